//! [`MadDevice`] over the embedded simulator, with a real clock.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::{MadAddress, MAD_SIZE};
use ibsm_sim::{ClientId, Sim, SimConfig};

use crate::device::{gmp_class, MadDevice, ReceivedMad};
use crate::error::TransportError;

/// The simulator plus one mailbox per attached client.
struct Hub {
    sim: Sim,
    mailboxes: HashMap<ClientId, VecDeque<ReceivedMad>>,
}

impl Hub {
    /// Move everything the simulator has delivered by `now` into mailboxes.
    fn drain(&mut self, now: Duration) {
        while let Some(d) = self.sim.poll_delivery_from(now) {
            self.mailboxes
                .entry(d.client)
                .or_default()
                .push_back(ReceivedMad {
                    mad: d.mad,
                    from: d.from,
                });
        }
    }
}

struct Inner {
    hub: Mutex<Hub>,
    /// Signalled on every send, so a receiver waiting for a time that a new
    /// delivery beats wakes up.
    wake: Condvar,
    epoch: Instant,
}

/// One simulator shared by several [`SimDevice`]s (one per attached SM).
/// Cloning shares the same simulator.
#[derive(Clone)]
pub struct SharedSim {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SharedSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSim")
            .field("epoch", &self.inner.epoch)
            .finish_non_exhaustive()
    }
}

impl SharedSim {
    /// Simulate `topology`. Simulator time 0 is now.
    pub fn new(topology: &Topology) -> SharedSim {
        SharedSim::from_sim(Sim::new(topology, SimConfig::default()))
    }

    /// Share an already configured simulator. Its time 0 is now.
    pub fn from_sim(sim: Sim) -> SharedSim {
        SharedSim {
            inner: Arc::new(Inner {
                hub: Mutex::new(Hub {
                    sim,
                    mailboxes: HashMap::new(),
                }),
                wake: Condvar::new(),
                epoch: Instant::now(),
            }),
        }
    }

    /// Simulator time now.
    pub fn now(&self) -> Duration {
        self.inner.epoch.elapsed()
    }

    /// Attach a new SM endpoint at `port` of CA `node` and return its device.
    pub fn attach(&self, node: NodeIdx, port: u8) -> Result<SimDevice, TransportError> {
        let mut hub = self.lock()?;
        let client = hub
            .sim
            .attach(node, port)
            .map_err(|e| TransportError::Sim(e.to_string()))?;
        hub.mailboxes.entry(client).or_default();
        Ok(SimDevice {
            shared: self.clone(),
            client,
        })
    }

    /// Run `f` on the simulator (fault injection, inspection).
    pub fn with_sim<R>(&self, f: impl FnOnce(&mut Sim) -> R) -> Result<R, TransportError> {
        let mut hub = self.lock()?;
        Ok(f(&mut hub.sim))
    }

    fn lock(&self) -> Result<MutexGuard<'_, Hub>, TransportError> {
        self.inner.hub.lock().map_err(|_| TransportError::Poisoned)
    }
}

/// One SM endpoint on a (possibly shared) embedded simulator.
#[derive(Debug)]
pub struct SimDevice {
    shared: SharedSim,
    client: ClientId,
}

impl SimDevice {
    /// Simulate `topology` with one SM attached at `port` of CA `node`.
    pub fn new(topology: &Topology, node: NodeIdx, port: u8) -> Result<SimDevice, TransportError> {
        SharedSim::new(topology).attach(node, port)
    }

    /// Simulate `topology` with the SM on the first CA port that has a cable
    /// (like ibsim's default `SIM_HOST`: the first CA).
    pub fn on_first_ca(topology: &Topology) -> Result<SimDevice, TransportError> {
        let (node, port) = first_connected_ca_port(topology).ok_or_else(|| {
            TransportError::Sim(
                "the topology has no CA port with a cable to attach an SM to".into(),
            )
        })?;
        SimDevice::new(topology, node, port)
    }

