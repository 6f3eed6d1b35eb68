//! Directed-route discovery: a sans-IO breadth-first walk of the fabric.
//!
//! [`Discovery`] is a pure state machine: it hands out requests
//! ([`Discovery::poll_request`]) and consumes their outcomes
//! ([`Discovery::handle_response`], [`Discovery::handle_failure`]). It knows
//! nothing about TIDs, windows or time; [`DiscoveryAgent`] couples it to a
//! [`Transactions`] agent for the common case, and an SM that multiplexes
//! several activities over one MAD agent can do the same with its own token
//! type.
//!
//! The walk, starting at the port the SM is attached to (0 hops):
//!
//! 1. SubnGet(NodeInfo) by directed route. A NodeGUID seen before is the same
//!    node reached over another cable: the cable is recorded (at both ends) and
//!    the walk does not go further through it.
//! 2. For a new node: SubnGet(NodeDescription); for a switch SubnGet(SwitchInfo)
//!    and SubnGet(PortInfo) of every port 0..=NumPorts; for a CA or router
//!    SubnGet(PortInfo) of the port we came in on.
//! 3. For every switch port (and the SM's own CA port) whose PortInfo says the
//!    link is up (PortState >= Init or PortPhysicalState = LinkUp) and whose far
//!    end is not known yet: SubnGet(NodeInfo) along path + port. SMPs are not
//!    forwarded through CAs, so CAs other than our own are leaves.
//!
//! A NodeInfo that fails after the agent's retries makes the far end
//! *unreachable*: it is recorded in [`DiscoveryResult::unreachable`] and the walk
//! goes on without it, so one dead node never stalls a sweep. Other failed or
//! rejected requests are recorded as [`DiscoveryIssue`]s.
//!
//! # Duplicate GUIDs
//!
//! The walk identifies nodes by NodeGUID, so a second device answering with a
//! GUID already seen (a cloned or misprogrammed adapter, a net file giving two
//! nodes one GUID) would otherwise be folded into the first. A NodeInfo whose
//! NodeGUID is known is the *same* node only if it is consistent with one of
//! the nodes recorded under that GUID (the first, or copies placed earlier):
//! same NodeType and NumPorts, the same PortGUID (a switch's port 0; a CA's
//! port if it is known), and an entry port (LocalPortNum) that is either not
//! cabled yet or cabled to exactly the port the request left through (the
//! same cable seen from the other side). One physical port has one cable, so
//! an entry port already cabled elsewhere can only be another device. Such a
//! NodeInfo is a *duplicate NodeGUID*; a NodeInfo with a new NodeGUID whose
//! PortGUID another node already has is a *duplicate PortGUID*. Either way the
//! newcomer is placed in the topology as a node of its own
//! ([`Topology::add_duplicate_node`]) and walked like any other (what is behind
//! it is real), and the pair is reported in [`DiscoveryResult::duplicates`];
//! the LID manager then decides which of them keeps the LID
//! ([`ibsm_fabric::lid`]). A copy is only created when no recorded node
//! matches, so the walk stays bounded. What this cannot see: a duplicate that
//! looks exactly like a not-yet-cabled port of the first (same type, ports
//! and GUIDs, entering on a port of the first that has no cable yet) is
//! indistinguishable by NodeInfo and is taken for that port; a cable moved
//! during the sweep can look like a duplicate for one sweep.
//!
//! # Topology cap
//!
//! [`DiscoveryConfig::max_nodes`] and [`DiscoveryConfig::max_ports`] bound
//! what one walk records, so a fabric far larger than planned (or a walk
//! confused by duplicates) cannot exhaust the SM's memory: past the cap new
//! nodes are refused, the walk goes on only among known nodes, and
//! [`DiscoveryResult::cap`] says which limit stopped it and how many nodes were
//! refused.
//!
//! Every node keeps the directed route it was first reached on (replaced by a
//! shorter one if one shows up), which later programming of the node uses.
//! Requests are produced lazily (a token carries a path, not an encoded SMP),
//! so the backlog of a 50k-node fabric stays small.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use ibsm_fabric::{LinkSpeed, LinkWidth, Node, NodeIdx, NodeType, Topology};
use ibsm_mad::attr::{NodeDescription, NodeInfo, PortInfo, SwitchInfo};
use ibsm_mad::{AttributeId, MadError, Smp, MAD_SIZE, MAX_HOPS};

