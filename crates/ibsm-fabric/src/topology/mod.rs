//! The topology graph: nodes (CAs, switches, routers), their ports and the
//! cables between ports.

mod error;
mod graph;
mod link;
mod node;
mod rate;

pub use error::TopologyError;
pub use graph::{Counts, Topology};
pub use link::{LinkSpeed, LinkWidth};
pub use node::{Node, NodeIdx, NodeType, Port};
pub use rate::{mtu_bytes, Rate, MTU_1024, MTU_2048, MTU_256, MTU_4096, MTU_512};

#[cfg(test)]
mod tests {
    use super::*;

    fn two_hcas_one_switch() -> (Topology, NodeIdx, NodeIdx, NodeIdx) {
        let mut t = Topology::new();
        let sw = t
            .add_node(Node::new(NodeType::Switch, 0x100, 8, "sw"))
            .unwrap();
        let h1 = t.add_node(Node::new(NodeType::Ca, 0x200, 2, "h1")).unwrap();
        let h2 = t.add_node(Node::new(NodeType::Ca, 0x300, 1, "h2")).unwrap();
        t.connect(sw, 1, h1, 1).unwrap();
        t.connect(h2, 1, sw, 5).unwrap();
        (t, sw, h1, h2)
    }

    #[test]
    fn node_type_numbers_follow_iba() {
        assert_eq!(NodeType::Ca.to_iba(), 1);
        assert_eq!(NodeType::Switch.to_iba(), 2);
        assert_eq!(NodeType::Router.to_iba(), 3);
        for v in 0..=255u8 {
            if let Some(t) = NodeType::from_iba(v) {
                assert_eq!(t.to_iba(), v);
            }
        }
    }

    #[test]
    fn lookups_and_neighbors() {
        let (t, sw, h1, h2) = two_hcas_one_switch();
        assert_eq!(t.find_by_guid(0x200), Some(h1));
        assert_eq!(t.find_by_guid(0x201), None);
        assert_eq!(t.find_by_port_guid(0x201), Some((h1, 1)));
        assert_eq!(t.find_by_port_guid(0x202), Some((h1, 2)));
        assert_eq!(t.find_by_port_guid(0x100), Some((sw, 0)));
        assert_eq!(t.neighbor(sw, 1), Some((h1, 1)));
        assert_eq!(t.neighbor(h1, 1), Some((sw, 1)));
        assert_eq!(t.neighbor(sw, 5), Some((h2, 1)));
        assert_eq!(t.neighbor(sw, 2), None);
        assert_eq!(t.neighbor(sw, 99), None);
        assert_eq!(t.neighbor(NodeIdx(42), 1), None);
        assert_eq!(t.node(sw).map(|n| n.num_ports()), Some(8));
    }

    #[test]
    fn counts_count_cables_once() {
        let (t, ..) = two_hcas_one_switch();
        assert_eq!(
            t.counts(),
            Counts {
                nodes: 3,
                switches: 1,
                hcas: 2,
                ports: 4,
                links: 2
            }
        );
        assert!(t.is_connected());
    }

    #[test]
    fn connect_validates() {
        let (mut t, sw, h1, h2) = two_hcas_one_switch();
        assert_eq!(
            t.connect(sw, 1, h1, 2),
            Err(TopologyError::AlreadyConnected {
                node: sw,
                port: 1,
                remote: (h1, 1)
            })
        );
        assert!(matches!(
            t.connect(sw, 9, h1, 2),
            Err(TopologyError::NoSuchPort { port: 9, .. })
        ));
        assert_eq!(t.connect(sw, 0, h1, 2), Err(TopologyError::PortZero(sw)));
        assert_eq!(
            t.connect(sw, 2, NodeIdx(7), 1),
            Err(TopologyError::NoSuchNode(NodeIdx(7)))
        );
        assert_eq!(
            t.connect(sw, 2, sw, 2),
            Err(TopologyError::SelfLink { node: sw, port: 2 })
        );
        assert!(matches!(
            t.connect(h1, 2, h2, 1),
            Err(TopologyError::AlreadyConnected { node, .. }) if node == h2
        ));
        // A failed connect changes nothing.
        assert_eq!(t.neighbor(h1, 2), None);
        // Loopback cable between two ports of one switch is one link.
        t.connect(sw, 2, sw, 3).unwrap();
        assert_eq!(t.counts().links, 3);
        assert_eq!(t.counts().ports, 6);
    }

