//! The knobs of a Raft simulation run ([`RaftSimConfig`]), the bug it may plant
//! ([`Plant`]) and the fixed identities of the cluster: the three node ids and the GUID
//! bases of the SMs and of the fabric's ports.

use std::time::Duration;

use ibsm_replica::NodeId;
/// Node ids of the three replicas; SM `i` runs next to node `i + 1`.
pub const NODES: [NodeId; 3] = [1, 2, 3];
pub(super) const SM_GUID_BASE: u64 = 0x0002_c903_00a0_0000;
pub(super) const PORT_GUID_BASE: u64 = 0x0002_c903_00b0_0000;

/// A bug the harness can plant so the checker's self-test has something to catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// A master stamps its writes with the newest epoch its replica shows rather than
    /// the one it claimed: a deposed master's writes are then accepted.
    UnfencedEpoch,
    /// A master writes `ReplaceGuid2Lid` of its record minus its oldest port: an
    /// acknowledged assignment disappears.
    ForgetAckedPort,
    /// A master gives its oldest port a new LID.
    RenumberPort,
}

/// Knobs of one run.
#[derive(Debug, Clone)]
pub struct RaftSimConfig {
    /// Steps with faults.
    pub steps: u32,
    /// Virtual time per step.
    pub step: Duration,
    /// After the faults stop, the replicas must agree within this much virtual time.
    pub converge_within: Duration,
    /// How long one write keeps trying (the daemon's `WRITE_TIMEOUT`).
    pub write_timeout: Duration,
    /// Snapshot every this many entries (small, so snapshots, purges and snapshot
    /// installs happen during a run).
    pub snapshot_after_logs: u64,
    pub logs_kept_after_snapshot: u64,
    pub plant: Option<Plant>,
}

impl Default for RaftSimConfig {
    fn default() -> Self {
        RaftSimConfig {
            steps: 80,
            step: Duration::from_millis(100),
            converge_within: Duration::from_secs(15),
            write_timeout: Duration::from_secs(1),
            snapshot_after_logs: 12,
            logs_kept_after_snapshot: 3,
            plant: None,
        }
    }
}
