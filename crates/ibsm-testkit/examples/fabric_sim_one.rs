//! Runs one fabric-simulation seed and prints its trace: `cargo run -p ibsm-testkit
//! --example fabric_sim_one -- <seed> [priorities...]`.

use ibsm_testkit::fabric_sim::{run, FabricSimConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let seed = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let prios: Vec<u8> = args.filter_map(|s| s.parse().ok()).collect();
    let mut cfg = FabricSimConfig::default();
    if !prios.is_empty() {
        cfg.priorities = prios;
    }
    match run(seed, &cfg) {
        Ok(o) => {
            for f in &o.faults {
                println!("fault {f}");
            }
            for t in &o.transitions {
                println!("state {t}");
            }
            println!(
                "ok: {} steps, {} delivered, end {:?}, master {:#x}, max dual {:?}, dual total {:?}, {} MasterSMLID checks",
                o.steps, o.delivered, o.end, o.master, o.max_dual_master, o.dual_master_total, o.master_sm_lid_checks
            );
        }
        Err(f) => {
            println!("{f}");
            std::process::exit(1);
        }
    }
}
