//! The port programs run with BPF_PROG_TEST_RUN on hand-built frames (IPv4 and IPv6), against
//! their real maps and ring buffer. Needs root (CAP_BPF + CAP_NET_ADMIN).
//!
//! Checksums of output frames are verified with the independent one's-complement sum in
//! common/mod.rs, not with the datapath's own helper.

mod common;

use std::net::{IpAddr, SocketAddr};

use ccswitch_ovs::loader::{
    monotonic_now_ns, FlowPhase, OvsDatapath, DirectiveSlotBusy, Port, RET_DROP, RET_NEXT,
};
use ccswitch_ovs::events::{AckVerdict, CloseReason, FoldDirective, Folded, OvsDirective, OvsEvent, SackBlock, UnbufferedReason};
use common::*;

#[test]
fn handshake_learns_options_from_both_sides() {
    for e in [Ends::v4(), Ends::v6()] {
        let mut dp = dp(1024, 1 << 20);
        let syn = SegmentSpec::to_server(&e, SYN, CLIENT_ISN, 0, 64240).opts(&full_opts(7));
        run(&dp, Port::Egress, &syn);
        let server = [mss(1400), ws(15), SACK_PERM.to_vec(), TS.to_vec()].concat();
        let synack = SegmentSpec::from_server(&e, SYN | ACK, SERVER_ISN, CLIENT_ISN + 1).opts(&server);
        run(&dp, Port::Ingress, &synack);
        let st = dp.flow(&e.key()).unwrap();
        assert_eq!(st.client.mss, Some(1460));
        assert_eq!(st.client.wscale, Some(7));
        assert!(st.client.sack_permitted && st.client.timestamps);
        assert_eq!(st.server.mss, Some(1400));
        assert_eq!(st.server.wscale, Some(14), "wscale 15 is capped at 14");
        assert!(st.server.sack_permitted && st.server.timestamps);
        assert_eq!(dp.stats().wscale_capped, 1);
        assert_eq!(st.server_isn, SERVER_ISN);
        assert_eq!(st.snd_nxt, SERVER_ISN.wrapping_add(1));

        let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 1000);
        run(&dp, Port::Egress, &ack);
        let evs = drain(&mut dp);
        let OvsEvent::Established(est) = &evs[0] else {
            panic!("{evs:?}")
        };
        assert_eq!(est.key, e.key());
        assert_eq!(est.mss, 1400);
        assert_eq!((est.client_wscale, est.server_wscale), (7, 14));
        assert!(est.sack && est.timestamps);
        assert_eq!((est.server_isn, est.client_isn), (SERVER_ISN, CLIENT_ISN));
        assert!(est.flow_id != 0);
        let OvsEvent::Ack(a) = &evs[1] else {
            panic!("{evs:?}")
        };
        assert_eq!(a.ack, SERVER_ISN.wrapping_add(1));
        assert_eq!(a.window_bytes, 1000 << 7);
        assert_eq!(dp.stats().established, 1);
    }
}

#[test]
fn handshake_without_options_uses_defaults() {
    for (e, default_mss) in [(Ends::v4(), 536), (Ends::v6(), 1220)] {
        let mut dp = dp(1024, 1 << 20);
        // Client scales, server does not: nobody scales. SACK only on one side: no SACK.
        let syn = SegmentSpec::to_server(&e, SYN, CLIENT_ISN, 0, 64240)
            .opts(&[ws(7), SACK_PERM.to_vec(), TS.to_vec()].concat());
        run(&dp, Port::Egress, &syn);
        let synack = SegmentSpec::from_server(&e, SYN | ACK, SERVER_ISN, CLIENT_ISN + 1).opts(&TS);
        run(&dp, Port::Ingress, &synack);
        let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 1000);
        run(&dp, Port::Egress, &ack);
        let evs = drain(&mut dp);
        let OvsEvent::Established(est) = &evs[0] else {
            panic!("{evs:?}")
        };
        assert_eq!(est.mss, default_mss);
        assert_eq!((est.client_wscale, est.server_wscale), (0, 0));
        assert!(!est.sack && est.timestamps);
        let OvsEvent::Ack(a) = &evs[1] else { panic!() };
        assert_eq!(a.window_bytes, 1000, "unscaled");
    }
}

#[test]
fn ack_without_matching_synack_does_not_establish() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, SYN, CLIENT_ISN, 0, 64240),
    );
    // No SYN-ACK seen: a bare ACK must not establish.
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 10),
    );
    run(
        &dp,
        Port::Ingress,
        &SegmentSpec::from_server(&e, SYN | ACK, SERVER_ISN, CLIENT_ISN + 1),
    );
    // Wrong acknowledgement number: no.
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(2), 10),
    );
    assert!(drain(&mut dp).is_empty());
    assert_eq!(dp.flow(&e.key()).unwrap().phase, FlowPhase::SynAckSeen);
}

#[test]
fn window_clamped_in_scaled_units_never_raised() {
    for e in [Ends::v4(), Ends::v6()] {
        for wscale in [0u8, 7] {
            let mut dp = dp(1024, 1 << 20);
            let id = handshake(&mut dp, &e, &full_opts(wscale), &full_opts(9));
            server_sends(&mut dp, &e, 1000);
            give_directive(&dp, id, 10_000);
            let una = SERVER_ISN.wrapping_add(1);
            let expect = if wscale == 0 { 10_000 } else { 79 }; // ceil(10000 / 128) = 79
            let cases: [(u16, u16); 3] = [(60_000, expect), (50, 50), (0, 0)];
            for (i, (orig, want)) in cases.into_iter().enumerate() {
                let ack = SegmentSpec::to_server(
                    &e,
                    ACK,
                    CLIENT_ISN + 1,
                    una.wrapping_add(i as u32 * 10),
                    orig,
                );
                let (ret, out) = run(&dp, Port::Egress, &ack);
                assert_eq!(ret, RET_NEXT);
                assert_eq!(window_of(&out), want, "wscale {wscale} orig {orig}");
                assert!(checksums_ok(&out), "checksum after clamp");
                let evs = drain(&mut dp);
                let a = &acks(&evs)[0];
                assert_eq!(a.window_bytes, (orig as u32) << wscale);
                let changed = want != orig;
                assert_eq!(
                    a.verdict,
                    if changed {
                        AckVerdict::Rewritten
                    } else {
                        AckVerdict::Passed
                    }
                );
                if !changed {
                    assert_eq!(out, ack.build());
                }
            }
            // Anything allowed keeps at least one unit open.
            give_directive(&dp, id, 1);
            let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una.wrapping_add(100), 500);
            assert_eq!(window_of(&run(&dp, Port::Egress, &ack).1), 1);
        }
    }
}

