//! What an operator sees of the Subnet Administrator, over gRPC on the demo's three
//! replicated instances: an HCA (a simulator client on its own port) joins the IPoIB
//! broadcast group, registers a ServiceRecord and subscribes to trap 64 through the
//! master's SA; the master's `Control/Watch` stream shows the join and the
//! registration; a standby lists the group member (with its JoinState), the service
//! and the subscription from its replica (`Fabric/ListMulticastGroups`,
//! `ListServiceRecords`, `ListSubscriptions`, what `ibsmctl groups|services|
//! subscriptions` print); and `Control/GetStatus` shows the SA's size and the
//! replica's freshness on both. A partition set with `ipoib` through
//! `Fabric/SetPartition` gets its IPoIB broadcast group with its parameters, on the
//! master and in the replica, and loses it when it is deleted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::Demo;
use ibsm_mad::sa::{
    ComponentMask, InformInfo, JoinState, McMemberRecord, SaMad, SaStatus, ServiceName,
    ServiceRecord, SA_CLASS,
};
use ibsm_mad::{MadAddress, Method};
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use ibsm_proto::v1::{
    GetStatusRequest, ListMulticastGroupsRequest, ListServiceRecordsRequest,
    ListSubscriptionsRequest, SmState, Status, WatchRequest,
};
use ibsm_transport::{FabricSpec, MadDevice, SimDevice};

