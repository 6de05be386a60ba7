//! The CCP wire protocol: the messages a datapath and a CCP agent exchange.
//!
//! Byte-compatible with libccp (`serialize.h`/`serialize.c`) and portus 0.9 (`serialize/`).
//! Every message starts with an 8-byte little-endian header
//!
//! ```text
//! | type u16 | len u16 | socket id u32 |
//! ```
//!
//! where `len` counts the whole message, header included. Messages travel back-to-back over a
//! unix `SOCK_STREAM` socket, so `len` is also the framing: [`FrameReader`] splits a byte stream
//! into frames, [`decode`] turns one frame into a typed [`Msg`], [`Msg::encode`] does the reverse.
//! Over portus's own unix IPC (`SOCK_DGRAM`), a datagram holds one or more whole messages.
//! portus 0.7 (used by the published `generic_cong_avoid` 0.4) encodes every message and every
//! datapath program exactly as portus 0.9 does, so this codec serves both.
//!
//! Bodies (all integers little endian, records packed without padding):
//!
//! | type | code | direction | body |
//! |------|------|-----------|------|
//! | CREATE | 0 | datapath → agent | init_cwnd, mss, src_ip, src_port, dst_ip, dst_port: u32; algorithm name: 64 bytes, NUL-padded |
//! | MEASURE | 1 | datapath → agent | program_uid u32, num_fields u32, fields: u64 × num_fields |
//! | INSTALL_EXPR | 2 | agent → datapath | program_uid u32, num_expressions u32, num_instructions u32, expression records (16 B), instruction records (16 B) |
//! | UPDATE_FIELDS | 3 | agent → datapath | num_updates u32, update records (13 B) |
//! | CHANGE_PROG | 4 | agent → datapath | program_uid u32, num_updates u32, update records (13 B) |
//! | READY | 5 | datapath → agent | datapath id u32 (socket id is 0) |
//!
//! An expression record is `cond_start, num_cond, body_start, num_body` (u32 each); an
//! instruction record is `op u8, (reg type u8, reg value u32) × 3` for result, left and right;
//! an update record is `reg type u8, reg index u32, value u64`. What the op and register codes
//! mean is in [`crate::lang`].
//!
//! Decoding never panics: every length and count is checked against the frame and against
//! libccp's limits before anything is read, and any inconsistency is a [`WireError`].
//! Lengths must match a message's contents exactly (both libccp and portus write exact lengths).

use thiserror::Error;

use crate::lang::{MAX_CONTROL_REGS, MAX_REPORT_REGS};

/// Size of the common header: type u16, len u16, socket id u32 (libccp `struct CcpMsgHeader`).
pub const HEADER_LEN: usize = 8;
/// Largest message libccp accepts, in bytes, header included (libccp `BIGGEST_MSG_SIZE`, sic).
pub const MAX_MSG_LEN: usize = 32_678;
/// Bytes reserved for the NUL-padded algorithm name in CREATE (libccp `MAX_CONG_ALG_SIZE`).
pub const CONG_ALG_FIELD_LEN: usize = 64;
/// Most register updates one UPDATE_FIELDS or CHANGE_PROG carries (libccp `MAX_MUTABLE_REG`:
/// every report and control register, `Cwnd` and `Rate`).
pub const MAX_UPDATES: usize = MAX_REPORT_REGS + MAX_CONTROL_REGS + 2;
/// Most expressions (`when` clauses) in one program (libccp `MAX_EXPRESSIONS`).
pub const MAX_EXPRESSIONS: usize = 256;
/// Most instructions in one program (libccp `MAX_INSTRUCTIONS`).
pub const MAX_INSTRUCTIONS: usize = 256;

const CREATE_LEN: usize = HEADER_LEN + 6 * 4 + CONG_ALG_FIELD_LEN;
const READY_LEN: usize = HEADER_LEN + 4;
const MEASURE_FIXED_LEN: usize = HEADER_LEN + 8;
const INSTALL_FIXED_LEN: usize = HEADER_LEN + 12;
const UPDATE_FIELDS_FIXED_LEN: usize = HEADER_LEN + 4;
const CHANGE_PROG_FIXED_LEN: usize = HEADER_LEN + 8;
const FIELD_LEN: usize = 8;
const EXPR_RECORD_LEN: usize = 16;
const INSTR_RECORD_LEN: usize = 16;
const UPDATE_RECORD_LEN: usize = 13;