#[test]
fn sack_stripped_and_ece_cleared_with_valid_checksum() {
    for e in [Ends::v4(), Ends::v6()] {
        let mut dp = dp(1024, 1 << 20);
        let id = handshake(&mut dp, &e, &full_opts(7), &full_opts(7));
        server_sends(&mut dp, &e, 1400);
        give_directive(&dp, id, 1_000_000);
        let una = SERVER_ISN.wrapping_add(1);
        // NOP NOP TS, NOP NOP SACK with a D-SACK block first, then one block.
        let mut sack = vec![5, 18];
        for v in [
            una.wrapping_sub(100),
            una,
            una.wrapping_add(500),
            una.wrapping_add(900),
        ] {
            sack.extend_from_slice(&v.to_be_bytes());
        }
        let opts = [vec![1, 1], TS.to_vec(), vec![1, 1], sack.clone()].concat();
        let ack = SegmentSpec::to_server(&e, ACK | ECE, CLIENT_ISN + 1, una, 100).opts(&opts);
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!(ret, RET_NEXT);
        assert!(checksums_ok(&out));
        assert_eq!(flags_of(&out), ACK, "ECE cleared");
        let o = opts_of(&out);
        assert_eq!(&o[..12], &opts[..12], "timestamps untouched");
        assert!(
            o[12..].iter().all(|&b| b == 1),
            "SACK replaced by NOPs: {o:?}"
        );
        assert_eq!(window_of(&out), 100, "window below the clamp stays");
        let a = &acks(&drain(&mut dp))[0];
        assert!(a.ece);
        assert_eq!(a.verdict, AckVerdict::Rewritten);
        assert_eq!(
            a.sack,
            vec![
                SackBlock {
                    start: una.wrapping_sub(100),
                    end: una
                },
                SackBlock {
                    start: una.wrapping_add(500),
                    end: una.wrapping_add(900)
                }
            ]
        );
        let s = dp.stats();
        assert_eq!(
            (s.sack_stripped, s.ece_cleared, s.acks_rewritten),
            (1, 1, 1)
        );

        // Four blocks (no timestamps): the maximum a 40-byte option space holds.
        let mut sack4 = vec![5, 34];
        for k in 0..8u32 {
            sack4.extend_from_slice(&una.wrapping_add(100 * (k + 1)).to_be_bytes());
        }
        let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una.wrapping_add(1), 100)
            .opts(&[vec![1, 1], sack4].concat());
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!(ret, RET_NEXT);
        assert!(checksums_ok(&out));
        assert!(opts_of(&out).iter().all(|&b| b == 1), "{:?}", opts_of(&out));
        assert_eq!(acks(&drain(&mut dp))[0].sack.len(), 4);
    }
}

#[test]
fn uncontrolled_ack_with_sack_and_ece_passes_unchanged() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    handshake(&mut dp, &e, &full_opts(7), &full_opts(7));
    server_sends(&mut dp, &e, 1400);
    let una = SERVER_ISN.wrapping_add(1);
    let mut sack = vec![1, 1, 5, 10];
    sack.extend_from_slice(&una.wrapping_add(200).to_be_bytes());
    sack.extend_from_slice(&una.wrapping_add(400).to_be_bytes());
    let ack = SegmentSpec::to_server(&e, ACK | ECE, CLIENT_ISN + 1, una, 100).opts(&sack);
    let (ret, out) = run(&dp, Port::Egress, &ack);
    assert_eq!(ret, RET_NEXT);
    assert_eq!(out, ack.build());
    let a = &acks(&drain(&mut dp))[0];
    assert_eq!(a.verdict, AckVerdict::Passed);
    assert_eq!(a.sack.len(), 1);
}

#[test]
fn duplicate_acks_hidden_only_while_controlled() {
    for e in [Ends::v4(), Ends::v6()] {
        let mut dp = dp(1024, 1 << 20);
        let id = handshake(&mut dp, &e, &full_opts(0), &full_opts(0));
        server_sends(&mut dp, &e, 4000);
        let una = SERVER_ISN.wrapping_add(1001);
        give_directive(&dp, id, 3000);
        let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una, 60_000);
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!((ret, window_of(&out)), (RET_NEXT, 3000));
        // Same ack, same original window, no payload: a duplicate. Hidden.
        let mut dup = ack.clone();
        let mut sack = vec![5, 10];
        sack.extend_from_slice(&una.wrapping_add(1000).to_be_bytes());
        sack.extend_from_slice(&una.wrapping_add(2000).to_be_bytes());
        dup = dup.opts(&[vec![1, 1], sack].concat());
        let (ret, _) = run(&dp, Port::Egress, &dup);
        assert_eq!(ret, RET_DROP);
        let a = &acks(&drain(&mut dp))[1];
        assert_eq!(a.verdict, AckVerdict::Hidden);
        assert_eq!(a.sack.len(), 1, "the shim still learns the SACK block");
        assert_eq!(dp.stats().dupacks_hidden, 1);

        // The clamp grew: the same duplicate goes on as a window update, SACK stripped.
        give_directive(&dp, id, 5000);
        let (ret, out) = run(&dp, Port::Egress, &dup);
        assert_eq!(ret, RET_NEXT);
        assert_eq!(window_of(&out), 5000);
        assert!(checksums_ok(&out));
        assert!(opts_of(&out).iter().all(|&b| b == 1));
        assert_eq!(acks(&drain(&mut dp))[0].verdict, AckVerdict::Rewritten);
        // And now the same again is a duplicate of that update.
        assert_eq!(run(&dp, Port::Egress, &dup).0, RET_DROP);

        // A changed original window is not a duplicate.
        let other = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una, 59_000);
        assert_eq!(run(&dp, Port::Egress, &other).0, RET_NEXT);
        // Neither is one carrying data.
        let data = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una, 59_000).payload(10);
        assert_eq!(run(&dp, Port::Egress, &data).0, RET_NEXT);

        // Not controlled: duplicates pass unchanged.
        dp.set_directive(
            id,
            &OvsDirective {
                cwnd_bytes: 5000,
                active: false,
                ..Default::default()
            },
        )
        .unwrap();
        let (ret, out) = run(&dp, Port::Egress, &dup);
        assert_eq!(ret, RET_NEXT);
        assert_eq!(out, dup.build());
        let (ret, out) = run(&dp, Port::Egress, &dup);
        assert_eq!((ret, out), (RET_NEXT, dup.build()));

        // Controlled again but the deadline lapsed: unchanged too.
        give_directive(&dp, id, 1000);
        dp.set_valid_until(monotonic_now_ns() - 1).unwrap();
        let (ret, out) = run(&dp, Port::Egress, &dup);
        assert_eq!((ret, out), (RET_NEXT, dup.build()));
        // Deadline 0 means no control at all.
        dp.set_valid_until(0).unwrap();
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!((ret, out), (RET_NEXT, ack.build()));
        dp.clear_directive(id).unwrap();
        dp.set_valid_until(far_future()).unwrap();
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!((ret, out), (RET_NEXT, ack.build()), "no directive");
        assert_eq!(dp.stats().dupacks_hidden, 2);
    }
}

#[test]
fn sacked_bytes_count_only_at_sacked_una() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    let id = handshake(&mut dp, &e, &full_opts(0), &full_opts(0));
    server_sends(&mut dp, &e, 20_000);
    let una = SERVER_ISN.wrapping_add(1001);
    dp.set_directive(
        id,
        &OvsDirective {
            cwnd_bytes: 10_000,
            sacked_bytes: 5000,
            sacked_una: una,
            active: true,
            fold: None,
        },
    )
    .unwrap();
    dp.set_valid_until(far_future()).unwrap();
    let (_, out) = run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una, 60_000),
    );
    assert_eq!(window_of(&out), 15_000);
    let (_, out) = run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una.wrapping_add(1), 60_000),
    );
    assert_eq!(window_of(&out), 10_000);
    assert!(checksums_ok(&out));
}

