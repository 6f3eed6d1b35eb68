//! The instance runtime under faults, on the embedded fabric:
//!
//! * a device that refuses to send some MADs: each is a failed MAD (counted in
//!   status and metrics), the instance thread carries on, becomes MASTER and keeps
//!   answering commands;
//! * a duplicate GUID in the fabric: an alarm in `GetStatus` (`Snapshot::alarms`),
//!   in the metrics and on the event stream, gone once the duplicate is.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::MAD_SIZE;
use ibsm_transport::{MadDevice, ReceivedMad, SharedSim, SimDevice, TransportError};
use ibsmd::Instance;

/// Refuses every `every`-th send once `after` sends went through.
struct Flaky {
    dev: SimDevice,
    sends: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    after: u64,
    every: u64,
}

impl Flaky {
    fn refuse(&self) -> bool {
        let n = self.sends.fetch_add(1, Ordering::Relaxed);
        let refuse = n >= self.after && n.is_multiple_of(self.every);
        if refuse {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        refuse
    }
}

impl MadDevice for Flaky {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        if self.refuse() {
            return Err(TransportError::Sim("injected send failure".into()));
        }
        self.dev.send(mad)
    }
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        if self.refuse() {
            return Err(TransportError::Sim("injected send failure".into()));
        }
        self.dev.send_lid(dlid, mad)
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        self.dev.recv(timeout)
    }
}

struct Detach(SharedSim, ibsm_sim::ClientId);

impl Drop for Detach {
    fn drop(&mut self) {
        let c = self.1;
        let _ = self.0.with_sim(|s| s.detach(c));
    }
}

fn attach_sm(sim: &SharedSim, node: NodeIdx, port: u8) -> (SimDevice, Detach) {
    let dev = sim.attach(node, port).expect("attach");
    let client = dev.client();
    sim.with_sim(|s| s.set_is_sm(client, true))
        .expect("sim")
        .expect("IsSM");
    (dev, Detach(sim.clone(), client))
}

fn first_ca(t: &Topology) -> NodeIdx {
    t.iter()
        .find(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .expect("a CA")
}

#[test]
fn a_send_error_is_a_failed_mad_not_the_end_of_the_instance() {
    let topo = ibsm_fabric::gen::fat_tree_2level(4).expect("fat tree");
    let sim = SharedSim::new(&topo);
    let (dev, keep) = attach_sm(&sim, first_ca(&topo), 1);
    let refused = Arc::new(AtomicU64::new(0));
    let flaky = Flaky {
        dev,
        sends: Arc::new(AtomicU64::new(0)),
        refused: Arc::clone(&refused),
        // The blocking start-up queries go through; then one send in 7 fails.
        after: 4,
        every: 7,
    };
    let cfg = common::quiet_master("sm1");
    let metrics = Arc::clone(&cfg.metrics);
    let inst = Instance::spawn(cfg, Box::new(flaky), Box::new(keep)).expect("spawn");
    common::subnet_up(&inst);
    let r = common::sweep(&inst, true);
    assert!(r.starts_with("master heavy sweep"), "{r}");
    assert!(inst.is_running(), "the instance thread ended");
    let s = inst.status();
    assert!(s.running);
    let n = refused.load(Ordering::Relaxed);
    assert!(n > 0, "no send was refused: the test proves nothing");
    assert_eq!(s.send_errors, n, "every refused send counted once");
    let text = ibsmd::metrics::render(&[("sm1".into(), metrics)]);
    assert!(
        text.contains(&format!("ibsm_mad_send_errors_total{{sm=\"sm1\"}} {n}")),
        "{text}"
    );
}

#[test]
fn a_duplicate_guid_is_an_alarm_in_status_metrics_and_events() {
    let mut topo = ibsm_fabric::gen::fat_tree_2level(4).expect("fat tree");
    let cas: Vec<NodeIdx> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    // A twin of the second CA (same NodeGUID and port GUIDs) on the third CA's cable.
    let (orig, displaced) = (cas[1], cas[2]);
    let (sw, sp) = topo.disconnect(displaced, 1).unwrap().unwrap();
    let mut twin = topo.node(orig).unwrap().clone();
    twin.name = "twin".into();
    let twin = topo.add_duplicate_node(twin).unwrap();
    topo.connect(twin, 1, sw, sp).unwrap();
    let guid = topo.node(orig).unwrap().node_guid;

    let sim = SharedSim::new(&topo);
    // Plugged in after the subnet is up, so the original holds its LID.
    sim.with_sim(|s| s.link_down(twin, 1)).unwrap().unwrap();
    let (dev, keep) = attach_sm(&sim, cas[0], 1);
    let cfg = common::quiet_master("sm1");
    let metrics = Arc::clone(&cfg.metrics);
    let inst = Instance::spawn(cfg, Box::new(dev), Box::new(keep)).expect("spawn");
    let mut events = inst.subscribe();
    common::subnet_up(&inst);
    assert!(
        inst.status().alarms.is_empty(),
        "{:?}",
        inst.status().alarms
    );
    let held = sim.with_sim(|s| s.port_lid(orig, 1)).unwrap().unwrap();
    assert_ne!(held, 0);

    sim.with_sim(|s| s.link_up(twin, 1)).unwrap().unwrap();
    let r = common::sweep(&inst, true);
    assert!(r.starts_with("master heavy sweep"), "{r}");
    let alarms = inst.status().alarms;
    assert_eq!(alarms.len(), 1, "{alarms:?}");
    assert!(
        alarms[0].contains("duplicate node GUID") && alarms[0].contains(&format!("{guid:#018x}")),
        "{alarms:?}"
    );
    let text = ibsmd::metrics::render(&[("sm1".into(), Arc::clone(&metrics))]);
    assert!(
        text.contains("ibsm_duplicate_guids{sm=\"sm1\"} 1"),
        "{text}"
    );
    let mut alarm_events = 0;
    while let Ok(e) = events.try_recv() {
        if e.kind == "alarm" && e.text.contains("duplicate") {
            alarm_events += 1;
        }
    }
    assert!(alarm_events >= 1, "no alarm on the event stream");
    // The LID rule on the fabric itself: the holder keeps it, the twin has none.
    assert_eq!(
        sim.with_sim(|s| s.port_lid(orig, 1)).unwrap().unwrap(),
        held
    );
    assert_eq!(sim.with_sim(|s| s.port_lid(twin, 1)).unwrap().unwrap(), 0);

    // Resolved (the twin unplugged): the alarm clears with the next sweep.
    sim.with_sim(|s| s.link_down(twin, 1)).unwrap().unwrap();
    let r = common::sweep(&inst, true);
    assert!(r.starts_with("master heavy sweep"), "{r}");
    let alarms = inst.status().alarms;
    assert!(alarms.is_empty(), "{alarms:?}");
    let text = ibsmd::metrics::render(&[("sm1".into(), metrics)]);
    assert!(
        text.contains("ibsm_duplicate_guids{sm=\"sm1\"} 0"),
        "{text}"
    );
}
