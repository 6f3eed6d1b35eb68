//! Model checks of the SM election: 2 to 4 SMs, loss, reordering, crash, restart.

use std::time::{Duration, Instant};

use ibsm_core::election::InjectedFault;
use ibsm_testkit::model::{check, handover_outstanding, model_spec, ModelConfig, Report, Warmup};

fn run(name: &str, cfg: &ModelConfig) -> Report {
    let t = Instant::now();
    let r = check(cfg);
    eprintln!(
        "{name}: {} states in {:?}, truncated={}",
        r.states,
        t.elapsed(),
        r.truncated
    );
    r
}

fn assert_clean(name: &str, cfg: &ModelConfig) {
    let r = run(name, cfg);
    if let Some(c) = &r.counterexample {
        panic!(
            "{name}: counterexample: {}\n  {}",
            c.violation,
            c.trace.join("\n  ")
        );
    }
    assert!(!r.truncated, "{name}: state budget exhausted");
}

fn base(specs: Vec<ibsm_testkit::SmSpec>, depth: usize) -> ModelConfig {
    ModelConfig {
        specs,
        max_depth: depth,
        max_drops: 2,
        max_crashes: 1,
        settle_for: Duration::from_secs(4),
        require_best: true,
        max_states: 400_000,
        warmup: None,
        rogues: Vec::new(),
    }
}

#[test]
fn two_sms_loss_reorder_crash_restart() {
    assert_clean(
        "2 SMs",
        &base(vec![model_spec(0x20, 5), model_spec(0x10, 3)], 6),
    );
}

#[test]
fn two_sms_equal_priority_tie_break() {
    assert_clean(
        "2 SMs tie",
        &base(vec![model_spec(0x20, 4), model_spec(0x10, 4)], 6),
    );
}

#[test]
fn three_sms() {
    assert_clean(
        "3 SMs",
        &base(
            vec![
                model_spec(0x30, 1),
                model_spec(0x20, 7),
                model_spec(0x10, 4),
            ],
            3,
        ),
    );
}

#[test]
fn four_sms_shallow() {
    let mut cfg = base(
        vec![
            model_spec(0x40, 2),
            model_spec(0x30, 9),
            model_spec(0x20, 9),
            model_spec(0x10, 0),
        ],
        3,
    );
    cfg.max_drops = 1;
    assert_clean("4 SMs", &cfg);
}

#[test]
fn checker_finds_injected_tie_break_bug() {
    let mut specs = vec![model_spec(0x20, 4), model_spec(0x10, 4)];
    for s in &mut specs {
        s.config.injected_fault = Some(InjectedFault::TieBreakHigherGuid);
    }
    let r = run("injected tie-break bug", &base(specs, 6));
    let c = r
        .counterexample
        .expect("the checker must report the broken tie-break");
    eprintln!(
        "counterexample (expected): {}\n  {}",
        c.violation,
        c.trace.join("\n  ")
    );
    assert!(c.violation.contains("best live SM"), "{}", c.violation);
}

/// A higher SM returns while a lower one is master: explore losses and crashes around
/// the HANDOVER / response / ACKNOWLEDGE exchange. The fabric must never stay masterless
/// and the returning higher SM must end master.
#[test]
fn lost_handover_or_acknowledge_never_leaves_fabric_masterless() {
    let mut cfg = base(vec![model_spec(0x20, 9), model_spec(0x10, 3)], 6);
    cfg.warmup = Some(Warmup {
        start_crashed: vec![0],
        settle: Duration::from_secs(2),
        until: handover_outstanding,
        max: Duration::from_secs(3),
    });
    assert_clean("handover 2 SMs", &cfg);
}

#[test]
fn handover_with_a_third_sm_watching() {
    let mut cfg = base(
        vec![
            model_spec(0x30, 9),
            model_spec(0x20, 3),
            model_spec(0x10, 1),
        ],
        4,
    );
    cfg.max_drops = 2;
    cfg.warmup = Some(Warmup {
        start_crashed: vec![0],
        settle: Duration::from_secs(2),
        until: handover_outstanding,
        max: Duration::from_secs(3),
    });
    assert_clean("handover 3 SMs", &cfg);
}

/// `model_spec` trusting only `guids` (trusted_sm_guids).
fn trusting(guid: u64, priority: u8, guids: &[u64]) -> ibsm_testkit::SmSpec {
    let mut s = model_spec(guid, priority);
    s.config.trusted_sm_guids = Some(guids.iter().copied().collect());
    s
}

/// Everyone trusts everyone by listing them: the trusted paths (requester by SLID,
/// control packets checked against it) must change nothing of the election.
#[test]
fn three_sms_all_listed_as_trusted() {
    let all = [0x30, 0x20, 0x10];
    assert_clean(
        "3 SMs trusted",
        &base(
            vec![
                trusting(0x30, 1, &all),
                trusting(0x20, 7, &all),
                trusting(0x10, 4, &all),
            ],
            3,
        ),
    );
}

/// A rogue SM of priority 15 (trusting everyone, as OpenSM does) beside two SMs that
/// trust only each other: with loss, reordering, crash and restart, the best trusted
/// live SM ends master, the other follows it, and no trusted SM ever follows or hands
/// over to the rogue (a per-step invariant of the world).
#[test]
fn a_rogue_of_priority_15_never_gets_mastership_from_trusted_sms() {
    let trusted = [0x20, 0x10];
    let mut cfg = base(
        vec![
            trusting(0x20, 5, &trusted),
            trusting(0x10, 3, &trusted),
            model_spec(0x05, 15),
        ],
        4,
    );
    cfg.rogues = vec![2];
    assert_clean("rogue 15", &cfg);
}

/// The rogue check can fail: the same world with nobody trusting anybody in
/// particular ends with the rogue as master.
#[test]
fn without_trusted_sms_the_priority_15_sm_takes_mastership() {
    let mut cfg = base(
        vec![
            model_spec(0x20, 5),
            model_spec(0x10, 3),
            model_spec(0x05, 15),
        ],
        2,
    );
    cfg.rogues = vec![2];
    let r = run("no trust", &cfg);
    let c = r
        .counterexample
        .expect("the priority-15 SM takes mastership and the others follow it");
    assert!(
        c.violation.contains("masters") || c.violation.contains("STANDBY behind"),
        "{}",
        c.violation
    );
}
