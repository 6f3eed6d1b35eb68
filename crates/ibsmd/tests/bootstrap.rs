//! An SMInfo request that arrives while the instance is still reading its own port
//! (the blocking 0-hop NodeInfo/PortInfo bootstrap) is answered, not dropped.
//!
//! IsSM is set before the instance starts, so a master that sweeps at that moment
//! (OpenSM does, on the trap ibsim raises for the CapabilityMask change) asks our
//! SMInfo while we bootstrap. Dropped, that request is never answered: OpenSM under
//! umad2sim then waits for it forever and never hands over (seen as a flaky interop
//! test in CI). The device here hands the instance such a request before anything
//! else and records what the instance sends back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ibsm_mad::{AttributeId, DirectedRoute, Method, Smp, SmpRoute, MAD_SIZE};
use ibsm_transport::{MadDevice, ReceivedMad, SharedSim, SimDevice, TransportError};
use ibsmd::embedded::pick_ca_ports;
use ibsmd::{Instance, InstanceConfig};

const FOREIGN_TID: u64 = 0x0000_0000_1234_5678;

struct Injecting {
    inner: SimDevice,
    first: VecDeque<ReceivedMad>,
    answers: Arc<Mutex<Vec<Smp>>>,
}

impl MadDevice for Injecting {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        if let Ok(smp) = Smp::decode(mad) {
            if smp.attr_id == AttributeId::SM_INFO && smp.method == Method::GET_RESP {
                // The answer to the injected request: nobody on the fabric asked it.
                self.answers.lock().expect("lock").push(smp);
                return Ok(());
            }
        }
        self.inner.send(mad)
    }

    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        self.inner.send_lid(dlid, mad)
    }

    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        if let Some(r) = self.first.pop_front() {
            return Ok(Some(r));
        }
        self.inner.recv(timeout)
    }
}

/// SubnGet(SMInfo) by directed route as it arrives at the end of a 1-hop path (the
/// master sits behind our leaf switch's port 1).
fn foreign_sminfo_get() -> ReceivedMad {
    let mut smp = Smp::get_dr(&[1], AttributeId::SM_INFO, 0, FOREIGN_TID);
    if let SmpRoute::Directed(DirectedRoute {
        ref mut hop_ptr,
        hop_cnt,
        ..
    }) = smp.route
    {
        *hop_ptr = hop_cnt;
    }
    ReceivedMad::smp(smp.encode(), 0xFFFF)
}

#[test]
fn an_sminfo_get_during_bootstrap_is_answered() {
    let topo = ibsm_fabric::gen::fat_tree_2level(4).expect("small fat tree");
    let sim = SharedSim::new(&topo);
    let (node, port, _) = pick_ca_ports(&topo, 1).pop().expect("a CA port");
    let answers = Arc::new(Mutex::new(Vec::new()));
    let dev = Injecting {
        inner: sim.attach(node, port).expect("attach"),
        first: VecDeque::from([foreign_sminfo_get()]),
        answers: answers.clone(),
    };
    let inst = Instance::spawn(InstanceConfig::new("boot", 7), Box::new(dev), Box::new(()))
        .expect("instance");
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let found = answers
            .lock()
            .expect("lock")
            .iter()
            .find(|s| s.tid as u32 == FOREIGN_TID as u32)
            .cloned();
        if let Some(a) = found {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "the SMInfo request that arrived during bootstrap was never answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(answer.status, 0);
    let info: ibsm_mad::attr::SmInfo = answer.attribute().expect("SMInfo payload");
    // The instance publishes its status on its own schedule: under load the answer
    // can be seen before the status names the port.
    let deadline = Instant::now() + Duration::from_secs(10);
    while inst.status().guid == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        info.guid,
        inst.status().guid,
        "answered with our own SMInfo"
    );
    assert_eq!(info.priority, 7);
    inst.shutdown();
}
