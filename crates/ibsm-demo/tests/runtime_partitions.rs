//! Partitions set through the API reach the fabric at run time and survive a
//! failover, on the in-process demo (three SM instances on an embedded fabric, three
//! replicas in one Raft cluster):
//!
//! - `Fabric/SetPartition` sent to a STANDBY commits `partition/<pkey>` to the
//!   replicated config; the MASTER learns it from its own replica and programs the
//!   members' P_Key tables (CA ports, and the switch ports facing them, which enforce),
//!   read back from the simulated SMAs with SubnGet(P_KeyTable), not from the SM;
//! - after the MASTER is killed, the new MASTER (whose first heavy sweep rewrites
//!   every P_Key table: a new mastership trusts nothing its predecessor programmed)
//!   keeps programming it, and a partition changed after the failover (one member
//!   dropped, one added) is reprogrammed: the dropped member loses the P_Key.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_core::discovery::DiscoveryResult;
use ibsm_demo::demo::{Demo, Selector};
use ibsm_mad::attr::PKeyTable;
use ibsm_mad::modifier::PKeyBlock;
use ibsm_mad::{AttributeId, Smp};
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use ibsm_proto::v1::{
    DeletePartitionRequest, GetStatusRequest, ListPartitionsRequest, ListPartitionsResponse,
    PartitionEntry, PartitionMemberEntry, SetPartitionRequest, SmState, Status,
};
use ibsm_transport::{run_discovery, DiscoverConfig, FabricSpec, MadDevice, SimDevice};

