//! Faults on demand: a cable pulled or plugged back, a node powered off, a seeded
//! fraction of MADs lost, the latency of later deliveries.

use std::time::Duration;

use ibsm_fabric::NodeIdx;

use crate::error::SimError;
use crate::rng::SplitMix64;
use crate::state::{phys, pstate, NONE};

use super::simulator::Sim;

impl Sim {
    /// Pulls the cable of `node` `port` (1..=NumPorts): both ends go Down (Polling),
    /// SwitchInfo.PortStateChange is raised on switches at either end, and the link
    /// stays down (an SM setting PortState=Down cannot retrain it) until [`Sim::link_up`].
    pub fn link_down(&mut self, node: NodeIdx, port: u8) -> Result<(), SimError> {
        let idx = self.link_port(node, port)?;
        let remote = self.fabric.port(idx).map_or(NONE, |p| p.remote);
        for i in [idx, remote] {
            if let Some(p) = self.fabric.ports.get_mut(i as usize) {
                p.unplugged = true;
            }
        }
        self.fabric.link_fall(idx, phys::POLLING);
        tracing::debug!(node = node.0, port, "link down");
        Ok(())
    }

    /// Plugs the cable of `node` `port` back: the link trains to Init/LinkUp at both ends
    /// (unless an end is disabled or removed) and PortStateChange is raised.
    pub fn link_up(&mut self, node: NodeIdx, port: u8) -> Result<(), SimError> {
        let idx = self.link_port(node, port)?;
        let remote = self.fabric.port(idx).map_or(NONE, |p| p.remote);
        for i in [idx, remote] {
            if let Some(p) = self.fabric.ports.get_mut(i as usize) {
                p.unplugged = false;
            }
        }
        self.fabric.link_train(idx);
        tracing::debug!(node = node.0, port, "link up");
        Ok(())
    }

    /// Powers a node off: all its links go down and it answers nothing any more
    /// (requests to it and through it time out). Not reversible.
    pub fn remove_node(&mut self, node: NodeIdx) -> Result<(), SimError> {
        let rec = self.node_rec(node)?;
        let (first, num) = (rec.first_port, rec.num_ports);
        if let Some(n) = self.fabric.nodes.get_mut(node.as_usize()) {
            n.removed = true;
        }
        for p in 1..=u32::from(num) {
            let idx = first + p;
            if self
                .fabric
                .port(idx)
                .is_some_and(|h| h.state != pstate::DOWN)
            {
                self.fabric.link_fall(idx, phys::POLLING);
            }
        }
        tracing::debug!(node = node.0, "node removed");
        Ok(())
    }

    /// Drops a fraction `rate` (0.0..=1.0) of the MADs sent from now on, chosen by a
    /// PRNG seeded with `seed`: the same sends after the same `set_loss` lose the same MADs.
    pub fn set_loss(&mut self, rate: f64, seed: u64) -> Result<(), SimError> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(SimError::BadLossRate(rate));
        }
        self.loss_rate = rate;
        self.rng = SplitMix64::new(seed);
        Ok(())
    }

    /// Delay of deliveries caused by later sends.
    pub fn set_latency(&mut self, latency: Duration) {
        self.latency = latency;
    }
}
