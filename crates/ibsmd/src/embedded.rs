//! Running an SM instance on the embedded fabric (`ibsm_transport::SharedSim`): which
//! CA ports to use, and attaching an instance to one as an SM port (IsSM set while it
//! runs, the client detached when its thread ends).
//!
//! Why a module of its own: `ibsmd --fabric sim:NETFILE|gen:...` ([`crate::open_fabric`])
//! needs it on the daemon's path, and so do the tests and the demo; it used to live in
//! the demo module, which made the daemon's fabric opening call into demo code.

use crate::error::DaemonError;
use ibsm_fabric::{NodeIdx, Topology};
use ibsm_transport::SharedSim;

use crate::instance::{Instance, InstanceConfig};

/// Detaches a simulator client when the instance thread ends: its port stops
/// advertising IsSM and SMPs for it go unanswered, as when an SM process dies.
struct SimClientGuard {
    sim: SharedSim,
    client: ibsm_sim::ClientId,
}

impl Drop for SimClientGuard {
    fn drop(&mut self) {
        let client = self.client;
        let _ = self.sim.with_sim(|s| {
            let _ = s.set_is_sm(client, false);
            s.detach(client)
        });
    }
}

/// Start an SM instance on CA port (`node`, `port`) of a shared simulator.
pub fn spawn_on_sim(
    sim: &SharedSim,
    node: NodeIdx,
    port: u8,
    cfg: InstanceConfig,
) -> Result<Instance, DaemonError> {
    spawn_on_sim_client(sim, node, port, cfg).map(|(inst, _)| inst)
}

/// [`spawn_on_sim`], also returning the simulator client, so a drill can cut the SM
/// off its port at once ([`ibsm_sim::Sim::detach`]) before it stops the thread.
pub fn spawn_on_sim_client(
    sim: &SharedSim,
    node: NodeIdx,
    port: u8,
    cfg: InstanceConfig,
) -> Result<(Instance, ibsm_sim::ClientId), DaemonError> {
    let dev = sim.attach(node, port)?;
    dev.register_gsi_class(ibsm_mad::sa::SA_CLASS.0)?;
    let client = dev.client();
    sim.with_sim(|s| s.set_is_sm(client, true))?
        .map_err(|e| DaemonError::SetIsSm(e.to_string()))?;
    let guard = SimClientGuard {
        sim: sim.clone(),
        client,
    };
    Ok((
        Instance::spawn(cfg, Box::new(dev), Box::new(guard))?,
        client,
    ))
}

/// `count` CA ports with a cable, spread over the fabric (first, middle, last...).
pub fn pick_ca_ports(topology: &Topology, count: usize) -> Vec<(NodeIdx, u8, String)> {
    let cas: Vec<(NodeIdx, u8, String)> = topology
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .filter_map(|(idx, n)| {
            n.physical_ports()
                .find(|(_, p)| p.remote.is_some())
                .map(|(p, _)| (idx, p, n.description.clone()))
        })
        .collect();
    if cas.len() <= count {
        return cas;
    }
    (0..count)
        .filter_map(|i| {
            let at = if count > 1 {
                i * (cas.len() - 1) / (count - 1)
            } else {
                0
            };
            cas.get(at).cloned()
        })
        .collect()
}
