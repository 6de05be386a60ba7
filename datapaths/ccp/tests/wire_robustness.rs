//! Codec round trips, explicit malformed inputs, stream framing, and randomized robustness:
//! no input makes decoding, validation or evaluation panic.

use ccswitch_ccp::program::{Program, ProgramTable};
use ccswitch_ccp::{CcpFlow, Primitives};
use ccswitch_protocol::lang::{
    reg_type, Implicit, Op, DEF_INFINITY_SENTINEL, MAX_CONTROL_REGS, MAX_LOCAL_REGS, MAX_REPORT_REGS, MAX_TMP_REGS,
    NUM_IMPLICIT_REGS, NUM_PRIMITIVES,
};
use ccswitch_protocol::wire::{
    self, ChangeProg, Create, ExprRecord, FrameReader, InstallExpr, InstrRecord, Measure, Msg,
    Ready, RegRecord, UpdateField, UpdateFields, WireError, HEADER_LEN, MAX_MSG_LEN,
};
use proptest::collection::vec;
use proptest::prelude::*;

fn samples() -> Vec<Msg> {
    let r = |reg_type, value| RegRecord { reg_type, value };
    vec![
        Msg::Create(Create {
            sid: 1,
            init_cwnd: 14480,
            mss: 1448,
            src_ip: 0x7f00_0001,
            src_port: 5000,
            dst_ip: 0x7f00_0001,
            dst_port: 80,
            cong_alg: "reno".into(),
        }),
        Msg::Measure(Measure {
            sid: 2,
            program_uid: 3,
            fields: vec![1, 2, u64::MAX],
        }),
        Msg::InstallExpr(InstallExpr {
            sid: 0,
            program_uid: 9,
            expressions: vec![ExprRecord {
                cond_start: 1,
                num_cond: 1,
                body_start: 2,
                num_body: 1,
            }],
            instructions: vec![
                InstrRecord {
                    op: Op::Def as u8,
                    res: r(reg_type::VOLATILE_REPORT, 0),
                    left: r(reg_type::VOLATILE_REPORT, 0),
                    right: r(reg_type::IMMEDIATE, 0),
                },
                InstrRecord {
                    op: Op::Bind as u8,
                    res: r(reg_type::IMPLICIT, 0),
                    left: r(reg_type::IMPLICIT, 0),
                    right: r(reg_type::IMMEDIATE, 1),
                },
                InstrRecord {
                    op: Op::Add as u8,
                    res: r(reg_type::VOLATILE_REPORT, 0),
                    left: r(reg_type::VOLATILE_REPORT, 0),
                    right: r(reg_type::PRIMITIVE, 0),
                },
            ],
        }),
        Msg::UpdateFields(UpdateFields {
            sid: 4,
            updates: vec![UpdateField {
                reg_type: reg_type::IMPLICIT,
                reg_index: Implicit::Cwnd as u32,
                value: 42,
            }],
        }),
        Msg::ChangeProg(ChangeProg {
            sid: 5,
            program_uid: 9,
            updates: vec![UpdateField {
                reg_type: reg_type::NONVOLATILE_CONTROL,
                reg_index: 1,
                value: 7,
            }],
        }),
        Msg::Ready(Ready { id: 6 }),
    ]
}

#[test]
fn every_message_type_round_trips() {
    for m in samples() {
        let bytes = m.encode().unwrap();
        assert_eq!(wire::decode(&bytes).unwrap(), (m.clone(), bytes.len()));
        // Trailing bytes (the next message) are left alone.
        let mut two = bytes.clone();
        two.extend_from_slice(&bytes);
        assert_eq!(wire::decode(&two).unwrap(), (m, bytes.len()));
    }
}

