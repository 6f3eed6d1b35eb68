//! [`Discovery`], the sans-IO state machine: its state, the request/outcome interface
//! a driver uses, and the bookkeeping of requests and issues. What each answer does
//! is in `walk` and `duplicates`, further `impl Discovery` blocks; the fields are
//! `pub(super)` for them.

use std::collections::{HashMap, VecDeque};

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::attr::{NodeDescription, NodeInfo, PortInfo, SwitchInfo};
use ibsm_mad::Smp;

use super::limits::{DiscoveryConfig, TopologyCap};
use super::result::{DiscoveryIssue, DiscoveryResult, DuplicateGuid, Unreachable};
use super::token::{DiscoveryToken, RequestKind};

/// The discovery state machine (see the [`discovery`](crate::discovery) doc).
#[derive(Debug)]
pub struct Discovery {
    pub(super) cfg: DiscoveryConfig,
    pub(super) topology: Topology,
    pub(super) paths: Vec<Vec<u8>>,
    pub(super) switch_info: Vec<Option<SwitchInfo>>,
    pub(super) node_info: Vec<NodeInfo>,
    pub(super) port_info: Vec<Vec<Option<PortInfo>>>,
    pub(super) local: Option<(NodeIdx, u8)>,
    pub(super) unreachable: Vec<Unreachable>,
    pub(super) issues: Vec<DiscoveryIssue>,
    pub(super) duplicates: Vec<DuplicateGuid>,
    /// Copies placed for a NodeGUID beyond the first node (duplicates).
    pub(super) copies: HashMap<u64, Vec<NodeIdx>>,
    /// Physical ports recorded (for [`DiscoveryConfig::max_ports`]).
    pub(super) ports: usize,
    pub(super) cap: Option<TopologyCap>,
    pub(super) pending: VecDeque<DiscoveryToken>,
    /// Requests handed out and not yet answered or failed.
    pub(super) outstanding: usize,
}

impl Discovery {
    /// A discovery that starts with NodeInfo of the SM's own node.
    pub fn new(cfg: DiscoveryConfig) -> Self {
        let mut d = Discovery {
            cfg,
            topology: Topology::new(),
            paths: Vec::new(),
            switch_info: Vec::new(),
            node_info: Vec::new(),
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
            node_info: self.node_info,
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

    pub(super) fn issue(&mut self, token: &DiscoveryToken, reason: String) {
        let (attr_id, attr_mod) = token.attribute();
        self.issues.push(DiscoveryIssue {
            path: token.path.clone(),
            attr_id,
            attr_mod,
            reason,
        });
    }

    pub(super) fn request(&mut self, path: Vec<u8>, kind: RequestKind) {
        self.pending.push_back(DiscoveryToken { path, kind });
    }
}