    #[test]
    fn add_node_rejects_duplicates() {
        let (mut t, sw, h1, _) = two_hcas_one_switch();
        assert_eq!(
            t.add_node(Node::new(NodeType::Ca, 0x100, 1, "x")),
            Err(TopologyError::DuplicateNodeGuid {
                guid: 0x100,
                existing: sw
            })
        );
        // Node GUID free but its port 1 GUID (0x201) is h1's.
        assert_eq!(
            t.add_node(Node::new(NodeType::Ca, 0x200 - 0x1 + 0x1000, 1, "x"))
                .map(|_| ()),
            Ok(())
        );
        let mut n = Node::new(NodeType::Ca, 0x5000, 1, "x");
        n.ports[1].port_guid = 0x201;
        assert_eq!(
            t.add_node(n),
            Err(TopologyError::DuplicatePortGuid {
                guid: 0x201,
                existing: h1
            })
        );
        let mut a = Node::new(NodeType::Ca, 0x6000, 1, "a");
        a.name = "same".into();
        let mut b = Node::new(NodeType::Ca, 0x7000, 1, "b");
        b.name = "same".into();
        let ia = t.add_node(a).unwrap();
        assert_eq!(t.find_by_name("same"), Some(ia));
        assert!(matches!(
            t.add_node(b),
            Err(TopologyError::DuplicateName { .. })
        ));
        let mut none = Node::new(NodeType::Ca, 0x8000, 1, "n");
        none.ports.truncate(1);
        assert!(matches!(t.add_node(none), Err(TopologyError::NoPorts(_))));
    }

    #[test]
    fn disconnect_and_set_port_guid() {
        let (mut t, sw, h1, _) = two_hcas_one_switch();
        assert_eq!(t.disconnect(h1, 1), Ok(Some((sw, 1))));
        assert_eq!(t.neighbor(sw, 1), None);
        assert_eq!(t.disconnect(h1, 1), Ok(None));
        assert_eq!(t.counts().links, 1);
        t.set_port_guid(h1, 2, 0xabc).unwrap();
        assert_eq!(t.find_by_port_guid(0xabc), Some((h1, 2)));
        assert_eq!(t.find_by_port_guid(0x202), None);
        t.set_port_guid(sw, 0, 0xdef).unwrap();
        assert_eq!(t.find_by_port_guid(0xdef), Some((sw, 0)));
        assert!(t.nodes()[sw.as_usize()]
            .ports
            .iter()
            .all(|p| p.port_guid == 0xdef));
        assert!(t.set_port_guid(h1, 1, 0xdef).is_err());
    }

    #[test]
    fn mtu_defaults_and_setters() {
        let (mut t, sw, h1, _) = two_hcas_one_switch();
        // ibsim's NeighborMTU/MTUCap on cabled ports.
        assert!(t
            .nodes()
            .iter()
            .flat_map(|n| &n.ports)
            .all(|p| p.mtu == MTU_2048));
        t.set_link_mtu(sw, 1, MTU_1024).unwrap();
        assert_eq!(t.node(sw).unwrap().ports[1].mtu, MTU_1024);
        assert_eq!(t.node(h1).unwrap().ports[1].mtu, MTU_1024);
        t.set_port_mtu(h1, 1, MTU_4096).unwrap();
        assert_eq!(t.node(h1).unwrap().ports[1].mtu, MTU_4096);
        assert_eq!(t.node(sw).unwrap().ports[1].mtu, MTU_1024);
        t.set_port_mtu(sw, 0, MTU_256).unwrap();
        assert_eq!(
            t.set_port_mtu(sw, 1, 6),
            Err(TopologyError::BadMtu {
                node: sw,
                port: 1,
                mtu: 6
            })
        );
        assert!(matches!(
            t.set_link_mtu(sw, 1, 0),
            Err(TopologyError::BadMtu { .. })
        ));
        assert!(matches!(
            t.set_port_mtu(sw, 42, MTU_256),
            Err(TopologyError::NoSuchPort { .. })
        ));
        assert_eq!(t.node(sw).unwrap().ports[1].mtu, MTU_1024);
        // Still compact: the port grew into padding.
        assert!(std::mem::size_of::<Port>() <= 32);
    }

    #[test]
    fn link_encodings() {
        assert_eq!(LinkWidth::X4.to_iba(), 2);
        for w in [
            LinkWidth::X1,
            LinkWidth::X2,
            LinkWidth::X4,
            LinkWidth::X8,
            LinkWidth::X12,
        ] {
            assert_eq!(LinkWidth::from_iba(w.to_iba()), Some(w));
            assert_eq!(LinkWidth::from_lanes(w.lanes()), Some(w));
        }
        for s in LinkSpeed::ALL {
            assert_eq!(LinkSpeed::from_name(s.name()), Some(s));
        }
        assert_eq!(LinkSpeed::Qdr.speed_active(), 4);
        assert_eq!(LinkSpeed::Edr.speed_ext_active(), 2);
    }
}
