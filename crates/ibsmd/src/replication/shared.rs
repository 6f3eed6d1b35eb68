//! The state the writer task shares with the [`Replication`] handle and the Raft
//! leadership task: the handle's calls only change [`Shared`] and wake the writer, so
//! the SM instance thread never waits for Raft.
//!
//! [`Replication`]: super::handle::Replication

use std::sync::{Mutex, MutexGuard};

use super::record::FabricRecord;

#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Bumped on every mastership change, so a writer result for an older mastership
    /// is ignored.
    pub(super) generation: u64,
    /// SM port GUID while MASTER.
    pub(super) master_guid: Option<u64>,
    pub(super) held_epoch: Option<u64>,
    pub(super) desired: Option<FabricRecord>,
    pub(super) degraded: bool,
    /// What made it degraded.
    pub(super) degraded_reason: String,
    /// Set once the data dir was found deleted.
    pub(super) data_dir_lost: Option<String>,
    /// The Raft core's stop was logged (once per stop).
    pub(super) core_stop_logged: bool,
    /// A restart of the core is under way.
    pub(super) core_restarting: bool,
    /// When the next restart of a stopped core may be tried.
    pub(super) core_retry_at: Option<std::time::Instant>,
    pub(super) data_dir_checked: Option<std::time::Instant>,
    /// When a newer epoch deposed this master (see [`DEPOSED_RECLAIM`](super::cluster::DEPOSED_RECLAIM)).
    pub(super) deposed: Option<std::time::Instant>,
    /// Our SM port GUID to register (`sm.<guid>.node`), until it committed.
    pub(super) register: Option<u64>,
    pub(super) registered: Option<u64>,
    pub(super) stop: bool,
    /// The mastership generation and epoch claim a Raft leadership request task ran
    /// for (once per claim, see `super::leadership`).
    pub(super) leadership_for: Option<(u64, u64)>,
    /// Raft leadership requests made (`ibsm_raft_leadership_requests_total`).
    pub(super) leadership_requests: u64,
}

pub(super) fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
