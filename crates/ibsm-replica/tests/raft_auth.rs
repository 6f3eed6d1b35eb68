//! The Raft service refuses callers without the cluster's credentials, and Forward
//! refuses what a member's own code never sends, even from a caller that has them.

mod common;

use common::*;
use ibsm_replica::network::{ForwardRequest, CLUSTER_SECRET_HEADER, FORMAT_BINCODE_V1};
use ibsm_replica::pb::raft_client::RaftClient;
use ibsm_replica::pb::{RaftPayload, SnapshotChunk};
use ibsm_replica::{Command, ConfigChange, ReplicaError};

fn payload<T: serde::Serialize>(v: &T) -> RaftPayload {
    RaftPayload {
        format: FORMAT_BINCODE_V1,
        payload: bincode::serialize(v).expect("encode"),
    }
}

fn with_secret<T>(secret: &str, body: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    r.metadata_mut()
        .insert(CLUSTER_SECRET_HEADER, secret.parse().expect("ascii"));
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raft_rpcs_without_the_cluster_secret_are_refused_and_change_nothing(
) -> Result<(), ReplicaError> {
    let nodes = cluster(&[1, 2, 3], timers()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    let leader = &nodes[li];
    let before_state = leader.replica.state();
    let before_members = leader.replica.metrics().voters;

    let mut c = RaftClient::connect(format!("http://{}", leader.addr))
        .await
        .expect("connect");
    // A ForwardRequest that would add an attacker's node, and a config write.
    let add = payload(&ForwardRequest::AddMember {
        node_id: 66,
        addr: "127.0.0.1:1".into(),
    });
    let evil_config = payload(&ForwardRequest::Write(Command::Config(ConfigChange::Set {
        key: "partition/0042".into(),
        value: "evil|0x1:full".into(),
    })));
    for secret in [None, Some("wrong-secret-0123456789")] {
        let req = |body: RaftPayload| match secret {
            None => tonic::Request::new(body),
            Some(s) => with_secret(s, body),
        };
        let garbage = RaftPayload {
            format: FORMAT_BINCODE_V1,
            payload: vec![0xff; 16],
        };
        let results = [
            ("Vote", c.vote(req(garbage.clone())).await.map(|_| ())),
            (
                "AppendEntries",
                c.append_entries(req(garbage.clone())).await.map(|_| ()),
            ),
            ("Forward", c.forward(req(add.clone())).await.map(|_| ())),
            (
                "Forward(config)",
                c.forward(req(evil_config.clone())).await.map(|_| ()),
            ),
            ("Applied", c.applied(req(garbage.clone())).await.map(|_| ())),
            ("InstallSnapshot", {
                let chunk = SnapshotChunk {
                    vote: vec![1, 2, 3],
                    meta: vec![],
                    offset: 0,
                    data: vec![0; 64],
                    done: true,
                };
                let s = tokio_stream::iter(vec![chunk]);
                let r = match secret {
                    None => tonic::Request::new(s),
                    Some(x) => with_secret(x, s),
                };
                c.install_snapshot(r).await.map(|_| ())
            }),
        ];
        for (what, r) in results {
            let e = r.expect_err(what);
            assert_eq!(
                e.code(),
                tonic::Code::Unauthenticated,
                "{what} with secret {secret:?}: {e}"
            );
        }
    }
    // With the secret: Forward still takes no membership change and no config key
    // outside the daemon's families.
    let e = c
        .forward(with_secret(TEST_SECRET, add))
        .await
        .expect_err("membership change forwarded");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    let e = c
        .forward(with_secret(
            TEST_SECRET,
            payload(&ForwardRequest::Write(Command::Config(ConfigChange::Set {
                key: "anything".into(),
                value: "x".into(),
            }))),
        ))
        .await
        .expect_err("arbitrary config key forwarded");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    // A claim that skips epochs is committed as a refusal, not applied.
    let r = leader
        .replica
        .write(Command::ClaimMastership {
            epoch: u64::MAX,
            sm_guid: 0xbad,
        })
        .await;
    assert!(
        matches!(
            r,
            Err(ReplicaError::Refused(
                ibsm_replica::Refusal::EpochNotNext { .. }
            ))
        ),
        "{r:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    for n in &nodes {
        assert_eq!(n.replica.state(), before_state, "replicated state changed");
        assert_eq!(n.replica.metrics().voters, before_members);
    }
    // The members still replicate among themselves (they carry the secret).
    let e = leader.replica.claim_mastership(7).await?;
    assert_eq!(e, before_state.epoch + 1);
    // And the applied index is readable over the member channel.
    let other = &nodes[(li + 1) % 3];
    let applied = leader
        .replica
        .peer_applied(other.replica.node_id(), &other.addr)
        .await
        .expect("Applied with the secret");
    assert!(applied > 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn data_dirs_record_one_cluster_id_and_refuse_another_cluster_and_a_second_bootstrap(
) -> Result<(), ReplicaError> {
    use ibsm_replica::identity::{self, CLUSTER_ID_HEADER, IDENTITY_FILE};
    let nodes = cluster(&[1, 2, 3], timers()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    // A write reaches every member, so each has seen the leader's cluster id.
    let r = nodes[li].replica.claim_mastership(5).await?;
    assert_eq!(r, 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let ids = loop {
        let ids: Vec<Option<String>> = nodes
            .iter()
            .map(|n| {
                identity::read(n.dir.path(), n.replica.node_id())
                    .expect("identity readable")
                    .and_then(|i| i.cluster_id)
            })
            .collect();
        if ids.iter().all(Option::is_some) {
            break ids;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cluster id not learned: {ids:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
    // A caller of another cluster (right secret, other cluster id) is refused.
    let mut c = RaftClient::connect(format!("http://{}", nodes[li].addr))
        .await
        .expect("connect");
    let mut req = with_secret(TEST_SECRET, payload(&()));
    req.metadata_mut().insert(
        CLUSTER_ID_HEADER,
        "00000000deadbeef".parse().expect("ascii"),
    );
    let e = c.applied(req).await.expect_err("other cluster");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
    assert!(e.message().contains("cluster"), "{e}");

    // The bootstrapper's store is lost but its identity is kept: no second cluster.
    let (l, a) = bind().await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        nodes[0].dir.path().join(IDENTITY_FILE),
        dir.path().join(IDENTITY_FILE),
    )
    .expect("copy identity");
    let members = std::collections::BTreeMap::from([(1, a.clone()), (2, "127.0.0.1:9".into())]);
    let cfg = |l, force| ibsm_replica::ReplicaConfig {
        node_id: 1,
        grpc_addr: a.clone(),
        listen: ibsm_replica::Listen::Listener(l),
        initial_members: members.clone(),
        data_dir: dir.path().to_path_buf(),
        timers: timers(),
        peer_tls: None,
        peer_auth: test_auth(),
        force_bootstrap: force,
    };
    match ibsm_replica::Replica::start(cfg(l, false)).await {
        Err(ReplicaError::Config(m)) => assert!(m.contains("refusing to bootstrap"), "{m}"),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a lost member bootstrapped a second cluster"),
    }
    // With the explicit flag it does, under a new cluster id.
    let (l, _) = bind().await;
    let r = ibsm_replica::Replica::start(cfg(l, true)).await?;
    assert!(r.bootstrapped());
    let new_id = identity::read(dir.path(), 1)
        .expect("identity")
        .and_then(|i| i.cluster_id);
    assert!(new_id.is_some() && new_id != ids[0], "{new_id:?}");
    r.shutdown().await?;
    // Another node id on this dir is refused.
    let (l, _) = bind().await;
    let mut other = cfg(l, false);
    other.node_id = 2;
    other.grpc_addr = "127.0.0.1:9".into();
    match ibsm_replica::Replica::start(other).await {
        Err(e) => assert!(e.to_string().contains("belongs to node 1"), "{e}"),
        Ok(_) => panic!("a dir of node 1 was opened as node 2"),
    }
    Ok(())
}
