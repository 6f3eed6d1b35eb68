//! The walk's steps: what a NodeInfo, NodeDescription or PortInfo answer records in
//! the topology and which requests it causes (the breadth-first order the
//! [`discovery`](crate::discovery) doc describes), with the topology cap checked
//! before a node is added. `impl Discovery`, called from the state machine's
//! `handle_response`.

use ibsm_fabric::{LinkSpeed, LinkWidth, Node, NodeIdx, NodeType};
use ibsm_mad::attr::{NodeDescription, NodeInfo, PortInfo};
use ibsm_mad::AttributeId;

use super::limits::{CapLimit, TopologyCap};
use super::machine::Discovery;
use super::result::{DiscoveryIssue, DuplicateGuid, DuplicateKind};
use super::token::{DiscoveryToken, RequestKind};

/// PortInfo.PortState value Init (2); Armed and Active are above it.
const PORT_STATE_INIT: u8 = 2;
/// PortInfo.PortPhysicalState value LinkUp (5).
const PORT_PHYS_LINK_UP: u8 = 5;

impl Discovery {
    pub(super) fn on_node_info(&mut self, path: &[u8], via: Option<(NodeIdx, u8)>, ni: &NodeInfo) {
        let raw_type = u8::from(ni.node_type);
        let Some(node_type) = NodeType::from_iba(raw_type) else {
            let reason = format!("NodeInfo.NodeType {raw_type} is reserved");
            self.issues.push(DiscoveryIssue {
                path: path.to_vec(),
                attr_id: AttributeId::NODE_INFO,
                attr_mod: 0,
                reason,
            });
            return;
        };
        let port = ni.local_port_num;
        let idx = match self.topology.find_by_guid(ni.node_guid) {
            Some(first) => match self.match_known(first, via, node_type, ni) {
                Some(idx) => {
                    self.on_known_node(idx, path, node_type, port, ni.port_guid);
                    idx
                }
                None => {
                    let dup = (DuplicateKind::NodeGuid, ni.node_guid, first);
                    match self.add_node(path, node_type, ni, Some(dup)) {
                        Some(idx) => idx,
                        None => return,
                    }
                }
            },
            None => {
                let dup = self
                    .topology
                    .find_by_port_guid(ni.port_guid)
                    .filter(|_| ni.port_guid != 0)
                    .map(|(n, _)| (DuplicateKind::PortGuid, ni.port_guid, n));
                match self.add_node(path, node_type, ni, dup) {
                    Some(idx) => idx,
                    None => return,
                }
            }
        };
        match via {
            None => self.local = Some((idx, port)),
            Some((from, from_port)) => self.record_link(from, from_port, idx, port),
        }
    }

    /// Record a new node; `dup` names the GUID it shares with an existing node
    /// (kind, GUID, first node), if any. `None` when refused (cap, bad node).
    fn add_node(
        &mut self,
        path: &[u8],
        node_type: NodeType,
        ni: &NodeInfo,
        dup: Option<(DuplicateKind, u64, NodeIdx)>,
    ) -> Option<NodeIdx> {
        if let Some(limit) = self.cap_reached(ni.num_ports) {
            self.refuse(path, limit);
            return None;
        }
        let mut node = Node::new(node_type, ni.node_guid, ni.num_ports, "");
        node.system_image_guid = ni.system_image_guid;
        node.vendor_id = ni.vendor_id;
        node.device_id = ni.device_id;
        for (p, port) in node.ports.iter_mut().enumerate() {
            port.port_guid = if node_type == NodeType::Switch || p == usize::from(ni.local_port_num)
            {
                ni.port_guid
            } else {
                0
            };
        }
        let added = match dup {
            Some(_) => self.topology.add_duplicate_node(node),
            None => self.topology.add_node(node),
        };
        let idx = match added {
            Ok(idx) => idx,
            Err(err) => {
                let reason = format!("cannot add node {:#018x}: {err}", ni.node_guid);
                tracing::warn!(path = ?path, reason, "discovery");
                self.issues.push(DiscoveryIssue {
                    path: path.to_vec(),
                    attr_id: AttributeId::NODE_INFO,
                    attr_mod: 0,
                    reason,
                });
                return None;
            }
        };
        self.ports += usize::from(ni.num_ports);
        if let Some((kind, guid, first)) = dup {
            if kind == DuplicateKind::NodeGuid {
                self.copies.entry(guid).or_default().push(idx);
            }
            let d = DuplicateGuid {
                kind,
                guid,
                first,
                newcomer: idx,
                path: path.to_vec(),
                port: ni.local_port_num,
            };
            tracing::error!(
                kind = %kind, guid = format_args!("{guid:#018x}"), first = %first,
                newcomer = %idx, path = ?path, port = ni.local_port_num,
                "duplicate GUID: two devices answer with the same GUID"
            );
            self.duplicates.push(d);
        }
        self.paths.push(path.to_vec());
        self.switch_info.push(None);
        self.node_info.push(*ni);
        self.port_info
            .push(vec![None; usize::from(ni.num_ports) + 1]);
        tracing::trace!(node = %idx, guid = ni.node_guid, ?node_type, hops = path.len(), "new node");
        self.request(path.to_vec(), RequestKind::NodeDescription { node: idx });
        if node_type == NodeType::Switch {
            self.request(path.to_vec(), RequestKind::SwitchInfo { node: idx });
            for port in 0..=ni.num_ports {
                self.request(path.to_vec(), RequestKind::PortInfo { node: idx, port });
            }
        } else {
            let port = ni.local_port_num;
            self.request(path.to_vec(), RequestKind::PortInfo { node: idx, port });
        }
        Some(idx)
    }

