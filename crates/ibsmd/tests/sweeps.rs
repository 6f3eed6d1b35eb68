//! The MASTER's sweeps in the instance runtime, on the embedded fabric, counted on
//! the wire (a device wrapper counts SubnGet(NodeInfo), i.e. discovery walks):
//!
//! * start-up discovers the fabric once: the discovery made while DISCOVERING is
//!   handed to the configurator instead of walking the fabric again;
//! * `Sweep{heavy: false}` from the API runs a light sweep (no discovery), and
//!   `Sweep{heavy: true}` a heavy one;
//! * `master_heavy_sweep_interval` (`--heavy-sweep-interval-s`) sets the periodic
//!   heavy sweep, and 0 turns it off.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::{AttributeId, Method, MAD_SIZE};
use ibsm_transport::{
    run_discovery, DiscoverConfig, MadDevice, ReceivedMad, SharedSim, SimDevice, TransportError,
};
use ibsmd::embedded::pick_ca_ports;
use ibsmd::{Instance, InstanceConfig};

/// Counts the SubnGet(NodeInfo) a device sends.
struct Counting(SimDevice, Arc<AtomicU64>);

impl Counting {
    fn count(&self, mad: &[u8; MAD_SIZE]) {
        let attr = u16::from_be_bytes([mad[16], mad[17]]);
        if mad[3] == Method::GET.0 && attr == AttributeId::NODE_INFO.0 {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl MadDevice for Counting {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        self.count(mad);
        self.0.send(mad)
    }
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        self.count(mad);
        self.0.send_lid(dlid, mad)
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        self.0.recv(timeout)
    }
}

struct Detach(SharedSim, ibsm_sim::ClientId);

impl Drop for Detach {
    fn drop(&mut self) {
        let c = self.1;
        let _ = self.0.with_sim(|s| s.detach(c));
    }
}

fn spawn_counted(
    sim: &SharedSim,
    node: NodeIdx,
    port: u8,
    cfg: InstanceConfig,
) -> (Instance, Arc<AtomicU64>) {
    let dev = sim.attach(node, port).expect("attach");
    let client = dev.client();
    sim.with_sim(|s| s.set_is_sm(client, true))
        .expect("sim")
        .expect("IsSM");
    let n = Arc::new(AtomicU64::new(0));
    let inst = Instance::spawn(
        cfg,
        Box::new(Counting(dev, Arc::clone(&n))),
        Box::new(Detach(sim.clone(), client)),
    )
    .expect("spawn");
    (inst, n)
}

/// SubnGet(NodeInfo) of one discovery of `topo` from (`node`, `port`).
fn one_walk(topo: &Topology, node: NodeIdx, port: u8) -> u64 {
    let sim = SharedSim::new(topo);
    let n = Arc::new(AtomicU64::new(0));
    let mut dev = Counting(sim.attach(node, port).expect("attach"), Arc::clone(&n));
    let report = run_discovery(&mut dev, &DiscoverConfig::default()).expect("discovery");
    assert_eq!(report.result.topology.len(), topo.len());
    n.load(Ordering::Relaxed)
}

#[test]
fn start_up_discovers_the_fabric_once() {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let ports = pick_ca_ports(&topo, 1);
    let [(node, port, _)] = ports.as_slice() else {
        panic!("a CA port");
    };
    let walk = one_walk(&topo, *node, *port);
    let sim = SharedSim::new(&topo);
    let (master, node_infos) = spawn_counted(&sim, *node, *port, common::quiet_master("sm1"));
    common::subnet_up(&master);
    let sent = node_infos.load(Ordering::Relaxed);
    // One walk while DISCOVERING, the bootstrap's own NodeInfo, and no second walk.
    assert!(
        sent < 2 * walk,
        "{sent} SubnGet(NodeInfo) up to subnet up; one discovery is {walk}: the fabric was walked twice"
    );
    assert!(sent >= walk, "{sent} < {walk}");
}

#[test]
fn api_light_sweep_is_light_and_heavy_is_heavy() {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let ports = pick_ca_ports(&topo, 1);
    let [(node, port, _)] = ports.as_slice() else {
        panic!("a CA port");
    };
    let sim = SharedSim::new(&topo);
    let (master, node_infos) = spawn_counted(&sim, *node, *port, common::quiet_master("sm1"));
    common::subnet_up(&master);
    // Bringing links Active flips SwitchInfo.PortStateChange, which the first light
    // sweep may report as a change (and a heavy sweep follows): settle first.
    for _ in 0..3 {
        let r = common::sweep(&master, false);
        assert!(r.starts_with("master light sweep"), "{r}");
        if r.contains("no change") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let before = node_infos.load(Ordering::Relaxed);
    let r = common::sweep(&master, false);
    assert!(
        r.starts_with("master light sweep") && r.contains("no change"),
        "{r}"
    );
    assert_eq!(
        node_infos.load(Ordering::Relaxed),
        before,
        "a light sweep walked the fabric"
    );
    let r = common::sweep(&master, true);
    assert!(r.starts_with("master heavy sweep"), "{r}");
    assert!(node_infos.load(Ordering::Relaxed) > before);
}

#[test]
fn master_heavy_sweep_interval_is_honoured_and_zero_turns_it_off() {
    let topo = ibsm_fabric::gen::fat_tree_2level(4).expect("2-level fat tree");
    let ports = pick_ca_ports(&topo, 2);
    let [(n1, p1, _), (n2, p2, _)] = ports.as_slice() else {
        panic!("two CA ports");
    };
    // Two separate fabrics, one master each.
    let (sim_a, sim_b) = (SharedSim::new(&topo), SharedSim::new(&topo));
    let mut often = common::quiet_master("often");
    often.master_heavy_sweep_interval = Duration::from_millis(300);
    let (a, walks_a) = spawn_counted(&sim_a, *n1, *p1, often);
    let (b, walks_b) = spawn_counted(&sim_b, *n2, *p2, common::quiet_master("never"));
    common::subnet_up(&a);
    common::subnet_up(&b);
    let (a0, b0) = (
        walks_a.load(Ordering::Relaxed),
        walks_b.load(Ordering::Relaxed),
    );
    std::thread::sleep(Duration::from_secs(2));
    let walk = one_walk(&topo, *n1, *p1);
    let a_walks = (walks_a.load(Ordering::Relaxed) - a0) / walk;
    assert!(
        a_walks >= 3,
        "interval 300 ms: only {a_walks} heavy sweeps in 2 s"
    );
    assert_eq!(
        walks_b.load(Ordering::Relaxed),
        b0,
        "interval 0: the master swept heavy with nothing changed"
    );
}
