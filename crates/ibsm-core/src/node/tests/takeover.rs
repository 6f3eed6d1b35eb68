//! A replicated standby takes over from the fabric it already knows: with a current
//! replica and an unchanged fabric it verifies its last standby discovery (no
//! breadth-first walk, no LFT Set); after a cable pulled since, it walks the fabric
//! and reroutes.

use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx};
use ibsm_mad::{AttributeId, Method};

use super::{Lab, Member, ReplicatedFabric};
use crate::election::SmState;

/// A replicated master (priority 10) and a replicated standby (5) on a 2-level fat
/// tree, settled, with the standby holding the master's LFT digests and cabling.
fn replicated_pair() -> (Lab, Vec<NodeIdx>) {
    replicated_pair_on(gen::fat_tree_2level(4).expect("topology"))
}

/// [`replicated_pair`] on `topo`.
pub(super) fn replicated_pair_on(topo: ibsm_fabric::Topology) -> (Lab, Vec<NodeIdx>) {
    let mut lab = Lab::new(topo, &[10]);
    lab.replicated = true;
    lab.kill(0);
    lab.start(0);
    lab.sms.push(Member {
        at: lab.sms[0].at,
        client: lab.sms[0].client,
        node: None,
        priority: 5,
        done: Vec::new(),
        log: Vec::new(),
        gmps: Vec::new(),
    });
    let cas: Vec<NodeIdx> = lab
        .topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    lab.sms[1].at = cas[3];
    lab.start(1);
    // The standby's first discovery ran while the master was bringing ports up,
    // which no takeover verifies: it discovers again a light-sweep interval later,
    // not a heavy-sweep interval (10 s).
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let sm = lab.subnet(0);
    let inherited = crate::subnet::inherit::tests::inherited(sm);
    let rep = ReplicatedFabric {
        epoch: 1,
        inherited,
        ..ReplicatedFabric::default()
    };
    lab.replicate(1, rep);
    (lab, cas)
}

fn standby_sent(lab: &Lab, attr: AttributeId, method: Method) -> usize {
    lab.sent
        .iter()
        .filter(|(i, s)| *i == 1 && s.attr_id == attr && s.method == method)
        .count()
}

#[test]
fn an_unchanged_fabric_is_taken_over_without_discovery_or_lft_writes() {
    let (mut lab, _) = replicated_pair();
    let nodes = lab.topo.len();
    lab.record_sent = true;
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(1));
    assert_eq!(lab.masters(), vec![1]);
    let sm = lab.subnet(1);
    let v = sm
        .last_verification()
        .cloned()
        .expect("a known fabric verified");
    assert_eq!(v.difference, None, "{v:?}");
    assert_eq!(v.nodes, nodes);
    let rep = sm.last_inherit().cloned().expect("LFTs read back");
    assert!(rep.adopted, "{rep:?}");
    // One NodeInfo per node (the verification), no NodeDescription (a walk reads
    // them), no LFT block written.
    assert_eq!(
        standby_sent(&lab, AttributeId::NODE_INFO, Method::GET),
        nodes
    );
    assert_eq!(
        standby_sent(&lab, AttributeId::NODE_DESCRIPTION, Method::GET),
        0
    );
    assert_eq!(
        standby_sent(&lab, AttributeId::LINEAR_FORWARDING_TABLE, Method::SET),
        0
    );
    assert!(standby_sent(&lab, AttributeId::LINEAR_FORWARDING_TABLE, Method::GET) > 0);
    // The replicated port digests match what it wants: no P_Key, SLtoVL or
    // VLArbitration table written (see `subnet::port_digest`), one PortInfo Set per
    // end port (the new MasterSMLID).
    for attr in [
        AttributeId::P_KEY_TABLE,
        AttributeId::SL_TO_VL_MAPPING_TABLE,
        AttributeId::VL_ARBITRATION_TABLE,
    ] {
        assert_eq!(standby_sent(&lab, attr, Method::SET), 0, "{attr:?}");
    }
    assert_eq!(
        standby_sent(&lab, AttributeId::PORT_INFO, Method::SET),
        nodes
    );
    let seed = sm.last_port_seed().expect("seeded");
    assert_eq!(seed.differ, 0, "{seed:?}");
}

#[test]
fn a_cable_pulled_after_the_standby_sweep_is_discovered_and_rerouted() {
    let (mut lab, cas) = replicated_pair();
    let nodes = lab.topo.len();
    let gone = cas[5];
    lab.record_sent = true;
    lab.sim.link_down(gone, 1).expect("pull");
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(2));
    assert_eq!(lab.masters(), vec![1]);
    let sm = lab.subnet(1);
    let v = sm.last_verification().cloned().expect("verification tried");
    assert!(v.difference.is_some(), "{v:?}");
    assert!(
        standby_sent(&lab, AttributeId::NODE_INFO, Method::GET) > nodes,
        "a breadth-first discovery followed"
    );
    let rep = sm.last_inherit().cloned().expect("LFTs read back");
    assert!(!rep.adopted && !rep.topology_unchanged, "{rep:?}");
    let switches: Vec<NodeIdx> = lab
        .topo
        .iter()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, _)| i)
        .collect();
    for sw in switches {
        for &ca in cas.iter().filter(|c| **c != gone) {
            let lid = lab.sim.port_lid(ca, 1).expect("LID");
            assert!(
                lab.sim.lft_entry(sw, lid).is_some_and(|p| p != 0xFF),
                "switch {sw:?} does not route LID {lid}"
            );
        }
    }
}

/// Three replicated SMs (priorities 10, 8, 6) on a 2-level fat tree, settled.
fn replicated_three() -> Lab {
    let topo = gen::fat_tree_2level(8).expect("topology");
    let mut lab = Lab::new(topo, &[10, 8, 6]);
    lab.replicated = true;
    for i in 0..3 {
        lab.kill(i);
        lab.start(i);
    }
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    lab
}

fn sent_by(lab: &Lab, i: usize, attr: AttributeId) -> usize {
    lab.sent
        .iter()
        .filter(|(n, s)| *n == i && s.attr_id == attr && s.method == Method::GET)
        .count()
}

#[test]
fn the_outranked_standby_does_not_sweep_while_the_next_master_takes_over() {
    // The master dies: both standbys miss its polls. The 8 prepares the takeover and
    // answers DISCOVERING; the 6 follows it at once and drops the discovery its round
    // asked for, instead of walking the fabric beside the 8's takeover reads.
    let mut lab = replicated_three();
    let nodes = lab.topo.len();
    let logged = lab.sms[2].log.len();
    lab.record_sent = true;
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(1));
    assert_eq!(lab.masters(), vec![1]);
    assert_eq!(lab.state(2), Some(SmState::Standby));
    let master = lab.sms[1].node.as_ref().expect("node 1").status().port_guid;
    assert_eq!(
        lab.sms[2]
            .node
            .as_ref()
            .expect("node 2")
            .status()
            .master_guid,
        master,
        "the 6 follows the new master"
    );
    let log = lab.sms[2].log[logged..].join("\n");
    assert!(
        log.contains("the sweep is no longer needed"),
        "the 6 concluded STANDBY without its sweep:\n{log}"
    );
    // A discovery reads every node's NodeInfo at least once; the 6 sent at most the
    // few its sweep had in flight before it was dropped.
    let node_info = sent_by(&lab, 2, AttributeId::NODE_INFO);
    assert!(
        node_info < nodes / 4,
        "{node_info} NodeInfo Gets from the outranked standby ({nodes} nodes):\n{log}"
    );
    assert!(
        !log.contains("heavy sweep: "),
        "a finished heavy sweep:\n{log}"
    );
}
