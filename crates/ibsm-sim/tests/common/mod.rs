//! Shared helpers for the simulator tests.
#![allow(dead_code)]

use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::{AttributeId, Smp, SmpAttribute};
use ibsm_sim::{ClientId, Delivery, Sim, SimConfig};

pub const NET_2SW2PATH4HCA: &str = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca";

/// The ibsim example fabric: Switch1 and Switch2 joined by ports 3 and 5, Hca1/Hca3 on
/// Switch1 ports 1/2, Hca2/Hca4 on Switch2 ports 1/2.
pub fn two_switch_topology() -> Topology {
    let text = std::fs::read_to_string(NET_2SW2PATH4HCA).unwrap_or_else(|e| {
        panic!("{NET_2SW2PATH4HCA} is needed (apt-get install ibsim-utils): {e}")
    });
    ibsm_fabric::netfile::parse(&text).expect("ibsim example net file parses")
}

pub fn node(topo: &Topology, name: &str) -> NodeIdx {
    topo.find_by_name(name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

pub struct Rig {
    pub topo: Topology,
    pub sim: Sim,
    pub now: Duration,
    tid: u64,
}

impl Rig {
    pub fn new() -> Rig {
        let topo = two_switch_topology();
        let sim = Sim::new(&topo, SimConfig::default());
        Rig {
            topo,
            sim,
            now: Duration::ZERO,
            tid: 0x1000,
        }
    }

    pub fn node(&self, name: &str) -> NodeIdx {
        node(&self.topo, name)
    }

    pub fn attach(&mut self, name: &str) -> ClientId {
        let n = self.node(name);
        self.sim.attach(n, 1).expect("attach")
    }

    pub fn next_tid(&mut self) -> u64 {
        self.tid += 1;
        self.tid
    }

    /// Sends and collects everything delivered within 1 ms of virtual time.
    pub fn exchange(&mut self, client: ClientId, mad: &[u8; 256]) -> Vec<Delivery> {
        self.sim.send(self.now, client, mad).expect("send accepted");
        self.drain()
    }

    pub fn exchange_to(&mut self, client: ClientId, dlid: u16, mad: &[u8; 256]) -> Vec<Delivery> {
        self.sim
            .send_to(self.now, client, dlid, mad)
            .expect("send accepted");
        self.drain()
    }

    pub fn drain(&mut self) -> Vec<Delivery> {
        self.now += Duration::from_millis(1);
        let mut out = Vec::new();
        while let Some(d) = self.sim.poll_delivery_from(self.now) {
            out.push(d);
        }
        out
    }

    /// DR request/response with exactly one answer, decoded.
    pub fn dr(&mut self, client: ClientId, req: Smp) -> Smp {
        let out = self.exchange(client, &req.encode());
        assert_eq!(out.len(), 1, "expected one answer to {:?}", req.attr_id);
        assert_eq!(out[0].client, client);
        Smp::decode(&out[0].mad).expect("response decodes")
    }

    pub fn dr_get(&mut self, client: ClientId, path: &[u8], attr: AttributeId, amod: u32) -> Smp {
        let tid = self.next_tid();
        self.dr(client, Smp::get_dr(path, attr, amod, tid))
    }

    pub fn dr_set<A: SmpAttribute>(
        &mut self,
        client: ClientId,
        path: &[u8],
        amod: u32,
        v: &A,
    ) -> Smp {
        let tid = self.next_tid();
        self.dr(client, Smp::set_dr_attr(path, amod, tid, v))
    }

    pub fn dr_set_raw(
        &mut self,
        client: ClientId,
        path: &[u8],
        attr: AttributeId,
        amod: u32,
        data: [u8; 64],
    ) -> Smp {
        let tid = self.next_tid();
        self.dr(client, Smp::set_dr(path, attr, amod, tid, data))
    }
}