// The largest message of every type fits libccp's limit, so encoding within the count limits
// always yields a frame the peer accepts.
const _: () = assert!(CREATE_LEN == 96); // libccp CREATE_MSG_SIZE
const _: () = assert!(MEASURE_FIXED_LEN + MAX_REPORT_REGS * FIELD_LEN <= MAX_MSG_LEN);
const _: () = assert!(
    INSTALL_FIXED_LEN + MAX_EXPRESSIONS * EXPR_RECORD_LEN + MAX_INSTRUCTIONS * INSTR_RECORD_LEN
        <= MAX_MSG_LEN
);
const _: () = assert!(CHANGE_PROG_FIXED_LEN + MAX_UPDATES * UPDATE_RECORD_LEN <= MAX_MSG_LEN);
const _: () = assert!(MAX_MSG_LEN <= u16::MAX as usize);
const _: () = assert!(MAX_UPDATES == 222);

numbered! {
/// Message type codes (libccp `serialize.h`).
pub enum MsgType: u16 {
    Create = 0,
    Measure = 1,
    InstallExpr = 2,
    UpdateFields = 3,
    ChangeProg = 4,
    Ready = 5,
}
}

/// Why bytes could not be decoded or a message could not be encoded.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("truncated message: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("header length {len} is shorter than the {HEADER_LEN}-byte header")]
    LengthBelowHeader { len: usize },
    #[error("header length {len} exceeds the maximum message size {MAX_MSG_LEN}")]
    LengthAboveMax { len: usize },
    #[error("unknown message type {0}")]
    UnknownType(u16),
    #[error("{msg_type:?} message has length {len}, its contents need {expected}")]
    LengthMismatch {
        msg_type: MsgType,
        len: usize,
        expected: usize,
    },
    #[error("{what}: {count} exceeds the limit of {max}")]
    TooMany {
        what: &'static str,
        count: u64,
        max: usize,
    },
    #[error("congestion algorithm name is {len} bytes, at most {} fit", CONG_ALG_FIELD_LEN - 1)]
    CongAlgTooLong { len: usize },
    #[error("congestion algorithm name contains a NUL byte")]
    CongAlgHasNul,
    #[error("congestion algorithm name is not UTF-8")]
    CongAlgNotUtf8,
}

impl WireError {
    /// True when a stream carrying this frame can no longer be split into messages (the header's
    /// length is impossible), false when only this one message is bad and the next can be read.
    pub fn is_fatal_for_stream(&self) -> bool {
        matches!(
            self,
            Self::LengthBelowHeader { .. } | Self::LengthAboveMax { .. }
        )
    }
}

/// The common header of every message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Raw type code; see [`MsgType::from_code`].
    pub msg_type: u16,
    /// Whole message length in bytes, header included; checked to lie in
    /// `HEADER_LEN..=MAX_MSG_LEN`.
    pub len: usize,
    /// CCP socket id of the flow (0 for READY and for INSTALL_EXPR, which concern the datapath).
    pub sid: u32,
}

/// Reads and checks the header at the front of `buf` (the body need not be there yet).
pub fn peek_header(buf: &[u8]) -> Result<Header, WireError> {
    if buf.len() < HEADER_LEN {
        return Err(WireError::Truncated {
            needed: HEADER_LEN,
            available: buf.len(),
        });
    }
    let mut r = Reader::new(buf);
    let msg_type = r.u16()?;
    let len = usize::from(r.u16()?);
    let sid = r.u32()?;
    if len < HEADER_LEN {
        return Err(WireError::LengthBelowHeader { len });
    }
    if len > MAX_MSG_LEN {
        return Err(WireError::LengthAboveMax { len });
    }
    Ok(Header { msg_type, len, sid })
}

/// CREATE: a new flow, sent by the datapath (libccp `struct CreateMsg`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Create {
    pub sid: u32,
    pub init_cwnd: u32,
    pub mss: u32,
    pub src_ip: u32,
    pub src_port: u32,
    pub dst_ip: u32,
    pub dst_port: u32,
    /// Requested algorithm; at most 63 bytes, no NUL; empty means "no preference".
    pub cong_alg: String,
}

/// MEASURE: the report registers of a program, sent when it executes `(report)`.
/// A MEASURE with program uid 0 and no fields is libccp's "flow closed" notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measure {
    pub sid: u32,
    pub program_uid: u32,
    pub fields: Vec<u64>,
}

