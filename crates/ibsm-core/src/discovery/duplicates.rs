//! Telling a node reached again from another device answering with its NodeGUID
//! ("Duplicate GUIDs" in the [`discovery`](crate::discovery) doc): the match against the nodes recorded under
//! that GUID, and what a node reached again over another cable adds. `impl
//! Discovery`, called from `walk`'s NodeInfo step.

use ibsm_fabric::{NodeIdx, NodeType};
use ibsm_mad::attr::NodeInfo;

use super::machine::Discovery;
use super::token::RequestKind;

impl Discovery {
    /// The recorded node with this NodeGUID that a NodeInfo answer arriving
    /// through `via` is consistent with ([`discovery`](crate::discovery) doc, "Duplicate GUIDs"); `None`:
    /// another device answers with the GUID. A node whose entry port already has
    /// exactly this cable wins over one whose entry port is still free.
    pub(super) fn match_known(
        &self,
        first: NodeIdx,
        via: Option<(NodeIdx, u8)>,
        node_type: NodeType,
        ni: &NodeInfo,
    ) -> Option<NodeIdx> {
        let port = ni.local_port_num;
        let copies = self.copies.get(&ni.node_guid).map(Vec::as_slice);
        let candidates = std::iter::once(first).chain(copies.unwrap_or(&[]).iter().copied());
        let mut free = None;
        for c in candidates {
            let Some(n) = self.topology.node(c) else {
                continue;
            };
            if n.node_type != node_type || n.num_ports() != ni.num_ports {
                continue;
            }
            let Some(p) = n.port(port) else { continue };
            let guid_ok = if node_type == NodeType::Switch {
                n.port(0).map(|p0| p0.port_guid) == Some(ni.port_guid)
            } else {
                p.port_guid == 0 || p.port_guid == ni.port_guid
            };
            if !guid_ok {
                continue;
            }
            match (p.remote, via) {
                (_, None) => return Some(c),
                (Some(r), Some(v)) if r == v => return Some(c),
                (None, Some(_)) if free.is_none() => free = Some(c),
                _ => {}
            }
        }
        free
    }

    /// A node reached again, over another cable or (for a CA) another port.
    pub(super) fn on_known_node(
        &mut self,
        idx: NodeIdx,
        path: &[u8],
        node_type: NodeType,
        port: u8,
        port_guid: u64,
    ) {
        if let Some(known) = self.paths.get_mut(idx.as_usize()) {
            if path.len() < known.len() {
                *known = path.to_vec();
            }
        }
        if node_type == NodeType::Switch {
            return;
        }
        // A CA's other port: learn its GUID and state through the path that reaches it.
        let unknown = self
            .topology
            .node(idx)
            .and_then(|n| n.port(port))
            .is_some_and(|p| p.port_guid == 0);
        if unknown {
            if let Err(err) = self.topology.set_port_guid(idx, port, port_guid) {
                tracing::warn!(%err, node = %idx, port, "cannot record port GUID");
            }
            self.request(path.to_vec(), RequestKind::PortInfo { node: idx, port });
        }
    }
}
