//! The client against ibsm-core's SA on the embedded simulator: a master `Node` driven
//! on its own thread over a `SimDevice` (as ibsmd's driver does), clients on other
//! CAs. Whole tables are checked against the topology (counts and GUIDs), so a client
//! that did not ACK (the SA then sends one segment and stops) or lost a segment fails.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ibsm_core::node::{Input, Node, NodeConfig, Output};
use ibsm_fabric::{gen, NodeIdx, Topology};
use ibsm_mad::sa::{
    ComponentMask, JoinState, McMemberRecord, NodeRecord, PathRecord, PortInfoRecord, SaMad,
    SaStatus, ServiceName, ServiceRecord,
};
use ibsm_mad::Method;
use ibsm_sa_client::{trap_subscription, ClientConfig, GroupParams, JoinRequest, SaClient};
use ibsm_transport::{MadDevice, SharedSim, SimDevice};

/// A master node on its own thread until dropped.
struct Master {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Master {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start_master(shared: &SharedSim, at: NodeIdx) -> Master {
    let mut dev = shared.attach(at, 1).expect("attach the SM");
    dev.register_gsi_class(0x03).expect("SA class");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        let start = Instant::now();
        let mut cfg = NodeConfig::new(10);
        cfg.subnet.sweep_interval = Duration::from_millis(500);
        cfg.light_sweep_interval = Duration::from_millis(500);
        let mut node = Node::new(cfg, Duration::ZERO);
        while !flag.load(Ordering::SeqCst) {
            while let Some(out) = node.poll_output() {
                match out {
                    Output::Transmit(t) => {
                        let _ = match t.dlid {
                            Some(l) if l != 0 => dev.send_lid(l, &t.mad),
                            _ => dev.send(&t.mad),
                        };
                    }
                    Output::TransmitGmp(t) => {
                        let _ = dev.send_gmp(&t.to, t.wire());
                    }
                    Output::RoutingJob(j) => {
                        let done = j.run();
                        node.handle_input(start.elapsed(), Input::RoutingDone(done));
                    }
                    Output::Failed(e) => panic!("the master failed: {e}"),
                    _ => {}
                }
            }
            let now = start.elapsed();
            let wait = node
                .poll_timeout()
                .map_or(Duration::from_millis(10), |t| t.saturating_sub(now))
                .min(Duration::from_millis(10));
            match dev.recv(wait) {
                Ok(Some(r)) if r.is_smp() => node.handle_input(
                    start.elapsed(),
                    Input::Mad {
                        mad: &r.mad,
                        slid: r.slid(),
                    },
                ),
                Ok(Some(r)) => node.handle_input(
                    start.elapsed(),
                    Input::Gmp {
                        mad: &r.mad,
                        from: r.from,
                    },
                ),
                Ok(None) => {}
                Err(e) => panic!("SM device: {e}"),
            }
            let now = start.elapsed();
            if node.poll_timeout().is_some_and(|t| t <= now) {
                node.handle_timeout(now);
            }
        }
    });
    Master {
        stop,
        thread: Some(thread),
    }
}

struct Fabric {
    topo: Topology,
    shared: SharedSim,
    cas: Vec<NodeIdx>,
    _master: Master,
}

/// A 2-level fat tree with a master on the first CA; returns once a client on the
/// last CA sees a master SM LID and a whole NodeRecord table.
fn fabric(radix: u32) -> Fabric {
    let topo = gen::fat_tree_2level(radix).expect("topology");
    let shared = SharedSim::new(&topo);
    let cas: Vec<NodeIdx> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    let master = start_master(&shared, cas[0]);
    let f = Fabric {
        topo,
        shared,
        cas,
        _master: master,
    };
    // Wait for the master to bring the fabric up and answer the SA.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the fabric never came up");
        std::thread::sleep(Duration::from_millis(200));
        let Ok(mut c) = f.client(f.cas.len() - 1, ClientConfig::default()) else {
            continue;
        };
        if c.local().lid == 0 {
            continue;
        }
        if let Ok(nr) = c.get_table(&NodeRecord::default(), ComponentMask::NONE) {
            if nr.len() == f.topo.len() {
                return f;
            }
        }
    }
}

impl Fabric {
    fn device(&self, ca: usize) -> SimDevice {
        let dev = self
            .shared
            .attach(self.cas[ca], 1)
            .expect("attach a client");
        // Reports go to one client per port: the first one there takes them (answers
        // to requests need no registration).
        let _ = dev.register_gsi_class(0x03);
        dev
    }

    fn client(
        &self,
        ca: usize,
        cfg: ClientConfig,
    ) -> Result<SaClient<SimDevice>, ibsm_sa_client::SaClientError> {
        SaClient::open(self.device(ca), cfg)
    }
}