/// One `when` clause: instruction ranges of its condition and of its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExprRecord {
    pub cond_start: u32,
    pub num_cond: u32,
    pub body_start: u32,
    pub num_body: u32,
}

/// A register operand as sent: its type code and its index (or, for immediates, its value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegRecord {
    pub reg_type: u8,
    pub value: u32,
}

/// One instruction as sent: op code and three register operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstrRecord {
    pub op: u8,
    pub res: RegRecord,
    pub left: RegRecord,
    pub right: RegRecord,
}

/// INSTALL_EXPR: a datapath program, unvalidated (the shims validate it with
/// `ccswitch_ccp::program::Program::from_install`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallExpr {
    pub sid: u32,
    pub program_uid: u32,
    pub expressions: Vec<ExprRecord>,
    pub instructions: Vec<InstrRecord>,
}

/// One register assignment carried by UPDATE_FIELDS or CHANGE_PROG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateField {
    pub reg_type: u8,
    pub reg_index: u32,
    pub value: u64,
}

/// UPDATE_FIELDS: set control registers, Cwnd or Rate of a flow's running program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateFields {
    pub sid: u32,
    pub updates: Vec<UpdateField>,
}

/// CHANGE_PROG: switch a flow to an installed program, then apply the updates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeProg {
    pub sid: u32,
    pub program_uid: u32,
    pub updates: Vec<UpdateField>,
}

/// READY: a datapath announces itself; its socket id on the wire is always 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ready {
    pub id: u32,
}

/// Any CCP message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    Create(Create),
    Measure(Measure),
    InstallExpr(InstallExpr),
    UpdateFields(UpdateFields),
    ChangeProg(ChangeProg),
    Ready(Ready),
}

impl Msg {
    pub fn msg_type(&self) -> MsgType {
        match self {
            Self::Create(_) => MsgType::Create,
            Self::Measure(_) => MsgType::Measure,
            Self::InstallExpr(_) => MsgType::InstallExpr,
            Self::UpdateFields(_) => MsgType::UpdateFields,
            Self::ChangeProg(_) => MsgType::ChangeProg,
            Self::Ready(_) => MsgType::Ready,
        }
    }

    /// Socket id written in the header.
    pub fn sid(&self) -> u32 {
        match self {
            Self::Create(m) => m.sid,
            Self::Measure(m) => m.sid,
            Self::InstallExpr(m) => m.sid,
            Self::UpdateFields(m) => m.sid,
            Self::ChangeProg(m) => m.sid,
            Self::Ready(_) => 0,
        }
    }

