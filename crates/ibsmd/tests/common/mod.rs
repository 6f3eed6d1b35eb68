//! What several integration tests of `ibsmd` share: a one-member replication cluster
//! on a temporary data dir, waiting for a condition with a deadline, driving an
//! embedded SM instance (one on a small fat tree, subnet up, a sweep on demand, a master
//! that sweeps only when asked), and a test PKI ([`pki`]).
#![allow(dead_code)] // each test binary uses its own part of this

pub mod pki;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_transport::{FabricSpec, SharedSim};

use ibsmd::replication::ClusterConfig;
use ibsmd::{Command, Instance, InstanceConfig};

/// One SM instance named `name` (priority 10) on the first CA port of an embedded k=4
/// fat tree; keep the simulator as long as the instance.
pub fn sm_on_small_fat_tree(name: &str) -> (SharedSim, Arc<Instance>) {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let topo = spec.topology().expect("topology").expect("embedded");
    let (node, port, _) = ibsmd::embedded::pick_ca_ports(&topo, 1)
        .into_iter()
        .next()
        .expect("a CA port");
    let sim = SharedSim::new(&topo);
    let inst = Arc::new(
        ibsmd::embedded::spawn_on_sim(&sim, node, port, InstanceConfig::new(name, 10))
            .expect("instance"),
    );
    (sim, inst)
}

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
pub fn wait_blocking(what: &str, ok: impl FnMut() -> Result<(), String>) {
    wait_for(what, DEADLINE, ok);
}

/// Poll `ok` from this thread until it holds; past `timeout`, panic with `what` and
/// its last error.
pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match ok() {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Wait until `inst` finished a heavy sweep as MASTER (its subnet is up).
pub fn subnet_up(inst: &Instance) {
    wait_for("subnet up", Duration::from_secs(60), || {
        let s = inst.status();
        if s.last_sweep.starts_with("master heavy sweep") {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    });
}

/// Ask `inst` for a sweep and wait for its answer.
pub fn sweep(inst: &Instance, heavy: bool) -> String {
    let (tx, rx) = tokio::sync::oneshot::channel();
    inst.send(Command::Sweep { heavy, reply: tx })
        .expect("command");
    rx.blocking_recv().expect("sweep answered")
}

/// A master with no periodic sweeps to speak of: only what the test asks for.
pub fn quiet_master(name: &str) -> InstanceConfig {
    let mut c = InstanceConfig::new(name, 10);
    c.subnet.sweep_interval = Duration::from_secs(3600);
    c.master_heavy_sweep_interval = Duration::ZERO;
    c
}
