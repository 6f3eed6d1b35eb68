//! The SA's state through a failover, on the demo's three replicated instances: two
//! HCAs join the IPoIB broadcast group through the master's SA (GMPs from simulator
//! clients on their own ports), the switches get the group's tree, a standby holds the
//! groups from its replica, the master is killed, and the new master serves the same
//! group at the same MLID with the same members, answers the same MCMemberRecord
//! query, and leaves the switches' MFT entries as they were.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::{Demo, Selector};
use ibsm_fabric::NodeIdx;
use ibsm_mad::sa::{JoinState, McMemberRecord, SaMad, SaStatus, SA_CLASS};
use ibsm_mad::{MadAddress, Method};
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use ibsm_proto::v1::{GetStatusRequest, ListMulticastGroupsRequest, SmState, Status};
use ibsm_transport::{FabricSpec, MadDevice, SimDevice};

const BROADCAST: [u8; 16] = [
    0xFF, 0x12, 0x40, 0x1B, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF,
];

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// The index and status of the one MASTER among the running `eps`.
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

/// MLID -> port GUIDs of the members, as `ep` lists them, and its source.
async fn groups(ep: SocketAddr) -> (String, BTreeMap<u32, Vec<u64>>) {
    let mut c = FabricClient::connect(format!("http://{ep}"))
        .await
        .expect("connect");
    let r = c
        .list_multicast_groups(ListMulticastGroupsRequest {})
        .await
        .expect("ListMulticastGroups")
        .into_inner();
    let g = r
        .groups
        .iter()
        .map(|g| (g.mlid, g.members.iter().map(|m| m.port_guid).collect()))
        .collect();
    (r.source, g)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_groups_survive_the_masters_death_with_the_same_mlid_members_and_mfts() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let topology = spec.topology().expect("topology").expect("embedded");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<(usize, SocketAddr)> = demo
        .members()
        .iter()
        .enumerate()
        .map(|(i, m)| (i, m.endpoint))
        .collect();
    let (m0, st) = master(&eps, Duration::from_secs(30)).await;

    // Two HCAs the SMs do not use, far apart (different leaves).
    let sm_hosts: Vec<String> = demo.members().iter().map(|m| m.host.clone()).collect();
    let cas: Vec<(NodeIdx, u64)> = topology
        .iter()
        .filter(|(_, n)| !n.is_switch() && !sm_hosts.contains(&n.description))
        .filter_map(|(i, n)| n.port(1).map(|p| (i, p.port_guid)))
        .collect();
    let picks = [cas[0], cas[cas.len() - 1]];
    let mut clients = Vec::new();
    for (node, guid) in picks {
        let dev = demo.sim.attach(node, 1).expect("attach a client");
        dev.register_gsi_class(SA_CLASS.0).expect("class");
        clients.push((dev, guid));
    }
    let join_mask = McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE;
    for (i, (dev, guid)) in clients.iter_mut().enumerate() {
        let rec = McMemberRecord {
            mgid: BROADCAST,
            port_gid: gid(*guid),
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let req = SaMad::query(Method::SET, 0x100 + i as u64, &rec, join_mask).unwrap();
        let lid = u16::try_from(st.lid).unwrap();
        let resp = ask(dev, lid, &req).expect("the master's SA answers the join");
        assert_eq!(resp.status(), SaStatus::SUCCESS, "join {i}");
        let r: McMemberRecord = resp.record().unwrap();
        assert_eq!(r.mlid, 0xC000);
    }
    let want: Vec<u64> = {
        let mut v: Vec<u64> = picks.iter().map(|p| p.1).collect();
        v.sort_unstable();
        v
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let (source, g) = loop {
        let (source, g) = groups(eps[m0].1).await;
        if g.get(&0xC000) == Some(&want) || Instant::now() > deadline {
            break (source, g);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(source, "master");
    assert_eq!(g.get(&0xC000), Some(&want), "{g:?}");

    // The switches forward the group: every leaf of a member has it.
    let mft = |demo: &Demo| -> BTreeMap<u32, Vec<u8>> {
        demo.sim
            .with_sim(|s| {
                topology
                    .iter()
                    .filter(|(_, n)| n.is_switch())
                    .filter_map(|(i, _)| {
                        let ports = s.mft_ports(i, 0xC000)?;
                        (!ports.is_empty()).then_some((i.0, ports))
                    })
                    .collect()
            })
            .expect("sim")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let before = loop {
        let m = mft(&demo);
        if m.len() >= 2 || Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(before.len() >= 2, "the tree spans both leaves: {before:?}");
    for (node, _) in picks {
        let (leaf, port) = topology.neighbor(node, 1).expect("cabled");
        assert!(
            before.get(&leaf.0).is_some_and(|p| p.contains(&port)),
            "the member's leaf forwards to it: {before:?}"
        );
    }

    // A standby holds the groups from its replica.
    let standby = eps.iter().find(|(i, _)| *i != m0).unwrap().1;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (source, g) = groups(standby).await;
        if source == "replica" && g.get(&0xC000) == Some(&want) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica never got the group: {source} {g:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The master dies.
    let name = demo.members()[m0].name.clone();
    demo.kill(&Selector::Name(name)).await.expect("kill");
    let alive: Vec<(usize, SocketAddr)> = eps.iter().copied().filter(|(i, _)| *i != m0).collect();
    let (m1, st1) = master(&alive, Duration::from_secs(30)).await;
    assert_ne!(m1, m0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (source, g) = loop {
        let (source, g) = groups(eps[m1].1).await;
        if source == "master" || Instant::now() > deadline {
            break (source, g);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(source, "master");
    assert_eq!(
        g.get(&0xC000),
        Some(&want),
        "same MLID, same members: {g:?}"
    );

    // The new master's SA answers a trusted MCMemberRecord query with both members.
    let (dev, _) = &mut clients[0];
    let mut req = SaMad::query(
        Method::GET_TABLE,
        0x200,
        &McMemberRecord {
            mgid: BROADCAST,
            ..McMemberRecord::default()
        },
        McMemberRecord::MGID,
    )
    .unwrap();
    req.sm_key = 1;
    let lid1 = u16::try_from(st1.lid).unwrap();
    let first = ask(dev, lid1, &req).expect("the new master's SA answers");
    assert_eq!(first.status(), SaStatus::SUCCESS);
    assert_eq!(first.method(), Method::GET_TABLE_RESP);
    let stride = usize::from(first.attribute_offset) * 8;
    assert!(stride >= McMemberRecord::SIZE);
    let recs: Vec<McMemberRecord> = first
        .data
        .chunks_exact(stride)
        .filter_map(|c| McMemberRecord::decode(c).ok())
        .filter(|r| r.mlid == 0xC000)
        .collect();
    assert_eq!(recs.len(), 2, "both members in the first segment: {recs:?}");

    // And the switches' entries were kept: nothing to re-program.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        mft(&demo),
        before,
        "the MFTs are as the old master left them"
    );
    demo.stop().await;
}
