//! What the demo's drills name and answer: the members' priorities, which member
//! (a [`Selector`]), what is known of one ([`MemberInfo`]) and why a drill failed.

use std::net::SocketAddr;
use std::sync::Arc;

use ibsmd::instance::Instance;
use ibsmd::metrics::Metrics;

/// Priorities of the demo's instances: distinct, so the expected master is obvious.
pub const DEMO_PRIORITIES: [u8; 3] = [10, 8, 6];

/// Why a drill was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DemoError {
    /// No member matches the selector.
    #[error("{0}")]
    NotFound(String),
    /// The member is not in a state the drill applies to.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The demo is shutting down or the instance could not be started.
    #[error("{0}")]
    Unavailable(String),
}

/// Which member a drill is aimed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// By name (`sm1`...).
    Name(String),
    /// By port GUID.
    Guid(u64),
    /// Whichever member is MASTER now.
    Master,
}

/// One member as seen from outside.
#[derive(Debug, Clone)]
pub struct MemberInfo {
    /// `sm1`, `sm2`, ...
    pub name: String,
    /// The CA it is attached to (node description).
    pub host: String,
    /// Its configured priority.
    pub priority: u8,
    /// Where its gRPC API listens.
    pub endpoint: SocketAddr,
    /// The instance while it runs.
    pub instance: Option<Arc<Instance>>,
    /// Its metrics (kept across restarts).
    pub metrics: Arc<Metrics>,
    /// For a member just killed: its status right before the kill (state, GUID...).
    pub before_kill: Option<ibsmd::instance::Snapshot>,
}

impl MemberInfo {
    /// Whether its instance thread runs.
    pub fn running(&self) -> bool {
        self.instance.as_ref().is_some_and(|i| i.is_running())
    }
}
