//! Trust: on the three-member demo (embedded fabric, Raft over the members' gRPC ports,
//! a bearer token on the control API), a plain tonic client without credentials is
//! refused by every Raft RPC and every mutating control RPC, a read-only token reads
//! but changes nothing, and the replicated state, the membership and the SMs are the
//! same afterwards.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::{Demo, DemoOptions};
use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::demo::v1::demo_client::DemoClient;
use ibsm_proto::v1 as pb;
use ibsm_proto::v1::cluster_client::ClusterClient;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use ibsm_replica::pb::raft_client::RaftClient;
use ibsm_transport::FabricSpec;
use ibsmd::auth::{Security, Token};
use tonic::transport::Channel;

const ADMIN: &str = "admin-token-for-trust-tests-0123";
const READER: &str = "read-only-token-for-trust-tests-0123";

fn bearer(v: &str) -> impl tonic::service::Interceptor + Clone {
    let value: tonic::metadata::MetadataValue<tonic::metadata::Ascii> =
        format!("Bearer {v}").parse().expect("ascii header");
    move |mut req: tonic::Request<()>| {
        req.metadata_mut().insert("authorization", value.clone());
        Ok(req)
    }
}

async fn start() -> Demo {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let security = Security {
        token: Some(Token::new(ADMIN).expect("token")),
        read_only_token: Some(Token::new(READER).expect("token")),
        ..Security::default()
    };
    Demo::start_with(
        &spec,
        DemoOptions {
            base_port: 0,
            security,
            data_dir: None,
        },
    )
    .await
    .expect("demo starts")
}

async fn channel(ep: SocketAddr) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{ep}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect")
}

/// Every replica's state once the master's first sweep is replicated (a topology on
/// every member) and nothing changed for a while: a master that is settled in the
/// election may still be publishing its first sweep, which is not the callers' doing.
async fn quiet_states(demo: &Demo) -> Vec<ibsm_replica::FabricState> {
    let read = || -> Vec<_> {
        demo.replicas()
            .iter()
            .map(|r| r.replica().state())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = read();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = read();
        if now == last && now.iter().all(|s| s.topology.is_some()) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the replicated state never settled"
        );
        last = now;
    }
}