#[test]
fn out_of_window_ack_passes_unchanged() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v6();
    let id = handshake(&mut dp, &e, &full_opts(0), &full_opts(0));
    server_sends(&mut dp, &e, 1000);
    give_directive(&dp, id, 100);
    // Acknowledges data never sent.
    let bogus = SegmentSpec::to_server(
        &e,
        ACK,
        CLIENT_ISN + 1,
        SERVER_ISN.wrapping_add(1002),
        60_000,
    );
    let (ret, out) = run(&dp, Port::Egress, &bogus);
    assert_eq!((ret, out), (RET_NEXT, bogus.build()));
    assert_eq!(dp.stats().out_of_window, 1);
    // Exactly snd_nxt is fine.
    let ok = SegmentSpec::to_server(
        &e,
        ACK,
        CLIENT_ISN + 1,
        SERVER_ISN.wrapping_add(1001),
        60_000,
    );
    assert_eq!(window_of(&run(&dp, Port::Egress, &ok).1), 100);
    // Far behind the last forwarded ACK.
    let stale = SegmentSpec::to_server(
        &e,
        ACK,
        CLIENT_ISN + 1,
        SERVER_ISN.wrapping_add(1001).wrapping_sub(0x6000_0000),
        60_000,
    );
    let (ret, out) = run(&dp, Port::Egress, &stale);
    assert_eq!((ret, out), (RET_NEXT, stale.build()));
    assert_eq!(dp.stats().out_of_window, 2);
    let evs = drain(&mut dp);
    assert!(acks(&evs).iter().all(|a| a.verdict != AckVerdict::Hidden));
}

#[test]
fn malformed_frames_pass_unchanged_and_are_counted() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    let id = handshake(&mut dp, &e, &full_opts(0), &full_opts(0));
    server_sends(&mut dp, &e, 1000);
    give_directive(&dp, id, 100);
    let good = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 60_000)
        .opts(&TS)
        .build();
    let good6 = SegmentSpec::to_server(&Ends::v6(), ACK, 1, 1, 60_000).build();
    // BPF_PROG_TEST_RUN refuses frames shorter than their L3 header, so the shortest
    // truncations here stop right after it; the programs read every header with
    // bpf_skb_load_bytes, which fails the same way wherever the frame ends.
    let mut bad: Vec<(&str, Vec<u8>)> = vec![
        ("IPv4 header only", good[..34].to_vec()),
        ("IPv6 header only", good6[..54].to_vec()),
        ("truncated TCP header", good[..44].to_vec()),
        ("truncated IPv6 TCP header", good6[..70].to_vec()),
    ];
    let mut f = good[..54].to_vec();
    f[14] = 0x4f; // ihl 15: the IP header would end past the frame
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    bad.push(("ihl beyond frame", f));
    let mut f = good.clone();
    f[14] = 0x55;
    bad.push(("IP version 5 under the IPv4 type", f));
    let mut f = good.clone();
    f[14] = 0x44; // ihl 4
    bad.push(("ihl < 5", f));
    let mut f = good.clone();
    f[16..18].copy_from_slice(&1000u16.to_be_bytes()); // total length beyond the frame
    bad.push(("IPv4 length beyond frame", f));
    let mut f = good6.clone();
    f[18..20].copy_from_slice(&1000u16.to_be_bytes());
    bad.push(("IPv6 length beyond frame", f));
    let mut f = good.clone();
    f[34 + 12] = 4 << 4;
    bad.push(("doff < 5", f));
    let mut f = good.clone();
    f[34 + 12] = 15 << 4;
    bad.push(("doff beyond packet", f));
    let mut f = good.clone();
    f[20] |= 0x20; // MF
    bad.push(("IPv4 first fragment", f));
    let mut f = good.clone();
    f[21] = 0x10; // fragment offset
    bad.push(("IPv4 later fragment", f));
    for (what, o) in [
        ("option length 0", vec![2, 0, 0, 0]),
        ("option length 1", vec![1, 1, 3, 1]),
        ("option overrunning", vec![1, 1, 8, 10]),
        ("option kind at the last byte", vec![1, 1, 1, 8]),
    ] {
        bad.push((
            what,
            SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 60_000)
                .opts(&o)
                .build(),
        ));
    }
    let before = dp.stats().malformed;
    for (i, (what, f)) in bad.iter().enumerate() {
        for port in [Port::Egress, Port::Ingress] {
            let r = dp
                .test_run(port, f, 0)
                .unwrap_or_else(|e| panic!("{what}: {e:#}"));
            assert_eq!(r.ret, RET_NEXT, "{what}");
            assert_eq!(&r.frame, f, "{what} must pass unchanged");
        }
        assert_eq!(
            dp.stats().malformed,
            before + 2 * (i as u64 + 1),
            "{what} counted"
        );
    }
    assert!(
        acks(&drain(&mut dp)).is_empty(),
        "no ACK records from malformed frames"
    );
    // A last option byte that is EOL or NOP is fine; the entry is still controlled.
    let ok = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 60_000)
        .opts(&[1, 1, 1, 0]);
    assert_eq!(window_of(&run(&dp, Port::Egress, &ok).1), 100);
    // Non-TCP traffic is not malformed.
    let mut udp = good.clone();
    udp[23] = 17;
    let m = dp.stats().malformed;
    dp.test_run(Port::Egress, &udp, 0).unwrap();
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    dp.test_run(Port::Ingress, &arp, 0).unwrap();
    assert_eq!(dp.stats().malformed, m);
}

#[test]
fn rst_closes_from_either_side() {
    for (port, e) in [(Port::Ingress, Ends::v4()), (Port::Egress, Ends::v6())] {
        let mut dp = dp(1024, 1 << 20);
        let id = handshake(&mut dp, &e, &[], &[]);
        let rst = match port {
            Port::Ingress => {
                SegmentSpec::from_server(&e, RST | ACK, SERVER_ISN.wrapping_add(1), CLIENT_ISN + 1)
            }
            Port::Egress => SegmentSpec::to_server(&e, RST, CLIENT_ISN + 1, 0, 0),
        };
        assert_eq!(run(&dp, port, &rst).0, RET_NEXT);
        assert!(dp.flow(&e.key()).is_none());
        let evs = drain(&mut dp);
        assert!(
            matches!(evs.last(), Some(OvsEvent::Closed { flow_id, reason: CloseReason::Rst, .. }) if *flow_id == id)
        );
    }
    // A half-open entry disappears silently.
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, SYN, CLIENT_ISN, 0, 100),
    );
    run(
        &dp,
        Port::Ingress,
        &SegmentSpec::from_server(&e, RST | ACK, 0, CLIENT_ISN + 1),
    );
    assert_eq!(dp.flow_count(), 0);
    assert!(drain(&mut dp).is_empty());
}

