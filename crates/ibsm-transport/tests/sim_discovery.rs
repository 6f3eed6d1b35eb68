//! run_discovery over SimDevice: exact counts, loss, dead nodes, shared sims.

use std::time::Duration;

use ibsm_fabric::gen;
use ibsm_transport::{run_discovery, DiscoverConfig, MadDevice, SharedSim, SimDevice};

fn quick() -> DiscoverConfig {
    let mut c = DiscoverConfig::default();
    c.transactions.timeout = Duration::from_millis(20);
    c.deadline = Duration::from_secs(60);
    c
}

#[test]
fn discovers_generated_fabrics_exactly() {
    for topo in [
        gen::fat_tree_2level(8).unwrap(),
        gen::fat_tree_3level(6).unwrap(),
        gen::random(3, 12, 30, 12).unwrap(),
    ] {
        let mut dev = SimDevice::on_first_ca(&topo).unwrap();
        let report = run_discovery(&mut dev, &quick()).unwrap();
        assert_eq!(report.result.topology.counts(), topo.counts());
        assert!(report.result.unreachable.is_empty());
        assert_eq!(report.counters.failures, 0);
        // Every discovered node's GUID exists in the original.
        for n in report.result.topology.nodes() {
            assert!(topo.find_by_guid(n.node_guid).is_some());
        }
    }
}

#[test]
fn survives_packet_loss_with_retries() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let shared = SharedSim::new(&topo);
    shared.with_sim(|s| s.set_loss(0.1, 42)).unwrap().unwrap();
    let (node, port) = topo
        .iter()
        .find(|(_, n)| !n.is_switch())
        .map(|(i, _)| (i, 1))
        .unwrap();
    let mut dev = shared.attach(node, port).unwrap();
    let mut cfg = quick();
    cfg.transactions.retries = 8;
    let report = run_discovery(&mut dev, &cfg).unwrap();
    assert!(report.counters.retries > 0, "10% loss but no retries?");
    assert_eq!(report.result.topology.counts(), topo.counts());
}

#[test]
fn a_removed_switch_is_left_out() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let shared = SharedSim::new(&topo);
    // A spine: a switch whose neighbours are all switches.
    let spine = topo
        .iter()
        .find(|(_, n)| {
            n.is_switch()
                && n.physical_ports().all(|(_, p)| {
                    p.remote
                        .is_none_or(|(r, _)| topo.node(r).is_some_and(|r| r.is_switch()))
                })
        })
        .map(|(i, _)| i)
        .unwrap();
    shared.with_sim(|s| s.remove_node(spine)).unwrap().unwrap();
    let (node, port) = topo
        .iter()
        .find(|(_, n)| !n.is_switch())
        .map(|(i, _)| (i, 1))
        .unwrap();
    let mut dev = shared.attach(node, port).unwrap();
    let mut cfg = quick();
    cfg.transactions.retries = 1;
    let report = run_discovery(&mut dev, &cfg).unwrap();
    let guid = topo.node(spine).unwrap().node_guid;
    assert!(report.result.topology.find_by_guid(guid).is_none());
    assert_eq!(report.result.topology.len(), topo.len() - 1);
    // (The simulator takes the removed switch's links down, so nobody even
    // tries to reach it; a node that is cabled but silent is covered by
    // ibsm-core's discovery tests.)
}

#[test]
fn two_devices_share_one_simulator_without_stealing_mail() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let shared = SharedSim::new(&topo);
    let cas: Vec<_> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .take(2)
        .collect();
    let mut a = shared.attach(cas[0], 1).unwrap();
    let mut b = shared.attach(cas[1], 1).unwrap();
    let ta = std::thread::spawn(move || run_discovery(&mut a, &quick()).unwrap());
    let rb = run_discovery(&mut b, &quick()).unwrap();
    let ra = ta.join().unwrap();
    assert_eq!(ra.result.topology.counts(), topo.counts());
    assert_eq!(rb.result.topology.counts(), topo.counts());
    assert_eq!(ra.counters.unmatched + rb.counters.unmatched, 0);
    // Nothing is left over for either.
    let mut c = shared.attach(cas[0], 1);
    assert!(
        c.is_err()
            || c.as_mut()
                .unwrap()
                .recv(Duration::from_millis(5))
                .unwrap()
                .is_none()
    );
}
