//! The MASTER configures the subnet through `ibsm_core::subnet` inside the instance
//! runtime, the STANDBY configures nothing: two instances on one embedded fabric (a
//! k=4 fat tree), checked against the simulator's own state:
//!
//! * every cabled port (switch external ports and CA ports) is Active;
//! * every CA port has a LID of its own, MasterSMLID pointing at the master;
//! * from every switch, following the programmed LFTs reaches every CA port's LID;
//! * a pulled switch-to-switch cable is routed around (light sweep -> heavy sweep);
//! * the standby stays STANDBY and reports its own (non-master) sweeps.

mod common;

use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::PortState;
use ibsm_sim::Sim;
use ibsm_transport::SharedSim;
use ibsmd::embedded::{pick_ca_ports, spawn_on_sim};
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

/// `RUST_LOG=info cargo test -p ibsmd --test master -- --nocapture` shows the instances' logs.
fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A k=4 fat tree in the embedded simulator and two CA ports far apart for two SMs.
fn k4_with_two_sm_ports() -> (Topology, SharedSim, (NodeIdx, u8), (NodeIdx, u8)) {
    init_tracing();
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("need two CA ports");
    };
    let (a, b) = ((*n1, *p1), (*n2, *p2));
    (topo, sim, a, b)
}

#[test]
fn master_configures_and_reroutes_standby_configures_nothing() {
    let (topo, sim, (n1, p1), (n2, p2)) = k4_with_two_sm_ports();
    let mut c1 = InstanceConfig::new("sm1", 10);
    c1.subnet.sweep_interval = Duration::from_millis(200);
    let master = spawn_on_sim(&sim, n1, p1, c1).expect("master");
    let standby = spawn_on_sim(&sim, n2, p2, InstanceConfig::new("sm2", 5)).expect("standby");

    common::wait_for("subnet up", Duration::from_secs(30), || {
        let s = master.status();
        if s.last_sweep.starts_with("master heavy sweep") {
            Ok(())
        } else {
            Err(format!("master status: {s:?}"))
        }
    });
    let master_lid = master.status().lid;
    assert_ne!(master_lid, 0);

    common::wait_for("ports Active and routes", Duration::from_secs(10), || {
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

    // The standby may still be finishing its own discovery round (its first query
    // can leave before the master's port answers SMInfo): it settles as STANDBY.
    common::wait_for("standby settles", Duration::from_secs(10), || {
        let st = standby.status();
        if st.state.to_string() == "STANDBY" {
            Ok(())
        } else {
            Err(format!("{st:?}"))
        }
    });
    let st = standby.status();
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
    common::wait_for(
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

/// A cable on the standby's directed route to the master goes down: the standby's
/// polls die on that path, but the master is alive. The standby must find it again
/// over another path (a fresh sweep before it may conclude MASTER), never take over.
/// The master and standby sit in different pods, so every route between them crosses
/// one of the master's leaf switch uplinks: pulling each in turn (plugging the other
/// back) cuts the standby's route at least once.
#[test]
fn a_cable_down_on_the_standbys_route_to_the_master_is_no_failover() {
    let (topo, sim, (n1, p1), (n2, p2)) = k4_with_two_sm_ports();
    let master = spawn_on_sim(&sim, n1, p1, InstanceConfig::new("sm1", 10)).expect("master");
    let standby = spawn_on_sim(&sim, n2, p2, InstanceConfig::new("sm2", 5)).expect("standby");
    common::wait_for("master and standby", Duration::from_secs(30), || {
        let (m, s) = (master.status(), standby.status());
        if m.state.to_string() == "MASTER"
            && m.last_sweep.starts_with("master heavy sweep")
            && s.state.to_string() == "STANDBY"
        {
            Ok(())
        } else {
            Err(format!("{m:?} / {s:?}"))
        }
    });
    let (leaf, _) = topo.neighbor(n1, p1).expect("master's leaf");
    let (leaf2, _) = topo.neighbor(n2, p2).expect("standby's leaf");
    assert_ne!(leaf, leaf2, "the SMs must sit on different leaf switches");
    let uplinks: Vec<u8> = topo
        .node(leaf)
        .expect("leaf")
        .physical_ports()
        .filter_map(|(p, _)| {
            let (next, _) = topo.neighbor(leaf, p)?;
            topo.node(next).is_some_and(|n| n.is_switch()).then_some(p)
        })
        .collect();
    assert!(uplinks.len() >= 2, "uplinks {uplinks:?}");

    let mut events = standby.subscribe();
    let mut excursions = 0;
    for &up in &uplinks {
        sim.with_sim(|s| s.link_down(leaf, up))
            .expect("sim")
            .expect("link down");
        // Polls miss for 300-400 ms, then a query, a sweep and a query on the new route.
        std::thread::sleep(Duration::from_millis(1500));
        common::wait_for("standby back to STANDBY", Duration::from_secs(10), || {
            let s = standby.status();
            if s.state.to_string() == "STANDBY" {
                Ok(())
            } else {
                Err(format!("{s:?}"))
            }
        });
        while let Ok(ev) = events.try_recv() {
            if ev.kind != "state" {
                continue;
            }
            assert_ne!(
                ev.to.map(|s| s.to_string()),
                Some("MASTER".to_string()),
                "false failover: {}",
                ev.text
            );
            if ev.to.map(|s| s.to_string()).as_deref() == Some("DISCOVERING") {
                excursions += 1;
            }
        }
        assert_eq!(master.status().state.to_string(), "MASTER");
        sim.with_sim(|s| s.link_up(leaf, up))
            .expect("sim")
            .expect("link up");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        excursions >= 1,
        "no pull cut the standby's route to the master: the test did not test anything"
    );
    let s = standby.status();
    assert_eq!(s.master_guid, master.status().guid, "{s:?}");
    master.shutdown();
    standby.shutdown();
}
