//! The instance thread answers a SubnAdmGet of a fabric record as it reads it, from
//! the SA snapshot (`ibsm_core::sa::SaReader`), ahead of the MADs queued before it:
//! a master on the embedded fabric answers a client's NodeRecord and PathRecord Gets,
//! and `/metrics` counts them as read answers (`ibsm_sa_reader_answers_total`),
//! while a join (a write) still goes through the node.

mod common;

use std::time::{Duration, Instant};

use common::{quiet_master, subnet_up, wait_for};
use ibsm_mad::sa::{JoinState, McMemberRecord, NodeRecord, PathRecord, SaMad, SaStatus, SA_CLASS};
use ibsm_mad::{MadAddress, Method};
use ibsm_transport::{MadDevice, SharedSim, SimDevice};
use ibsmd::embedded::{pick_ca_ports, spawn_on_sim};

fn ask(dev: &mut SimDevice, sm_lid: u16, req: &SaMad) -> SaMad {
    dev.send_gmp(&MadAddress::gsi(sm_lid), &req.encode())
        .expect("send");
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(r)) = dev.recv(Duration::from_millis(100)) {
            if let Ok(m) = SaMad::decode(&r.mad) {
                if m.tid() == req.tid() {
                    return m;
                }
            }
        }
    }
    panic!("no answer to {req:?}");
}

fn reader_answers(name: &str, m: &std::sync::Arc<ibsmd::metrics::Metrics>) -> u64 {
    let text = ibsmd::metrics::render(&[(name.to_string(), m.clone())]);
    let series = format!("ibsm_sa_reader_answers_total{{sm=\"{name}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[test]
fn the_master_answers_fabric_gets_as_it_reads_them() {
    let topo = ibsm_fabric::gen::fat_tree_2level(4).expect("topology");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };
    let cfg = quiet_master("sm1");
    let metrics = cfg.metrics.clone();
    let master = spawn_on_sim(&sim, *n1, *p1, cfg).expect("master");
    subnet_up(&master);
    let mut client = sim.attach(*n2, *p2).expect("client");
    client.register_gsi_class(SA_CLASS.0).expect("SA class");
    let sm_lid = master.status().lid;
    assert_eq!(reader_answers("sm1", &metrics), 0);

    // NodeRecord of the master's own port, and the path from it to itself.
    let nr = NodeRecord {
        lid: sm_lid,
        ..NodeRecord::default()
    };
    let r = ask(
        &mut client,
        sm_lid,
        &SaMad::query(Method::GET, 0x301, &nr, NodeRecord::LID).unwrap(),
    );
    assert_eq!(r.status(), SaStatus::SUCCESS, "{r:?}");
    let got: NodeRecord = r.record().expect("a NodeRecord");
    assert_eq!(got.lid, sm_lid);
    assert_eq!(got.node_info.port_guid, master.status().guid);
    let pr = PathRecord {
        slid: sm_lid,
        dlid: sm_lid,
        ..PathRecord::default()
    };
    let r = ask(
        &mut client,
        sm_lid,
        &SaMad::query(Method::GET, 0x302, &pr, PathRecord::SLID | PathRecord::DLID).unwrap(),
    );
    assert_eq!(r.method(), Method::GET_RESP);
    wait_for(
        "the Gets counted as read answers",
        Duration::from_secs(5),
        || match reader_answers("sm1", &metrics) {
            2 => Ok(()),
            n => Err(format!("{n} read answers")),
        },
    );

    // A join is the node's: answered, and not a read answer.
    let guid2 = topo
        .node(*n2)
        .and_then(|n| n.port(*p2))
        .expect("the client's port")
        .port_guid;
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&0xFE80_0000_0000_0000u64.to_be_bytes());
    gid[8..].copy_from_slice(&guid2.to_be_bytes());
    let join = McMemberRecord {
        mgid: [
            0xFF, 0x12, 0x40, 0x1B, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF,
        ],
        port_gid: gid,
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let mask = McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE;
    let r = ask(
        &mut client,
        sm_lid,
        &SaMad::query(Method::SET, 0x303, &join, mask).unwrap(),
    );
    assert_eq!(r.status(), SaStatus::SUCCESS, "join");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(reader_answers("sm1", &metrics), 2);
}
