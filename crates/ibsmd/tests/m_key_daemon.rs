//! Two ibsmd instances with an M_Key at protection level 2 on the embedded fabric,
//! which checks M_Keys as IBA 14.2.4 says: the master programs the key into every
//! CA port and switch, the standby's SMInfo polls keep working, and after the master
//! stops the standby takes over and sweeps the protected fabric (every SMP of both
//! carries the key: the fabric never refuses one). And with replication: a new master
//! configured with another key takes the old one from the replica, reprograms every
//! port with its own, and replicates that.

mod common;

use std::time::Duration;

use ibsm_mad::PortState;
use ibsm_transport::SharedSim;
use ibsmd::embedded::{pick_ca_ports, spawn_on_sim};
use ibsmd::InstanceConfig;

const M_KEY: u64 = 0x5EC0_0000_C0FF_EE01;

fn keyed(name: &str, priority: u8) -> InstanceConfig {
    keyed_with(name, priority, M_KEY, 2)
}

fn keyed_with(name: &str, priority: u8, key: u64, level: u8) -> InstanceConfig {
    let mut c = InstanceConfig::new(name, priority);
    c.subnet.m_key.key = key;
    c.subnet.m_key.protect_bits = level;
    c.subnet.m_key.lease_period = 30;
    c.subnet.sweep_interval = Duration::from_millis(200);
    c
}

/// Every management port (CA ports, switch port 0) holds the key, level and lease,
/// and every cabled port is Active.
fn check_keyed(sim: &SharedSim, topo: &ibsm_fabric::Topology) -> Result<(), String> {
    check_keyed_with(sim, topo, M_KEY, 2)
}

fn check_keyed_with(
    sim: &SharedSim,
    topo: &ibsm_fabric::Topology,
    key: u64,
    level: u8,
) -> Result<(), String> {
    sim.with_sim(|s| {
        for (idx, node) in topo.iter() {
            let ports: Vec<u8> = if node.is_switch() {
                vec![0]
            } else {
                node.physical_ports()
                    .filter(|(_, p)| p.remote.is_some())
                    .map(|(n, _)| n)
                    .collect()
            };
            for p in ports {
                let pi = s.port_info(idx, p).map_err(|e| e.to_string())?;
                let got = (pi.m_key, pi.m_key_protect_bits, pi.m_key_lease_period);
                if got != (key, level, 30) {
                    return Err(format!("{} port {p}: {got:x?}", node.description));
                }
            }
        }
        for ((a, pa), (b, pb)) in topo.links() {
            for (n, p) in [(a, pa), (b, pb)] {
                let st = s.port_state(n, p).map_err(|e| e.to_string())?;
                if st != PortState::Active {
                    return Err(format!("{n:?} port {p} is {st:?}"));
                }
            }
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?
}

#[test]
fn a_keyed_fabric_comes_up_and_survives_a_failover() {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };
    let master = spawn_on_sim(&sim, *n1, *p1, keyed("sm1", 10)).expect("master");
    let standby = spawn_on_sim(&sim, *n2, *p2, keyed("sm2", 5)).expect("standby");

    common::wait_for("subnet up with the key", Duration::from_secs(30), || {
        let s = master.status();
        if !s.last_sweep.starts_with("master heavy sweep") {
            return Err(format!("master status: {s:?}"));
        }
        check_keyed(&sim, &topo)
    });
    common::wait_for("standby settles", Duration::from_secs(10), || {
        let st = standby.status();
        (st.state.to_string() == "STANDBY")
            .then_some(())
            .ok_or(format!("{st:?}"))
    });
    // The standby keeps polling the master (SMInfo is not M_Key guarded): it stays.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(standby.status().state.to_string(), "STANDBY");

    master.shutdown();
    common::wait_for("the standby takes over", Duration::from_secs(20), || {
        let st = standby.status();
        if st.state.to_string() == "MASTER" && st.last_sweep.starts_with("master heavy sweep") {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    });
    check_keyed(&sim, &topo).expect("the key is kept and the ports stay Active");
    let dropped = sim.with_sim(|s| s.stats().dropped_m_key).expect("sim");
    assert_eq!(dropped, 0, "an SMP of ours went without the key");
    standby.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_with_a_new_key_rekeys_the_fabric_with_the_replicated_one() {
    use std::sync::Arc;

    use ibsmd::replication::Replication;

    const OLD: u64 = 0x0000_0000_0000_01D0;
    const NEW: u64 = 0x0000_0000_0000_0E10;
    let dir = tempfile::tempdir().expect("tempdir");
    // A one-member cluster: its replica outlives the first master, as a peer's would.
    let repl = Replication::start(common::one_member_cluster(dir.path()))
        .await
        .expect("replica starts");
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };

    let mut c1 = keyed_with("sm1", 10, OLD, 1);
    c1.replication = Some(Arc::clone(&repl));
    let first = Arc::new(spawn_on_sim(&sim, *n1, *p1, c1).expect("first master"));
    let slot = ibsmd::server::slot(Arc::clone(&first));
    repl.follow(ibsmd::server::followed_sm(Arc::clone(&slot)));
    common::wait_async("the old key programmed and replicated", || {
        check_keyed_with(&sim, &topo, OLD, 1)?;
        let k = repl.replica().with_state(|s| s.m_key);
        (k == OLD)
            .then_some(())
            .ok_or(format!("replicated M_Key {k:#x}"))
    })
    .await;
    first.shutdown();

    // The operator configured a new key on the successor.
    let mut c2 = keyed_with("sm2", 5, NEW, 1);
    c2.replication = Some(Arc::clone(&repl));
    let second = Arc::new(spawn_on_sim(&sim, *n2, *p2, c2).expect("successor"));
    *slot.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&second));
    common::wait_async(
        "the successor rekeys the fabric and replicates the new key",
        || {
            let st = second.status();
            if st.state.to_string() != "MASTER" {
                return Err(format!("{st:?}"));
            }
            check_keyed_with(&sim, &topo, NEW, 1)?;
            let k = repl.replica().with_state(|s| s.m_key);
            (k == NEW)
                .then_some(())
                .ok_or(format!("replicated M_Key {k:#x}"))
        },
    )
    .await;
    second.shutdown();
}