    /// The message as one frame. Fails only when a count or string exceeds libccp's limits.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Appends the frame to `out` and returns its length; on error `out` is left unchanged.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<usize, WireError> {
        self.check_limits()?;
        let len = self.encoded_len();
        let start = out.len();
        out.extend_from_slice(&(self.msg_type() as u16).to_le_bytes());
        // check_limits bounds every message by MAX_MSG_LEN, which fits a u16.
        out.extend_from_slice(&(len as u16).to_le_bytes());
        out.extend_from_slice(&self.sid().to_le_bytes());
        self.encode_body(out);
        debug_assert_eq!(out.len() - start, len);
        Ok(len)
    }

    fn encoded_len(&self) -> usize {
        match self {
            Self::Create(_) => CREATE_LEN,
            Self::Measure(m) => MEASURE_FIXED_LEN + m.fields.len() * FIELD_LEN,
            Self::InstallExpr(m) => {
                INSTALL_FIXED_LEN
                    + m.expressions.len() * EXPR_RECORD_LEN
                    + m.instructions.len() * INSTR_RECORD_LEN
            }
            Self::UpdateFields(m) => UPDATE_FIELDS_FIXED_LEN + m.updates.len() * UPDATE_RECORD_LEN,
            Self::ChangeProg(m) => CHANGE_PROG_FIXED_LEN + m.updates.len() * UPDATE_RECORD_LEN,
            Self::Ready(_) => READY_LEN,
        }
    }

    fn check_limits(&self) -> Result<(), WireError> {
        match self {
            Self::Create(m) => check_cong_alg(&m.cong_alg),
            Self::Measure(m) => check_count("report fields", m.fields.len(), MAX_REPORT_REGS),
            Self::InstallExpr(m) => {
                check_count("expressions", m.expressions.len(), MAX_EXPRESSIONS)?;
                check_count("instructions", m.instructions.len(), MAX_INSTRUCTIONS)
            }
            Self::UpdateFields(m) => check_count("updates", m.updates.len(), MAX_UPDATES),
            Self::ChangeProg(m) => check_count("updates", m.updates.len(), MAX_UPDATES),
            Self::Ready(_) => Ok(()),
        }
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            Self::Create(m) => {
                for v in [
                    m.init_cwnd,
                    m.mss,
                    m.src_ip,
                    m.src_port,
                    m.dst_ip,
                    m.dst_port,
                ] {
                    put_u32(out, v);
                }
                let mut name = [0u8; CONG_ALG_FIELD_LEN];
                name[..m.cong_alg.len()].copy_from_slice(m.cong_alg.as_bytes());
                out.extend_from_slice(&name);
            }
            Self::Measure(m) => {
                put_u32(out, m.program_uid);
                put_u32(out, m.fields.len() as u32);
                m.fields
                    .iter()
                    .for_each(|&f| out.extend_from_slice(&f.to_le_bytes()));
            }
            Self::InstallExpr(m) => {
                put_u32(out, m.program_uid);
                put_u32(out, m.expressions.len() as u32);
                put_u32(out, m.instructions.len() as u32);
                for e in &m.expressions {
                    for v in [e.cond_start, e.num_cond, e.body_start, e.num_body] {
                        put_u32(out, v);
                    }
                }
                for i in &m.instructions {
                    out.push(i.op);
                    for reg in [i.res, i.left, i.right] {
                        out.push(reg.reg_type);
                        put_u32(out, reg.value);
                    }
                }
            }
            Self::UpdateFields(m) => {
                put_u32(out, m.updates.len() as u32);
                put_updates(out, &m.updates);
            }
            Self::ChangeProg(m) => {
                put_u32(out, m.program_uid);
                put_u32(out, m.updates.len() as u32);
                put_updates(out, &m.updates);
            }
            Self::Ready(m) => put_u32(out, m.id),
        }
    }
}

fn check_count(what: &'static str, count: usize, max: usize) -> Result<(), WireError> {
    if count > max {
        return Err(WireError::TooMany {
            what,
            count: count as u64,
            max,
        });
    }
    Ok(())
}

fn check_cong_alg(name: &str) -> Result<(), WireError> {
    if name.len() >= CONG_ALG_FIELD_LEN {
        return Err(WireError::CongAlgTooLong { len: name.len() });
    }
    if name.contains('\0') {
        return Err(WireError::CongAlgHasNul);
    }
    Ok(())
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_updates(out: &mut Vec<u8>, updates: &[UpdateField]) {
    for u in updates {
        out.push(u.reg_type);
        put_u32(out, u.reg_index);
        out.extend_from_slice(&u.value.to_le_bytes());
    }
}

/// Decodes the message at the front of `buf`; returns it and the bytes it occupied
/// (its header's `len`). Bytes after the message are ignored.
pub fn decode(buf: &[u8]) -> Result<(Msg, usize), WireError> {
    let hdr = peek_header(buf)?;
    let frame = buf.get(..hdr.len).ok_or(WireError::Truncated {
        needed: hdr.len,
        available: buf.len(),
    })?;
    let msg_type = MsgType::from_code(u32::from(hdr.msg_type)).ok_or(WireError::UnknownType(hdr.msg_type))?;
    let mut body = Reader::new(&frame[HEADER_LEN..]);
    let msg = match msg_type {
        MsgType::Create => Msg::Create(decode_create(&hdr, &mut body)?),
        MsgType::Measure => Msg::Measure(decode_measure(&hdr, &mut body)?),
        MsgType::InstallExpr => Msg::InstallExpr(decode_install(&hdr, &mut body)?),
        MsgType::UpdateFields => Msg::UpdateFields(decode_update_fields(&hdr, &mut body)?),
        MsgType::ChangeProg => Msg::ChangeProg(decode_change_prog(&hdr, &mut body)?),
        MsgType::Ready => {
            expect_len(MsgType::Ready, &hdr, READY_LEN)?;
            Msg::Ready(Ready { id: body.u32()? })
        }
    };
    Ok((msg, hdr.len))
}

fn expect_len(msg_type: MsgType, hdr: &Header, expected: usize) -> Result<(), WireError> {
    if hdr.len != expected {
        return Err(WireError::LengthMismatch {
            msg_type,
            len: hdr.len,
            expected,
        });
    }
    Ok(())
}

/// Checks a count read from a body against its limit and the header's length:
/// `len` must equal `fixed + count × record`.
fn expect_records(
    msg_type: MsgType,
    hdr: &Header,
    what: &'static str,
    count: u32,
    max: usize,
    fixed: usize,
    record: usize,
) -> Result<usize, WireError> {
    let count = count as usize;
    check_count(what, count, max)?;
    expect_len(msg_type, hdr, fixed + count * record)?;
    Ok(count)
}

fn decode_create(hdr: &Header, body: &mut Reader) -> Result<Create, WireError> {
    expect_len(MsgType::Create, hdr, CREATE_LEN)?;
    let init_cwnd = body.u32()?;
    let mss = body.u32()?;
    let src_ip = body.u32()?;
    let src_port = body.u32()?;
    let dst_ip = body.u32()?;
    let dst_port = body.u32()?;
    let raw = body.bytes(CONG_ALG_FIELD_LEN)?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let cong_alg = std::str::from_utf8(&raw[..end]).map_err(|_| WireError::CongAlgNotUtf8)?;
    check_cong_alg(cong_alg)?;
    Ok(Create {
        sid: hdr.sid,
        init_cwnd,
        mss,
        src_ip,
        src_port,
        dst_ip,
        dst_port,
        cong_alg: cong_alg.to_owned(),
    })
}

fn decode_measure(hdr: &Header, body: &mut Reader) -> Result<Measure, WireError> {
    let program_uid = body.u32()?;
    let n = body.u32()?;
    let n = expect_records(
        MsgType::Measure,
        hdr,
        "report fields",
        n,
        MAX_REPORT_REGS,
        MEASURE_FIXED_LEN,
        FIELD_LEN,
    )?;
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        fields.push(body.u64()?);
    }
    Ok(Measure {
        sid: hdr.sid,
        program_uid,
        fields,
    })
}