#[test]
fn fins_close_once_the_servers_fin_is_acknowledged() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    let id = handshake(&mut dp, &e, &[], &[]);
    let s1 = SERVER_ISN.wrapping_add(1);
    // Client closes first; the server's FIN carries its last 100 bytes.
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, FIN | ACK, CLIENT_ISN + 1, s1, 100),
    );
    let sfin = SegmentSpec::from_server(&e, FIN | ACK, s1, CLIENT_ISN + 2).payload(100);
    run(&dp, Port::Ingress, &sfin);
    let evs = drain(&mut dp);
    let seg = evs
        .iter()
        .find_map(|e| {
            if let OvsEvent::Segment(s) = e {
                Some(s.clone())
            } else {
                None
            }
        })
        .unwrap();
    assert_eq!((seg.seq, seg.len, seg.fin), (s1, 101, true));
    // An ACK below the server's FIN does not close.
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 2, s1.wrapping_add(100), 100),
    );
    assert!(dp.flow(&e.key()).is_some());
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 2, s1.wrapping_add(101), 100),
    );
    assert!(dp.flow(&e.key()).is_none());
    let evs = drain(&mut dp);
    assert!(
        matches!(evs.last(), Some(OvsEvent::Closed { flow_id, reason: CloseReason::Fin, .. }) if *flow_id == id)
    );
    assert_eq!(dp.stats().closed, 1);

    // Server first, FIN alone.
    let e = Ends::v6();
    let id = handshake(&mut dp, &e, &[], &[]);
    run(
        &dp,
        Port::Ingress,
        &SegmentSpec::from_server(&e, FIN | ACK, s1, CLIENT_ISN + 1),
    );
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, s1.wrapping_add(1), 100),
    );
    assert!(dp.flow(&e.key()).is_some(), "the client has not closed yet");
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, FIN | ACK, CLIENT_ISN + 1, s1.wrapping_add(1), 100),
    );
    assert!(dp.flow(&e.key()).is_none());
    let evs = drain(&mut dp);
    assert!(
        matches!(evs.last(), Some(OvsEvent::Closed { flow_id, reason: CloseReason::Fin, .. }) if *flow_id == id)
    );
}