#[test]
fn malformed_inputs_give_descriptive_errors() {
    let ready = Msg::Ready(Ready { id: 6 }).encode().unwrap();
    assert_eq!(
        wire::decode(&[]),
        Err(WireError::Truncated {
            needed: HEADER_LEN,
            available: 0
        })
    );
    assert_eq!(
        wire::decode(&ready[..5]),
        Err(WireError::Truncated {
            needed: HEADER_LEN,
            available: 5
        })
    );
    assert_eq!(
        wire::decode(&ready[..10]),
        Err(WireError::Truncated {
            needed: 12,
            available: 10
        })
    );

    let with_len = |len: u16| {
        let mut b = ready.clone();
        b[2..4].copy_from_slice(&len.to_le_bytes());
        b
    };
    assert_eq!(
        wire::decode(&with_len(7)),
        Err(WireError::LengthBelowHeader { len: 7 })
    );
    assert_eq!(
        wire::decode(&with_len(MAX_MSG_LEN as u16 + 1)),
        Err(WireError::LengthAboveMax {
            len: MAX_MSG_LEN + 1
        })
    );
    let mut longer = with_len(16);
    longer.extend_from_slice(&[0; 4]);
    assert!(matches!(
        wire::decode(&longer),
        Err(WireError::LengthMismatch { expected: 12, .. })
    ));

    let mut unknown = ready.clone();
    unknown[0] = 42;
    assert_eq!(wire::decode(&unknown), Err(WireError::UnknownType(42)));

    // A MEASURE claiming more fields than its length holds, and one beyond libccp's limit.
    let mut measure = Msg::Measure(Measure {
        sid: 1,
        program_uid: 1,
        fields: vec![5],
    })
    .encode()
    .unwrap();
    measure[12] = 2;
    assert!(matches!(
        wire::decode(&measure),
        Err(WireError::LengthMismatch { .. })
    ));
    measure[12..16].copy_from_slice(&200u32.to_le_bytes());
    assert!(matches!(
        wire::decode(&measure),
        Err(WireError::TooMany { count: 200, .. })
    ));

    // An INSTALL_EXPR whose counts overflow any sane length.
    let mut install = samples()[2].encode().unwrap();
    install[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        wire::decode(&install),
        Err(WireError::TooMany { .. })
    ));

    // CREATE with invalid UTF-8 in its name.
    let mut create = samples()[0].encode().unwrap();
    create[HEADER_LEN + 24] = 0xff;
    assert_eq!(wire::decode(&create), Err(WireError::CongAlgNotUtf8));
}

#[test]
fn frame_reader_splits_back_to_back_messages() {
    let msgs = samples();
    let stream: Vec<u8> = msgs.iter().flat_map(|m| m.encode().unwrap()).collect();
    let mut reader = FrameReader::new();
    let mut got = vec![];
    for b in &stream {
        reader.push(std::slice::from_ref(b));
        while let Some(frame) = reader.next_frame().unwrap() {
            got.push(wire::decode(&frame).unwrap().0);
        }
    }
    assert_eq!(got, msgs);
    assert_eq!(reader.buffered(), 0);
}

#[test]
fn frame_reader_skips_bad_messages_but_stops_on_impossible_length() {
    let mut reader = FrameReader::new();
    let mut unknown = Msg::Ready(Ready { id: 1 }).encode().unwrap();
    unknown[0] = 99;
    reader.push(&unknown);
    reader.push(&Msg::Ready(Ready { id: 2 }).encode().unwrap());
    let frame = reader.next_frame().unwrap().unwrap();
    assert_eq!(wire::decode(&frame), Err(WireError::UnknownType(99)));
    let frame = reader.next_frame().unwrap().unwrap();
    assert_eq!(wire::decode(&frame).unwrap().0, Msg::Ready(Ready { id: 2 }));

    reader.push(&[5, 0, 3, 0, 0, 0, 0, 0]);
    let err = reader.next_frame().unwrap_err();
    assert!(err.is_fatal_for_stream());
    reader.push(&Msg::Ready(Ready { id: 3 }).encode().unwrap());
    assert_eq!(reader.next_frame(), Err(err));
}

fn arb_reg() -> impl Strategy<Value = RegRecord> {
    (0u8..10, prop_oneof![0u32..20, any::<u32>()])
        .prop_map(|(reg_type, value)| RegRecord { reg_type, value })
}

fn arb_msg() -> impl Strategy<Value = Msg> {
    let update =
        (0u8..10, 0u32..300, any::<u64>()).prop_map(|(reg_type, reg_index, value)| UpdateField {
            reg_type,
            reg_index,
            value,
        });
    let expr = (0u32..40, 0u32..10, 0u32..40, 0u32..10).prop_map(|(a, b, c, d)| ExprRecord {
        cond_start: a,
        num_cond: b,
        body_start: c,
        num_body: d,
    });
    let instr =
        (0u8..17, arb_reg(), arb_reg(), arb_reg()).prop_map(|(op, res, left, right)| InstrRecord {
            op,
            res,
            left,
            right,
        });
    prop_oneof![
        (any::<[u32; 7]>(), "[a-z0-9_-]{0,63}").prop_map(|(v, cong_alg)| Msg::Create(Create {
            sid: v[0],
            init_cwnd: v[1],
            mss: v[2],
            src_ip: v[3],
            src_port: v[4],
            dst_ip: v[5],
            dst_port: v[6],
            cong_alg,
        })),
        (any::<u32>(), any::<u32>(), vec(any::<u64>(), 0..=110)).prop_map(
            |(sid, program_uid, fields)| Msg::Measure(Measure {
                sid,
                program_uid,
                fields
            })
        ),
        (
            any::<u32>(),
            any::<u32>(),
            vec(expr, 0..8),
            vec(instr, 0..40)
        )
            .prop_map(
                |(sid, program_uid, expressions, instructions)| Msg::InstallExpr(InstallExpr {
                    sid,
                    program_uid,
                    expressions,
                    instructions,
                })
            ),
        (any::<u32>(), vec(update.clone(), 0..30))
            .prop_map(|(sid, updates)| Msg::UpdateFields(UpdateFields { sid, updates })),
        (any::<u32>(), any::<u32>(), vec(update, 0..30)).prop_map(|(sid, program_uid, updates)| {
            Msg::ChangeProg(ChangeProg {
                sid,
                program_uid,
                updates,
            })
        }),
        any::<u32>().prop_map(|id| Msg::Ready(Ready { id })),
    ]
}

