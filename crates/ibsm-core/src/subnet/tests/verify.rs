//! A takeover that verifies the discovery its standby already made (`subnet::verify`):
//! on an unchanged fabric it sends no breadth-first discovery (one NodeInfo per node,
//! PortInfo of end ports only, nothing written) and adopts the LFTs; after a cable
//! pulled since that discovery it walks the fabric from scratch and reroutes.

use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx, Topology};
use ibsm_mad::{AttributeId, Method, Smp};
use ibsm_sim::{ClientId, Sim, SimConfig};

use crate::discovery::{DiscoveryAgent, DiscoveryConfig, DiscoveryResult};
use crate::subnet::inherit::tests::{
    inherited, master_at, send_queued, sweep, sweep_recording, until_quiet,
};
use crate::subnet::{Inherited, SubnetManager};
use crate::transactions::TransactionsConfig;

/// A standby's own discovery from `client`'s port (what its standby sweeps keep).
pub(super) fn standby_discovery(
    sim: &mut Sim,
    client: ClientId,
    now: &mut Duration,
) -> DiscoveryResult {
    let mut agent = DiscoveryAgent::new(
        *now,
        TransactionsConfig::default(),
        DiscoveryConfig::default(),
    );
    for _ in 0..1_000_000 {
        if agent.is_done() {
            return agent.into_result();
        }
        let mut busy = false;
        while let Some(mad) = agent.poll_transmit() {
            busy = true;
            sim.send(*now, client, &mad).expect("well-formed MAD");
        }
        while let Some((c, mad)) = sim.poll_delivery(*now) {
            busy = true;
            if c == client {
                agent.handle_incoming(*now, &mad);
            }
        }
        if !busy {
            let next = [agent.poll_timeout(), sim.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .expect("something pending");
            *now = next.max(*now);
            agent.handle_timeout(*now);
        }
    }
    panic!("discovery never ended");
}

pub(super) fn cas(topo: &Topology) -> Vec<NodeIdx> {
    topo.iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect()
}

/// The fabric, a first master's bring-up (its SMPs), and a standby on the last CA
/// holding its own discovery; the first master stopped and detached.
pub(super) struct Takeover {
    pub(super) topo: Topology,
    pub(super) sim: Sim,
    pub(super) now: Duration,
    pub(super) bring_up: Vec<Smp>,
    pub(super) inh: Inherited,
    pub(super) c2: ClientId,
    pub(super) second: SubnetManager,
    pub(super) known: crate::discovery::DiscoveryResult,
}

pub(super) fn takeover() -> Takeover {
    let topo = gen::fat_tree_3level(4).expect("k=4");
    let cas = cas(&topo);
    let mut sim = Sim::new(&topo, SimConfig::default());
    let mut now = Duration::ZERO;
    let (c1, mut first) = master_at(&mut sim, cas[0]);
    first.become_master(now);
    let (_, bring_up) = sweep_recording(&mut sim, c1, &mut first, &mut now);
    let (c2, second) = master_at(&mut sim, cas[cas.len() - 1]);
    let known = standby_discovery(&mut sim, c2, &mut now);
    let inh = inherited(&first);
    first.stop();
    sim.detach(c1).expect("detach");
    Takeover {
        topo,
        sim,
        now,
        bring_up,
        inh,
        c2,
        second,
        known,
    }
}

fn count(sent: &[Smp], attr: AttributeId) -> usize {
    sent.iter().filter(|s| s.attr_id == attr).count()
}

#[test]
fn an_unchanged_fabric_is_verified_not_discovered_and_nothing_is_written() {
    let Takeover {
        topo,
        mut sim,
        mut now,
        inh,
        c2,
        mut second,
        known,
        ..
    } = takeover();
    let switches = topo.iter().filter(|(_, n)| n.is_switch()).count();

    second.prepare_takeover_from(now, inh.clone(), Some(known));
    let mut sent = Vec::new();
    until_quiet(&mut sim, c2, &mut second, &mut now, &mut sent);
    let v = second.last_verification().cloned().expect("verified");
    assert_eq!(v.difference, None, "{v:?}");
    assert!(sent.iter().all(|s| s.method == Method::GET));
    // No breadth-first walk: one NodeInfo per node, PortInfo of end ports only
    // (one per CA, each switch's port 0), no NodeDescription.
    assert_eq!(count(&sent, AttributeId::NODE_INFO), topo.len());
    assert_eq!(count(&sent, AttributeId::SWITCH_INFO), switches);
    assert_eq!(count(&sent, AttributeId::PORT_INFO), topo.len());
    assert_eq!(count(&sent, AttributeId::NODE_DESCRIPTION), 0);
    // Every LFT block read once (sent as soon as the verification's own reads are
    // out, from the known switches' routes and LinearFDBTop), none again after it.
    let blocks: usize = inh
        .lft_digests
        .values()
        .map(|(top, _)| usize::from(*top) / 64 + 1)
        .sum();
    assert_eq!(count(&sent, AttributeId::LINEAR_FORWARDING_TABLE), blocks);

    second.inherit(inh.clone());
    second.become_master(now);
    let mut at_master = Vec::new();
    send_queued(&mut sim, c2, &mut second, now, &mut at_master);
    let r = sweep(&mut sim, c2, &mut second, &mut now);
    let rep = second.last_inherit().cloned().expect("read back");
    assert!(rep.adopted, "{rep:?}");
    assert_eq!(r.lft_blocks_sent, 0, "no LFT Set");
    assert_eq!(r.nodes, topo.len());
    assert!(
        !at_master
            .iter()
            .any(|s| s.attr_id == AttributeId::NODE_INFO),
        "MASTER does not walk the fabric"
    );
}

#[test]
fn a_cable_pulled_since_the_standby_sweep_falls_back_to_discovery_and_reroutes() {
    let Takeover {
        topo,
        mut sim,
        mut now,
        inh,
        c2,
        mut second,
        known,
        ..
    } = takeover();
    let cas = cas(&topo);

    // After the standby's sweep, a CA loses its cable (its switch raises
    // PortStateChange; the routes to it must go).
    let gone = cas[cas.len() / 2];
    sim.link_down(gone, 1).expect("pull");

    second.prepare_takeover_from(now, inh.clone(), Some(known));
    let mut sent = Vec::new();
    until_quiet(&mut sim, c2, &mut second, &mut now, &mut sent);
    let v = second.last_verification().cloned().expect("verified");
    assert!(v.difference.is_some(), "the change is seen: {v:?}");
    assert!(
        count(&sent, AttributeId::NODE_INFO) > topo.len(),
        "a breadth-first discovery followed"
    );
    second.inherit(inh);
    second.become_master(now);
    let r = sweep(&mut sim, c2, &mut second, &mut now);
    assert_eq!(r.nodes, topo.len() - 1, "the CA is gone");
    let rep = second.last_inherit().cloned().expect("read back");
    assert!(!rep.adopted && !rep.topology_unchanged, "{rep:?}");
    // A fabric discovered again is not the one the replicated port digests
    // describe: none is trusted, every table is written (`subnet::port_digest`).
    assert_eq!(second.last_port_seed(), None);
    assert!(r.smps > 0);
    // Every switch still routes every CA that is still cabled.
    for (sw, _) in topo.iter().filter(|(_, n)| n.is_switch()) {
        for &ca in cas.iter().filter(|c| **c != gone) {
            let lid = sim.port_lid(ca, 1).expect("LID");
            assert!(
                sim.lft_entry(sw, lid).is_some_and(|p| p != 0xFF),
                "switch {sw:?} lost LID {lid}"
            );
        }
    }
}
