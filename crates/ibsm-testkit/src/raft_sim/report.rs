//! What a Raft simulation run hands back: the [`Violation`] of an invariant, the
//! [`RaftSimFailure`] that names the seed replaying it, the [`RaftSimOutcome`] of a
//! passing run, and [`seeds`], which reads the seeds to run from `IBSM_SEED` /
//! `IBSM_SEEDS`.

use std::fmt;
use std::time::Duration;

use ibsm_replica::{LidRange, NodeId};

use crate::raft_sim_net::NetStats;
/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("acknowledged write lost: node {node} applied up to {applied} but lacks the write at index {index} ({what})")]
    AckedWriteLost {
        node: NodeId,
        applied: u64,
        index: u64,
        what: String,
    },
    #[error("epoch decreased on node {node}: {from} -> {to}")]
    EpochDecreased { node: NodeId, from: u64, to: u64 },
    #[error("epoch {epoch} acknowledged to two SMs: {first} and {second}")]
    EpochHeldTwice {
        epoch: u64,
        first: usize,
        second: usize,
    },
    #[error(
        "SM {sm} wrote with epoch {epoch} at index {index}, but that epoch is held by {holder:?}"
    )]
    ForeignEpochWrite {
        sm: usize,
        epoch: u64,
        index: u64,
        holder: Option<usize>,
    },
    #[error("stale write accepted: Update with epoch {epoch} at index {index} after the claim of epoch {newer} at index {newer_index}")]
    StaleWriteAccepted {
        epoch: u64,
        index: u64,
        newer: u64,
        newer_index: u64,
    },
    #[error(
        "claims out of epoch order in the log: epoch {a} at index {ai}, epoch {b} at index {bi}"
    )]
    ClaimsOutOfOrder { a: u64, ai: u64, b: u64, bi: u64 },
    #[error("two SMs believe they hold the current epoch {epoch}: {sms:?}")]
    TwoMasters { epoch: u64, sms: Vec<usize> },
    #[error("node {node}: epoch {epoch} has master_guid {state:#x?}, but its claim was acknowledged to SM {holder}")]
    MasterMismatch {
        node: NodeId,
        epoch: u64,
        state: Option<u64>,
        holder: usize,
    },
    #[error("node {node}: port {port_guid:#018x} changed LID {was:?} -> {now:?}")]
    LidChanged {
        node: NodeId,
        port_guid: u64,
        was: LidRange,
        now: Option<LidRange>,
    },
    #[error("node {node}: LID {lid} is held by ports {a:#018x} and {b:#018x}")]
    LidShared {
        node: NodeId,
        lid: u16,
        a: u64,
        b: u64,
    },
    #[error("write refused unexpectedly: {0}")]
    UnexpectedRefusal(String),
    #[error("replicas did not converge within {within:?} after the faults stopped: {detail}")]
    NoConvergence { within: Duration, detail: String },
    #[error("harness: {0}")]
    Harness(String),
}

/// A failing run: the seed to replay and what broke.
#[derive(Debug, Clone)]
pub struct RaftSimFailure {
    pub seed: u64,
    pub step: u32,
    pub violation: Violation,
    /// The last lines of the trace.
    pub trace_tail: Vec<String>,
}

impl fmt::Display for RaftSimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "IBSM_SEED={} (step {}): {}",
            self.seed, self.step, self.violation
        )?;
        writeln!(
            f,
            "replay: IBSM_SEED={} cargo test -p ibsm-testkit raft_sim",
            self.seed
        )?;
        for l in &self.trace_tail {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

/// What a passing run did.
#[derive(Debug, Clone)]
pub struct RaftSimOutcome {
    pub steps: u32,
    pub crashes: u32,
    pub partitions: u32,
    pub failovers: u32,
    pub acked: usize,
    pub stale_refused: u32,
    pub final_epoch: u64,
    pub final_index: u64,
    pub ports: usize,
    /// Highest snapshot index any node reached (snapshots and log purges happened).
    pub max_snapshot_index: u64,
    pub virtual_time: Duration,
    pub net: NetStats,
    /// One line per step and per write result.
    pub trace: Vec<String>,
}
