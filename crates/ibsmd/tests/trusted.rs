//! `trusted_sm_guids` in the daemon, on the embedded fabric: a MASTER of priority 5
//! that trusts only itself keeps mastership beside an SM of priority 15 (that SM goes
//! STANDBY behind it and traps 144, and gets no HANDOVER), lists it as untrusted,
//! counts it in its metrics, and refuses the Handover command to it with a clear error.
//! The control run, without the setting, hands over to the priority-15 SM.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ibsm_core::election::SmState;
use ibsm_transport::SharedSim;
use ibsmd::embedded::{pick_ca_ports, spawn_on_sim};
use ibsmd::{Command, Instance, InstanceConfig};
use tokio::sync::oneshot;

fn handover(inst: &Instance, to: u64) -> Result<u64, String> {
    let (reply, rx) = oneshot::channel();
    inst.send(Command::Handover { to, reply })
        .map_err(|e| e.to_string())?;
    rx.blocking_recv()
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// sm1 (priority 5, `trusted` as given) is MASTER, then sm2 (priority 15) joins.
fn run(trusted: Option<BTreeSet<u64>>) -> (Instance, Instance, InstanceConfig) {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };
    let mut c1 = InstanceConfig::new("sm1", 5);
    c1.trusted_sm_guids = trusted;
    let sm1 = spawn_on_sim(&sim, *n1, *p1, c1.clone()).expect("sm1");
    common::wait_for("sm1 MASTER", Duration::from_secs(30), || {
        let s = sm1.status();
        (s.state == SmState::Master && s.last_sweep.starts_with("master heavy sweep"))
            .then_some(())
            .ok_or(format!("{} / {}", s.state, s.last_sweep))
    });
    let sm2 = spawn_on_sim(&sim, *n2, *p2, InstanceConfig::new("sm2", 15)).expect("sm2");
    (sm1, sm2, c1)
}

#[test]
fn a_master_trusting_only_itself_keeps_mastership_beside_a_priority_15_sm() {
    let (sm1, sm2, c1) = run(Some(BTreeSet::new()));
    let mut sm2_guid = 0;
    common::wait_for("sm2's port GUID", Duration::from_secs(30), || {
        sm2_guid = sm2.status().guid;
        (sm2_guid != 0).then_some(()).ok_or_else(String::new)
    });
    common::wait_for(
        "sm1 to list sm2 as untrusted",
        Duration::from_secs(30),
        || {
            let s = sm1.status();
            match s.sms.iter().find(|p| p.guid == sm2_guid) {
                Some(p) if !p.trusted && p.state.is_some() => Ok(()),
                _ => Err(format!("sm2 {sm2_guid:#x}, sm1 sees {:?}", s.sms)),
            }
        },
    );
    // Several master polls (1 s) and trap 144 retries later: nothing moved.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let (a, b) = (sm1.status(), sm2.status());
        assert_eq!(a.state, SmState::Master, "sm1 must stay MASTER");
        assert_ne!(b.state, SmState::Master, "sm2 must not be MASTER");
        std::thread::sleep(Duration::from_millis(200));
    }
    let me = sm1.status();
    assert!(
        me.sms.iter().any(|p| p.is_self && p.trusted),
        "{:?}",
        me.sms
    );
    let text = ibsmd::metrics::render(&[("sm1".to_string(), c1.metrics.clone())]);
    assert!(text.contains("ibsm_untrusted_sms{sm=\"sm1\"} 1"), "{text}");
    assert!(
        !text.contains("ibsm_untrusted_sm_reports_total{sm=\"sm1\"} 0"),
        "{text}"
    );
    // The Handover command refuses it, by name or as "the best standby".
    let err = handover(&sm1, sm2_guid).expect_err("no handover to an untrusted SM");
    assert!(err.contains("not a trusted SM"), "{err}");
    let err = handover(&sm1, 0).expect_err("no trusted standby");
    assert!(err.contains("no trusted SM in STANDBY"), "{err}");
    assert_eq!(sm1.status().state, SmState::Master);
    sm1.shutdown();
    sm2.shutdown();
}

#[test]
fn control_without_trusted_sm_guids_the_priority_15_sm_gets_mastership() {
    let (sm1, sm2, _) = run(None);
    common::wait_for("sm2 MASTER, sm1 STANDBY", Duration::from_secs(30), || {
        let (a, b) = (sm1.status(), sm2.status());
        (a.state == SmState::Standby && b.state == SmState::Master)
            .then_some(())
            .ok_or(format!("sm1 {} sm2 {}", a.state, b.state))
    });
    assert!(sm1.status().sms.iter().all(|p| p.trusted));
    sm1.shutdown();
    sm2.shutdown();
}