#[test]
fn new_data_copied_whole_old_data_resent() {
    for e in [Ends::v4(), Ends::v6()] {
        let mut dp = dp(1024, 1 << 20);
        let id = handshake(&mut dp, &e, &full_opts(7), &full_opts(7));
        let s1 = SERVER_ISN.wrapping_add(1);
        let mut frames = Vec::new();
        for k in 0..3u32 {
            let d = SegmentSpec::from_server(&e, ACK | PSH, s1.wrapping_add(1448 * k), CLIENT_ISN + 1)
                .opts(&TS)
                .payload(1448);
            let f = d.build();
            let r = dp.test_run(Port::Ingress, &f, 0).unwrap();
            assert_eq!(
                (r.ret, &r.frame),
                (RET_NEXT, &f),
                "ingress never changes frames"
            );
            frames.push(f);
        }
        let evs = drain_keeping_frames(&mut dp);
        let segs: Vec<_> = evs
            .iter()
            .filter_map(|e| {
                if let OvsEvent::Segment(s) = e {
                    Some(s.clone())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(segs.len(), 3);
        for (k, s) in segs.iter().enumerate() {
            assert_eq!(s.flow_id, id);
            assert_eq!(s.seq, s1.wrapping_add(1448 * k as u32));
            assert_eq!((s.len, s.fin, s.tsval), (1448, false, Some(1)), "the frame's timestamp value");
            assert_eq!(dp.frame(&s.frame), Some(&frames[k][..]), "exact frame bytes");
        }
        let slots: std::collections::HashSet<u32> = segs.iter().map(|s| s.frame.index).collect();
        assert_eq!((slots.len(), dp.slab_in_use()), (3, 3), "one slot per copied frame");
        free_frames(&dp, &evs);
        assert_eq!(dp.slab_in_use(), 0, "a freed slot is free");
        assert_eq!(
            dp.flow(&e.key()).unwrap().snd_nxt,
            s1.wrapping_add(3 * 1448)
        );
        // The second segment again: it crossed the port before, so this is the server's
        // retransmission, reported without its frame (the shim holds the first copy).
        dp.test_run(Port::Ingress, &frames[1], 0).unwrap();
        // A segment straddling snd_nxt carries new data: copied.
        let straddle =
            SegmentSpec::from_server(&e, ACK, s1.wrapping_add(3 * 1448 - 100), CLIENT_ISN + 1).payload(200);
        run(&dp, Port::Ingress, &straddle);
        // Pure ACKs from the server are neither.
        run(
            &dp,
            Port::Ingress,
            &SegmentSpec::from_server(&e, ACK, s1.wrapping_add(3 * 1448 + 100), CLIENT_ISN + 1),
        );
        // Frames can cross the port out of order: a segment that leaves a gap below it, then
        // the late original that fills it, within the reordering allowance: both copied. The
        // late one again is a retransmission.
        let late = s1.wrapping_add(3 * 1448 + 100);
        let gap = late.wrapping_add(1448);
        run(&dp, Port::Ingress, &SegmentSpec::from_server(&e, ACK, gap, CLIENT_ISN + 1).payload(1448));
        run(&dp, Port::Ingress, &SegmentSpec::from_server(&e, ACK, late, CLIENT_ISN + 1).payload(1448));
        run(&dp, Port::Ingress, &SegmentSpec::from_server(&e, ACK, late, CLIENT_ISN + 1).payload(1448));
        // Data far ahead moves snd_nxt beyond the allowance: the second segment is now old.
        let far = s1.wrapping_add(3 * 1448 + 100 + 70_000);
        run(&dp, Port::Ingress, &SegmentSpec::from_server(&e, ACK, far, CLIENT_ISN + 1).payload(100));
        dp.test_run(Port::Ingress, &frames[1], 0).unwrap();
        let evs = drain_keeping_frames(&mut dp);
        let resent_second = |e: &OvsEvent| {
            matches!(e, OvsEvent::Resent(r) if r.seq == s1.wrapping_add(1448) && r.len == 1448 && r.flow_id == id && r.tsval == Some(1))
        };
        assert_eq!(evs.len(), 7, "{evs:?}");
        assert!(resent_second(&evs[0]), "{:?}", evs[0]);
        assert!(matches!(&evs[1], OvsEvent::Segment(s) if s.len == 200));
        assert!(matches!(&evs[2], OvsEvent::Segment(s) if s.seq == gap && s.len == 1448));
        assert!(matches!(&evs[3], OvsEvent::Segment(s) if s.seq == late && s.len == 1448));
        assert!(matches!(&evs[4], OvsEvent::Resent(r) if r.seq == late && r.len == 1448));
        assert!(matches!(&evs[5], OvsEvent::Segment(s) if s.seq == far && s.len == 100));
        assert!(resent_second(&evs[6]), "{:?}", evs[6]);
        free_frames(&dp, &evs);
        let s = dp.stats();
        assert_eq!((s.segments, s.resent, s.copies_seen), (7, 3, 0));
        // A retransmission hands up its timestamp value, none without the option (the shim's
        // copies must not be older: the client's PAWS check would drop them).
        let ts = [1, 1, 8, 10, 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 7];
        run(&dp, Port::Ingress, &SegmentSpec::from_server(&e, ACK, s1, CLIENT_ISN + 1).payload(1448).opts(&ts));
        run(&dp, Port::Ingress, &SegmentSpec::from_server(&e, ACK, s1, CLIENT_ISN + 1).payload(1448));
        let evs = drain_keeping_frames(&mut dp);
        assert!(
            matches!(evs[..], [OvsEvent::Resent(a), OvsEvent::Resent(b)] if a.seq == s1 && a.tsval == Some(0x0102_0304) && b.tsval.is_none()),
            "{evs:?}"
        );
    }
}

#[test]
fn oversize_and_gso_frames_make_the_flow_unbuffered() {
    for gso in [false, true] {
        let mut dp = dp(1024, 1 << 20);
        let e = Ends::v4();
        let id = handshake(&mut dp, &e, &full_opts(0), &full_opts(0));
        give_directive(&dp, id, 1000);
        let s1 = SERVER_ISN.wrapping_add(1);
        let (f, segs) = if gso {
            (
                SegmentSpec::from_server(&e, ACK, s1, CLIENT_ISN + 1)
                    .payload(1000)
                    .build(),
                2,
            )
        } else {
            (
                SegmentSpec::from_server(&e, ACK, s1, CLIENT_ISN + 1)
                    .payload(3000)
                    .build(),
                0,
            )
        };
        let r = dp.test_run(Port::Ingress, &f, segs).unwrap();
        assert_eq!((r.ret, &r.frame), (RET_NEXT, &f));
        let evs = drain(&mut dp);
        assert_eq!(
            evs,
            vec![OvsEvent::Unbuffered {
                flow_id: id,
                ts_ns: evs[0].ts_ns(),
                reason: UnbufferedReason::FrameTooLarge,
                hole_end: s1.wrapping_add(if gso { 1000 } else { 3000 }),
            }]
        );
        assert!(dp.flow(&e.key()).unwrap().unbuffered);
        assert_eq!(dp.stats().unbuffered, 1);
        // No longer controlled, even with an active directive and a live deadline, and even
        // once the client has acknowledged everything: its frames will never fit.
        let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, s1.wrapping_add(3000), 60_000);
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!((ret, out), (RET_NEXT, ack.build()));
        // Later data is not copied.
        run(
            &dp,
            Port::Ingress,
            &SegmentSpec::from_server(&e, ACK, s1.wrapping_add(5000), CLIENT_ISN + 1).payload(100),
        );
        let evs = drain(&mut dp);
        assert!(
            evs.iter()
                .all(|e| !matches!(e, OvsEvent::Segment(_) | OvsEvent::Unbuffered { .. })),
            "{evs:?}"
        );
    }
    // The copy limit.
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v6();
    handshake(&mut dp, &e, &[], &[]);
    dp.set_copy_limit(600).unwrap();
    run(
        &dp,
        Port::Ingress,
        &SegmentSpec::from_server(&e, ACK, SERVER_ISN.wrapping_add(1), CLIENT_ISN + 1).payload(500),
    );
    run(
        &dp,
        Port::Ingress,
        &SegmentSpec::from_server(&e, ACK, SERVER_ISN.wrapping_add(501), CLIENT_ISN + 1).payload(600),
    );
    let evs = drain(&mut dp);
    assert!(matches!(evs[0], OvsEvent::Segment(_)));
    assert!(matches!(
        evs[1],
        OvsEvent::Unbuffered {
            reason: UnbufferedReason::FrameTooLarge,
            ..
        }
    ));
}

#[test]
fn full_ring_makes_the_flow_unbuffered() {
    // One page of ring holds at most 4088 bytes of records (a reservation that would fill it
    // to 4096 fails): segment records take 48 bytes (40 + 8 of header), ACK records 72, an
    // UNBUFFERED record 32. Three ACK records and 80 segment records leave room for the
    // UNBUFFERED one and not for an 81st segment.
    let mut dp = dp(1024, 4096);
    let e = Ends::v4();
    let id = handshake(&mut dp, &e, &[], &[]);
    let _ = drain(&mut dp);
    let s1 = SERVER_ISN.wrapping_add(1);
    for _ in 0..3 {
        run(&dp, Port::Egress, &SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, s1, 60_000));
    }
    for k in 0..120u32 {
        run(
            &dp,
            Port::Ingress,
            &SegmentSpec::from_server(&e, ACK, s1.wrapping_add(100 * k), CLIENT_ISN + 1).payload(100),
        );
    }
    let st = dp.flow(&e.key()).unwrap();
    assert!(st.unbuffered);
    assert_eq!(st.snd_nxt, s1.wrapping_add(12_000));
    let s = dp.stats();
    assert_eq!((s.segments, s.slab_full), (80, 0));
    assert!(s.ring_drops >= 1);
    assert_eq!(dp.slab_in_use(), 80, "no slot taken for a frame the ring could not announce");
    let evs = drain(&mut dp);
    assert_eq!(dp.slab_in_use(), 0);
    assert_eq!(evs.iter().filter(|e| matches!(e, OvsEvent::Segment(_))).count(), 80);
    assert_eq!(
        evs[83..],
        [OvsEvent::Unbuffered {
            flow_id: id,
            ts_ns: evs[83].ts_ns(),
            reason: UnbufferedReason::RingFull,
            hole_end: s1.wrapping_add(8_100),
        }]
    );
}

#[test]
fn an_exhausted_slab_leaves_the_flow_unbuffered_until_the_hole_is_acknowledged() {
    let mut dp = dp_with_slab(1024, 1 << 20, 4);
    let (a, b) = (Ends::v4(), Ends::v6());
    let id = handshake(&mut dp, &a, &full_opts(0), &full_opts(0));
    let id_b = handshake(&mut dp, &b, &full_opts(0), &full_opts(0));
    give_directive(&dp, id, 10_000);
    let _ = drain(&mut dp);
    let s1 = SERVER_ISN.wrapping_add(1);
    let data = |e: &Ends, k: u32| SegmentSpec::from_server(e, ACK, s1.wrapping_add(1000 * k), CLIENT_ISN + 1).payload(1000);
    for k in 0..4 {
        run(&dp, Port::Ingress, &data(&a, k));
    }
    assert_eq!(dp.slab_in_use(), 4);
    // The fifth frame finds no slot: it passes unchanged, and the flow is left to the server.
    let f = data(&a, 4).build();
    let r = dp.test_run(Port::Ingress, &f, 0).unwrap();
    assert_eq!((r.ret, &r.frame), (RET_NEXT, &f));
    let evs = drain_keeping_frames(&mut dp);
    let slots: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            OvsEvent::Segment(s) => Some(s.frame.index),
            _ => None,
        })
        .collect();
    let mut sorted = slots.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![0, 1, 2, 3], "each slot once");
    for (k, e) in evs.iter().take(4).enumerate() {
        assert_eq!(frame_of(&dp, e), Some(data(&a, k as u32).build()), "slot holds frame {k}");
    }
    assert_eq!(
        evs[4..],
        [OvsEvent::Unbuffered { flow_id: id, ts_ns: evs[4].ts_ns(), reason: UnbufferedReason::SlabFull, hole_end: s1.wrapping_add(5000) }]
    );
    assert!(dp.flow(&a.key()).unwrap().unbuffered);
    let s = dp.stats();
    assert_eq!((s.segments, s.slab_full, s.unbuffered, s.ring_drops), (4, 1, 1, 0));
    // Not controlled while the hole is outstanding, even with an active directive and a live
    // deadline.
    let ack = SegmentSpec::to_server(&a, ACK, CLIENT_ISN + 1, s1, 60_000);
    assert_eq!(run(&dp, Port::Egress, &ack), (RET_NEXT, ack.build()));
    assert!(matches!(&drain(&mut dp)[..], [OvsEvent::Ack(x)] if x.verdict == AckVerdict::Passed));
    // Given back, the slots serve both flows: the one that found the slab full is copied
    // again after its hole.
    free_frames(&dp, &evs);
    assert_eq!(dp.slab_in_use(), 0);
    run(&dp, Port::Ingress, &data(&a, 5));
    run(&dp, Port::Ingress, &data(&b, 0));
    let evs = drain_keeping_frames(&mut dp);
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert!(matches!(&evs[0], OvsEvent::Segment(s) if s.flow_id == id && s.seq == s1.wrapping_add(5000)));
    assert_eq!(frame_of(&dp, &evs[0]), Some(data(&a, 5).build()));
    assert!(matches!(&evs[1], OvsEvent::Segment(s) if s.flow_id == id_b));
    assert_eq!(frame_of(&dp, &evs[1]), Some(data(&b, 0).build()));
    assert_eq!(dp.stats().slab_full, 1);
    // The hole acknowledged, every byte outstanding was copied: controlled again.
    let ack = SegmentSpec::to_server(&a, ACK, CLIENT_ISN + 1, s1.wrapping_add(5000), 60_000);
    let (ret, out) = run(&dp, Port::Egress, &ack);
    assert_eq!(ret, RET_NEXT);
    assert_ne!(out, ack.build(), "the window is clamped again");
    assert!(!dp.flow(&a.key()).unwrap().unbuffered);
    assert!(matches!(&drain(&mut dp)[..], [OvsEvent::Ack(x)] if x.verdict == AckVerdict::Rewritten));
    free_frames(&dp, &evs);
}

