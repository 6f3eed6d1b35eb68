//! Measure the explorer: `cargo run -p ibsm-testkit --example explore -- <n> <depth> <drops>`.
use ibsm_testkit::model::{check, model_spec, ModelConfig};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(2) as usize;
    let depth = args.get(1).copied().unwrap_or(6) as usize;
    let drops = args.get(2).copied().unwrap_or(2) as u32;
    let prios: Vec<u8> = std::env::var("PRIOS")
        .unwrap_or("5,3,7,4".into())
        .split(",")
        .filter_map(|x| x.parse().ok())
        .collect();
    let specs = (0..n)
        .map(|i| {
            model_spec(
                if std::env::var("REV").is_ok() {
                    0x10 * (n - i) as u64
                } else {
                    0x10 * (i as u64 + 1)
                },
                prios[i % prios.len()],
            )
        })
        .collect();
    let cfg = ModelConfig {
        specs,
        max_depth: depth,
        max_drops: drops,
        max_crashes: 1,
        settle_for: Duration::from_secs(4),
        require_best: true,
        max_states: 2_000_000,
        warmup: None,
        rogues: Vec::new(),
    };
    let t = Instant::now();
    let r = check(&cfg);
    println!(
        "n={n} depth={depth} drops={drops}: {} states in {:?} truncated={} cex={:?}",
        r.states,
        t.elapsed(),
        r.truncated,
        r.counterexample.map(|c| (c.violation, c.trace))
    );
}
