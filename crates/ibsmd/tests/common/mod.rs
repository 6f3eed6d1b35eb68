//! What several integration tests of `ibsmd` share: a one-member replication cluster
//! on a temporary data dir, and waiting for a condition with a deadline.
#![allow(dead_code)] // each test binary uses its own part of this

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ibsmd::replication::ClusterConfig;

/// How long a condition may take before the test fails with its last explanation.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A one-member cluster (node 1) with its data dir under `dir`: it elects itself, so a
/// test gets a real Raft replica on disk, with the daemon's timers, and no peers.
pub fn one_member_cluster(dir: &Path) -> ClusterConfig {
    ClusterConfig {
        node_id: 1,
        grpc_addr: "127.0.0.1:1".into(),
        initial_members: BTreeMap::from([(1, "127.0.0.1:1".to_string())]),
        data_dir: dir.join("replica"),
        timers: ClusterConfig::timers_for_daemon(),
        peer_tls: None,
        peer_auth: ibsm_replica::PeerAuth::default(),
        force_bootstrap: false,
    }
}

/// Poll `ok` until it holds; past [`DEADLINE`], panic with `what` and its last error.
pub async fn wait_async(what: &str, mut ok: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match ok() {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// [`wait_async`] for a thread outside the runtime.
pub fn wait_blocking(what: &str, mut ok: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match ok() {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