/// Timestamp accessor for comparing whole events.
trait Ts {
    fn ts_ns(&self) -> u64;
}
impl Ts for OvsEvent {
    fn ts_ns(&self) -> u64 {
        match self {
            OvsEvent::Established(e) => e.ts_ns,
            OvsEvent::Segment(s) => s.ts_ns,
            OvsEvent::Resent(r) => r.ts_ns,
            OvsEvent::Ack(a) => a.ts_ns,
            OvsEvent::Closed { ts_ns, .. } | OvsEvent::Unbuffered { ts_ns, .. } => *ts_ns,
            OvsEvent::Folded(f) => f.ts_ns,
        }
    }
}

#[test]
fn syn_flood_fills_the_table_visibly_without_losing_a_live_flow() {
    let mut dp = dp(4096, 1 << 22);
    let e = Ends::v4();
    let id = handshake(&mut dp, &e, &full_opts(0), &full_opts(0));
    server_sends(&mut dp, &e, 100_000);
    give_directive(&dp, id, 2000);
    let _ = drain(&mut dp);
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let una = SERVER_ISN.wrapping_add(1);
    let mut touched = 0u32;
    for batch in 0..100 {
        for _ in 0..1000 {
            let r = next();
            let v6 = r & 1 == 0;
            let client: SocketAddr = if v6 {
                SocketAddr::new(
                    IpAddr::V6((r as u128 | 0x2001_0db8 << 96).into()),
                    (r >> 16) as u16,
                )
            } else {
                SocketAddr::new(IpAddr::V4(((r >> 8) as u32).into()), (r >> 40) as u16)
            };
            let server: SocketAddr = if v6 {
                "[2001:db8::1]:8080".parse().unwrap()
            } else {
                e.server
            };
            let syn = SegmentSpec {
                src: client,
                dst: server,
                seq: r as u32,
                ack: 0,
                flags: SYN,
                window: 1000,
                opts: vec![],
                payload: vec![],
            };
            dp.test_run(Port::Egress, &syn.build(), 0).unwrap();
        }
        assert!(
            dp.flow_count() <= 4096,
            "batch {batch}: {}",
            dp.flow_count()
        );
        // The live flow keeps sending ACKs; it must survive and stay clamped.
        touched += 1;
        let ack = SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una.wrapping_add(touched), 60_000);
        let (ret, out) = run(&dp, Port::Egress, &ack);
        assert_eq!((ret, window_of(&out)), (RET_NEXT, 2000), "batch {batch}");
    }
    assert!(dp.flow(&e.key()).is_some());
    // Full, and every SYN it could not take counted: none evicted a flow to make room.
    assert_eq!(dp.flow_count(), 4096);
    let st = dp.stats();
    assert_eq!(st.syns, 100_000 + 1);
    assert_eq!(st.table_full, st.syns - 4096, "{st:?}");
    // The shim clears a full table of handshakes that never completed; the live flow stays.
    assert_eq!(dp.expire_half_open(0, far_future()), 4095);
    assert_eq!(dp.flow_count(), 1);
    assert!(dp.flow(&e.key()).is_some());
    // The slots given back take new flows again, up to the table's capacity.
    for port in 1..4096u16 {
        let client = SocketAddr::new(e.client.ip(), port);
        let syn = SegmentSpec { src: client, dst: e.server, seq: 7, ack: 0, flags: SYN, window: 1000, opts: vec![], payload: vec![] };
        dp.test_run(Port::Egress, &syn.build(), 0).unwrap();
    }
    assert_eq!(dp.flow_count(), 4096);
    assert_eq!(dp.stats().table_full, st.table_full);
    assert_eq!(dp.expire_half_open(0, far_future()), 4095);
    let evs = drain(&mut dp);
    assert!(
        evs.iter().all(|ev| ev.flow_id() == id),
        "records only from the live flow"
    );
    assert!(!evs.iter().any(|ev| matches!(ev, OvsEvent::Established(_))));
    assert_eq!(acks(&evs).len(), 100);
}

#[test]
fn flows_beyond_the_near_region_are_found_in_the_far_one() {
    // 16,000 flows in a table sized for 20,000: its near region (16,384 slots, 8 probes a
    // key) overflows into the far one, and both programs and the shim find every flow.
    let mut dp = dp(20_000, 1 << 20);
    let flows: Vec<Ends> = (0..16_000u32)
        .map(|i| Ends {
            server: "192.0.2.1:8080".parse().unwrap(),
            client: SocketAddr::new(IpAddr::V4((0xc633_6400 + (i >> 14)).into()), 1024 + (i & 0x3fff) as u16),
        })
        .collect();
    for e in &flows {
        run(&dp, Port::Egress, &SegmentSpec::to_server(e, SYN, CLIENT_ISN, 0, 64240));
    }
    assert_eq!(dp.flow_count(), flows.len());
    assert_eq!(dp.stats().table_full, 0);
    for e in &flows {
        run(&dp, Port::Ingress, &SegmentSpec::from_server(e, SYN | ACK, SERVER_ISN, CLIENT_ISN + 1));
        assert_eq!(dp.flow(&e.key()).expect("every flow found").phase, FlowPhase::SynAckSeen);
    }
    assert_eq!(dp.expire_half_open(0, far_future()), flows.len());
    assert_eq!(dp.flow_count(), 0);
    let _ = drain(&mut dp);
}

