//! [`DiscoveryToken`]: what one discovery request asks for (a directed route and an
//! attribute), carried through the MAD agent and handed back with the outcome. A
//! leaf, so the state machine and its steps share it; its fields are `pub(super)`
//! for them and opaque to callers.

use ibsm_fabric::NodeIdx;
use ibsm_mad::{AttributeId, MadError, Smp};

/// What a request asks for. Opaque to the caller; handed back with the outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryToken {
    pub(super) path: Vec<u8>,
    pub(super) kind: RequestKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RequestKind {
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

    pub(super) fn attribute(&self) -> (AttributeId, u32) {
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
