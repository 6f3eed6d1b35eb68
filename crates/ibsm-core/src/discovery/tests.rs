//! Discovery against a minimal directed-route responder written here (so
//! this crate's tests do not depend on the simulator's details): it walks
//! the initial path over a `Topology`, refuses to forward through CAs and
//! answers NodeInfo, PortInfo, NodeDescription and SwitchInfo.

use std::time::Duration;

use super::*;
use crate::transactions::{Counters, TransactionsConfig};
use ibsm_fabric::{Node, NodeIdx, NodeType, Topology};
use ibsm_mad::attr::PortState;
use ibsm_mad::attr::{NodeDescription, NodeInfo, PortInfo, SwitchInfo};
use ibsm_mad::attr::{NodeType as MadNodeType, PhysPortState};
use ibsm_mad::SmpAttribute;
use ibsm_mad::{AttributeId, Smp, MAD_SIZE};
use proptest::prelude::*;
use std::collections::HashSet;

struct Fabric {
    topo: Topology,
    start: (NodeIdx, u8),
    dead: HashSet<NodeIdx>,
}

impl Fabric {
    /// The node at the end of `path` and the port it was entered on.
    fn walk(&self, path: &[u8]) -> Option<(NodeIdx, u8)> {
        let (mut node, mut port) = self.start;
        for (hop, &p) in path.iter().enumerate() {
            let n = self.topo.node(node)?;
            if hop > 0 && !n.is_switch() {
                return None;
            }
            (node, port) = self.topo.neighbor(node, p)?;
        }
        Some((node, port))
    }

    fn answer(&self, bytes: &[u8]) -> Option<[u8; MAD_SIZE]> {
        let req = Smp::decode(bytes).ok()?;
        let path = req.directed()?.path().to_vec();
        let (idx, in_port) = self.walk(&path)?;
        if self.dead.contains(&idx) {
            return None;
        }
        let node = self.topo.node(idx)?;
        let data = match req.attr_id {
            AttributeId::NODE_INFO => NodeInfo {
                base_version: 1,
                class_version: 1,
                node_type: MadNodeType::from(node.node_type.to_iba()),
                num_ports: node.num_ports(),
                system_image_guid: node.system_image_guid,
                node_guid: node.node_guid,
                port_guid: node.port(in_port)?.port_guid,
                local_port_num: in_port,
                ..NodeInfo::default()
            }
            .encode(),
            AttributeId::PORT_INFO => {
                let p = u8::try_from(req.attr_mod).ok()?;
                let port = node.port(p)?;
                let up = port.remote.is_some();
                PortInfo {
                    lid: port.lid,
                    local_port_num: in_port,
                    port_state: if up {
                        PortState::Active
                    } else {
                        PortState::Down
                    },
                    port_physical_state: if up {
                        PhysPortState::LinkUp
                    } else {
                        PhysPortState::Polling
                    },
                    link_width_active: 2,
                    link_speed_active: 1,
                    ..PortInfo::default()
                }
                .encode()
            }
            AttributeId::NODE_DESCRIPTION => NodeDescription::new(&node.description).encode(),
            AttributeId::SWITCH_INFO if node.is_switch() => SwitchInfo::default().encode(),
            _ => return Some(req.response().with_status(0x0c).encode()),
        };
        Some(req.response().with_data(data).encode())
    }
}

/// Run a discovery in virtual time. `answer_order` permutes each batch of
/// transmitted MADs so responses arrive out of order.
fn discover(fabric: &Fabric, window: usize, shuffle: u64) -> (DiscoveryResult, Counters) {
    discover_with(fabric, window, shuffle, DiscoveryConfig::default())
}