/// The demo has one master holding a committed epoch and a Raft leader.
async fn settled(demo: &Demo) -> pb::Status {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut masters = Vec::new();
        for m in demo.members() {
            let mut c = ControlClient::with_interceptor(channel(m.endpoint).await, bearer(ADMIN));
            let s = c
                .get_status(pb::GetStatusRequest {})
                .await
                .expect("GetStatus")
                .into_inner();
            if s.state == pb::SmState::Master as i32 && s.epoch > 0 && s.raft_leader != 0 {
                masters.push(s);
            }
        }
        if masters.len() == 1 {
            return masters.remove(0);
        }
        assert!(Instant::now() < deadline, "no settled master");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn partition() -> pb::PartitionEntry {
    pb::PartitionEntry {
        groups: Vec::new(),
        index0: false,
        name: "intruder".into(),
        p_key: 0x0042,
        members: vec![pb::PartitionMemberEntry {
            port_guid: 1,
            full: true,
        }],
        ipoib: None,
    }
}

/// Every mutating control RPC on `ch` (with whatever credentials the channel's
/// interceptor adds), with the code each returned.
async fn mutate_all<I>(ch: Channel, icpt: I) -> Vec<(&'static str, tonic::Code)>
where
    I: tonic::service::Interceptor + Clone,
{
    let mut ctl = ControlClient::with_interceptor(ch.clone(), icpt.clone());
    let mut fab = FabricClient::with_interceptor(ch.clone(), icpt.clone());
    let mut clu = ClusterClient::with_interceptor(ch.clone(), icpt.clone());
    let mut demo = DemoClient::with_interceptor(ch, icpt);
    // The code a call returned (Ok, or its error's).
    macro_rules! code {
        ($call:expr) => {
            $call.await.err().map_or(tonic::Code::Ok, |e| e.code())
        };
    }
    vec![
        (
            "SetPriority",
            code!(ctl.set_priority(pb::SetPriorityRequest { priority: 15 })),
        ),
        (
            "Handover",
            code!(ctl.handover(pb::HandoverRequest { to_guid: 0 })),
        ),
        (
            "SendControl",
            code!(ctl.send_control(pb::SendControlRequest {
                packet: pb::ControlPacket::Disable as i32,
                guid: 1,
            })),
        ),
        ("Sweep", code!(ctl.sweep(pb::SweepRequest { heavy: true }))),
        (
            "SetPartition",
            code!(fab.set_partition(pb::SetPartitionRequest {
                partition: Some(partition()),
            })),
        ),
        (
            "DeletePartition",
            code!(fab.delete_partition(pb::DeletePartitionRequest { p_key: 0x42 })),
        ),
        (
            "AddMember",
            code!(clu.add_member(pb::AddMemberRequest {
                node_id: 66,
                addr: "127.0.0.1:1".into(),
            })),
        ),
        (
            "RemoveMember",
            code!(clu.remove_member(pb::RemoveMemberRequest { node_id: 1 })),
        ),
        (
            "KillInstance",
            code!(demo.kill_instance(dpb::KillInstanceRequest {
                master: true,
                ..Default::default()
            })),
        ),
        (
            "SetLinkState",
            code!(demo.set_link_state(dpb::SetLinkStateRequest {
                name: "sm1".into(),
                up: false,
            })),
        ),
        (
            "SetRaftIsolation",
            code!(demo.set_raft_isolation(dpb::SetRaftIsolationRequest {
                name: "sm1".into(),
                isolated: true,
                ..Default::default()
            })),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_credentials_change_nothing_and_the_reader_only_reads() {
    let mut demo = start().await;
    let master = settled(&demo).await;
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();
    let states_before = quiet_states(&demo).await;
    let members_before = demo.replicas()[0].metrics().voters;

    for ep in &eps {
        // No credentials at all: a plain client.
        let ch = channel(*ep).await;
        for (rpc, code) in mutate_all(ch.clone(), |r: tonic::Request<()>| Ok(r)).await {
            assert_eq!(code, tonic::Code::Unauthenticated, "{rpc} on {ep}");
        }
        let mut raft = RaftClient::new(ch.clone());
        let body = ibsm_replica::pb::RaftPayload {
            format: ibsm_replica::network::FORMAT_BINCODE_V1,
            payload: vec![0; 8],
        };
        let results = [
            ("Vote", raft.vote(body.clone()).await.map(|_| ())),
            (
                "AppendEntries",
                raft.append_entries(body.clone()).await.map(|_| ()),
            ),
            ("Forward", raft.forward(body.clone()).await.map(|_| ())),
            ("Applied", raft.applied(body.clone()).await.map(|_| ())),
            (
                "InstallSnapshot",
                raft.install_snapshot(tokio_stream::iter(vec![ibsm_replica::pb::SnapshotChunk {
                    done: true,
                    ..Default::default()
                }]))
                .await
                .map(|_| ()),
            ),
        ];
        for (rpc, r) in results {
            let e = r.expect_err(rpc);
            assert_eq!(
                e.code(),
                tonic::Code::Unauthenticated,
                "Raft {rpc} on {ep}: {e}"
            );
        }
        // The control token does not open the Raft service either.
        let mut raft = RaftClient::with_interceptor(ch.clone(), bearer(ADMIN));
        let e = raft.vote(body).await.expect_err("control token on Raft");
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");

        // The read-only token: reads work, every mutation is PERMISSION_DENIED.
        let mut ro = ControlClient::with_interceptor(ch.clone(), bearer(READER));
        let st = ro
            .get_status(pb::GetStatusRequest {})
            .await
            .expect("read-only GetStatus")
            .into_inner();
        assert_ne!(st.guid, 0);
        ro.list_sms(pb::ListSmsRequest {})
            .await
            .expect("read-only ListSms");
        let mut rof = FabricClient::with_interceptor(ch.clone(), bearer(READER));
        rof.list_partitions(pb::ListPartitionsRequest {})
            .await
            .expect("read-only ListPartitions");
        ClusterClient::with_interceptor(ch.clone(), bearer(READER))
            .list_members(pb::ListMembersRequest {})
            .await
            .expect("read-only ListMembers");
        for (rpc, code) in mutate_all(ch.clone(), bearer(READER)).await {
            assert_eq!(
                code,
                tonic::Code::PermissionDenied,
                "read-only {rpc} on {ep}"
            );
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let states_after: Vec<_> = demo
        .replicas()
        .iter()
        .map(|r| r.replica().state())
        .collect();
    assert_eq!(states_after, states_before, "the replicated state changed");
    assert_eq!(demo.replicas()[0].metrics().voters, members_before);
    let now = settled(&demo).await;
    assert_eq!(now.guid, master.guid, "the master changed");
    assert_eq!(now.epoch, master.epoch, "the epoch changed");
    for m in demo.members() {
        let mut c = ControlClient::with_interceptor(channel(m.endpoint).await, bearer(ADMIN));
        let s = c
            .get_status(pb::GetStatusRequest {})
            .await
            .expect("GetStatus")
            .into_inner();
        assert_ne!(s.priority, 15, "{} got priority 15", m.name);
    }
    // The admin token still does what the others could not.
    let mut admin = FabricClient::with_interceptor(channel(eps[0]).await, bearer(ADMIN));
    admin
        .set_partition(pb::SetPartitionRequest {
            partition: Some(pb::PartitionEntry {
                members: vec![pb::PartitionMemberEntry {
                    port_guid: master.guid,
                    full: true,
                }],
                ..partition()
            }),
        })
        .await
        .expect("admin SetPartition");
    demo.stop().await;
}