/// The SA_Key of ibsm-core's SA (and OpenSM's default): a trusted requester sees
/// every port's paths and every member of a group.
const SA_KEY: u64 = 1;

fn trusted() -> ClientConfig {
    ClientConfig {
        sm_key: SA_KEY,
        ..ClientConfig::default()
    }
}

/// The LIDs of every end port, from the SA's PortInfoRecords.
fn end_lids(c: &mut SaClient<SimDevice>) -> Vec<u16> {
    c.get_table(&PortInfoRecord::default(), ComponentMask::NONE)
        .unwrap()
        .iter()
        .map(|r| r.endport_lid)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn end_port_count(topo: &Topology) -> usize {
    topo.iter()
        .map(|(_, n)| {
            if n.is_switch() {
                1
            } else {
                n.physical_ports()
                    .filter(|(_, p)| p.remote.is_some())
                    .count()
            }
        })
        .sum()
}

#[test]
fn whole_tables_are_reassembled_with_acks_in_windows() {
    let f = fabric(8);
    for window in [1, 4, 32] {
        let mut c = f
            .client(
                3,
                ClientConfig {
                    rmpp_window: window,
                    ..trusted()
                },
            )
            .unwrap();
        let nr = c
            .get_table(&NodeRecord::default(), ComponentMask::NONE)
            .unwrap();
        let guids: BTreeSet<u64> = nr.iter().map(|r| r.node_info.node_guid).collect();
        let want: BTreeSet<u64> = f.topo.iter().map(|(_, n)| n.node_guid).collect();
        assert_eq!(guids, want, "every node once (window {window})");

        // All-to-all PathRecords: one per ordered pair of end ports (LMC 0).
        let slids = end_lids(&mut c);
        let before = c.stats();
        let paths = c.paths_from(&slids, 4).unwrap();
        let n = end_port_count(&f.topo);
        assert_eq!(paths.len(), n * n, "window {window}");
        let pairs: BTreeSet<(u16, u16)> = paths.iter().map(|p| (p.slid, p.dlid)).collect();
        assert_eq!(pairs.len(), n * n, "distinct (SLID, DLID) pairs");
        let s = c.stats();
        let segments = s.segments - before.segments;
        assert_eq!(segments, (n * (n * 64).div_ceil(200)) as u64);
        // One ACK per window reached, and the last.
        let acks = s.acks - before.acks;
        assert!(
            acks >= segments / u64::from(window),
            "{acks} ACKs for {segments} segments in windows of {window}"
        );
    }
}

#[test]
fn tables_arrive_whole_through_packet_loss() {
    let f = fabric(4);
    let mut c = f
        .client(
            2,
            ClientConfig {
                timeout: Duration::from_millis(400),
                retries: 8,
                rmpp_window: 4,
                ..trusted()
            },
        )
        .unwrap();
    f.shared
        .with_sim(|s| s.set_loss(0.05, 7))
        .unwrap()
        .expect("loss");
    let n = end_port_count(&f.topo);
    for _ in 0..3 {
        let pir = c
            .get_table(&PortInfoRecord::default(), ComponentMask::NONE)
            .unwrap();
        assert!(pir.len() >= n, "{} PortInfoRecords", pir.len());
        let slids = end_lids(&mut c);
        let paths = c.paths_from(&slids, 2).unwrap();
        assert_eq!(paths.len(), n * n);
    }
    f.shared.with_sim(|s| s.set_loss(0.0, 0)).unwrap().unwrap();
}

#[test]
fn refusals_come_back_as_typed_statuses() {
    let f = fabric(4);
    let mut c = f.client(1, ClientConfig::default()).unwrap();
    let err = c
        .get(
            &NodeRecord {
                lid: 0xBFFF,
                ..NodeRecord::default()
            },
            NodeRecord::LID,
        )
        .unwrap_err();
    assert!(err.is_no_records(), "{err}");
    // A creation without its components.
    let err = c
        .join(&JoinRequest {
            mgid: None,
            join_state: JoinState::FULL_MEMBER,
            create: None,
            port_gid: None,
        })
        .unwrap_err();
    assert_eq!(
        err.status(),
        Some(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS),
        "{err}"
    );
    // An empty table is not an error.
    let none = c
        .get_table(
            &NodeRecord {
                lid: 0xBFFF,
                ..NodeRecord::default()
            },
            NodeRecord::LID,
        )
        .unwrap();
    assert!(none.is_empty());
}

#[test]
fn joins_and_leaves_from_two_ports_and_the_group_goes_with_its_last_full_member() {
    let f = fabric(4);
    let mut a = f.client(1, ClientConfig::default()).unwrap();
    let mut b = f.client(2, ClientConfig::default()).unwrap();
    let created = a
        .join(&JoinRequest::create(GroupParams::default()))
        .unwrap();
    assert_eq!(created.mgid[0], 0xFF, "an MGID the SA allocated");
    assert!(created.mlid >= 0xC000);
    assert!(created.join_state.contains(JoinState::FULL_MEMBER));

    let non = b
        .join(&JoinRequest::existing(created.mgid, JoinState::NON_MEMBER))
        .unwrap();
    assert_eq!(non.mlid, created.mlid);
    let so = b
        .join(&JoinRequest::existing(
            created.mgid,
            JoinState::SEND_ONLY_NON_MEMBER,
        ))
        .unwrap();
    assert_eq!(so.mlid, created.mlid);

    let members = |c: &mut SaClient<SimDevice>| -> Vec<McMemberRecord> {
        c.get_table(
            &McMemberRecord {
                mgid: created.mgid,
                ..McMemberRecord::default()
            },
            McMemberRecord::MGID,
        )
        .unwrap()
    };
    let mut judge = f.client(3, trusted()).unwrap();
    let m = members(&mut judge);
    assert_eq!(m.len(), 2, "two member ports: {m:?}");
    let of_b = m
        .iter()
        .find(|r| r.port_gid == b.local().gid())
        .expect("b is a member");
    assert_eq!(
        of_b.join_state,
        JoinState::NON_MEMBER.union(JoinState::SEND_ONLY_NON_MEMBER)
    );

    // b leaves one of its memberships, then a (the only full member) leaves: gone.
    b.leave(created.mgid, JoinState::NON_MEMBER, None).unwrap();
    let m = members(&mut judge);
    let of_b = m.iter().find(|r| r.port_gid == b.local().gid()).unwrap();
    assert_eq!(of_b.join_state, JoinState::SEND_ONLY_NON_MEMBER);
    a.leave(created.mgid, JoinState::FULL_MEMBER, None).unwrap();
    assert!(
        members(&mut judge).is_empty(),
        "deleted with its last full member"
    );
}

#[test]
fn services_register_and_delete_and_subscribers_get_reports() {
    let f = fabric(4);
    let mut a = f.client(1, ClientConfig::default()).unwrap();
    let rec = ServiceRecord {
        service_id: 0x1234_5678,
        service_name: ServiceName::new("ibsm-sa-client test"),
        ..ServiceRecord::default()
    };
    let got = a.register_service(&rec, Some(60)).unwrap();
    assert_eq!(got.service_gid, a.local().gid());
    let all = a
        .get_table(
            &ServiceRecord {
                service_id: rec.service_id,
                ..ServiceRecord::default()
            },
            ServiceRecord::SERVICE_ID,
        )
        .unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].service_name, rec.service_name);
    a.delete_service(&rec).unwrap();
    let err = a.delete_service(&rec).unwrap_err();
    assert!(err.is_no_records(), "{err}");

    // Subscribe to trap 66 (a group created) and create one from another port.
    a.subscribe(&trap_subscription(66)).unwrap();
    let mut b = f.client(2, ClientConfig::default()).unwrap();
    let g = b
        .join(&JoinRequest::create(GroupParams::default()))
        .unwrap();
    let report = a
        .next_report(Duration::from_secs(10))
        .unwrap()
        .expect("a Report of trap 66");
    assert_eq!(report.notice.notice.trap_number(), Some(66));
    // The ReportResp was taken: no resend of the same Report is handed out again.
    assert!(a
        .next_report(Duration::from_millis(1500))
        .unwrap()
        .is_none());
    a.unsubscribe(&trap_subscription(66)).unwrap();
    b.leave(g.mgid, JoinState::FULL_MEMBER, None).unwrap();
    assert!(a
        .next_report(Duration::from_millis(1000))
        .unwrap()
        .is_none());
}

#[test]
fn many_requests_in_flight_all_complete() {
    let f = fabric(4);
    let mut c = f.client(3, ClientConfig::default()).unwrap();
    let lids = end_lids(&mut c);
    let me = c.local().lid;
    let mut tids = BTreeSet::new();
    for &d in &lids {
        let t = PathRecord {
            slid: me,
            dlid: d,
            ..PathRecord::default()
        };
        let mad = SaMad::query(
            Method::GET_TABLE,
            0,
            &t,
            PathRecord::SLID | PathRecord::DLID,
        )
        .unwrap();
        tids.insert(c.submit(mad).unwrap());
    }
    assert_eq!(c.outstanding(), lids.len());
    while !tids.is_empty() {
        let (tid, r) = c
            .poll(Duration::from_secs(10))
            .unwrap()
            .expect("an outcome");
        assert!(tids.remove(&tid), "each TID once");
        let p: Vec<PathRecord> = r.unwrap().records().unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].slid, me);
    }
}