fn discover_with(
    fabric: &Fabric,
    window: usize,
    shuffle: u64,
    cfg: DiscoveryConfig,
) -> (DiscoveryResult, Counters) {
    let tx = TransactionsConfig {
        window,
        timeout: Duration::from_millis(10),
        retries: 2,
        tid_high: 1,
        tid_low: crate::transactions::TidRange::ALL,
    };
    let mut now = Duration::ZERO;
    let mut agent = DiscoveryAgent::new(now, tx, cfg);
    let mut rng = shuffle | 1;
    for _ in 0..1_000_000 {
        let mut batch = Vec::new();
        while let Some(m) = agent.poll_transmit() {
            batch.push(m);
        }
        assert!(batch.len() <= window, "window exceeded");
        // xorshift permutation of the batch.
        for i in (1..batch.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            batch.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        let mut answered = false;
        for m in batch {
            if let Some(resp) = fabric.answer(&m) {
                answered = true;
                agent.handle_incoming(now, &resp);
            }
        }
        if agent.is_done() {
            let c = agent.counters();
            return (agent.into_result(), c);
        }
        if !answered {
            now = agent
                .poll_timeout()
                .expect("not done, so something is pending");
            agent.handle_timeout(now);
        }
    }
    panic!("discovery did not finish");
}

/// Switches in a ring with `hcas_per_switch` CAs each, plus a chord.
fn ring(switches: u8, hcas_per_switch: u8) -> Topology {
    let mut t = Topology::new();
    let radix = hcas_per_switch + 3;
    let sw: Vec<NodeIdx> = (0..switches)
        .map(|i| {
            let n = Node::new(
                NodeType::Switch,
                0x1000 + u64::from(i),
                radix,
                &format!("sw{i}"),
            );
            t.add_node(n).unwrap()
        })
        .collect();
    for i in 0..sw.len() {
        let j = (i + 1) % sw.len();
        if sw.len() > 2 || i == 0 {
            t.connect(sw[i], 1, sw[j], 2).unwrap();
        }
        for h in 0..hcas_per_switch {
            let guid = 0x10_0000 + (i as u64) * 0x100 + u64::from(h) * 2;
            let ca = t
                .add_node(Node::new(NodeType::Ca, guid, 2, &format!("hca{i}-{h}")))
                .unwrap();
            t.connect(sw[i], 4 + h, ca, 1).unwrap();
        }
    }
    if sw.len() >= 4 {
        t.connect(sw[0], 3, sw[sw.len() / 2], 3).unwrap();
    }
    t
}

fn first_ca(t: &Topology) -> (NodeIdx, u8) {
    t.iter()
        .find(|(_, n)| !n.is_switch())
        .map(|(i, _)| (i, 1))
        .unwrap()
}

#[test]
fn discovers_a_ring_exactly() {
    let topo = ring(5, 3);
    let fabric = Fabric {
        start: first_ca(&topo),
        topo,
        dead: HashSet::new(),
    };
    let (res, counters) = discover(&fabric, 16, 7);
    assert_eq!(res.topology.counts(), fabric.topo.counts());
    assert!(
        res.unreachable.is_empty() && res.issues.is_empty() && res.duplicates.is_empty(),
        "{:?} {:?} {:?}",
        res.unreachable,
        res.issues,
        res.duplicates
    );
    assert_eq!(res.cap, None);
    assert_eq!(counters.failures, 0);
    // Same nodes, same cables (compared by GUID and port).
    let cables = |t: &Topology| {
        let mut v: Vec<_> = t
            .links()
            .map(|((a, pa), (b, pb))| {
                let (ga, gb) = (t.node(a).unwrap().node_guid, t.node(b).unwrap().node_guid);
                if (ga, pa) < (gb, pb) {
                    (ga, pa, gb, pb)
                } else {
                    (gb, pb, ga, pa)
                }
            })
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(cables(&res.topology), cables(&fabric.topo));
    for (idx, node) in res.topology.iter() {
        let orig = fabric
            .topo
            .node(fabric.topo.find_by_guid(node.node_guid).unwrap())
            .unwrap();
        assert_eq!(node.description, orig.description);
        assert_eq!(node.node_type, orig.node_type);
        // The recorded DR path leads to this very node.
        let path = res.path(idx).unwrap();
        let (reached, _) = fabric.walk(path).unwrap();
        assert_eq!(fabric.topo.node(reached).unwrap().node_guid, node.node_guid);
        assert_eq!(res.switch_info[idx.as_usize()].is_some(), node.is_switch());
    }
    let (local, port) = res.local.unwrap();
    assert_eq!(
        res.topology.node(local).unwrap().node_guid,
        fabric.topo.node(fabric.start.0).unwrap().node_guid
    );
    assert_eq!(port, 1);
}

#[test]
fn a_dead_switch_is_unreachable_and_does_not_stall() {
    let topo = ring(6, 2);
    let dead_sw = topo.find_by_guid(0x1003).unwrap();
    let fabric = Fabric {
        start: first_ca(&topo),
        topo,
        dead: HashSet::from([dead_sw]),
    };
    let (res, counters) = discover(&fabric, 4, 3);
    assert!(res.topology.find_by_guid(0x1003).is_none());
    // Its neighbours tried to reach it: at least one unreachable record.
    assert!(!res.unreachable.is_empty());
    assert!(counters.failures >= 1 && counters.retries >= 2);
    // Its two CAs are only reachable through it.
    assert_eq!(res.topology.len(), fabric.topo.len() - 3);
}

/// `ring(3, 2)` plus a CA `twin` cabled to a free port of switch 2. With
/// `same_node`, the twin copies hca0-0's NodeGUID and port GUIDs; without, it
/// has a NodeGUID of its own and copies only hca0-0's port GUID.
fn ring_with_twin(same_node: bool) -> (Topology, u64) {
    let mut t = ring(3, 2);
    let orig = t.node(t.find_by_guid(0x10_0000).unwrap()).unwrap().clone();
    let port_guid = orig.ports[1].port_guid;
    let mut twin = Node::new(NodeType::Ca, 0x77_0000, 2, "twin");
    if same_node {
        twin = orig.clone();
        twin.description = "twin".into();
    }
    twin.ports[1].port_guid = port_guid;
    let d = t.add_duplicate_node(twin).unwrap();
    let sw2 = t.find_by_guid(0x1002).unwrap();
    t.connect(sw2, 3, d, 1).unwrap();
    (t, if same_node { orig.node_guid } else { port_guid })
}

#[test]
fn a_duplicate_node_guid_is_placed_apart_and_reported() {
    let (topo, guid) = ring_with_twin(true);
    let fabric = Fabric {
        start: first_ca(&topo),
        topo,
        dead: HashSet::new(),
    };
    for (window, seed) in [(1, 1), (4, 2), (16, 3)] {
        let (res, _) = discover(&fabric, window, seed);
        assert_eq!(
            res.topology.counts(),
            fabric.topo.counts(),
            "window {window}"
        );
        assert_eq!(res.duplicates.len(), 1, "{:?}", res.duplicates);
        let d = &res.duplicates[0];
        assert_eq!((d.kind, d.guid), (DuplicateKind::NodeGuid, guid));
        assert_ne!(d.first, d.newcomer);
        // Both are in the graph, each on its own cable; the route given for
        // the newcomer leads to a device with that GUID that is not the first.
        let (reached, port) = fabric.walk(&d.path).unwrap();
        assert_eq!(fabric.topo.node(reached).unwrap().node_guid, guid);
        assert_eq!(port, d.port);
        let far = |n: NodeIdx| {
            let (sw, sp) = res.topology.neighbor(n, 1).unwrap();
            (res.topology.node(sw).unwrap().node_guid, sp)
        };
        assert_ne!(far(d.first), far(d.newcomer));
        assert!(res.issues.is_empty(), "{:?}", res.issues);
    }
}

#[test]
fn a_duplicate_port_guid_is_reported() {
    let (topo, guid) = ring_with_twin(false);
    let fabric = Fabric {
        start: first_ca(&topo),
        topo,
        dead: HashSet::new(),
    };
    let (res, _) = discover(&fabric, 8, 5);
    assert_eq!(res.topology.counts(), fabric.topo.counts());
    assert_eq!(res.duplicates.len(), 1, "{:?}", res.duplicates);
    let d = &res.duplicates[0];
    assert_eq!((d.kind, d.guid), (DuplicateKind::PortGuid, guid));
    assert_eq!(res.topology.node(d.newcomer).unwrap().node_guid, 0x77_0000);
    // The port GUID index keeps naming the first holder.
    assert_eq!(
        res.topology.find_by_port_guid(guid).map(|(n, _)| n),
        Some(d.first)
    );
}

#[test]
fn the_topology_cap_stops_growth_and_says_why() {
    let topo = ring(5, 3);
    let fabric = Fabric {
        start: first_ca(&topo),
        topo,
        dead: HashSet::new(),
    };
    let cfg = DiscoveryConfig {
        max_nodes: 6,
        ..DiscoveryConfig::default()
    };
    let (res, _) = discover_with(&fabric, 4, 9, cfg);
    assert_eq!(res.topology.len(), 6);
    let cap = res.cap.expect("cap reached");
    assert_eq!((cap.limit, cap.max), (CapLimit::Nodes, 6));
    assert!(cap.refused >= 1, "{cap:?}");
    assert!(cap.to_string().contains("cap of 6 nodes"), "{cap}");

    // Ports: the SM's CA (2 ports) and its switch (6) fit in 8, nothing more.
    let cfg = DiscoveryConfig {
        max_ports: 8,
        ..DiscoveryConfig::default()
    };
    let (res, _) = discover_with(&fabric, 4, 9, cfg);
    assert_eq!(res.topology.len(), 2);
    assert_eq!(res.cap.map(|c| c.limit), Some(CapLimit::Ports));
    // Under the cap, nothing is said.
    let cfg = DiscoveryConfig {
        max_nodes: fabric.topo.len(),
        ..DiscoveryConfig::default()
    };
    let (res, _) = discover_with(&fabric, 4, 9, cfg);
    assert_eq!(res.cap, None);
    assert_eq!(res.topology.len(), fabric.topo.len());
}

proptest! {
    /// Any ring size, window and response order: the discovered topology
    /// has the same shape as the real one.
    #[test]
    fn discovery_is_order_independent(switches in 1u8..7, hcas in 1u8..4, window in 1usize..20, seed: u64) {
        let topo = ring(switches, hcas);
        let fabric = Fabric { start: first_ca(&topo), topo, dead: HashSet::new() };
        let (res, _) = discover(&fabric, window, seed);
        prop_assert_eq!(res.topology.counts(), fabric.topo.counts());
        prop_assert!(res.unreachable.is_empty());
        prop_assert!(res.duplicates.is_empty());
    }
}
