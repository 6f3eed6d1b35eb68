//! A master's SMInfo answers do not wait for its SM thread (`sminfo_answer_thread`,
//! `instance/driver/poll_answer.rs`), on the embedded simulator with two SMs: the
//! master's SM thread stalls for several times the standby's loss streak (25 ms polls,
//! 3 misses) and the standby stays STANDBY; with the reader thread off the same stall
//! loses the master (what the test guards against); and a master whose SM thread stays
//! stuck is still declared lost by its frozen ActCount (answers alone are no life).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_core::election::SmState;
use ibsm_transport::SharedSim;
use ibsmd::embedded::{pick_ca_ports, spawn_on_sim};
use ibsmd::metrics::Metrics;
use ibsmd::{Command, Instance, InstanceConfig};

/// A master (priority 10) and a standby (5) on an embedded k=4 fat tree, the standby
/// following the master. `light_sweep`: both SMs' light-sweep interval (the hung-master
/// window is three of them).
fn master_and_standby(
    answer_thread: bool,
    light_sweep: Duration,
) -> (SharedSim, Instance, Instance, Arc<Metrics>) {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };
    let cfg = |name: &str, priority| {
        let mut c = InstanceConfig::new(name, priority);
        c.subnet.sweep_interval = light_sweep;
        c.light_sweep_interval = light_sweep;
        c
    };
    let mut c1 = cfg("sm1", 10);
    c1.sminfo_answer_thread = answer_thread;
    let metrics = Arc::clone(&c1.metrics);
    let master = spawn_on_sim(&sim, *n1, *p1, c1).expect("master");
    let standby = spawn_on_sim(&sim, *n2, *p2, cfg("sm2", 5)).expect("standby");
    common::wait_for("master and standby", Duration::from_secs(30), || {
        let (m, s) = (master.status(), standby.status());
        if m.state == SmState::Master
            && m.last_sweep.starts_with("master heavy sweep")
            && s.state == SmState::Standby
            && s.master_guid == m.guid
        {
            Ok(())
        } else {
            Err(format!(
                "master {:?} ({}), standby {:?} following {:#x}",
                m.state, m.last_sweep, s.state, s.master_guid
            ))
        }
    });
    (sim, master, standby, metrics)
}

/// Stall `inst`'s SM thread for `stall` and watch `standby` meanwhile (and a little
/// after): the line of its transition out of STANDBY, if it left it.
fn stall_and_watch(inst: &Instance, standby: &Instance, stall: Duration) -> Option<String> {
    let mut events = standby.subscribe();
    inst.send(Command::Stall(stall)).expect("stall");
    let end = Instant::now() + stall + Duration::from_millis(300);
    while Instant::now() < end {
        match events.try_recv() {
            Ok(e) if e.kind == "state" && e.from == Some(SmState::Standby) => return Some(e.text),
            Ok(_) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    None
}

#[test]
fn a_stalled_master_thread_still_answers_its_standbys_polls() {
    let (_sim, master, standby, metrics) = master_and_standby(true, Duration::from_secs(2));
    // 600 ms: nine times the standby's loss streak (about 65 ms), a tenth of the
    // hung-master window (6 s).
    let left = stall_and_watch(&master, &standby, Duration::from_millis(600));
    assert_eq!(left, None, "the standby kept its master");
    assert_eq!(master.status().state, SmState::Master);
    assert!(
        fast_answers(&metrics) > 0,
        "the polls were answered by the reader thread"
    );
}

#[test]
fn without_the_reader_thread_the_same_stall_loses_the_master() {
    let (_sim, master, standby, _) = master_and_standby(false, Duration::from_secs(2));
    let left = stall_and_watch(&master, &standby, Duration::from_millis(600));
    let why = left.expect("the standby gave the stalled master up");
    assert!(why.contains("missed"), "lost by its missed polls: {why}");
}

#[test]
fn a_hung_master_is_declared_lost_by_its_frozen_act_count() {
    // Light sweeps every 100 ms: the hung-master window is 300 ms.
    let (_sim, master, standby, metrics) = master_and_standby(true, Duration::from_millis(100));
    let left = stall_and_watch(&master, &standby, Duration::from_millis(1500));
    let why = left.expect("the standby gave the hung master up");
    assert!(
        why.contains("ActCount stalled"),
        "lost by its ActCount, its polls answered: {why}"
    );
    assert!(fast_answers(&metrics) > 0);
}

/// `ibsm_sminfo_fast_answers_total` as `/metrics` renders it.
fn fast_answers(m: &Arc<Metrics>) -> u64 {
    let text = ibsmd::metrics::render(&[("sm1".to_string(), Arc::clone(m))]);
    text.lines()
        .find(|l| l.starts_with("ibsm_sminfo_fast_answers_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}
