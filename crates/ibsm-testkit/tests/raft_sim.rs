//! Seeded simulation of three SMs with their Raft replicas under faults
//! (`ibsm_testkit::raft_sim`). A failure prints `IBSM_SEED=<n>`:
//! `IBSM_SEED=<n> cargo test -p ibsm-testkit raft_sim` replays it; `IBSM_SEEDS=<count>`
//! runs more seeds.

use ibsm_testkit::raft_sim::{run, seeds, Plant, RaftSimConfig, Violation};

#[test]
fn raft_sim_invariants_hold_under_seeded_faults() {
    let cfg = RaftSimConfig::default();
    let seeds = seeds(24).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    let (mut crashes, mut partitions, mut failovers, mut stale, mut acked, mut snap) =
        (0, 0, 0, 0, 0, 0);
    for s in &seeds {
        match run(*s, &cfg) {
            Ok(o) => {
                eprintln!(
                    "seed {s}: {} steps ({:?} virtual), {} crashes, {} partitions, {} failovers, {} acked, {} stale refused, epoch {}, index {}, {} ports, snapshot index {}, net {:?}",
                    o.steps, o.virtual_time, o.crashes, o.partitions, o.failovers, o.acked,
                    o.stale_refused, o.final_epoch, o.final_index, o.ports, o.max_snapshot_index, o.net
                );
                crashes += o.crashes;
                partitions += o.partitions;
                failovers += o.failovers;
                stale += o.stale_refused;
                acked += o.acked;
                snap = snap.max(o.max_snapshot_index);
            }
            Err(f) => {
                eprintln!("{f}");
                failures.push(f.seed);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "failing seeds: {failures:?} (replay with IBSM_SEED=<n>)"
    );
    // The run must actually have exercised the faults, not only passed.
    if seeds.len() >= 10 {
        assert!(
            crashes > 0 && partitions > 0 && failovers > 0,
            "no faults exercised"
        );
        assert!(stale > 0, "no deposed master was ever refused");
        assert!(acked > seeds.len(), "hardly any write was acknowledged");
        assert!(
            snap > 0,
            "no snapshot was ever taken (log compaction untested)"
        );
    }
}

/// Two runs of each seed give the same trace (every step's Raft roles, terms, applied
/// and snapshot indexes, epochs; every write's log index and outcome) and the same
/// message counts: a failing seed replays exactly. See the `raft_sim` module doc for
/// the one residual source of nondeterminism (openraft's replication backoff select).
#[test]
fn raft_sim_replay_of_a_seed() {
    let cfg = RaftSimConfig::default();
    for seed in seeds(4).unwrap_or_else(|e| panic!("{e}")) {
        let a = run(seed, &cfg).unwrap_or_else(|f| panic!("{f}"));
        let b = run(seed, &cfg).unwrap_or_else(|f| panic!("{f}"));
        let first_diff = a
            .trace
            .iter()
            .zip(&b.trace)
            .position(|(x, y)| x != y)
            .or((a.trace.len() != b.trace.len()).then(|| a.trace.len().min(b.trace.len())));
        if let Some(i) = first_diff {
            panic!(
                "IBSM_SEED={seed}: two runs diverge at trace line {i}:\n  run 1: {:?}\n  run 2: {:?}",
                a.trace.get(i),
                b.trace.get(i)
            );
        }
        assert_eq!(a.net, b.net, "IBSM_SEED={seed}: message counts differ");
    }
}

fn planted_is_caught(plant: Plant, expect: fn(&Violation) -> bool) {
    let cfg = RaftSimConfig {
        plant: Some(plant),
        ..RaftSimConfig::default()
    };
    for seed in 0..8 {
        match run(seed, &cfg) {
            Ok(_) => continue,
            Err(f) => {
                eprintln!("{plant:?} caught: {f}");
                assert!(
                    expect(&f.violation),
                    "{plant:?}: unexpected violation {}",
                    f.violation
                );
                return;
            }
        }
    }
    panic!("planted bug {plant:?} went unnoticed for 8 seeds: the checker is blind");
}

#[test]
fn raft_sim_checker_catches_unfenced_deposed_master() {
    planted_is_caught(Plant::UnfencedEpoch, |v| {
        matches!(
            v,
            Violation::ForeignEpochWrite { .. } | Violation::TwoMasters { .. }
        )
    });
}

#[test]
fn raft_sim_checker_catches_forgotten_acked_write() {
    planted_is_caught(Plant::ForgetAckedPort, |v| {
        matches!(v, Violation::AckedWriteLost { .. })
    });
}

#[test]
fn raft_sim_checker_catches_renumbered_port() {
    planted_is_caught(Plant::RenumberPort, |v| {
        matches!(v, Violation::LidChanged { .. })
    });
}