use crate::transactions::{Counters, Event, Transactions, TransactionsConfig};

/// PortInfo.PortState value Init (2); Armed and Active are above it.
const PORT_STATE_INIT: u8 = 2;
/// PortInfo.PortPhysicalState value LinkUp (5).
const PORT_PHYS_LINK_UP: u8 = 5;

/// Tunables of a [`Discovery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// Longest directed route to follow (IBA allows 63 hops).
    pub max_hops: usize,
    /// Most nodes one walk records (see "Topology cap" in the module doc).
    pub max_nodes: usize,
    /// Most physical ports (sum of NumPorts) one walk records.
    pub max_ports: usize,
}

/// Default [`DiscoveryConfig::max_nodes`]: well above the largest fabrics
/// built (a 3-level k=58 fat tree has ~50k nodes) and the 48k unicast LIDs.
pub const DEFAULT_MAX_NODES: usize = 65_536;
/// Default [`DiscoveryConfig::max_ports`]: 64k nodes of 40 ports on average.
pub const DEFAULT_MAX_PORTS: usize = 65_536 * 40;

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            max_hops: MAX_HOPS,
            max_nodes: DEFAULT_MAX_NODES,
            max_ports: DEFAULT_MAX_PORTS,
        }
    }
}

/// Which GUID two devices share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DuplicateKind {
    /// NodeInfo.NodeGUID.
    NodeGuid,
    /// NodeInfo.PortGUID (a CA port, or a switch's port 0).
    PortGuid,
}

impl fmt::Display for DuplicateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DuplicateKind::NodeGuid => "node GUID",
            DuplicateKind::PortGuid => "port GUID",
        })
    }
}

/// Two devices answering with the same GUID (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateGuid {
    /// Which GUID.
    pub kind: DuplicateKind,
    /// The GUID both answer with.
    pub guid: u64,
    /// The node found first with it.
    pub first: NodeIdx,
    /// The node found later, placed as a node of its own.
    pub newcomer: NodeIdx,
    /// The directed route to the newcomer.
    pub path: Vec<u8>,
    /// The newcomer's port the route enters (NodeInfo.LocalPortNum).
    pub port: u8,
}

impl fmt::Display for DuplicateGuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "duplicate {} {:#018x}: node {} and node {} (port {} at directed route {:?})",
            self.kind, self.guid, self.first, self.newcomer, self.port, self.path
        )
    }
}

/// Which limit of [`DiscoveryConfig`] stopped the topology from growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapLimit {
    /// [`DiscoveryConfig::max_nodes`].
    Nodes,
    /// [`DiscoveryConfig::max_ports`].
    Ports,
}

/// The walk reached its topology cap (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologyCap {
    /// The limit reached first.
    pub limit: CapLimit,
    /// Its value.
    pub max: usize,
    /// New nodes refused after it was reached (NodeInfo answers not recorded).
    pub refused: usize,
}

impl fmt::Display for TopologyCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.limit {
            CapLimit::Nodes => "nodes",
            CapLimit::Ports => "ports",
        };
        write!(
            f,
            "topology cap of {} {what} reached: {} more node(s) not recorded; raise the cap if the fabric is really this large",
            self.max, self.refused
        )
    }
}

/// What a request asks for. Opaque to the caller; handed back with the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryToken {
    path: Vec<u8>,
    kind: RequestKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RequestKind {
    /// NodeInfo of whatever is at `path`, reached through `via` (None for 0 hops).
    NodeInfo {
        via: Option<(NodeIdx, u8)>,
    },
    NodeDescription {
        node: NodeIdx,
    },
    SwitchInfo {
        node: NodeIdx,
    },
    PortInfo {
        node: NodeIdx,
        port: u8,
    },
}