    /// The simulator this device is attached to.
    pub fn shared(&self) -> &SharedSim {
        &self.shared
    }

    /// This device's client id in the simulator.
    pub fn client(&self) -> ClientId {
        self.client
    }

    /// Take GMP requests of `class` (e.g. 0x03, Subnet Administration) sent to QP1 of
    /// this device's port, like a umad GSI agent ([`ibsm_sim::Sim::register_gsi_class`]:
    /// one client per port and class). Sending GMPs and receiving answers to them needs
    /// no registration.
    pub fn register_gsi_class(&self, class: u8) -> Result<(), TransportError> {
        let mut hub = self.shared.lock()?;
        hub.sim
            .register_gsi_class(self.client, class)
            .map_err(|e| TransportError::Sim(e.to_string()))
    }
}

impl SimDevice {
    fn send_inner(&mut self, to: To<'_>, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        let now = self.shared.now();
        let mut hub = self.shared.lock()?;
        let sent = match to {
            To::Path => hub.sim.send(now, self.client, mad),
            To::Lid(dlid) => hub.sim.send_to(now, self.client, dlid, mad),
            To::Gmp(addr) => hub.sim.send_gmp(now, self.client, addr, mad),
        };
        drop(hub);
        self.shared.inner.wake.notify_all();
        sent.map_err(|e| TransportError::Sim(e.to_string()))
    }
}

/// How a MAD leaves a [`SimDevice`].
#[derive(Debug, Clone, Copy)]
enum To<'a> {
    /// Directed route, or the answer to a LID-routed request handed to us.
    Path,
    /// LID-routed SMP.
    Lid(u16),
    /// GMP to a full address.
    Gmp(&'a MadAddress),
}

/// The first CA (in node order) and its first port with a cable.
pub(crate) fn first_connected_ca_port(topology: &Topology) -> Option<(NodeIdx, u8)> {
    topology.iter().find_map(|(idx, node)| {
        if node.is_switch() {
            return None;
        }
        node.physical_ports()
            .find(|(_, p)| p.remote.is_some())
            .map(|(p, _)| (idx, p))
    })
}

impl MadDevice for SimDevice {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        self.send_inner(To::Path, mad)
    }

    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        self.send_inner(To::Lid(dlid), mad)
    }

    /// A MAD shorter than 256 bytes is padded with zeros, as a kernel pads it on the
    /// wire.
    fn send_gmp(&mut self, to: &MadAddress, mad: &[u8]) -> Result<(), TransportError> {
        gmp_class(mad)?;
        let mut whole = [0u8; MAD_SIZE];
        whole[..mad.len()].copy_from_slice(mad);
        self.send_inner(To::Gmp(to), &whole)
    }

    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        let inner = &self.shared.inner;
        let deadline = inner.epoch.elapsed().saturating_add(timeout);
        let mut hub = self.shared.lock()?;
        loop {
            let now = inner.epoch.elapsed();
            hub.drain(now);
            if let Some(mad) = hub
                .mailboxes
                .get_mut(&self.client)
                .and_then(VecDeque::pop_front)
            {
                return Ok(Some(mad));
            }
            if now >= deadline {
                return Ok(None);
            }
            let until = hub.sim.poll_timeout().map_or(deadline, |t| t.min(deadline));
            let wait = until.saturating_sub(now).max(Duration::from_micros(1));
            hub = inner
                .wake
                .wait_timeout(hub, wait)
                .map_err(|_| TransportError::Poisoned)?
                .0;
        }
    }
    /// The same simulator client: MADs sent on either handle leave the same port; only
    /// one of them should receive (they share one mailbox).
    fn try_share(&self) -> Option<Box<dyn MadDevice + Send>> {
        Some(Box::new(SimDevice {
            shared: self.shared.clone(),
            client: self.client,
        }))
    }
}