#[test]
fn reused_tuple_closes_the_old_flow() {
    let mut dp = dp(1024, 1 << 20);
    let e = Ends::v4();
    let id = handshake(&mut dp, &e, &[], &[]);
    // A duplicate of the original SYN changes nothing.
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, SYN, CLIENT_ISN, 0, 100),
    );
    assert_eq!(dp.flow(&e.key()).unwrap().phase, FlowPhase::Established);
    // A new connection on the same tuple replaces it.
    run(
        &dp,
        Port::Egress,
        &SegmentSpec::to_server(&e, SYN, CLIENT_ISN + 99_999, 0, 100),
    );
    assert_eq!(dp.flow(&e.key()).unwrap().phase, FlowPhase::SynSeen);
    let evs = drain(&mut dp);
    assert!(matches!(evs.last(), Some(OvsEvent::Closed { flow_id, .. }) if *flow_id == id));
    let id2 = handshake_after_syn(&mut dp, &e, CLIENT_ISN + 99_999);
    assert_ne!(id2, id);
}

fn handshake_after_syn(dp: &mut OvsDatapath, e: &Ends, isn: u32) -> u32 {
    run(
        dp,
        Port::Ingress,
        &SegmentSpec::from_server(e, SYN | ACK, 7, isn + 1),
    );
    run(dp, Port::Egress, &SegmentSpec::to_server(e, ACK, isn + 1, 8, 100));
    drain(dp)
        .iter()
        .find_map(|e| {
            if let OvsEvent::Established(x) = e {
                Some(x.flow_id)
            } else {
                None
            }
        })
        .unwrap()
}

#[test]
fn remove_flow_and_flows_listing() {
    let mut dp = dp(1024, 1 << 20);
    let (a, b) = (Ends::v4(), Ends::v6());
    handshake(&mut dp, &a, &[], &[]);
    handshake(&mut dp, &b, &[], &[]);
    let mut keys: Vec<_> = dp.flows().into_iter().map(|(k, _)| k).collect();
    keys.sort_by_key(|k| k.server.is_ipv6());
    assert_eq!(keys, vec![a.key(), b.key()]);
    dp.remove_flow(&a.key()).unwrap();
    dp.remove_flow(&a.key()).unwrap();
    assert_eq!(dp.flow_count(), 1);
    assert!(dp.flow(&b.key()).is_some());
    assert_eq!(dp.records_malformed(), 0);
}

/// Controls are slots of a mapped array, one per flow slot (flow id modulo the table's
/// slots). A write for a flow gone from its slot, whose slot a live flow's directive holds,
/// is refused visibly; a directive left behind by a flow gone from the table is taken over.
#[test]
fn a_directive_slot_held_by_another_flow_is_refused_visibly() {
    let mut dp = dp(2, 1 << 16);
    let slots = dp.flow_slots() as u32;
    assert_eq!(slots, 4, "twice --max-flows, a power of two");
    let c = OvsDirective { cwnd_bytes: 3000, sacked_bytes: 0, sacked_una: 1, active: true, fold: None };
    let e = Ends::v4();
    let live = handshake(&mut dp, &e, &[], &[]);
    dp.set_directive(live, &c).unwrap();
    let gone = live + slots; // another flow of the same slot, not in the table
    let err = dp.set_directive(gone, &c).unwrap_err();
    assert!(err.is::<DirectiveSlotBusy>(), "{err:#}");
    assert_eq!((dp.directive(live), dp.directive(gone)), (Some(c), None));
    // The live flow leaves the table without its directive cleared: the next flow of the
    // slot takes the directive slot over.
    dp.remove_flow(&e.key()).unwrap();
    dp.set_directive(gone, &OvsDirective { cwnd_bytes: 7000, ..c }).unwrap();
    assert_eq!(dp.directive(live), None);
    assert_eq!(dp.directive(gone).map(|c| c.cwnd_bytes), Some(7000));
    // Other slots are untouched: a directive of no live flow in a free slot is written as is.
    dp.set_directive(2, &OvsDirective { cwnd_bytes: 5000, ..c }).unwrap();
    assert_eq!(dp.directive(2).map(|c| c.cwnd_bytes), Some(5000));
    dp.clear_directive(gone).unwrap();
    assert_eq!(dp.directive(gone), None);
}

/// A flow's id names its flow slot, and the next flow in the same slot gets another id.
#[test]
fn a_flow_id_names_its_slot_and_the_next_flow_there_gets_another() {
    let mut dp = dp(2, 1 << 20);
    let slots = dp.flow_slots() as u32;
    let e = Ends::v4();
    let first = handshake(&mut dp, &e, &[], &[]);
    let at = dp.flow_slot_of(&e.key()).expect("in the table");
    assert_eq!(first % slots, at as u32);
    assert!(first >= slots, "generation 1 at least: never 0");
    dp.remove_flow(&e.key()).unwrap();
    let second = handshake(&mut dp, &e, &[], &[]);
    assert_eq!(dp.flow_slot_of(&e.key()), Some(at));
    assert_eq!(second, first + slots);
}

/// The directive of a controlled flow whose standard program the egress program folds: per
/// RTT while more than half its window (the port's and the program's, 1 MB) is in flight,
/// else every second, or per ACK.
fn give_fold_directive(dp: &OvsDatapath, id: u32, per_ack: bool, start_us: u64, hold: bool) {
    let fold = Some(FoldDirective {
        per_ack,
        start_us,
        window_use_pct: 50,
        idle_report_us: 1_000_000,
        cwnd_bytes: 1_000_000,
        rate: 0,
        micros_zero_us: 0,
        hold,
    });
    dp.set_directive(id, &OvsDirective { cwnd_bytes: 1_000_000, sacked_bytes: 0, sacked_una: 0, active: true, fold })
        .unwrap();
    dp.set_valid_until(far_future()).unwrap();
}

fn folded(evs: &[OvsEvent]) -> Vec<Folded> {
    evs.iter()
        .filter_map(|e| match e {
            OvsEvent::Folded(f) => Some(*f),
            _ => None,
        })
        .collect()
}

