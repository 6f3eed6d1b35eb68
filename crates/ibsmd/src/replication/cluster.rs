//! How the daemon's replica is started ([`ClusterConfig`], its Raft timers, a random
//! cluster secret for the demos) and the timers the writer and the status go by.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ibsm_replica::{NodeId, RaftTimers};

/// How often the writer retries a claim or write that did not commit.
pub const RETRY: Duration = Duration::from_millis(250);

/// How long a deposed master (a newer epoch was claimed while it was MASTER) waits
/// before it claims again, if the fabric election still has it MASTER. Two SMs that
/// became MASTER together at start-up both claim; the SMInfo election demotes one of
/// them within a few polls, and it may be either: the newer epoch's holder can be the
/// one that steps down. Without a second claim the remaining master would run the
/// fabric and never write its state again. Several polls long, so the election has
/// settled before the claim.
pub const DEPOSED_RECLAIM: Duration = Duration::from_millis(1000);
/// The least time between the starts of two writes that carry only SA changes (joins,
/// leaves, services, subscriptions): changes published meanwhile are merged into the
/// next write. A join storm is then at most ~100 Raft entries a second, each committed
/// and applied on every member, instead of one entry per Raft round trip; the price is
/// that an answered join waits up to this long more before its write starts (see the
/// SA's HA notes in ARCHITECTURE.md). A fabric record (a sweep's) is never held back.
pub const SA_WRITE_INTERVAL: Duration = Duration::from_millis(10);
/// A Raft leader without a quorum acknowledgement for this long counts as without
/// quorum (10 heartbeats).
pub const QUORUM_LOST: Duration = Duration::from_millis(500);
/// How often a Raft core that stopped on a storage error is replaced by a new one on
/// the same store (which stops again at once while the disk stays full).
pub const CORE_RETRY: Duration = Duration::from_secs(5);
/// How long one claim or write may wait for a quorum before the master is degraded.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// How to start the replica of this daemon (`--node-id`, `--grpc`, `--peer`, `--data-dir`).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This instance's Raft node id.
    pub node_id: NodeId,
    /// `host:port` the peers dial (the daemon's gRPC address).
    pub grpc_addr: String,
    /// The first cluster, this node included; empty: join later through AddMember.
    pub initial_members: BTreeMap<NodeId, String>,
    /// Where `replica.redb` lives.
    pub data_dir: PathBuf,
    /// Raft timers; [`ClusterConfig::timers_for_daemon`] by default.
    pub timers: RaftTimers,
    /// Mutual TLS towards the peers (Raft and the catch-up check); `None`: plaintext.
    /// See `SecurityOptions::peer_tls`.
    pub peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// How members authenticate each other on the Raft service (cluster secret and/or
    /// member certificates); the daemon refuses to start with neither.
    pub peer_auth: ibsm_replica::PeerAuth,
    /// Bootstrap even if the data dir was a member before (`--force-bootstrap`).
    pub force_bootstrap: bool,
}

/// A fresh random cluster secret (32 hex digits from the OS's random source), for the
/// demos, which make their own.
pub fn random_cluster_secret() -> std::io::Result<ibsm_replica::ClusterSecret> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    ibsm_replica::ClusterSecret::new(&hex).map_err(std::io::Error::other)
}

impl ClusterConfig {
    /// The replica's defaults with a [`WRITE_TIMEOUT`] write timeout (the writer retries
    /// by itself, so a short timeout only makes "degraded" show sooner).
    pub fn timers_for_daemon() -> RaftTimers {
        RaftTimers {
            write_timeout: WRITE_TIMEOUT,
            ..RaftTimers::default()
        }
    }
}
