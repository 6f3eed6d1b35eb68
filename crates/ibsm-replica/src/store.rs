//! redb-backed Raft log store and state machine (openraft storage v2).
//!
//! One redb file per instance (`<data_dir>/replica.redb`) holds three tables: the log
//! (index -> bincode `Entry`), the meta (vote, committed, last purged) and the current
//! snapshot (meta + data). redb's default durability is `Immediate`: `commit()` returns
//! after fsync, and every method here commits before it returns or calls back, which is
//! what Raft needs: a vote or an entry is acknowledged only once it is on disk.
//!
//! The state machine lives in memory ([`SmData`]) and is persisted as snapshots. After a
//! crash it is rebuilt from the last snapshot, then openraft re-applies the log up to
//! the committed id this store saves (`save_committed`), so nothing acknowledged is lost
//! and there is no fsync per applied entry.

use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftLogReader, RaftSnapshotBuilder,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use redb::{Database, ReadableTable, TableDefinition};

use crate::state::{FabricState, Outcome};
use crate::{NodeId, TypeConfig};

const LOGS: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");
const SNAP: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshot");

const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_PURGED: &str = "last_purged";
const KEY_SNAP_META: &str = "meta";
const KEY_SNAP_DATA: &str = "data";

/// Errors of the redb store before they are wrapped into openraft's `StorageError`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redb: {0}")]
    Redb(Box<redb::Error>),
    #[error("decoding {what} from the store: {source}")]
    Decode {
        what: &'static str,
        source: bincode::Error,
    },
    #[error("encoding {what}: {source}")]
    Encode {
        what: &'static str,
        source: bincode::Error,
    },
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Redb(Box::new(e.into())) }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

fn encode<T: serde::Serialize>(what: &'static str, v: &T) -> Result<Vec<u8>, StoreError> {
    bincode::serialize(v).map_err(|source| StoreError::Encode { what, source })
}

fn decode<T: serde::de::DeserializeOwned>(what: &'static str, b: &[u8]) -> Result<T, StoreError> {
    bincode::deserialize(b).map_err(|source| StoreError::Decode { what, source })
}

type SErr = StorageError<NodeId>;

fn io(f: fn(AnyError) -> StorageIOError<NodeId>) -> impl Fn(StoreError) -> SErr {
    move |e| SErr::from(f(AnyError::new(&e)))
}

/// Open (or create) the redb file and its tables.
pub fn open_db(path: &Path) -> Result<Arc<Database>, StoreError> {
    let db = Database::create(path)?;
    let tx = db.begin_write()?;
    {
        tx.open_table(LOGS)?;
        tx.open_table(META)?;
        tx.open_table(SNAP)?;
    }
    tx.commit()?;
    Ok(Arc::new(db))
}

fn read_meta<T: serde::de::DeserializeOwned>(
    db: &Database,
    key: &'static str,
) -> Result<Option<T>, StoreError> {
    let tx = db.begin_read()?;
    let t = tx.open_table(META)?;
    match t.get(key)? {
        Some(v) => Ok(Some(decode(key, v.value())?)),
        None => Ok(None),
    }
}

fn write_meta<T: serde::Serialize>(
    db: &Database,
    key: &'static str,
    v: &T,
) -> Result<(), StoreError> {
    let bytes = encode(key, v)?;
    let tx = db.begin_write()?;
    {
        let mut t = tx.open_table(META)?;
        t.insert(key, bytes.as_slice())?;
    }
    tx.commit()?;
    Ok(())
}

/// Run a redb transaction (which fsyncs on commit) without stalling the async workers.
///
/// On tokio's multi-thread runtime, `block_in_place` hands this worker's other tasks to
/// another worker while the commit waits on the disk, so an API call or a heartbeat is
/// not queued behind an fsync. On a current-thread runtime (the seeded Raft simulation,
/// unit tests) that is not allowed, and there is no other worker anyway: the work runs
/// inline, which keeps those runs deterministic.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// The Raft log and vote, in redb. Cheap to clone (it is its own log reader).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
}

impl LogStore {
    pub fn new(db: Arc<Database>) -> Self {
        Self { db }
    }