#[test]
fn a_folded_flow_sends_up_only_its_reports_and_hands_its_registers_over_before_a_loss_signal() {
    for e in [Ends::v4(), Ends::v6()] {
        let mut dp = dp(1024, 1 << 20);
        let id = handshake(&mut dp, &e, &full_opts(7), &full_opts(7));
        server_sends(&mut dp, &e, 10_000);
        let una = SERVER_ISN.wrapping_add(1);
        // The server resends its first segment: the segment timed for an RTT sample is
        // forgotten (Karn), so the program has no sample (infinite RTT) and reports per RTT
        // only on loss, timeout or ECN here.
        let resend = SegmentSpec::from_server(&e, ACK | PSH, una, CLIENT_ISN + 1).payload(1000);
        run(&dp, Port::Ingress, &resend);
        drain(&mut dp);
        let ack_at = |n: u32, win: u16| SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una.wrapping_add(n), win);
        let start_us = monotonic_now_ns() / 1000;
        give_fold_directive(&dp, id, false, start_us, false);

        // ACKs that move forward and a window update: folded, nothing goes up, and the clamp
        // still applies to each.
        for (n, win) in [(1000, 1000), (2000, 1000), (2000, 900), (4000, 1000)] {
            let (ret, out) = run(&dp, Port::Egress, &ack_at(n, win));
            assert_eq!(ret, RET_NEXT);
            assert!(checksums_ok(&out));
        }
        assert!(drain(&mut dp).is_empty(), "folded ACKs send nothing up");
        assert_eq!(dp.stats().acks_folded, 4);

        // A SACK block: the registers folded so far go up first (not a report), then the ACK.
        let sack = [vec![1, 1, 5, 10], una.wrapping_add(5000).to_be_bytes().to_vec(), una.wrapping_add(6000).to_be_bytes().to_vec()].concat();
        run(&dp, Port::Egress, &ack_at(4000, 1000).opts(&sack));
        let evs = drain(&mut dp);
        assert_eq!(evs.len(), 2, "{evs:?}");
        let OvsEvent::Folded(h) = evs[0] else { panic!("{evs:?}") };
        assert!(!h.reported);
        assert_eq!((h.flow_id, h.start_us, h.acks, h.ack), (id, start_us, 4, una.wrapping_add(4000)));
        assert_eq!(h.window_bytes, 1000 << 7);
        assert_eq!(h.fields[0], 4000, "bytes acknowledged by the folded ACKs");
        assert_eq!((h.fields[1], h.fields[2], h.fields[3]), (0, 0, 0), "no loss, timeout or ECN folded");
        assert_eq!(h.fields[6], 6000, "in flight: snd_nxt - ack");
        let OvsEvent::Ack(a) = &evs[1] else { panic!("{evs:?}") };
        assert_eq!(a.sack.len(), 1);

        // The shim recovers a loss (hold): every ACK goes up, none is folded.
        give_fold_directive(&dp, id, false, start_us, true);
        run(&dp, Port::Egress, &ack_at(5000, 1000));
        let evs = drain(&mut dp);
        assert!(matches!(evs[..], [OvsEvent::Ack(_)]), "{evs:?}");

        // Per-ACK mode: every foldable ACK is a report, its own.
        give_fold_directive(&dp, id, true, start_us, false);
        run(&dp, Port::Egress, &ack_at(6000, 1000));
        let f = folded(&drain(&mut dp));
        assert_eq!(f.len(), 1);
        assert!(f[0].reported);
        assert_eq!((f[0].acks, f[0].fields[0], f[0].ack), (1, 1000, una.wrapping_add(6000)));
        assert_eq!(dp.stats().folded_reports, 1);

        // Half the port's window acknowledged since the shim last heard: the registers go up
        // (not a report), so that the shim frees those segments' slots.
        let mut d = dp.directive(id).unwrap();
        d.cwnd_bytes = 3000;
        d.fold.as_mut().unwrap().per_ack = false;
        dp.set_directive(id, &d).unwrap();
        run(&dp, Port::Egress, &ack_at(6500, 1000));
        assert!(drain(&mut dp).is_empty());
        run(&dp, Port::Egress, &ack_at(7500, 1000));
        let f = folded(&drain(&mut dp));
        assert_eq!(f.len(), 1);
        assert!(!f[0].reported);
        assert_eq!((f[0].acks, f[0].fields[0], f[0].ack), (2, 1500, una.wrapping_add(7500)));

        // Everything the server sent acknowledged: the registers go up too (the shim's
        // retransmission timer must stop), whatever the share of the window.
        d.cwnd_bytes = 1_000_000;
        dp.set_directive(id, &d).unwrap();
        run(&dp, Port::Egress, &ack_at(8000, 1000));
        assert!(drain(&mut dp).is_empty());
        run(&dp, Port::Egress, &ack_at(10_000, 1000));
        let f = folded(&drain(&mut dp));
        assert_eq!(f.len(), 1);
        assert!(!f[0].reported);
        assert_eq!((f[0].acks, f[0].fields[0], f[0].ack), (2, 2500, una.wrapping_add(10_000)));

        // Without a directive (the flow fell back) nothing is folded.
        dp.clear_directive(id).unwrap();
        run(&dp, Port::Egress, &ack_at(10_000, 900));
        assert_eq!(acks(&drain(&mut dp)).len(), 1);
    }
}

#[test]
fn a_folded_flow_reports_once_the_rtt_timed_on_a_segment_has_passed() {
    let e = Ends::v4();
    let mut dp = dp(1024, 1 << 20);
    let id = handshake(&mut dp, &e, &full_opts(7), &full_opts(7));
    let una = SERVER_ISN.wrapping_add(1);
    let ack_at = |n: u32| SegmentSpec::to_server(&e, ACK, CLIENT_ISN + 1, una.wrapping_add(n), 1000);
    // The program started 1 ms ago: Micros is then always beyond an RTT timed from now; and
    // its window (4 kB) binds, with 3 kB in flight before the ACK.
    let fold = FoldDirective {
        per_ack: false,
        start_us: monotonic_now_ns() / 1000 - 1000,
        window_use_pct: 50,
        idle_report_us: 1_000_000,
        cwnd_bytes: 4000,
        rate: 0,
        micros_zero_us: 0,
        hold: false,
    };
    dp.set_directive(id, &OvsDirective { cwnd_bytes: 1_000_000, sacked_bytes: 0, sacked_una: 0, active: true, fold: Some(fold) }).unwrap();
    dp.set_valid_until(far_future()).unwrap();
    run(&dp, Port::Egress, &ack_at(0));
    assert!(folded(&drain(&mut dp)).is_empty(), "no RTT sample yet: nothing to report");
    // Segment 1 is timed from here; its ACK brings the first sample, infinity before it.
    server_sends(&mut dp, &e, 3000);
    drain(&mut dp);
    std::thread::sleep(std::time::Duration::from_millis(3));
    run(&dp, Port::Egress, &ack_at(1000));
    // Micros (since the start, over 3 ms ago) passed the sample: a report.
    let f = folded(&drain(&mut dp));
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].reported);
    let (rtt, minrtt, rate) = (f[0].fields[4], f[0].fields[5], f[0].fields[7]);
    assert!((3_000..1_000_000).contains(&rtt), "rtt {rtt} us");
    assert_eq!(minrtt, rtt);
    assert!(rate > 0 && rate <= 1000 * 1_000_000 / 3_000, "rate {rate} B/s: 1000 bytes over the sample");
    assert_eq!(f[0].ack, una.wrapping_add(1000));
}
