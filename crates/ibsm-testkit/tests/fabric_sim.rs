//! Multi-SM simulation on the embedded fabric. A failing seed prints
//! `IBSM_SEED=<n> cargo test -p ibsm-testkit fabric_sim`, which replays it exactly;
//! `IBSM_SEEDS=<count>` runs more seeds (soak).

use std::time::{Duration, Instant};

use ibsm_core::election::InjectedFault;
use ibsm_testkit::fabric_sim::{run, seeds, FabricSimConfig};
use ibsm_testkit::rng::Rng;

/// The configuration a seed runs: 2, 3 or 4 SMs with seeded priorities (ties included).
fn config_for(seed: u64) -> FabricSimConfig {
    let mut rng = Rng::new(seed ^ 0xfab_51b);
    let n = 2 + (seed % 3) as usize;
    let priorities = (0..n).map(|_| rng.below(4) as u8 * 4).collect();
    FabricSimConfig {
        priorities,
        // Every fourth seed on a bigger fat tree (18 HCAs, 9 switches).
        radix: if seed % 4 == 3 { 6 } else { 4 },
        ..FabricSimConfig::default()
    }
}

#[test]
fn fabric_sim_seeds() {
    let seeds = seeds(100).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut worst_dual = Duration::ZERO;
    let mut checks = 0u32;
    let mut faults = 0usize;
    let mut changes = 0u32;
    for &s in &seeds {
        match run(s, &config_for(s)) {
            Ok(o) => {
                worst_dual = worst_dual.max(o.max_dual_master);
                checks += o.master_sm_lid_checks;
                faults += o.faults.len();
                changes += o.master_changes;
            }
            Err(f) => {
                eprintln!("{f}");
                failures.push(format!("IBSM_SEED={}", f.seed));
            }
        }
    }
    eprintln!(
        "fabric_sim: {} seeds in {:.1} s, {faults} faults, {changes} master changes, {checks} MasterSMLID checks, longest counted dual-master stretch {} ms",
        seeds.len(),
        started.elapsed().as_secs_f64(),
        worst_dual.as_millis()
    );
    assert!(
        failures.is_empty(),
        "{} failing seeds (replay each with `<seed> cargo test -p ibsm-testkit fabric_sim`): {}",
        failures.len(),
        failures.join(" ")
    );
    // Not vacuous: the runs moved mastership around and verified MasterSMLID.
    if seeds.len() >= 20 {
        assert!(
            changes > 0 && checks > 0,
            "{changes} master changes, {checks} checks"
        );
    }
}

/// The dual-master check is live: handovers overlap two MASTERs for a round trip, so a
/// zero window must be reported.
#[test]
fn fabric_sim_dual_master_check_fires() {
    let mut cfg = config_for(1);
    cfg.handover_window = Duration::ZERO;
    let caught = (0..10).find_map(|s| run(s, &cfg).err());
    let f = caught.expect("no dual mastership in 10 seeds with a zero window");
    assert!(f.what.contains("both MASTER"), "{f}");
}

#[test]
fn fabric_sim_same_seed_same_run() {
    let s = 11;
    let a = run(s, &config_for(s)).unwrap_or_else(|f| panic!("{f}"));
    let b = run(s, &config_for(s)).unwrap_or_else(|f| panic!("{f}"));
    assert!(!a.faults.is_empty() && !a.transitions.is_empty());
    assert_eq!(a, b);
}

/// The harness must catch a broken election: ties broken by the HIGHER GUID elect the
/// wrong master, which the convergence check has to report (with a replayable seed).
#[test]
fn fabric_sim_catches_injected_tie_break_bug() {
    let mut cfg = FabricSimConfig {
        priorities: vec![5, 5, 5],
        ..FabricSimConfig::default()
    };
    cfg.election.injected_fault = Some(InjectedFault::TieBreakHigherGuid);
    let caught = (0..10).find_map(|s| run(s, &cfg).err());
    let f = caught.expect("the tie-break bug went unnoticed in 10 seeds");
    let text = f.to_string();
    assert!(text.contains(&format!("IBSM_SEED={}", f.seed)), "{text}");
}