fn decode_install(hdr: &Header, body: &mut Reader) -> Result<InstallExpr, WireError> {
    let program_uid = body.u32()?;
    let num_expressions = body.u32()? as usize;
    let num_instructions = body.u32()? as usize;
    check_count("expressions", num_expressions, MAX_EXPRESSIONS)?;
    check_count("instructions", num_instructions, MAX_INSTRUCTIONS)?;
    let expected =
        INSTALL_FIXED_LEN + num_expressions * EXPR_RECORD_LEN + num_instructions * INSTR_RECORD_LEN;
    expect_len(MsgType::InstallExpr, hdr, expected)?;
    let (expressions, instructions) = read_program(body, num_expressions, num_instructions)?;
    Ok(InstallExpr {
        sid: hdr.sid,
        program_uid,
        expressions,
        instructions,
    })
}

/// A program's records: its expressions, then its instructions.
fn read_program(
    body: &mut Reader,
    num_expressions: usize,
    num_instructions: usize,
) -> Result<(Vec<ExprRecord>, Vec<InstrRecord>), WireError> {
    let expressions = (0..num_expressions)
        .map(|_| {
            Ok(ExprRecord {
                cond_start: body.u32()?,
                num_cond: body.u32()?,
                body_start: body.u32()?,
                num_body: body.u32()?,
            })
        })
        .collect::<Result<_, WireError>>()?;
    let instructions = (0..num_instructions)
        .map(|_| {
            Ok(InstrRecord {
                op: body.u8()?,
                res: body.reg()?,
                left: body.reg()?,
                right: body.reg()?,
            })
        })
        .collect::<Result<_, WireError>>()?;
    Ok((expressions, instructions))
}

impl InstallExpr {
    /// The INSTALL_EXPR of a compiled program: `records` holds its expression records then
    /// its instruction records, in the wire layout (what portus's compiler emits for a
    /// program, `Bin::serialize`). Every byte must be used.
    pub fn from_records(
        sid: u32,
        program_uid: u32,
        num_expressions: usize,
        num_instructions: usize,
        records: &[u8],
    ) -> Result<Self, WireError> {
        check_count("expressions", num_expressions, MAX_EXPRESSIONS)?;
        check_count("instructions", num_instructions, MAX_INSTRUCTIONS)?;
        let expected = num_expressions * EXPR_RECORD_LEN + num_instructions * INSTR_RECORD_LEN;
        if records.len() != expected {
            return Err(WireError::LengthMismatch { msg_type: MsgType::InstallExpr, len: records.len(), expected });
        }
        let mut body = Reader::new(records);
        let (expressions, instructions) = read_program(&mut body, num_expressions, num_instructions)?;
        Ok(Self { sid, program_uid, expressions, instructions })
    }
}