impl DiscoveryToken {
    /// The directed route of the request.
    pub fn path(&self) -> &[u8] {
        &self.path
    }

    fn attribute(&self) -> (AttributeId, u32) {
        match self.kind {
            RequestKind::NodeInfo { .. } => (AttributeId::NODE_INFO, 0),
            RequestKind::NodeDescription { .. } => (AttributeId::NODE_DESCRIPTION, 0),
            RequestKind::SwitchInfo { .. } => (AttributeId::SWITCH_INFO, 0),
            RequestKind::PortInfo { port, .. } => (AttributeId::PORT_INFO, u32::from(port)),
        }
    }

    /// The SubnGet for this request (TID 0: the MAD agent assigns it).
    pub fn to_smp(&self) -> Result<Smp, MadError> {
        let (attr, attr_mod) = self.attribute();
        Smp::try_get_dr(&self.path, attr, attr_mod, 0)
    }
}

/// A far end that never answered NodeInfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// The directed route that was tried.
    pub path: Vec<u8>,
    /// The known node and port the route leaves through (None: the SM's own node).
    pub via: Option<(NodeIdx, u8)>,
}

/// A request about a known node that failed or was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryIssue {
    /// The directed route of the request.
    pub path: Vec<u8>,
    /// The attribute asked for.
    pub attr_id: AttributeId,
    /// Its AttributeModifier (the port for PortInfo).
    pub attr_mod: u32,
    /// What went wrong.
    pub reason: String,
}

/// Everything discovery learned.
#[derive(Debug, Clone)]
pub struct DiscoveryResult {
    /// The fabric as discovered.
    pub topology: Topology,
    /// `paths[i]` is the directed route to `NodeIdx(i)` (empty for the SM's own node).
    pub paths: Vec<Vec<u8>>,
    /// `switch_info[i]` is the SwitchInfo of `NodeIdx(i)` if it is a switch that answered.
    pub switch_info: Vec<Option<SwitchInfo>>,
    /// `port_info[i][p]` is the PortInfo of port `p` of `NodeIdx(i)` as read
    /// (every port of a switch, the reached ports of a CA; `None` if not read).
    /// The configurator needs it: CapabilityMask (IsSM), PortState, MTUCap,
    /// VLCap, the LID/LMC a port already carries.
    pub port_info: Vec<Vec<Option<PortInfo>>>,
    /// The SM's own node and port, if the 0-hop NodeInfo was answered.
    pub local: Option<(NodeIdx, u8)>,
    /// Far ends that did not answer NodeInfo.
    pub unreachable: Vec<Unreachable>,
    /// Other failed or rejected requests.
    pub issues: Vec<DiscoveryIssue>,
    /// Devices answering with a GUID another one has.
    pub duplicates: Vec<DuplicateGuid>,
    /// Set when the topology cap stopped the walk from growing.
    pub cap: Option<TopologyCap>,
}

impl DiscoveryResult {
    /// The directed route to `node`.
    pub fn path(&self, node: NodeIdx) -> Option<&[u8]> {
        self.paths.get(node.as_usize()).map(Vec::as_slice)
    }
}

/// The discovery state machine (see the module doc).
#[derive(Debug)]
pub struct Discovery {
    cfg: DiscoveryConfig,
    topology: Topology,
    paths: Vec<Vec<u8>>,
    switch_info: Vec<Option<SwitchInfo>>,
    port_info: Vec<Vec<Option<PortInfo>>>,
    local: Option<(NodeIdx, u8)>,
    unreachable: Vec<Unreachable>,
    issues: Vec<DiscoveryIssue>,
    duplicates: Vec<DuplicateGuid>,
    /// Copies placed for a NodeGUID beyond the first node (duplicates).
    copies: HashMap<u64, Vec<NodeIdx>>,
    /// Physical ports recorded (for [`DiscoveryConfig::max_ports`]).
    ports: usize,
    cap: Option<TopologyCap>,
    pending: VecDeque<DiscoveryToken>,
    /// Requests handed out and not yet answered or failed.
    outstanding: usize,
}

