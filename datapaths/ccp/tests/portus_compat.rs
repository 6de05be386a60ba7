//! Wire compatibility: bytes written by portus's serializers decode to the same values, our
//! re-encoding reproduces them byte for byte, and portus decodes what we write.

mod common;

use ccswitch_ccp::program::Program;
use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::wire::{
    ChangeProg, Create, ExprRecord, InstrRecord, Measure, Msg, Ready, RegRecord, UpdateField,
    UpdateFields,
};
use common::{compile, decode_all, portus_install_bytes};
use portus::lang::{Reg as PReg, Type};
use portus::serialize as ps;

/// Decodes portus's bytes, checks the value, and checks that we re-encode the same bytes.
fn check_portus_bytes(bytes: &[u8], expected: Msg) {
    let got = decode_all(bytes);
    assert_eq!(got, expected);
    assert_eq!(
        got.encode().unwrap(),
        bytes,
        "re-encoding reproduces portus's bytes"
    );
}

#[test]
fn create_from_portus() {
    let p = ps::create::Msg {
        sid: 7,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: 0x0a00_0001,
        src_port: 4242,
        dst_ip: 0x0a00_0002,
        dst_port: 80,
        cong_alg: None,
    };
    let expected = Msg::Create(Create {
        sid: 7,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: 0x0a00_0001,
        src_port: 4242,
        dst_ip: 0x0a00_0002,
        dst_port: 80,
        cong_alg: String::new(),
    });
    check_portus_bytes(&ps::serialize(&p).unwrap(), expected);
}

#[test]
fn create_with_name_decodes_in_portus() {
    // portus's own encoder cannot write a name (it panics on any), but its decoder reads ours.
    let m = Msg::Create(Create {
        sid: 3,
        init_cwnd: 10,
        mss: 1448,
        src_ip: 1,
        src_port: 2,
        dst_ip: 3,
        dst_port: 4,
        cong_alg: "cubic".into(),
    });
    let bytes = m.encode().unwrap();
    match ps::Msg::from_buf(&bytes).unwrap() {
        (ps::Msg::Cr(c), len) => {
            assert_eq!(len, bytes.len());
            assert_eq!((c.sid, c.init_cwnd, c.mss, c.dst_port), (3, 10, 1448, 4));
            assert_eq!(c.cong_alg.as_deref(), Some("cubic"));
        }
        other => panic!("portus decoded {other:?}"),
    }
}

#[test]
fn measure_both_ways() {
    let fields = vec![424_242, 65_535, 0, u64::MAX, 1 << 40];
    let p = ps::measure::Msg {
        sid: 15,
        program_uid: 72,
        num_fields: 5,
        fields: fields.clone(),
    };
    let ours = Msg::Measure(Measure {
        sid: 15,
        program_uid: 72,
        fields,
    });
    check_portus_bytes(&ps::serialize(&p).unwrap(), ours.clone());
    match ps::Msg::from_buf(&ours.encode().unwrap()).unwrap().0 {
        ps::Msg::Ms(m) => assert_eq!(m, p),
        other => panic!("portus decoded {other:?}"),
    }
}

#[test]
fn flow_closed_measure_is_empty() {
    let p = ps::measure::Msg {
        sid: 9,
        program_uid: 0,
        num_fields: 0,
        fields: vec![],
    };
    check_portus_bytes(
        &ps::serialize(&p).unwrap(),
        Msg::Measure(Measure {
            sid: 9,
            program_uid: 0,
            fields: vec![],
        }),
    );
}

#[test]
fn ready_both_ways() {
    let p = ps::ready::Msg { id: 77 };
    check_portus_bytes(&ps::serialize(&p).unwrap(), Msg::Ready(Ready { id: 77 }));
    match ps::Msg::from_buf(&Msg::Ready(Ready { id: 77 }).encode().unwrap())
        .unwrap()
        .0
    {
        ps::Msg::Rdy(r) => assert_eq!(r, p),
        other => panic!("portus decoded {other:?}"),
    }
}

#[test]
fn update_fields_from_portus() {
    let p = ps::update_field::Msg {
        sid: 4,
        num_fields: 3,
        fields: vec![
            (PReg::Implicit(4, Type::Num(None)), 42),
            (PReg::Control(3, Type::Num(None), false), 7),
            (PReg::Control(2, Type::Num(None), true), u64::MAX),
        ],
    };
    let expected = Msg::UpdateFields(UpdateFields {
        sid: 4,
        updates: vec![
            UpdateField {
                reg_type: reg_type::IMPLICIT,
                reg_index: Implicit::Cwnd as u32,
                value: 42,
            },
            UpdateField {
                reg_type: reg_type::NONVOLATILE_CONTROL,
                reg_index: 3,
                value: 7,
            },
            UpdateField {
                reg_type: reg_type::VOLATILE_CONTROL,
                reg_index: 2,
                value: u64::MAX,
            },
        ],
    });
    check_portus_bytes(&ps::serialize(&p).unwrap(), expected);
}