fn decode_update_fields(hdr: &Header, body: &mut Reader) -> Result<UpdateFields, WireError> {
    let n = body.u32()?;
    let n = expect_records(
        MsgType::UpdateFields,
        hdr,
        "updates",
        n,
        MAX_UPDATES,
        UPDATE_FIELDS_FIXED_LEN,
        UPDATE_RECORD_LEN,
    )?;
    Ok(UpdateFields {
        sid: hdr.sid,
        updates: body.updates(n)?,
    })
}

fn decode_change_prog(hdr: &Header, body: &mut Reader) -> Result<ChangeProg, WireError> {
    let program_uid = body.u32()?;
    let n = body.u32()?;
    let n = expect_records(
        MsgType::ChangeProg,
        hdr,
        "updates",
        n,
        MAX_UPDATES,
        CHANGE_PROG_FIXED_LEN,
        UPDATE_RECORD_LEN,
    )?;
    Ok(ChangeProg {
        sid: hdr.sid,
        program_uid,
        updates: body.updates(n)?,
    })
}

/// Bounds-checked little-endian reader over a byte slice.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.saturating_add(n);
        let out = self.buf.get(self.pos..end).ok_or(WireError::Truncated {
            needed: end,
            available: self.buf.len(),
        })?;
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn reg(&mut self) -> Result<RegRecord, WireError> {
        Ok(RegRecord {
            reg_type: self.u8()?,
            value: self.u32()?,
        })
    }

    /// `n` updates; `n` is a count [`expect_records`] has bounded, since the vector is sized
    /// by it before anything is read.
    fn updates(&mut self, n: usize) -> Result<Vec<UpdateField>, WireError> {
        // Sized first: collected through a Result, a vector starts empty and grows by
        // reallocation (with the other per-message vectors, 9% of a shim at 7.6k reports/s).
        let mut updates = Vec::with_capacity(n);
        for _ in 0..n {
            updates.push(UpdateField { reg_type: self.u8()?, reg_index: self.u32()?, value: self.u64()? });
        }
        Ok(updates)
    }
}

/// Splits a byte stream (a unix `SOCK_STREAM` connection) into message frames.
///
/// Feed received bytes with [`read_from`](Self::read_from) (one read straight into the buffer)
/// or [`push`](Self::push), and take complete frames with [`next_frame`](Self::next_frame);
/// then [`decode`] each frame. A frame of an unknown type or with a bad body is only a bad
/// message (`decode` fails, the next frame is fine), but a header whose length is impossible
/// (below the header size or above [`MAX_MSG_LEN`]) desynchronises the stream for good:
/// `next_frame` then keeps returning that error and the connection should be closed.
///
/// Frames are taken from the front by advancing a cursor and lent out as slices of the buffer,
/// never copied. The unread bytes move to the front only when the free tail is too small for
/// what arrives, and then they are less than one frame, so a read costs time linear in its size.
#[derive(Debug, Default)]
pub struct FrameReader {
    /// Storage, zero-initialised over its whole length so that reads can go straight into it.
    buf: Vec<u8>,
    /// `buf[start..end]`: received, not yet returned as frames.
    start: usize,
    end: usize,
    broken: Option<WireError>,
}

/// Free space [`FrameReader::read_from`] offers one read: many frames, at least one whole one.
pub const READ_CHUNK: usize = 64 * 1024;
const _: () = assert!(READ_CHUNK >= MAX_MSG_LEN);