const BROADCAST: [u8; 16] = [
    0xFF, 0x12, 0x40, 0x1B, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF,
];
const SERVICE_ID: u64 = 0x1000_0000_0000_0abc;

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// The index and status of the one MASTER among `eps`.
async fn master(eps: &[(usize, SocketAddr)], within: Duration) -> (usize, Status) {
    let deadline = Instant::now() + within;
    loop {
        let mut found = Vec::new();
        for (i, ep) in eps {
            if let Some(s) = status(*ep).await {
                if s.state == SmState::Master as i32 && s.lid != 0 {
                    found.push((*i, s));
                }
            }
        }
        if found.len() == 1 {
            return found.remove(0);
        }
        assert!(Instant::now() < deadline, "no single master: {found:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One SA request from `dev` to the SA at `sm_lid`, and its answer.
fn ask(dev: &mut SimDevice, sm_lid: u16, req: &SaMad) -> Option<SaMad> {
    dev.send_gmp(&MadAddress::gsi(sm_lid), &req.encode()).ok()?;
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(r)) = dev.recv(Duration::from_millis(100)) {
            if let Ok(m) = SaMad::decode(&r.mad) {
                if m.tid() == req.tid() {
                    return Some(m);
                }
            }
        }
    }
    None
}

fn gid(guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&0xFE80_0000_0000_0000u64.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// Poll `check` every 100 ms until it holds (true) or `within` has passed.
async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_lists_what_clients_did_on_the_master_and_watch_shows_it() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let topology = spec.topology().expect("topology").expect("embedded");
    let demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<(usize, SocketAddr)> = demo
        .members()
        .iter()
        .enumerate()
        .map(|(i, m)| (i, m.endpoint))
        .collect();
    let (m0, st) = master(&eps, Duration::from_secs(30)).await;
    let master_ep = eps[m0].1;
    let standby = eps.iter().find(|(i, _)| *i != m0).expect("a standby").1;
    let sm_lid = u16::try_from(st.lid).expect("LID");

    // Watch the master before the client acts.
    let mut watch = ControlClient::connect(format!("http://{master_ep}"))
        .await
        .expect("connect")
        .watch(WatchRequest {})
        .await
        .expect("Watch")
        .into_inner();

    // A client HCA the SMs do not use.
    let sm_hosts: Vec<String> = demo.members().iter().map(|m| m.host.clone()).collect();
    let (node, guid) = topology
        .iter()
        .filter(|(_, n)| !n.is_switch() && !sm_hosts.contains(&n.description))
        .find_map(|(i, n)| n.port(1).map(|p| (i, p.port_guid)))
        .expect("a free HCA");
    let mut dev = demo.sim.attach(node, 1).expect("attach a client");
    dev.register_gsi_class(SA_CLASS.0).expect("class");

    // Join the broadcast group, register a service, subscribe to trap 64.
    let join = McMemberRecord {
        mgid: BROADCAST,
        port_gid: gid(guid),
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let mask = McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE;
    let r = ask(
        &mut dev,
        sm_lid,
        &SaMad::query(Method::SET, 0x201, &join, mask).unwrap(),
    )
    .expect("the SA answers the join");
    assert_eq!(r.status(), SaStatus::SUCCESS, "join");
    let service = ServiceRecord {
        service_id: SERVICE_ID,
        service_gid: gid(guid),
        service_lease: ServiceRecord::INFINITE_LEASE,
        service_name: ServiceName::new("ibsm-operators-test"),
        ..ServiceRecord::default()
    };
    let smask = ServiceRecord::SERVICE_ID
        | ServiceRecord::SERVICE_GID
        | ServiceRecord::SERVICE_LEASE
        | ServiceRecord::SERVICE_NAME;
    let r = ask(
        &mut dev,
        sm_lid,
        &SaMad::query(Method::SET, 0x202, &service, smask).unwrap(),
    )
    .expect("the SA answers the registration");
    assert_eq!(r.status(), SaStatus::SUCCESS, "service registration");
    let trap64 = InformInfo {
        lid_range_begin: 0xFFFF,
        is_generic: 1,
        subscribe: 1,
        notice_type: 0xFFFF,
        trap_number: 64,
        producer_type: 0xFF_FFFF,
        ..InformInfo::default()
    };
    let r = ask(
        &mut dev,
        sm_lid,
        &SaMad::query(Method::SET, 0x203, &trap64, ComponentMask::NONE).unwrap(),
    )
    .expect("the SA answers the subscription");
    assert_eq!(r.status(), SaStatus::SUCCESS, "subscription");

    // The master's Watch stream shows the join (port, group, JoinState) and the
    // registration, as events of kind "sa".
    let port = format!("port {guid:#018x}");
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut joined, mut registered) = (false, false);
    while !(joined && registered) && Instant::now() < deadline {
        let Ok(Ok(Some(ev))) = tokio::time::timeout(Duration::from_secs(1), watch.message()).await
        else {
            continue;
        };
        if ev.kind == "sa" {
            joined |= ev.text.contains(&port)
                && ev
                    .text
                    .contains("joined multicast group ff12:401b:ffff::ffff:ffff")
                && ev.text.contains("full member");
            registered |=
                ev.text.contains("\"ibsm-operators-test\"") && ev.text.contains("registered");
        }
        seen.push(format!("{}: {}", ev.kind, ev.text));
    }
    assert!(joined && registered, "the watch stream: {seen:#?}");

    // A standby lists them from its replica.
    let mut fabric = FabricClient::connect(format!("http://{standby}"))
        .await
        .expect("connect");
    let listed = eventually(Duration::from_secs(10), || {
        let mut f = fabric.clone();
        async move {
            let s = f
                .list_service_records(ListServiceRecordsRequest {})
                .await
                .expect("ListServiceRecords")
                .into_inner();
            s.source == "replica"
                && s.services.iter().any(|x| {
                    x.service_id == SERVICE_ID
                        && x.port_guid == guid
                        && x.service_name == "ibsm-operators-test"
                        && x.service_lease == u32::MAX
                })
        }
    })
    .await;
    assert!(listed, "the standby lists the service");
    let gid_text = std::net::Ipv6Addr::from(gid(guid)).to_string();
    let subs = fabric
        .list_subscriptions(ListSubscriptionsRequest {})
        .await
        .expect("ListSubscriptions")
        .into_inner();
    assert_eq!(subs.source, "replica");
    assert!(
        subs.subscriptions
            .iter()
            .any(|s| s.is_generic && s.trap_number == 64 && s.subscriber_gid == gid_text),
        "{subs:?}"
    );
    let groups = fabric
        .list_multicast_groups(ListMulticastGroupsRequest {})
        .await
        .expect("ListMulticastGroups")
        .into_inner();
    let member = groups
        .groups
        .iter()
        .filter(|g| g.mlid == 0xC000)
        .flat_map(|g| g.members.iter())
        .find(|m| m.port_guid == guid)
        .unwrap_or_else(|| panic!("the member in the standby's list: {groups:?}"));
    assert_eq!(member.join_state, 1, "a full member");

    // GetStatus: the SA's size on both; the master's replica is current; the standby
    // says how far its replica is from the Raft leader's.
    let ok = eventually(Duration::from_secs(10), || async {
        let Some(s) = status(master_ep).await else {
            return false;
        };
        let sa = s.sa.unwrap_or_default();
        sa.services == 1 && sa.subscriptions == 1 && sa.members >= 1 && sa.replica_current
    })
    .await;
    assert!(ok, "master status: {:?}", status(master_ep).await);
    let s = status(standby).await.expect("standby status");
    let sa = s.sa.expect("an SA summary");
    assert_eq!((sa.services, sa.subscriptions), (1, 1), "{sa:?}");
    assert!(sa.members >= 1 && sa.groups >= 1, "{sa:?}");
    assert!(sa.replica_holds_state && sa.replica_current, "{sa:?}");
    assert!(
        sa.last_sa_write_unix_ms > 0 && sa.last_sa_write_index > 0,
        "{sa:?}"
    );
    assert_eq!(sa.applied_index, s.applied_index);
    if s.raft_role != "leader" {
        assert!(
            sa.leader_applied_index >= sa.last_sa_write_index,
            "a follower knows the leader's index: {sa:?}"
        );
    }
}

/// MGID text, MLID and (mtu, rate, sl, q_key) of the groups `ep` lists.
async fn group_params(ep: SocketAddr) -> Vec<(String, u32, (u32, u32, u32, u32))> {
    let mut c = FabricClient::connect(format!("http://{ep}"))
        .await
        .expect("connect");
    c.list_multicast_groups(ListMulticastGroupsRequest {})
        .await
        .expect("ListMulticastGroups")
        .into_inner()
        .groups
        .into_iter()
        .map(|g| (g.mgid, g.mlid, (g.mtu, g.rate, g.sl, g.q_key)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_set_with_ipoib_gets_its_broadcast_group_until_it_is_deleted() {
    use ibsm_proto::v1::{
        DeletePartitionRequest, PartitionEntry, PartitionIpoib, PartitionMemberEntry,
        SetPartitionRequest,
    };
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let topology = spec.topology().expect("topology").expect("embedded");
    let demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<(usize, SocketAddr)> = demo
        .members()
        .iter()
        .enumerate()
        .map(|(i, m)| (i, m.endpoint))
        .collect();
    let (m0, _) = master(&eps, Duration::from_secs(30)).await;
    let master_ep = eps[m0].1;
    let standby = eps.iter().find(|(i, _)| *i != m0).expect("a standby").1;
    let members: Vec<PartitionMemberEntry> = topology
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .filter_map(|(_, n)| n.port(1).map(|p| p.port_guid))
        .take(4)
        .map(|port_guid| PartitionMemberEntry {
            port_guid,
            full: true,
        })
        .collect();
    let mut fabric = FabricClient::connect(format!("http://{master_ep}"))
        .await
        .expect("connect");
    fabric
        .set_partition(SetPartitionRequest {
            partition: Some(PartitionEntry {
                groups: Vec::new(),
                index0: false,
                name: "ib-storage".into(),
                p_key: 0x0033,
                members,
                ipoib: Some(PartitionIpoib {
                    rate: 7,
                    mtu: 5,
                    sl: 2,
                    scope: 5,
                    q_key: 0x0B1B,
                }),
            }),
        })
        .await
        .expect("SetPartition with ipoib");
    let mgid = "ff15:401b:8033::ffff:ffff";
    for ep in [master_ep, standby] {
        let ok = eventually(Duration::from_secs(15), || async {
            group_params(ep)
                .await
                .iter()
                .any(|(g, mlid, p)| g == mgid && *mlid >= 0xC001 && *p == (5, 7, 2, 0x0B1B))
        })
        .await;
        assert!(ok, "{ep}: {:?}", group_params(ep).await);
    }

    // Deleted: the group has no member and goes, on the master and in the replica.
    fabric
        .delete_partition(DeletePartitionRequest { p_key: 0x0033 })
        .await
        .expect("DeletePartition");
    for ep in [master_ep, standby] {
        let ok = eventually(Duration::from_secs(15), || async {
            group_params(ep).await.iter().all(|(g, _, _)| g != mgid)
        })
        .await;
        assert!(ok, "{ep}: {:?}", group_params(ep).await);
    }
}
