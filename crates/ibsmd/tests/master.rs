//! The MASTER configures the subnet through `ibsm_core::subnet` inside the instance
//! runtime, the STANDBY configures nothing: two instances on one embedded fabric (a
//! k=4 fat tree), checked against the simulator's own state:
//!
//! * every cabled port (switch external ports and CA ports) is Active;
//! * every CA port has a LID of its own, MasterSMLID pointing at the master;
//! * from every switch, following the programmed LFTs reaches every CA port's LID;
//! * a pulled switch-to-switch cable is routed around (light sweep -> heavy sweep);
//! * the standby stays STANDBY and reports its own (non-master) sweeps.

use std::time::{Duration, Instant};

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::PortState;
use ibsm_sim::Sim;
use ibsm_transport::SharedSim;
use ibsmd::demo::{pick_ca_ports, spawn_on_sim};
use ibsmd::InstanceConfig;

/// Every CA port LID, and whether the LFTs lead there from every switch, avoiding
/// `dead` (a switch port whose cable is gone).
fn check_routes(sim: &Sim, topo: &Topology, dead: Option<(NodeIdx, u8)>) -> Result<usize, String> {
    let mut cas = Vec::new();
    for (idx, node) in topo.iter() {
        if node.is_switch() {
            continue;
        }
        for (p, port) in node.physical_ports() {
            if port.remote.is_none() {
                continue;
            }
            let lid = sim.port_lid(idx, p).map_err(|e| e.to_string())?;
            if lid == 0 {
                return Err(format!("{} port {p} has no LID", node.description));
            }
            cas.push((idx, p, lid));
        }
    }
    let mut lids: Vec<u16> = cas.iter().map(|c| c.2).collect();
    lids.sort_unstable();
    lids.dedup();
    if lids.len() != cas.len() {
        return Err("two CA ports share a LID".into());
    }
    let mut walks = 0;
    for (sw, node) in topo.iter().filter(|(_, n)| n.is_switch()) {
        for &(ca, ca_port, lid) in &cas {
            let mut at = sw;
            for _hop in 0..16 {
                let out = sim
                    .lft_entry(at, lid)
                    .ok_or_else(|| format!("{}: no LFT entry for LID {lid}", node.description))?;
                if Some((at, out)) == dead {
                    return Err(format!("LID {lid} still routed over the dead cable"));
                }
                let (next, next_port) = topo.neighbor(at, out).ok_or_else(|| {
                    format!("LFT of switch {at:?} sends LID {lid} to unconnected port {out}")
                })?;
                if Some((next, next_port)) == dead {
                    return Err(format!("LID {lid} still routed over the dead cable"));
                }
                if next == ca && next_port == ca_port {
                    walks += 1;
                    break;
                }
                if topo.node(next).is_some_and(|n| !n.is_switch()) {
                    return Err(format!("LID {lid} from {at:?} ends at the wrong CA"));
                }
                at = next;
            }
        }
    }
    Ok(walks)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match ok() {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn master_configures_and_reroutes_standby_configures_nothing() {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };
    let mut c1 = InstanceConfig::new("sm1", 10);
    c1.subnet.sweep_interval = Duration::from_millis(200);
    let master = spawn_on_sim(&sim, *n1, *p1, c1).expect("master");
    let standby = spawn_on_sim(&sim, *n2, *p2, InstanceConfig::new("sm2", 5)).expect("standby");

    wait_for("subnet up", Duration::from_secs(30), || {
        let s = master.status();
        if s.last_sweep.starts_with("master heavy sweep") {
            Ok(())
        } else {
            Err(format!("master status: {s:?}"))
        }
    });
    let master_lid = master.status().lid;
    assert_ne!(master_lid, 0);

    wait_for("ports Active and routes", Duration::from_secs(10), || {
        sim.with_sim(|s| {
            for ((a, pa), (b, pb)) in topo.links() {
                for (n, p) in [(a, pa), (b, pb)] {
                    let st = s.port_state(n, p).map_err(|e| e.to_string())?;
                    if st != PortState::Active {
                        return Err(format!("{n:?} port {p} is {st:?}"));
                    }
                }
            }
            for (idx, node) in topo.iter().filter(|(_, n)| !n.is_switch()) {
                for (p, port) in node.physical_ports() {
                    if port.remote.is_some() {
                        let pi = s.port_info(idx, p).map_err(|e| e.to_string())?;
                        if pi.master_sm_lid != master_lid {
                            return Err(format!("{idx:?}/{p}: MasterSMLID {}", pi.master_sm_lid));
                        }
                    }
                }
            }
            let walks = check_routes(s, &topo, None)?;
            if walks == 0 {
                return Err("no walks".into());
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?
    });

    let st = standby.status();
    assert_eq!(st.state.to_string(), "STANDBY", "{st:?}");
    assert!(!st.last_sweep.starts_with("master"), "{st:?}");

    // Pull a switch-to-switch cable: the light sweep sees PortStateChange, the heavy
    // sweep reroutes around it.
    let (a, pa) = topo
        .links()
        .find(|((a, _), (b, _))| {
            topo.node(*a).is_some_and(|n| n.is_switch())
                && topo.node(*b).is_some_and(|n| n.is_switch())
        })
        .map(|(a, _)| a)
        .expect("a switch-to-switch cable");
    sim.with_sim(|s| s.link_down(a, pa))
        .expect("sim")
        .expect("link down");
    wait_for(
        "reroute around the pulled cable",
        Duration::from_secs(20),
        || {
            sim.with_sim(|s| check_routes(s, &topo, Some((a, pa))).map(|_| ()))
                .map_err(|e| e.to_string())?
        },
    );
    master.shutdown();
    standby.shutdown();
}