const WAIT: Duration = Duration::from_secs(60);

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// Statuses of the running members, once `pred` holds for them.
async fn wait_for(eps: &[SocketAddr], what: &str, pred: impl Fn(&[Status]) -> bool) -> Vec<Status> {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut all = Vec::new();
        for ep in eps {
            if let Some(s) = status(*ep).await {
                all.push(s);
            }
        }
        if pred(&all) {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {WAIT:?}: {all:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn one_settled_master(all: &[Status]) -> Option<&Status> {
    let masters: Vec<&Status> = all
        .iter()
        .filter(|s| s.state == SmState::Master as i32)
        .collect();
    (masters.len() == 1 && masters[0].epoch > 0 && !masters[0].degraded).then(|| masters[0])
}

async fn set_partition(
    ep: SocketAddr,
    name: &str,
    p_key: u32,
    members: &[(u64, bool)],
) -> ListPartitionsResponse {
    let mut c = FabricClient::connect(format!("http://{ep}"))
        .await
        .expect("connect");
    c.set_partition(SetPartitionRequest {
        partition: Some(PartitionEntry {
            groups: Vec::new(),
            index0: false,
            name: name.into(),
            p_key,
            members: members
                .iter()
                .map(|&(port_guid, full)| PartitionMemberEntry { port_guid, full })
                .collect(),
            ipoib: None,
        }),
    })
    .await
    .unwrap_or_else(|e| panic!("SetPartition {name} {p_key:#x} on {ep}: {e}"))
    .into_inner()
}

async fn list_partitions(ep: SocketAddr) -> ListPartitionsResponse {
    let mut c = FabricClient::connect(format!("http://{ep}"))
        .await
        .expect("connect");
    c.list_partitions(ListPartitionsRequest {})
        .await
        .expect("ListPartitions")
        .into_inner()
}

/// Reads P_Key tables straight from the simulated SMAs, through a client of its own
/// on a CA port (directed route: independent of the LFTs and of the SMs).
struct Reader {
    dev: SimDevice,
    fabric: DiscoveryResult,
    tid: u64,
}

impl Reader {
    fn new(demo: &Demo, topo: &ibsm_fabric::Topology) -> Reader {
        let (node, _) = topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .last()
            .expect("a CA");
        let mut dev = demo.sim.attach(node, 1).expect("reader attaches");
        let fabric = run_discovery(&mut dev, &DiscoverConfig::default())
            .expect("reader discovery")
            .result;
        Reader {
            dev,
            fabric,
            tid: 0x5EAD_0000_0000,
        }
    }

    fn get_pkeys(&mut self, path: &[u8], port: u8) -> Vec<u16> {
        self.tid += 1;
        let tid = self.tid;
        let smp = Smp::get_dr(
            path,
            AttributeId::P_KEY_TABLE,
            PKeyBlock { block: 0, port }.attr_mod(),
            tid,
        );
        self.dev.send(&smp.encode()).expect("send");
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let Some(r) = self.dev.recv(Duration::from_millis(100)).expect("recv") else {
                continue;
            };
            let Ok(r) = Smp::decode(&r.mad) else { continue };
            if r.tid != tid {
                continue;
            }
            assert_eq!(r.status, 0, "P_KeyTable of port {port} at {path:?}");
            let t = r.attribute::<PKeyTable>().expect("P_KeyTable decodes");
            return t.keys.iter().map(|k| k.0).filter(|&k| k != 0).collect();
        }
        panic!("P_KeyTable of port {port} at {path:?}: no answer");
    }

    /// (CA port's keys, keys of the switch port facing it).
    fn pkeys(&mut self, port_guid: u64) -> (Vec<u16>, Vec<u16>) {
        let t = &self.fabric.topology;
        let (ca, cp) = t
            .find_by_port_guid(port_guid)
            .expect("member on the fabric");
        let (sw, sp) = t.neighbor(ca, cp).expect("member cabled");
        let ca_path = self.fabric.path(ca).expect("CA path").to_vec();
        let sw_path = self.fabric.path(sw).expect("switch path").to_vec();
        (self.get_pkeys(&ca_path, 0), self.get_pkeys(&sw_path, sp))
    }
}

/// Wait until every `(port GUID, wanted key or absent key)` holds at the CA port and
/// at the switch port facing it.
async fn wait_pkeys(reader: &mut Reader, what: &str, checks: &[(u64, u16, bool)]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut bad = Vec::new();
        for &(g, key, present) in checks {
            let (ca, sw) = tokio::task::block_in_place(|| reader.pkeys(g));
            for (at, keys) in [("CA port", &ca), ("switch port", &sw)] {
                if keys.contains(&key) != present {
                    bad.push(format!("{at} of {g:#x}: {keys:x?}"));
                }
            }
        }
        if bad.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {WAIT:?}: {bad:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_set_through_the_api_is_programmed_and_survives_a_failover() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let topo = spec.topology().expect("topology").expect("embedded");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();
    let all = wait_for(&eps, "a settled master", |all| {
        all.len() == 3 && one_settled_master(all).is_some()
    })
    .await;
    let master = one_settled_master(&all).expect("master").clone();
    let standby = eps[all
        .iter()
        .position(|s| s.state != SmState::Master as i32)
        .expect("a standby")];
    let mut reader = Reader::new(&demo, &topo);
    // Members: CA ports away from the SMs' own.
    let cas: Vec<u64> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(_, n)| n.ports[1].port_guid)
        .collect();
    let (a, b, c) = (cas[4], cas[5], cas[6]);
    let (ka, kb) = (0x8021u16, 0x0021u16);
    // Before: nobody has 0x21.
    wait_pkeys(
        &mut reader,
        "no 0x21 at start",
        &[(a, ka, false), (b, kb, false)],
    )
    .await;

    // Set through a STANDBY: the master learns it from the replica and programs it.
    let set = set_partition(standby, "rt-storage", 0x21, &[(a, true), (b, false)]).await;
    assert!(set.outcome.contains("committed"), "{}", set.outcome);
    assert!(set.outcome.contains("next heavy sweep"), "{}", set.outcome);
    wait_pkeys(
        &mut reader,
        "0x21 programmed by the master",
        &[(a, ka, true), (b, kb, true), (c, ka, false), (c, kb, false)],
    )
    .await;
    // The master lists it as programmed.
    let master_ep = eps[all
        .iter()
        .position(|s| s.guid == master.guid)
        .expect("master endpoint")];
    let deadline = Instant::now() + WAIT;
    loop {
        let l = list_partitions(master_ep).await;
        if l.source == "master" && l.partitions.iter().any(|p| p.p_key == 0x21) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "master never listed 0x21 as programmed: {l:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Kill the master: the new one must keep the partition. Its first heavy sweep
    // rewrites every P_Key table, so the members are sampled all along: 0x21 must
    // never go missing (a new master that learnt the replicated partitions only
    // after that sweep would drop it for a while).
    let killed = demo.kill(&Selector::Master).await.expect("kill master");
    let left: Vec<SocketAddr> = eps
        .iter()
        .copied()
        .filter(|ep| *ep != killed.endpoint)
        .collect();
    let deadline = Instant::now() + WAIT;
    let mut samples = 0u32;
    let new_ep = loop {
        let (ca, sw) = tokio::task::block_in_place(|| reader.pkeys(a));
        assert!(
            ca.contains(&ka) && sw.contains(&ka),
            "0x21 missing on {a:#x} during the failover (sample {samples}): CA {ca:x?}, switch {sw:x?}"
        );
        samples += 1;
        let mut all = Vec::new();
        for ep in &left {
            if let Some(s) = status(*ep).await {
                all.push((*ep, s));
            }
        }
        let statuses: Vec<Status> = all.iter().map(|(_, s)| s.clone()).collect();
        if let Some(m) = one_settled_master(&statuses)
            .filter(|m| m.guid != master.guid && m.epoch > master.epoch)
        {
            let ep = all
                .iter()
                .find(|(_, s)| s.guid == m.guid)
                .map(|(ep, _)| *ep)
                .expect("new master endpoint");
            // Its view is published at the end of each heavy sweep.
            let l = list_partitions(ep).await;
            if l.source == "master" && l.partitions.iter().any(|p| p.p_key == 0x21) {
                break ep;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no new master programming 0x21 within {WAIT:?}: {statuses:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    wait_pkeys(
        &mut reader,
        "0x21 kept by the new master",
        &[(a, ka, true), (b, kb, true)],
    )
    .await;

    // Change it after the failover: a is dropped, c joins as a full member.
    set_partition(new_ep, "rt-storage", 0x21, &[(b, false), (c, true)]).await;
    wait_pkeys(
        &mut reader,
        "0x21 reprogrammed by the new master",
        &[(a, ka, false), (a, kb, false), (b, kb, true), (c, ka, true)],
    )
    .await;

    // Delete it: the key leaves every member; deleting it again is NOT_FOUND.
    let mut f = FabricClient::connect(format!("http://{new_ep}"))
        .await
        .expect("connect");
    let del = f
        .delete_partition(DeletePartitionRequest { p_key: 0x21 })
        .await
        .expect("DeletePartition")
        .into_inner();
    assert!(del.outcome.contains("removed"), "{}", del.outcome);
    assert!(
        del.partitions.iter().all(|p| p.p_key != 0x21),
        "listed after delete: {:?}",
        del.partitions
    );
    wait_pkeys(
        &mut reader,
        "0x21 removed from the members",
        &[
            (b, kb, false),
            (b, ka, false),
            (c, ka, false),
            (c, kb, false),
        ],
    )
    .await;
    let again = f
        .delete_partition(DeletePartitionRequest { p_key: 0x21 })
        .await
        .expect_err("deleting twice");
    assert_eq!(again.code(), tonic::Code::NotFound, "{again}");
    let bad = f
        .delete_partition(DeletePartitionRequest { p_key: 0x7fff })
        .await
        .expect_err("the default partition");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument, "{bad}");
    demo.stop().await;
}
