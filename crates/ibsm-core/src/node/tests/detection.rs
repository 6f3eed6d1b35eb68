//! The hung-master rule against a master whose routing worker is busy: its heavy
//! sweep sends nothing while it waits for the routes, but its election keeps querying
//! the other SM ports every `master_poll_interval`, so its ActCount keeps moving and
//! its standby never takes it for hung.

use std::time::Duration;

use super::*;

#[test]
fn a_master_waiting_for_its_routing_worker_is_not_taken_for_hung() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let mut lab = Lab::new(topo, &[10, 5]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    assert_eq!(lab.state(1), Some(SmState::Standby));
    // The standby's hung-master window: three of the master's light sweeps (500 ms
    // in these tests), above master_poll_interval (1 s) but far below the time the
    // routing worker stays busy.
    let window = Duration::from_millis(1500);
    lab.sms[1].node = None;
    lab.sim.detach(lab.sms[1].client).unwrap();
    let mut c = cfg(5);
    c.election.stall_window = Some(window);
    lab.sms[1].client = lab.sim.attach(lab.sms[1].at, 1).unwrap();
    lab.sim.set_is_sm(lab.sms[1].client, true).unwrap();
    lab.sms[1].node = Some(Node::new(c, lab.now));
    lab.drain(1);
    lab.run_to(lab.now + Duration::from_secs(3));
    assert_eq!(lab.state(1), Some(SmState::Standby));

    // A cable between two switches goes down: the master's next sweep sees it and
    // routes again, and that routing job does not come back for 10 s.
    lab.hold_routing = Some(0);
    let ((a, pa), _) = lab
        .topo
        .links()
        .find(|((a, _), (b, _))| {
            lab.topo.node(*a).is_some_and(|n| n.is_switch())
                && lab.topo.node(*b).is_some_and(|n| n.is_switch())
        })
        .expect("a fat tree has switch-to-switch cables");
    lab.sim.link_down(a, pa).unwrap();
    while lab.held.is_empty() {
        lab.run_to(lab.now + Duration::from_millis(10));
        assert!(lab.now < Duration::from_secs(20), "no routing job");
    }
    let busy_from = lab.now;
    let mut act = Vec::new();
    while lab.now < busy_from + Duration::from_secs(10) {
        lab.run_to(lab.now + Duration::from_millis(100));
        let st = lab.sms[0].node.as_ref().unwrap().status();
        act.push((lab.now, st.act_count));
        assert_eq!(lab.state(1), Some(SmState::Standby), "at {:?}", lab.now);
    }
    assert!(!lab.held.is_empty(), "the routing job was held");
    // ActCount moved at least every master_poll_interval while the worker was busy.
    let mut last_change = busy_from;
    let mut longest = Duration::ZERO;
    for w in act.windows(2) {
        if w[1].1 != w[0].1 {
            longest = longest.max(w[1].0 - last_change);
            last_change = w[1].0;
        }
    }
    assert!(
        longest <= Duration::from_millis(1100),
        "longest ActCount gap {longest:?}"
    );
    assert_eq!(lab.masters(), vec![0]);

    // The routes come back: the sweep completes, still one master.
    lab.hold_routing = None;
    let held = std::mem::take(&mut lab.held);
    let now = lab.now;
    for j in held {
        if let Some(n) = lab.sms[0].node.as_mut() {
            n.handle_input(now, Input::RoutingDone(j.run()));
        }
    }
    lab.drain(0);
    lab.run_to(lab.now + Duration::from_secs(2));
    assert_eq!(lab.masters(), vec![0]);
    assert_eq!(lab.state(1), Some(SmState::Standby));
}

#[test]
fn the_default_hung_master_window_is_three_light_sweeps() {
    // (The rule itself, a frozen ActCount declared lost, is tested on the election
    // in election::tests::detection.)
    let c = NodeConfig::new(5);
    assert_eq!(
        c.election.stall_window,
        Some(c.subnet.sweep_interval * 3),
        "three light-sweep intervals"
    );
}