#[test]
fn change_prog_from_portus() {
    let p = ps::changeprog::Msg {
        sid: 1,
        program_uid: 7,
        num_fields: 1,
        fields: vec![(PReg::Implicit(5, Type::Num(None)), 1_000_000)],
    };
    let expected = Msg::ChangeProg(ChangeProg {
        sid: 1,
        program_uid: 7,
        updates: vec![UpdateField {
            reg_type: reg_type::IMPLICIT,
            reg_index: Implicit::Rate as u32,
            value: 1_000_000,
        }],
    });
    check_portus_bytes(&ps::serialize(&p).unwrap(), expected);
}

/// portus's own test vector for INSTALL_EXPR (`serialize/install.rs`).
#[test]
fn install_matches_portus_test_vector() {
    #[rustfmt::skip]
    let bytes: Vec<u8> = vec![
        2, 0, 84, 0, 1, 0, 0, 0,
        7, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0,
        1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0,
        2, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        1, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 0,
        1, 5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 1, 4, 0, 0, 0,
    ];
    let r = |reg_type, value| RegRecord { reg_type, value };
    let expected = Msg::InstallExpr(ccswitch_protocol::wire::InstallExpr {
        sid: 1,
        program_uid: 7,
        expressions: vec![ExprRecord {
            cond_start: 1,
            num_cond: 1,
            body_start: 2,
            num_body: 1,
        }],
        instructions: vec![
            InstrRecord {
                op: 2,
                res: r(5, 0),
                left: r(5, 0),
                right: r(1, 0),
            },
            InstrRecord {
                op: 1,
                res: r(2, 0),
                left: r(2, 0),
                right: r(1, 1),
            },
            InstrRecord {
                op: 1,
                res: r(5, 0),
                left: r(5, 0),
                right: r(1, 4),
            },
        ],
    });
    check_portus_bytes(&bytes, expected);
}

/// Maps a portus register to its wire record, per portus's documented encoding.
fn portus_reg_record(r: &PReg) -> RegRecord {
    let (reg_type, value) = match r {
        PReg::Control(i, _, v) => (if *v { 8 } else { 0 }, u32::from(*i)),
        PReg::ImmBool(b) => (1, u32::from(*b)),
        PReg::ImmNum(n) => (1, *n as u32),
        PReg::Implicit(i, _) => (2, u32::from(*i)),
        PReg::Local(i, _) => (3, u32::from(*i)),
        PReg::Primitive(i, _) => (4, u32::from(*i)),
        PReg::Report(i, _, v) => (if *v { 5 } else { 6 }, u32::from(*i)),
        PReg::Tmp(i, _) => (7, u32::from(*i)),
        PReg::None => panic!("unresolved register"),
    };
    RegRecord { reg_type, value }
}

const PROGRAMS: &[&str] = &[
    "(def (Report (volatile acked 0) (volatile loss 0) (volatile rtt 0)))
     (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.loss Ack.lost_pkts_sample)
        (:= Report.rtt Flow.rtt_sample_us)
        (fallthrough))
     (when (> Micros Flow.rtt_sample_us)
        (report)
        (:= Micros 0))",
    "(def (Report (volatile minrtt +infinity) (avg 0) (lossy false)) (gain 2) (volatile seen 0))
     (when true
        (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
        (:= Report.avg (ewma 2 Flow.rate_outgoing))
        (:= Report.lossy (!if Report.lossy (> Ack.lost_pkts_sample 0)))
        (:= seen (+ seen 1))
        (:= Cwnd (max (* Cwnd gain) (wrapped_max Ack.now 3)))
        (fallthrough))
     (when (|| (> Micros 100) (&& Flow.was_timeout (< Flow.bytes_in_flight 10)))
        (:= Rate (/ (* Flow.rate_incoming 5) 4))
        (:= seen (if (== Ack.ecn_packets 0) (- Cwnd 1)))
        (report))",
];

#[test]
fn compiled_programs_decode_to_portus_values_and_validate() {
    for src in PROGRAMS {
        let (bytes, scope) = portus_install_bytes(src);
        let (bin, _) = portus::lang::compile(src.as_bytes(), &[]).unwrap();
        let install = match decode_all(&bytes) {
            Msg::InstallExpr(m) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(install.program_uid, scope.program_uid);
        assert_eq!(install.expressions.len(), bin.events.len());
        for (ours, theirs) in install.expressions.iter().zip(&bin.events) {
            assert_eq!(
                (
                    ours.cond_start,
                    ours.num_cond,
                    ours.body_start,
                    ours.num_body
                ),
                (
                    theirs.flag_idx,
                    theirs.num_flag_instrs,
                    theirs.body_idx,
                    theirs.num_body_instrs
                )
            );
        }
        assert_eq!(install.instructions.len(), bin.instrs.len());
        let program = Program::from_install(&install).expect("portus programs validate");
        for ((rec, ours), theirs) in install
            .instructions
            .iter()
            .zip(program.instructions())
            .zip(&bin.instrs)
        {
            assert_eq!(format!("{:?}", ours.op), format!("{:?}", theirs.op));
            assert_eq!(rec.res, portus_reg_record(&theirs.res));
            assert_eq!(rec.left, portus_reg_record(&theirs.left));
            assert_eq!(rec.right, portus_reg_record(&theirs.right));
        }
        assert_eq!(Msg::InstallExpr(install).encode().unwrap(), bytes);
    }
}

#[test]
fn compile_helper_round_trips() {
    let (install, _) = compile(PROGRAMS[0]);
    assert!(Program::from_install(&install).is_ok());
}