/// Decoding must not panic; whatever decodes re-encodes to a message that decodes the same.
fn decode_is_sound(bytes: &[u8]) {
    if let Ok((m, used)) = wire::decode(bytes) {
        assert!((HEADER_LEN..=bytes.len()).contains(&used));
        let again = m.encode().expect("decoded messages are within limits");
        assert_eq!(wire::decode(&again).unwrap().0, m);
        if let Msg::InstallExpr(install) = &m {
            let _ = Program::from_install(install);
        }
    }
}

fn arb_prims() -> impl Strategy<Value = Primitives> {
    (
        any::<[u64; 8]>(),
        any::<bool>(),
        prop_oneof![Just(0u64), 0u64..100_000, any::<u64>()],
    )
        .prop_map(|(v, was_timeout, rtt)| Primitives {
            bytes_acked: v[0] % 100_000,
            packets_acked: v[1] % 100,
            lost_pkts_sample: v[2] % 4,
            ecn_packets: v[3] % 3,
            rate_outgoing: v[4],
            rate_incoming: v[5] % 1_000_000_000,
            bytes_in_flight: v[6] % 10_000_000,
            now: v[7],
            was_timeout,
            rtt_sample_us: rtt,
            ..Primitives::default()
        })
}

/// Instruction streams that always validate: writable results, in-range indices.
fn arb_valid_install() -> impl Strategy<Value = InstallExpr> {
    let operand = prop_oneof![
        any::<u32>().prop_map(|v| RegRecord {
            reg_type: reg_type::IMMEDIATE,
            value: v
        }),
        (0..NUM_PRIMITIVES as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::PRIMITIVE,
            value: v
        }),
        (0..NUM_IMPLICIT_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::IMPLICIT,
            value: v
        }),
        (0..MAX_TMP_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::TMP,
            value: v
        }),
        (0..MAX_LOCAL_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::LOCAL,
            value: v
        }),
        (0..MAX_REPORT_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::VOLATILE_REPORT,
            value: v
        }),
        (0..MAX_CONTROL_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::VOLATILE_CONTROL,
            value: v
        }),
    ];
    let result = prop_oneof![
        (0..NUM_IMPLICIT_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::IMPLICIT,
            value: v
        }),
        (0..MAX_TMP_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::TMP,
            value: v
        }),
        (0..MAX_LOCAL_REGS as u32).prop_map(|v| RegRecord {
            reg_type: reg_type::LOCAL,
            value: v
        }),
        (0u32..4).prop_map(|v| RegRecord {
            reg_type: reg_type::NONVOLATILE_REPORT,
            value: v
        }),
        (0u32..4).prop_map(|v| RegRecord {
            reg_type: reg_type::NONVOLATILE_CONTROL,
            value: v
        }),
    ];
    let op = prop_oneof![0u8..2, 3u8..15];
    let instr =
        (op, result, operand.clone(), operand).prop_map(|(op, res, left, right)| InstrRecord {
            op,
            res,
            left,
            right,
        });
    let def = (
        0u32..4,
        any::<bool>(),
        prop_oneof![Just(DEF_INFINITY_SENTINEL), any::<u32>()],
    )
        .prop_map(|(i, report, v)| {
            let reg = RegRecord {
                reg_type: if report { reg_type::VOLATILE_REPORT } else { reg_type::VOLATILE_CONTROL },
                value: i,
            };
            InstrRecord {
                op: Op::Def as u8,
                res: reg,
                left: reg,
                right: RegRecord {
                    reg_type: reg_type::IMMEDIATE,
                    value: v,
                },
            }
        });
    (
        vec(def, 0..5),
        vec(instr, 1..60),
        vec(
            (any::<u16>(), any::<u16>(), any::<u16>(), any::<u16>()),
            1..6,
        ),
    )
        .prop_map(|(defs, body, exprs)| {
            let n = (defs.len() + body.len()) as u32;
            let span = |a: u16, b: u16| {
                let start = u32::from(a) % n;
                (start, u32::from(b) % (n - start + 1))
            };
            let expressions = exprs
                .into_iter()
                .map(|(a, b, c, d)| {
                    let (cond_start, num_cond) = span(a, b);
                    let (body_start, num_body) = span(c, d);
                    ExprRecord {
                        cond_start,
                        num_cond,
                        body_start,
                        num_body,
                    }
                })
                .collect();
            InstallExpr {
                sid: 0,
                program_uid: 77,
                expressions,
                instructions: defs.into_iter().chain(body).collect(),
            }
        })
}

