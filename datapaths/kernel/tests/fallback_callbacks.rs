//! The struct_ops callbacks only Cubic's fallback reads (`pkts_acked`, `cwnd_event`) are
//! loaded with a Cubic fallback and left out with Reno's, which spares every ACK a call into
//! BPF; a transfer under each fallback completes intact. Needs root (CI runs as root); the
//! namespaces and processes are removed by `Env`'s Drop, also when an assertion fails.

mod common;

use std::time::{Duration, Instant};

use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions};
use common::{cc_available, make_blob, sha256_file, Env};

const CUBIC_ONLY: [&str; 2] = ["ccsw_pkts_acked", "ccsw_cwnd_event"];

#[test]
fn cubic_only_callbacks_load_with_a_cubic_fallback_and_transfers_complete_under_either() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let mut env = Env::new();
    let want = make_blob(&env.dir);
    for (i, fallback) in [Fallback::Reno, Fallback::Cubic].into_iter().enumerate() {
        let cc = format!("ccsw_c{}{i}", std::process::id() % 100_000);
        let mut dp = KernelDatapath::load(LoadOptions { fallback, cc_name: cc.clone(), ..Default::default() })
            .expect("load datapath");
        let names: Vec<String> = dp.prog_ids().iter().map(|p| p.name.clone()).collect();
        assert!(names.iter().any(|n| n == "ccsw_cong_control"), "{names:?}");
        for cb in CUBIC_ONLY {
            assert_eq!(names.iter().any(|n| n == cb), fallback == Fallback::Cubic, "{fallback:?}: {names:?}");
        }
        assert!(cc_available(&cc));
        env.use_cc(&cc);
        let srv = env.start_server();
        let out = env.dir.join(format!("got-{i}"));
        let t0 = Instant::now();
        let c = env.curl(&out);
        while env.children[c].try_wait().unwrap().is_none() {
            dp.poll(Duration::from_millis(20), |_| {}).unwrap();
            assert!(t0.elapsed() < Duration::from_secs(120), "{fallback:?}: transfer stuck");
        }
        env.wait_ok(c, Duration::from_secs(1));
        assert_eq!(sha256_file(&out), want, "{fallback:?}: payload corrupted");
        let stats = dp.stats();
        assert!(stats.acks_fallback > 0 && stats.acks_directive == 0, "{fallback:?}: the fallback carried the flow: {stats:?}");
        println!("{fallback:?} fallback: {:.2} s, programs {names:?}", t0.elapsed().as_secs_f64());
        env.kill(srv);
        drop(dp);
    }
}
