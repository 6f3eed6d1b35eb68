//! Helpers: N replicas on 127.0.0.1 ephemeral ports, each with its own temp data dir.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use ibsm_replica::{
    Command, LidRange, Listen, Op, RaftTimers, Replica, ReplicaConfig, ReplicaError, Role,
};

pub const WAIT: Duration = Duration::from_secs(15);

/// The cluster secret of the test clusters.
pub const TEST_SECRET: &str = "test-cluster-secret-0123";

pub fn test_auth() -> ibsm_replica::PeerAuth {
    ibsm_replica::PeerAuth {
        secret: Some(ibsm_replica::ClusterSecret::new(TEST_SECRET).expect("valid secret")),
        mtls: false,
    }
}

pub fn timers() -> RaftTimers {
    RaftTimers {
        write_timeout: Duration::from_secs(2),
        ..RaftTimers::default()
    }
}

pub struct Node {
    pub replica: Replica,
    pub dir: tempfile::TempDir,
    pub addr: String,
}

pub async fn bind() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let a = l.local_addr().expect("local addr").to_string();
    (l, a)
}

/// Start `ids` as one cluster (bootstrapped by the lowest id).
pub async fn cluster(ids: &[u64], timers: RaftTimers) -> Vec<Node> {
    let mut listeners = Vec::new();
    let mut members = BTreeMap::new();
    for id in ids {
        let (l, a) = bind().await;
        members.insert(*id, a.clone());
        listeners.push((*id, l, a));
    }
    let mut nodes = Vec::new();
    for (id, l, a) in listeners {
        let dir = tempfile::tempdir().expect("tempdir");
        let replica = Replica::start(ReplicaConfig {
            node_id: id,
            grpc_addr: a.clone(),
            listen: Listen::Listener(l),
            initial_members: members.clone(),
            data_dir: dir.path().to_path_buf(),
            timers: timers.clone(),
            peer_tls: None,
            peer_auth: test_auth(),
            force_bootstrap: false,
        })
        .await
        .expect("start replica");
        nodes.push(Node {
            replica,
            dir,
            addr: a,
        });
    }
    nodes
}

/// Start a node that joins later (no initial members).
pub async fn joiner(id: u64, timers: RaftTimers) -> Node {
    let (l, a) = bind().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let replica = Replica::start(ReplicaConfig {
        node_id: id,
        grpc_addr: a.clone(),
        listen: Listen::Listener(l),
        initial_members: BTreeMap::new(),
        data_dir: dir.path().to_path_buf(),
        timers,
        peer_tls: None,
        peer_auth: test_auth(),
        force_bootstrap: false,
    })
    .await
    .expect("start joiner");
    Node {
        replica,
        dir,
        addr: a,
    }
}

/// Index of the node that all running nodes agree leads.
pub async fn leader(nodes: &[&Node]) -> Result<usize, ReplicaError> {
    let m = nodes[0]
        .replica
        .wait_metrics(WAIT, |m| m.leader.is_some())
        .await?;
    let mut lid = m.leader;
    for _ in 0..3 {
        for n in nodes {
            let m = n.replica.wait_metrics(WAIT, |m| m.leader.is_some()).await?;
            lid = m.leader;
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        if Some(n.replica.node_id()) == lid {
            n.replica
                .wait_metrics(WAIT, |m| m.role == Role::Leader)
                .await?;
            return Ok(i);
        }
    }
    Err(ReplicaError::Raft(format!(
        "leader {lid:?} is not among the nodes"
    )))
}

pub async fn wait_applied(n: &Node, index: u64) -> Result<(), ReplicaError> {
    n.replica
        .wait_metrics(WAIT, |m| m.last_applied.is_some_and(|a| a >= index))
        .await
        .map(|_| ())
}

pub async fn shutdown_all(nodes: &[Node]) {
    for n in nodes {
        let _ = n.replica.shutdown().await;
    }
}

/// An epoch-fenced write of one GUID's LID: the entry the cluster tests commit.
#[allow(dead_code)]
pub fn set_lid(epoch: u64, guid: u64, lid: u16) -> Command {
    Command::Update {
        epoch,
        ops: vec![Op::SetGuid2Lid {
            port_guid: guid,
            range: LidRange {
                min_lid: lid,
                max_lid: lid,
            },
        }],
    }
}
