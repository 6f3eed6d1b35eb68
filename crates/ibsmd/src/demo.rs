//! `ibsmd demo`: three SM instances on one embedded fabric, each with its own gRPC
//! endpoint. They share one process because the embedded simulator is in-process
//! (each instance still has its own thread, device, agent and election, and talks to
//! the others only through SMPs on the simulated fabric).

use std::net::SocketAddr;
use std::sync::Arc;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_transport::{FabricSpec, SharedSim};
use tokio::sync::oneshot;

use crate::instance::{Instance, InstanceConfig};

/// Priorities of the demo's instances: distinct, so the expected master is obvious.
pub const DEMO_PRIORITIES: [u8; 3] = [10, 8, 6];

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
) -> anyhow::Result<Instance> {
    let dev = sim.attach(node, port)?;
    let client = dev.client();
    sim.with_sim(|s| s.set_is_sm(client, true))?
        .map_err(|e| anyhow::anyhow!("set IsSM: {e}"))?;
    let guard = SimClientGuard {
        sim: sim.clone(),
        client,
    };
    Instance::spawn(cfg, Box::new(dev), Box::new(guard))
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

/// One instance of the demo with its gRPC server.
pub struct Member {
    /// `sm1`, `sm2`, ...
    pub name: String,
    /// The CA it is attached to (node description).
    pub host: String,
    /// Its configured priority.
    pub priority: u8,
    /// Where its gRPC API listens.
    pub endpoint: SocketAddr,
    /// The instance.
    pub instance: Arc<Instance>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Member {
    /// Stop the instance and its gRPC server (a demo "kill").
    pub async fn kill(&mut self) {
        let inst = Arc::clone(&self.instance);
        let _ = tokio::task::spawn_blocking(move || inst.shutdown()).await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

/// The running demo.
pub struct Demo {
    /// The shared embedded fabric.
    pub sim: SharedSim,
    /// The instances, in priority order.
    pub members: Vec<Member>,
}

impl Demo {
    /// Start three instances on `spec` (an embedded fabric) with gRPC on
    /// 127.0.0.1:`base_port`..+2 (`base_port` 0: ephemeral ports, for tests).
    pub async fn start(spec: &FabricSpec, base_port: u16) -> anyhow::Result<Demo> {
        let topology = spec.topology()?.ok_or_else(|| {
            anyhow::anyhow!("the demo needs an embedded fabric (sim:NETFILE or gen:...), not umad")
        })?;
        let hosts = pick_ca_ports(&topology, DEMO_PRIORITIES.len());
        if hosts.len() < DEMO_PRIORITIES.len() {
            anyhow::bail!(
                "the fabric has {} CA ports with a cable; the demo needs {}",
                hosts.len(),
                DEMO_PRIORITIES.len()
            );
        }
        let sim = SharedSim::new(&topology);
        let mut members = Vec::new();
        for (i, ((node, port, host), prio)) in hosts.into_iter().zip(DEMO_PRIORITIES).enumerate() {
            let name = format!("sm{}", i + 1);
            let inst = Arc::new(spawn_on_sim(
                &sim,
                node,
                port,
                InstanceConfig::new(&name, prio),
            )?);
            let port_num = if base_port == 0 {
                0
            } else {
                base_port.checked_add(u16::try_from(i)?).ok_or_else(|| {
                    anyhow::anyhow!("--base-port {base_port} leaves no room for 3 ports")
                })?
            };
            let addr = SocketAddr::from(([127, 0, 0, 1], port_num));
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let (endpoint, serve) = crate::server::bind(Arc::clone(&inst), addr, async {
                let _ = stop_rx.await;
            })
            .await?;
            let server = tokio::spawn(serve);
            members.push(Member {
                name,
                host,
                priority: prio,
                endpoint,
                instance: inst,
                stop: Some(stop_tx),
                server: Some(server),
            });
        }
        Ok(Demo { sim, members })
    }

    /// Stop everything.
    pub async fn stop(&mut self) {
        for m in &mut self.members {
            m.kill().await;
        }
    }
}