    /// The limit a node with `num_ports` ports would exceed, if any.
    fn cap_reached(&self, num_ports: u8) -> Option<(CapLimit, usize)> {
        if self.topology.len() >= self.cfg.max_nodes {
            return Some((CapLimit::Nodes, self.cfg.max_nodes));
        }
        if self.ports.saturating_add(usize::from(num_ports)) > self.cfg.max_ports {
            return Some((CapLimit::Ports, self.cfg.max_ports));
        }
        None
    }

    /// A new node refused at the cap: said once at error, then counted.
    fn refuse(&mut self, path: &[u8], (limit, max): (CapLimit, usize)) {
        let cap = self.cap.get_or_insert(TopologyCap {
            limit,
            max,
            refused: 0,
        });
        cap.refused += 1;
        if cap.refused == 1 {
            let cap = *cap;
            tracing::error!(path = ?path, "discovery stops growing: {cap}");
        }
    }

    fn record_link(&mut self, a: NodeIdx, pa: u8, b: NodeIdx, pb: u8) {
        if self.topology.neighbor(a, pa) == Some((b, pb)) {
            return;
        }
        if let Err(err) = self.topology.connect(a, pa, b, pb) {
            tracing::warn!(%err, "inconsistent cabling");
            let path = self.paths.get(a.as_usize()).cloned().unwrap_or_default();
            self.issues.push(DiscoveryIssue {
                path,
                attr_id: AttributeId::NODE_INFO,
                attr_mod: 0,
                reason: format!("cannot record link {a}/{pa} - {b}/{pb}: {err}"),
            });
        }
    }

    pub(super) fn on_node_description(&mut self, node: NodeIdx, nd: &NodeDescription) {
        let Some(n) = self.topology.node(node) else {
            return;
        };
        let (vendor, device, sysimg) = (n.vendor_id, n.device_id, n.system_image_guid);
        let text = String::from_utf8_lossy(nd.as_bytes());
        if let Err(err) = self
            .topology
            .set_node_info(node, &text, vendor, device, sysimg)
        {
            tracing::warn!(%err, "cannot record NodeDescription");
        }
    }

    pub(super) fn on_port_info(&mut self, path: &[u8], node: NodeIdx, port: u8, pi: &PortInfo) {
        let Some(n) = self.topology.node(node) else {
            return;
        };
        let is_switch = n.is_switch();
        let is_local = self.local.map(|(l, _)| l) == Some(node);
        let known_remote = n.port(port).and_then(|p| p.remote).is_some();
        if let Some(slot) = self
            .port_info
            .get_mut(node.as_usize())
            .and_then(|v| v.get_mut(usize::from(port)))
        {
            *slot = Some(*pi);
        }
        if port == 0 || !is_switch {
            if let Err(err) = self.topology.set_port_lid(node, port, pi.lid, pi.lmc) {
                tracing::warn!(%err, "cannot record LID");
            }
        }
        let up = u8::from(pi.port_state) >= PORT_STATE_INIT
            || u8::from(pi.port_physical_state) == PORT_PHYS_LINK_UP;
        if port == 0 || !up {
            return;
        }
        if let (Some(w), Some(s)) = (
            LinkWidth::from_iba(pi.link_width_active),
            link_speed(pi.link_speed_active, pi.link_speed_ext_active),
        ) {
            if let Err(err) = self.topology.set_link_rate(node, port, w, s) {
                tracing::debug!(%err, "cannot record link rate");
            }
        }
        // SMPs are only forwarded by switches, and leave from the SM's own CA.
        if known_remote || !(is_switch || (is_local && path.is_empty())) {
            return;
        }
        if path.len() >= self.cfg.max_hops {
            self.issue(
                &DiscoveryToken {
                    path: path.to_vec(),
                    kind: RequestKind::PortInfo { node, port },
                },
                format!(
                    "link not followed: route would exceed {} hops",
                    self.cfg.max_hops
                ),
            );
            return;
        }
        let mut next = Vec::with_capacity(path.len() + 1);
        next.extend_from_slice(path);
        next.push(port);
        self.request(
            next,
            RequestKind::NodeInfo {
                via: Some((node, port)),
            },
        );
    }
}

/// LinkSpeedActive / LinkSpeedExtActive to a [`LinkSpeed`].
fn link_speed(active: u8, ext_active: u8) -> Option<LinkSpeed> {
    match (ext_active, active) {
        (1, _) => Some(LinkSpeed::Fdr),
        (2, _) => Some(LinkSpeed::Edr),
        (4, _) => Some(LinkSpeed::Hdr),
        (8, _) => Some(LinkSpeed::Ndr),
        (_, 1) => Some(LinkSpeed::Sdr),
        (_, 2) => Some(LinkSpeed::Ddr),
        (_, 4) => Some(LinkSpeed::Qdr),
        _ => None,
    }
}