impl FrameReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.broken.is_none() {
            self.make_room(bytes.len());
            self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
            self.end += bytes.len();
        }
    }

    /// One `read` of up to [`READ_CHUNK`] bytes from `src` straight into the buffer; returns
    /// what `read` returned (0: end of stream). After a stream-fatal error the bytes are read
    /// and dropped.
    pub fn read_from(&mut self, src: &mut (impl std::io::Read + ?Sized)) -> std::io::Result<usize> {
        if self.broken.is_some() {
            self.start = 0;
            self.end = 0;
        }
        self.make_room(READ_CHUNK);
        let n = src.read(&mut self.buf[self.end..])?;
        if self.broken.is_none() {
            self.end += n;
        }
        Ok(n)
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Those bytes.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The next complete frame (header included), `Ok(None)` if more bytes are needed, or the
    /// stream-fatal error (see [`WireError::is_fatal_for_stream`]).
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, WireError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let unread = &self.buf[self.start..self.end];
        if unread.len() < HEADER_LEN {
            return Ok(None);
        }
        let hdr = match peek_header(unread) {
            Ok(hdr) => hdr,
            Err(e) => {
                self.start = 0;
                self.end = 0;
                self.broken = Some(e.clone());
                return Err(e);
            }
        };
        if unread.len() < hdr.len {
            return Ok(None);
        }
        let at = self.start;
        self.start += hdr.len;
        Ok(Some(&self.buf[at..at + hdr.len]))
    }

    /// Makes `n` bytes free after `end`: first by moving the unread bytes to the front, then by
    /// growing.
    fn make_room(&mut self, n: usize) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end >= n {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < n {
            self.buf.resize(self.end + n, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_little_endian() {
        let bytes = Msg::Ready(Ready { id: 0x0403_0201 }).encode().unwrap();
        assert_eq!(bytes, [5, 0, 12, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
    }

    #[test]
    fn create_is_96_bytes_with_nul_padded_name() {
        let m = Msg::Create(Create {
            sid: 1,
            init_cwnd: 14480,
            mss: 1448,
            src_ip: 1,
            src_port: 2,
            dst_ip: 3,
            dst_port: 4,
            cong_alg: "reno".into(),
        });
        let bytes = m.encode().unwrap();
        assert_eq!(bytes.len(), 96);
        assert_eq!(&bytes[32..37], b"reno\0");
        assert_eq!(decode(&bytes).unwrap(), (m, 96));
    }

    fn reports(n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            let m = Msg::Measure(Measure { sid: i as u32, program_uid: 7, fields: vec![i as u64; 9] });
            m.encode_into(&mut out).unwrap();
        }
        out
    }

    /// Hands out its bytes in reads of the given sizes, in turn.
    struct Chunked<'a> {
        bytes: &'a [u8],
        sizes: std::iter::Cycle<std::slice::Iter<'a, usize>>,
    }

    impl std::io::Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = (*self.sizes.next().unwrap()).min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn frame_reader_takes_a_whole_batch_in_one_read_and_lends_frames_in_place() {
        let stream = reports(500);
        let mut src = &stream[..];
        let mut reader = FrameReader::new();
        assert_eq!(reader.read_from(&mut src).unwrap(), stream.len());
        let storage = reader.buf.as_ptr_range();
        let mut sids = vec![];
        while let Some(frame) = reader.next_frame().unwrap() {
            assert!(storage.contains(&frame.as_ptr()), "a frame is a slice of the buffer");
            let Msg::Measure(m) = decode(frame).unwrap().0 else { panic!() };
            sids.push(m.sid);
        }
        assert_eq!(sids, (0..500).collect::<Vec<u32>>());
        assert_eq!(reader.buffered(), 0);
    }

    #[test]
    fn frame_reader_storage_stays_within_one_read_and_one_frame() {
        let stream = reports(40_000); // 3.5 MB
        let sizes = [READ_CHUNK, 1, 100, 7_000, READ_CHUNK - 3];
        let mut src = Chunked { bytes: &stream, sizes: sizes.iter().cycle() };
        let mut reader = FrameReader::new();
        let mut n = 0u32;
        while reader.read_from(&mut src).unwrap() > 0 {
            while let Some(frame) = reader.next_frame().unwrap() {
                assert_eq!(peek_header(frame).unwrap().sid, n);
                n += 1;
            }
            assert!(reader.buf.len() <= READ_CHUNK + MAX_MSG_LEN, "{}", reader.buf.len());
        }
        assert_eq!((n, reader.buffered()), (40_000, 0));
    }

    #[test]
    fn encode_rejects_oversized_contents() {
        let long = Msg::Create(Create {
            sid: 1,
            init_cwnd: 0,
            mss: 0,
            src_ip: 0,
            src_port: 0,
            dst_ip: 0,
            dst_port: 0,
            cong_alg: "x".repeat(64),
        });
        assert_eq!(long.encode(), Err(WireError::CongAlgTooLong { len: 64 }));
        let many = Msg::Measure(Measure {
            sid: 1,
            program_uid: 1,
            fields: vec![0; 111],
        });
        assert!(matches!(
            many.encode(),
            Err(WireError::TooMany { count: 111, .. })
        ));
    }
}