/// Runs `install` on a flow through a series of ACKs and ticks; nothing may panic.
fn exercise(install: &InstallExpr, acks: &[Primitives]) {
    let mut table = ProgramTable::new();
    if table.install_msg(install).is_err() {
        return;
    }
    let mut flow = CcpFlow::new(1, 14480, 1448);
    let change = Msg::ChangeProg(ChangeProg {
        sid: 1,
        program_uid: install.program_uid,
        updates: vec![],
    });
    flow.handle(&change, &table, 0)
        .expect("installed program switches");
    let mut now = 0u64;
    for p in acks {
        now = now.wrapping_add(p.now % 50_000);
        let step = flow.on_ack(p, now);
        if let Some(r) = step.report {
            assert!(r.fields.len() <= MAX_REPORT_REGS);
            Msg::Measure(r).encode().expect("reports are encodable");
        }
        flow.on_tick(now.wrapping_add(1000));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..300)) {
        decode_is_sound(&bytes);
    }

    #[test]
    fn arbitrary_bytes_with_valid_header_never_panic(
        typ in 0u16..7, sid in any::<u32>(), body in vec(any::<u8>(), 0..300)
    ) {
        let mut bytes = typ.to_le_bytes().to_vec();
        bytes.extend_from_slice(&((HEADER_LEN + body.len()) as u16).to_le_bytes());
        bytes.extend_from_slice(&sid.to_le_bytes());
        bytes.extend_from_slice(&body);
        decode_is_sound(&bytes);
    }

    #[test]
    fn valid_messages_round_trip(m in arb_msg()) {
        let bytes = m.encode().unwrap();
        prop_assert_eq!(wire::decode(&bytes).unwrap(), (m, bytes.len()));
    }

    #[test]
    fn mutated_messages_never_panic(
        m in arb_msg(),
        cut in any::<prop::sample::Index>(),
        new_len in any::<u16>(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let bytes = m.encode().unwrap();
        decode_is_sound(&bytes[..cut.index(bytes.len() + 1)]);
        let mut relen = bytes.clone();
        relen[2..4].copy_from_slice(&new_len.to_le_bytes());
        decode_is_sound(&relen);
        let mut flipped = bytes;
        for (i, x) in flips {
            let i = i.index(flipped.len());
            flipped[i] ^= x;
        }
        decode_is_sound(&flipped);
    }

    #[test]
    fn frame_reader_is_chunking_independent(
        msgs in vec(arb_msg(), 1..6), chunks in vec(1usize..64, 1..50)
    ) {
        let stream: Vec<u8> = msgs.iter().flat_map(|m| m.encode().unwrap()).collect();
        let mut reader = FrameReader::new();
        let mut got = vec![];
        let mut pos = 0;
        for c in chunks.iter().cycle() {
            if pos >= stream.len() { break; }
            let end = (pos + c).min(stream.len());
            reader.push(&stream[pos..end]);
            pos = end;
            while let Some(frame) = reader.next_frame().unwrap() {
                got.push(wire::decode(&frame).unwrap().0);
            }
        }
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn random_instruction_streams_validate_or_are_rejected(
        m in arb_msg(), acks in vec(arb_prims(), 1..20)
    ) {
        if let Msg::InstallExpr(install) = m {
            exercise(&install, &acks);
        }
    }

    #[test]
    fn valid_random_programs_run_without_panicking(
        install in arb_valid_install(), acks in vec(arb_prims(), 1..30)
    ) {
        prop_assert!(Program::from_install(&install).is_ok());
        exercise(&install, &acks);
    }
}
