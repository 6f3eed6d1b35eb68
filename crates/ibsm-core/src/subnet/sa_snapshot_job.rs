//! Building the SA's snapshot of a heavy sweep ([`SaFabric`], see `sa_snapshot`), here
//! or handed to the driver as an [`SaSnapshotJob`]
//! (`SubnetConfig::offload_sa_snapshot`) that owns its inputs and can run on another
//! thread; its [`SaSnapshotDone`] comes back to
//! [`SubnetManager::handle_sa_snapshot_done`](super::SubnetManager::handle_sa_snapshot_done),
//! which swaps it in. Meanwhile the SA answers from the previous snapshot, and the
//! sweep's events (its `SweepDone`, the GID in/out of service notices) wait for the
//! new one, so nothing downstream of the sweep (a `Sweep` command's answer, the
//! publication, the SA's reports) sees the fabric before the SA does.

use std::sync::Arc;

use crate::discovery::DiscoveryResult;
use crate::sa::SaFabric;

use super::config::SubnetConfig;
use super::events::SubnetEvent;
use super::sa_snapshot::{fill_lfts, sa_snapshot, ProgrammedTables};
use super::sweep::Sweep;

/// What a dropped snapshot and discovery weigh: freed by the job that carries them,
/// on the driver's worker, not on the thread answering SMInfo.
#[derive(Debug, Default)]
pub(super) struct Retired {
    pub(super) fabrics: Vec<Arc<SaFabric>>,
    pub(super) discoveries: Vec<Arc<DiscoveryResult>>,
}

/// The SA snapshot of a finished heavy sweep, handed to the driver (see
/// [`SubnetConfig::offload_sa_snapshot`](super::config::SubnetConfig::offload_sa_snapshot)):
/// it owns the sweep, the settings and the programmed tables it is built from, so the
/// driver can run it on another thread while its own keeps answering SMInfo polls (at
/// k=32 the build takes longer than the standbys' 65 ms poll budget on a loaded host).
#[derive(Debug)]
pub struct SaSnapshotJob {
    pub(super) id: u64,
    pub(super) sweep_no: u64,
    /// The sweep, its discovery taken out: that is `res`, shared with the
    /// configurator (a copy here would be made on the thread ending the sweep).
    pub(super) sweep: Box<Sweep>,
    pub(super) res: Arc<DiscoveryResult>,
    pub(super) cfg: SubnetConfig,
    pub(super) tables: ProgrammedTables,
    /// Build the PathRecord table now rather than on the first PathRecord query
    /// (which would otherwise build it on the SA's thread).
    pub(super) prepare_paths: bool,
    pub(super) retired: Retired,
}

impl SaSnapshotJob {
    /// Build the snapshot (the expensive part; reads no clock, does no I/O), and free
    /// what the job carries to be dropped.
    pub fn run(self) -> SaSnapshotDone {
        let SaSnapshotJob {
            id,
            sweep_no,
            mut sweep,
            res,
            cfg,
            tables,
            prepare_paths,
            retired,
        } = self;
        sweep.res = Arc::unwrap_or_clone(res);
        let fabric = build(&mut sweep, &cfg, sweep_no, tables);
        if prepare_paths {
            fabric.prepare_paths();
        }
        drop((sweep, retired));
        SaSnapshotDone {
            id,
            fabric: Arc::new(fabric),
        }
    }

    /// The heavy sweep (the master's count) the snapshot is of.
    pub fn sweep(&self) -> u64 {
        self.sweep_no
    }
}

/// The result of [`SaSnapshotJob::run`], for
/// [`SubnetManager::handle_sa_snapshot_done`](super::SubnetManager::handle_sa_snapshot_done).
#[derive(Debug)]
pub struct SaSnapshotDone {
    pub(super) id: u64,
    pub(super) fabric: Arc<SaFabric>,
}

impl SaSnapshotDone {
    /// The snapshot built.
    pub fn fabric(&self) -> &Arc<SaFabric> {
        &self.fabric
    }
}

/// A job handed out and not yet back: the sweep's events wait for it.
#[derive(Debug)]
pub(super) struct PendingSnapshot {
    pub(super) id: u64,
    pub(super) events: Vec<SubnetEvent>,
}

/// The snapshot of `sweep`, the `sweep_no`-th heavy sweep, with the tables it left.
pub(super) fn build(
    sweep: &mut Sweep,
    cfg: &SubnetConfig,
    sweep_no: u64,
    tables: ProgrammedTables,
) -> SaFabric {
    let mut sa = sa_snapshot(sweep, cfg, sweep_no);
    fill_lfts(&mut sa, tables);
    sa
}