impl Discovery {
    /// A discovery that starts with NodeInfo of the SM's own node.
    pub fn new(cfg: DiscoveryConfig) -> Self {
        let mut d = Discovery {
            cfg,
            topology: Topology::new(),
            paths: Vec::new(),
            switch_info: Vec::new(),
            port_info: Vec::new(),
            local: None,
            unreachable: Vec::new(),
            issues: Vec::new(),
            duplicates: Vec::new(),
            copies: HashMap::new(),
            ports: 0,
            cap: None,
            pending: VecDeque::new(),
            outstanding: 0,
        };
        d.request(Vec::new(), RequestKind::NodeInfo { via: None });
        d
    }

    /// The next request to send, if any.
    pub fn poll_request(&mut self) -> Option<DiscoveryToken> {
        let token = self.pending.pop_front()?;
        self.outstanding += 1;
        Some(token)
    }

    /// Requests produced and not yet handed out.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// True once every request has been answered or has failed.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty() && self.outstanding == 0
    }

    /// The topology discovered so far.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The result (complete once [`Discovery::is_done`]).
    pub fn into_result(self) -> DiscoveryResult {
        DiscoveryResult {
            topology: self.topology,
            paths: self.paths,
            switch_info: self.switch_info,
            port_info: self.port_info,
            local: self.local,
            unreachable: self.unreachable,
            issues: self.issues,
            duplicates: self.duplicates,
            cap: self.cap,
        }
    }

    /// The request `token` went unanswered (or could not be sent).
    pub fn handle_failure(&mut self, token: DiscoveryToken, reason: &str) {
        self.outstanding = self.outstanding.saturating_sub(1);
        match token.kind {
            RequestKind::NodeInfo { via } => {
                tracing::warn!(path = ?token.path, reason, "node unreachable");
                self.unreachable.push(Unreachable {
                    path: token.path,
                    via,
                });
            }
            _ => self.issue(&token, reason.to_string()),
        }
    }

    /// The response `smp` answered the request `token`.
    pub fn handle_response(&mut self, token: DiscoveryToken, smp: &Smp) {
        self.outstanding = self.outstanding.saturating_sub(1);
        let (attr_id, _) = token.attribute();
        if smp.attr_id != attr_id {
            let reason = format!("response carries attribute {:?}", smp.attr_id);
            return self.fail_kind(token, reason);
        }
        if smp.status != 0 {
            let reason = format!("MAD status {:#06x}", smp.status);
            return self.fail_kind(token, reason);
        }
        let outcome = match token.kind {
            RequestKind::NodeInfo { via } => smp
                .attribute::<NodeInfo>()
                .map(|ni| self.on_node_info(&token.path, via, &ni)),
            RequestKind::NodeDescription { node } => smp
                .attribute::<NodeDescription>()
                .map(|nd| self.on_node_description(node, &nd)),
            RequestKind::SwitchInfo { node } => smp.attribute::<SwitchInfo>().map(|si| {
                if let Some(slot) = self.switch_info.get_mut(node.as_usize()) {
                    *slot = Some(si);
                }
            }),
            RequestKind::PortInfo { node, port } => smp
                .attribute::<PortInfo>()
                .map(|pi| self.on_port_info(&token.path, node, port, &pi)),
        };
        if let Err(err) = outcome {
            self.fail_kind(token, format!("undecodable response: {err}"));
        }
    }

    /// A response that cannot be used: unlike a timeout the node is alive, so
    /// this is an issue, not an unreachable node.
    fn fail_kind(&mut self, token: DiscoveryToken, reason: String) {
        tracing::warn!(path = ?token.path, reason, "discovery request rejected");
        self.issue(&token, reason);
    }

    fn issue(&mut self, token: &DiscoveryToken, reason: String) {
        let (attr_id, attr_mod) = token.attribute();
        self.issues.push(DiscoveryIssue {
            path: token.path.clone(),
            attr_id,
            attr_mod,
            reason,
        });
    }

    fn request(&mut self, path: Vec<u8>, kind: RequestKind) {
        self.pending.push_back(DiscoveryToken { path, kind });
    }

    fn on_node_info(&mut self, path: &[u8], via: Option<(NodeIdx, u8)>, ni: &NodeInfo) {
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

    /// The recorded node with this NodeGUID that a NodeInfo answer arriving
    /// through `via` is consistent with (module doc, "Duplicate GUIDs"); `None`:
    /// another device answers with the GUID. A node whose entry port already has
    /// exactly this cable wins over one whose entry port is still free.
    fn match_known(
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
    fn on_known_node(
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

    fn on_node_description(&mut self, node: NodeIdx, nd: &NodeDescription) {
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

    fn on_port_info(&mut self, path: &[u8], node: NodeIdx, port: u8, pi: &PortInfo) {
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

/// [`Discovery`] driven through its own [`Transactions`] agent: the usual way
/// to run a discovery. Driven like the agent (sans-IO).
#[derive(Debug)]
pub struct DiscoveryAgent {
    tx: Transactions<DiscoveryToken>,
    discovery: Discovery,
    unsolicited: VecDeque<Smp>,
}

impl DiscoveryAgent {
    /// Start a discovery at time `now`.
    pub fn new(now: Duration, tx: TransactionsConfig, cfg: DiscoveryConfig) -> Self {
        let mut agent = DiscoveryAgent {
            tx: Transactions::new(tx),
            discovery: Discovery::new(cfg),
            unsolicited: VecDeque::new(),
        };
        agent.pump(now);
        agent
    }

    /// Feed a MAD received from the device.
    pub fn handle_incoming(&mut self, now: Duration, bytes: &[u8]) {
        self.tx.handle_incoming(now, bytes);
        self.pump(now);
    }

    /// Call when [`DiscoveryAgent::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.tx.handle_timeout(now);
        self.pump(now);
    }

    /// The next MAD to put on the wire.
    pub fn poll_transmit(&mut self) -> Option<[u8; MAD_SIZE]> {
        self.tx.poll_transmit()
    }

    /// When to call [`DiscoveryAgent::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.tx.poll_timeout()
    }

    /// Requests from other SMs or traps that arrived during discovery.
    pub fn poll_unsolicited(&mut self) -> Option<Smp> {
        self.unsolicited.pop_front()
    }

    /// True when the walk is complete and everything was sent.
    pub fn is_done(&self) -> bool {
        self.discovery.is_done() && self.tx.is_idle()
    }

    /// The MAD agent's counters.
    pub fn counters(&self) -> Counters {
        self.tx.counters()
    }

    /// The discovery state.
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// The result (complete once [`DiscoveryAgent::is_done`]).
    pub fn into_result(self) -> DiscoveryResult {
        self.discovery.into_result()
    }

    /// Move requests into the agent (keeping its backlog at one window) and
    /// outcomes into the discovery, until neither has anything to say.
    fn pump(&mut self, now: Duration) {
        loop {
            let mut progressed = false;
            while let Some(event) = self.tx.poll_event() {
                progressed = true;
                match event {
                    Event::Response { token, smp } => self.discovery.handle_response(token, &smp),
                    Event::Failed { token, .. } => self
                        .discovery
                        .handle_failure(token, "no response after retries"),
                    Event::Unsolicited(smp) => self.unsolicited.push_back(smp),
                }
            }
            while self.tx.queued() < self.tx.config().window {
                let Some(token) = self.discovery.poll_request() else {
                    break;
                };
                progressed = true;
                match token.to_smp() {
                    Ok(smp) => self.tx.submit(now, smp, token),
                    Err(err) => self.discovery.handle_failure(token, &err.to_string()),
                }
            }
            if !progressed {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Discovery against a minimal directed-route responder written here (so
    //! this crate's tests do not depend on the simulator's details): it walks
    //! the initial path over a `Topology`, refuses to forward through CAs and
    //! answers NodeInfo, PortInfo, NodeDescription and SwitchInfo.
    use super::*;
    use ibsm_mad::attr::PortState;
    use ibsm_mad::attr::{NodeType as MadNodeType, PhysPortState};
    use ibsm_mad::SmpAttribute;
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
}
