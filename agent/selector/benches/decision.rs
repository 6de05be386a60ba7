//! `cargo bench -p ccswitch-selector --bench decision [-- MODEL.json...]`: what a model costs
//! the agent, printed (never asserted; machines here are shared and noisy). For each model
//! (default: every `learner/models/*.json`): its file size, trees, nodes and depth, and µs per
//! decision (`Model::choose` on a flow's features, what the selector calls), median over
//! rounds, on feature vectors drawn from the golden data beside the model when there is some,
//! else synthetic ones. Also µs per report of the feature tracker, which every policy pays.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ccswitch_algorithms::xorshift::XorShift64;
use ccswitch_algorithms::Measurement;
use ccswitch_selector::features::{FeatureTracker, FeatureWindow, Features};
use ccswitch_selector::model::Model;

const ROUNDS: usize = 15;
const VECTORS: usize = 4_096;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Features for the model: golden rows (in the model's column order) when there are some.
fn inputs(model: &Model, path: &Path) -> (Vec<Features>, &'static str) {
    let golden = path.with_extension("golden.csv");
    let columns: Vec<usize> = model.feature_names().map(|n| Features::index_of(n).expect("checked at load")).collect();
    if let Ok(text) = std::fs::read_to_string(&golden) {
        let rows: Vec<Features> = text
            .lines()
            .skip(1)
            .take(VECTORS)
            .map(|line| {
                let mut f = Features::default();
                for (&column, value) in columns.iter().zip(line.split(',')) {
                    set(&mut f, column, value.parse().unwrap_or(0.0));
                }
                f
            })
            .collect();
        if !rows.is_empty() {
            return (rows, "golden rows");
        }
    }
    let mut rng = XorShift64::new(0x9e37_79b9_7f4a_7c15);
    let synthetic = (0..VECTORS)
        .map(|_| {
            let mut f = Features::default();
            for i in 0..Features::NAMES.len() {
                set(&mut f, i, rng.uniform(if i == 9 { 1e7 } else { 300.0 }));
            }
            f
        })
        .collect();
    (synthetic, "synthetic vectors")
}

fn set(f: &mut Features, index: usize, v: f64) {
    match index {
        0 => f.min_rtt_ms = v,
        1 => f.mean_rtt_ms = v,
        2 => f.max_rtt_ms = v,
        3 => f.rtt_std_ms = v,
        4 => f.rtt_cov = v,
        5 => f.rtt_norm_range = v,
        6 => f.loss_rate = v,
        7 => f.delivery_rate_mbps = v,
        8 => f.max_delivery_rate_mbps = v,
        9 => f.bytes = v,
        10 => f.elapsed_s = v,
        _ => f.samples = v as u64,
    }
}

fn bench_model(path: &Path) {
    let model = match Model::load(path) {
        Ok(m) => m,
        Err(e) => {
            println!("{e}");
            return;
        }
    };
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let (features, source) = inputs(&model, path);
    let rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for f in &features {
                black_box(model.choose(black_box(f)));
            }
            start.elapsed().as_secs_f64() * 1e6 / features.len() as f64
        })
        .collect();
    println!(
        "{}: {} bytes, {} trees, {} nodes, max depth {}, {} classes: {:.3} µs per decision (median of {ROUNDS} rounds over {} {source})",
        path.display(),
        bytes,
        model.trees(),
        model.nodes(),
        model.max_depth(),
        model.classes().len(),
        median(rounds),
        features.len()
    );
}

fn bench_tracker() {
    let mut rng = XorShift64::new(7);
    let reports: Vec<Measurement> = (0..VECTORS)
        .map(|i| Measurement {
            now_us: i as u64 * 20_000,
            rtt_us: 20_000 + rng.next_u64() % 50_000,
            acked_bytes: (rng.next_u64() % 60) * 1448,
            lost_packets: u64::from(rng.next_u64() % 100 == 0),
            delivery_rate_bytes_per_s: rng.next_u64() % 10_000_000,
            ..Measurement::default()
        })
        .collect();
    for window in [FeatureWindow::FirstSamples(20), FeatureWindow::Sliding(30)] {
        let rounds: Vec<f64> = (0..ROUNDS)
            .map(|_| {
                let mut t = FeatureTracker::new(window);
                let start = Instant::now();
                for m in &reports {
                    t.observe(m, 1448);
                    black_box(t.features());
                }
                start.elapsed().as_secs_f64() * 1e6 / reports.len() as f64
            })
            .collect();
        println!("feature tracker, {window}: {:.3} µs per report (observe + features)", median(rounds));
    }
}

/// `NAME.json` beside the notebook's other outputs (`NAME.report.json` is not a model).
fn is_model_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".json") && name.matches('.').count() == 1
}

fn main() {
    let args: Vec<PathBuf> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).map(PathBuf::from).collect();
    let models = if args.is_empty() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../learner/models");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| is_model_file(p)).collect())
            .unwrap_or_default();
        found.sort();
        if found.is_empty() {
            println!("no models in {} (give model files as arguments)", dir.display());
        }
        found
    } else {
        args
    };
    for path in &models {
        bench_model(path);
    }
    bench_tracker();
}