    fn entries(&self, lo: u64, hi: Bound<u64>) -> Result<Vec<Entry<TypeConfig>>, StoreError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(LOGS)?;
        let mut out = Vec::new();
        let iter = t.range::<u64>((Bound::Included(lo), hi))?;
        for row in iter {
            let (_, v) = row?;
            out.push(decode("log entry", v.value())?);
        }
        Ok(out)
    }

    fn log_state(&self) -> Result<LogState<TypeConfig>, StoreError> {
        let purged: Option<LogId<NodeId>> = read_meta(&self.db, KEY_PURGED)?;
        let tx = self.db.begin_read()?;
        let t = tx.open_table(LOGS)?;
        let last = match t.last()? {
            Some((_, v)) => Some(decode::<Entry<TypeConfig>>("log entry", v.value())?.log_id),
            None => purged,
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    fn append_sync(&self, entries: Vec<Entry<TypeConfig>>) -> Result<(), StoreError> {
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(LOGS)?;
            for e in &entries {
                let bytes = encode("log entry", e)?;
                t.insert(e.log_id.index, bytes.as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Remove the entries with index in `range` (and record `purged` when purging).
    fn remove_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        purged: Option<LogId<NodeId>>,
    ) -> Result<(), StoreError> {
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(LOGS)?;
            let keys: Vec<u64> = t
                .range::<u64>(range)?
                .map(|r| r.map(|(k, _)| k.value()))
                .collect::<Result<_, _>>()?;
            for k in keys {
                t.remove(k)?;
            }
            if let Some(p) = purged {
                let bytes = encode(KEY_PURGED, &p)?;
                let mut m = tx.open_table(META)?;
                m.insert(KEY_PURGED, bytes.as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, SErr> {
        let lo = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => x.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(x) => Bound::Included(*x),
            Bound::Excluded(x) => Bound::Excluded(*x),
            Bound::Unbounded => Bound::Unbounded,
        };
        if let Bound::Excluded(h) = hi {
            if h <= lo {
                return Ok(Vec::new());
            }
        }
        if let Bound::Included(h) = hi {
            if h < lo {
                return Ok(Vec::new());
            }
        }
        blocking(|| self.entries(lo, hi)).map_err(io(StorageIOError::read_logs))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, SErr> {
        blocking(|| self.log_state()).map_err(io(StorageIOError::read_logs))
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), SErr> {
        blocking(|| write_meta(&self.db, KEY_VOTE, vote)).map_err(io(StorageIOError::write_vote))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, SErr> {
        blocking(|| read_meta(&self.db, KEY_VOTE)).map_err(io(StorageIOError::read_vote))
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), SErr> {
        blocking(|| write_meta(&self.db, KEY_COMMITTED, &committed))
            .map_err(io(StorageIOError::write))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, SErr> {
        let v: Option<Option<LogId<NodeId>>> =
            blocking(|| read_meta(&self.db, KEY_COMMITTED)).map_err(io(StorageIOError::read))?;
        Ok(v.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        // Committed (fsynced) before the callback: Raft acknowledges only durable entries.
        let entries: Vec<_> = entries.into_iter().collect();
        let res = blocking(|| self.append_sync(entries));
        match res {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(io(StorageIOError::write_logs)(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), SErr> {
        blocking(|| self.remove_range((Bound::Included(log_id.index), Bound::Unbounded), None))
            .map_err(io(StorageIOError::write_logs))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), SErr> {
        blocking(|| {
            self.remove_range(
                (Bound::Unbounded, Bound::Included(log_id.index)),
                Some(log_id),
            )
        })
        .map_err(io(StorageIOError::write_logs))
    }
}

/// A snapshot as stored: its meta and its data (bincode of [`FabricState`]).
type StoredSnapshot = (SnapshotMeta<NodeId, BasicNode>, Vec<u8>);

/// The in-memory state machine: what has been applied, and the fabric state.
#[derive(Debug, Default, Clone)]
pub struct SmData {
    pub last_applied: Option<LogId<NodeId>>,
    pub last_membership: StoredMembership<NodeId, BasicNode>,
    pub state: FabricState,
}

/// The state machine. Clones share the same data (the [`crate::Replica`] reads through
/// one of them).
#[derive(Clone)]
pub struct StateMachineStore {
    db: Arc<Database>,
    data: Arc<RwLock<SmData>>,
    snapshot_seq: Arc<AtomicU64>,
}

impl StateMachineStore {
    /// Load the state machine from the last snapshot in `db`, if any.
    pub fn open(db: Arc<Database>) -> Result<Self, StoreError> {
        let mut data = SmData::default();
        if let Some((meta, bytes)) = Self::load_snapshot(&db)? {
            data.state = decode("snapshot data", &bytes)?;
            data.last_applied = meta.last_log_id;
            data.last_membership = meta.last_membership;
        }
        Ok(Self {
            db,
            data: Arc::new(RwLock::new(data)),
            snapshot_seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A store on `db` around in-memory data that an earlier store of the same
    /// replica applied (see `Replica::restart_core`): what was applied stays, and
    /// openraft replays the log after it.
    pub fn with_data(db: Arc<Database>, data: Arc<RwLock<SmData>>) -> Self {
        Self {
            db,
            data,
            snapshot_seq: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Shared handle on the in-memory data.
    pub fn data(&self) -> Arc<RwLock<SmData>> {
        self.data.clone()
    }

    fn load_snapshot(db: &Database) -> Result<Option<StoredSnapshot>, StoreError> {
        let tx = db.begin_read()?;
        let t = tx.open_table(SNAP)?;
        let meta = match t.get(KEY_SNAP_META)? {
            Some(v) => decode("snapshot meta", v.value())?,
            None => return Ok(None),
        };
        let data = match t.get(KEY_SNAP_DATA)? {
            Some(v) => v.value().to_vec(),
            None => return Ok(None),
        };
        Ok(Some((meta, data)))
    }

    fn save_snapshot(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: &[u8],
    ) -> Result<(), StoreError> {
        let m = encode("snapshot meta", meta)?;
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(SNAP)?;
            t.insert(KEY_SNAP_META, m.as_slice())?;
            t.insert(KEY_SNAP_DATA, data)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn read_data(&self) -> std::sync::RwLockReadGuard<'_, SmData> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_data(&self) -> std::sync::RwLockWriteGuard<'_, SmData> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, SErr> {
        let (meta, bytes) = {
            let d = self.read_data();
            let bytes = encode("snapshot data", &d.state)
                .map_err(io(StorageIOError::read_state_machine))?;
            let seq = self.snapshot_seq.fetch_add(1, Ordering::Relaxed);
            let snapshot_id = match d.last_applied {
                Some(l) => format!("{}-{}-{}", l.leader_id, l.index, seq),
                None => format!("none-{seq}"),
            };
            let meta = SnapshotMeta {
                last_log_id: d.last_applied,
                last_membership: d.last_membership.clone(),
                snapshot_id,
            };
            (meta, bytes)
        };
        blocking(|| self.save_snapshot(&meta, &bytes))
            .map_err(|e| SErr::from(StorageIOError::write_snapshot(None, AnyError::new(&e))))?;
        tracing::debug!(snapshot_id = %meta.snapshot_id, bytes = bytes.len(), "snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), SErr> {
        let d = self.read_data();
        Ok((d.last_applied, d.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut d = self.write_data();
        let mut out = Vec::new();
        for e in entries {
            d.last_applied = Some(e.log_id);
            let o = match e.payload {
                EntryPayload::Blank => Outcome::Internal,
                EntryPayload::Normal(cmd) => {
                    let o = d.state.apply(&cmd);
                    if let Outcome::Refused(r) = &o {
                        tracing::info!(index = e.log_id.index, refusal = %r, "command refused");
                    }
                    o
                }
                EntryPayload::Membership(m) => {
                    d.last_membership = StoredMembership::new(Some(e.log_id), m);
                    Outcome::Internal
                }
            };
            out.push(o);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, SErr> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), SErr> {
        let bytes = snapshot.into_inner();
        let state: FabricState = decode("received snapshot", &bytes).map_err(|e| {
            SErr::from(StorageIOError::read_snapshot(
                Some(meta.signature()),
                AnyError::new(&e),
            ))
        })?;
        blocking(|| self.save_snapshot(meta, &bytes)).map_err(|e| {
            SErr::from(StorageIOError::write_snapshot(
                Some(meta.signature()),
                AnyError::new(&e),
            ))
        })?;
        let mut d = self.write_data();
        d.state = state;
        d.last_applied = meta.last_log_id;
        d.last_membership = meta.last_membership.clone();
        tracing::info!(snapshot_id = %meta.snapshot_id, bytes = bytes.len(), "snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, SErr> {
        let s = blocking(|| Self::load_snapshot(&self.db))
            .map_err(|e| SErr::from(StorageIOError::read_snapshot(None, AnyError::new(&e))))?;
        Ok(s.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
