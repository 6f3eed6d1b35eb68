//! The public simulator: clients, `send`, routing, the delivery queue and faults.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::{AttributeId, Method, PhysPortState, PortState};

use crate::error::SimError;
use crate::rng::SplitMix64;
use crate::sma::SmaAction;
use crate::state::{phys, pstate, Fabric, NONE};
use crate::wire::{self, Mad};

/// The permissive LID (IBA 4.1.2).
const PERMISSIVE: u16 = 0xFFFF;
/// How many requests handed to clients are remembered so that their answers reach
/// the right requester (several clients may share a port).
const FORWARD_MEMORY: usize = 1024;

/// Knobs of the simulated devices. `Default` gives a fabric like ibsim's with the
/// capacities of a current switch ASIC.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// SwitchInfo.LinearFDBCap (LFT entries per switch).
    pub linear_fdb_cap: u16,
    /// SwitchInfo.MulticastFDBCap (0 = no MulticastForwardingTable).
    pub multicast_fdb_cap: u16,
    /// NodeInfo.PartitionCap (P_Key entries of CA ports and switch port 0).
    pub partition_cap: u16,
    /// SwitchInfo.PartitionEnforcementCap (P_Key entries of switch external ports; 0 = none).
    pub partition_enforcement_cap: u16,
    /// PortInfo.GUIDCap (GUIDInfo entries of CA ports and switch port 0).
    pub guid_cap: u8,
    /// PortInfo.MTUCap (IBA encoding: 1 = 256 ... 5 = 4096).
    pub mtu_cap: u8,
    /// PortInfo.VLCap (IBA encoding: 1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7).
    pub vl_cap: u8,
    /// PortInfo.VLArbitrationHighCap of link ports (entries of the high-priority
    /// table; VLArbitration blocks 3 and, above 32, 4 exist).
    pub vl_arb_high_cap: u8,
    /// PortInfo.VLArbitrationLowCap of link ports (blocks 1 and, above 32, 2).
    pub vl_arb_low_cap: u8,
    /// PortInfo.RespTimeValue.
    pub resp_time_value: u8,
    /// SwitchInfo.LifeTimeValue at power-on.
    pub life_time_value: u8,
    /// Delay between `send` and the delivery of what it causes (response, or the
    /// request handed to another client). Changed later with [`Sim::set_latency`].
    pub latency: Duration,
    /// Switch hops after which a LID-routed packet is dropped (routing loops).
    pub max_lid_hops: u16,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            linear_fdb_cap: 49152,
            multicast_fdb_cap: 1024,
            partition_cap: 128,
            partition_enforcement_cap: 32,
            guid_cap: 8,
            mtu_cap: 5,
            vl_cap: 4,
            vl_arb_high_cap: 8,
            vl_arb_low_cap: 8,
            resp_time_value: 8,
            life_time_value: 18,
            latency: Duration::from_micros(2),
            max_lid_hops: 64,
        }
    }
}

/// An SM's endpoint (umad + issm) on a CA port, handed out by [`Sim::attach`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u32);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client#{}", self.0)
    }
}

/// A MAD handed to a client, with the source LID of the packet that carried it
/// (LRH SLID; [`PERMISSIVE_LID`](ibsm_mad::PERMISSIVE_LID) for directed-route SMPs).
#[derive(Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The receiving client.
    pub client: ClientId,
    /// LRH SLID: where a LID-routed answer must go (see [`Sim::send_to`]).
    pub slid: u16,
    /// The MAD.
    pub mad: [u8; 256],
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("client", &self.client)
            .field("slid", &self.slid)
            .field("method", &Method(self.mad[wire::METHOD]))
            .field("attr", &AttributeId(wire::rd16(&self.mad, wire::ATTR_ID)))
            .finish_non_exhaustive()
    }
}

/// Counters of what happened to MADs, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// MADs accepted by `send`/`send_to`.
    pub sent: u64,
    /// Requests answered by a simulated SMA.
    pub sma_responses: u64,
    /// Requests (SMInfo, traps) handed to the client at their destination port.
    pub forwarded_to_clients: u64,
    /// MADs handed out by `poll_delivery`.
    pub delivered: u64,
    /// Dropped by `set_loss`.
    pub dropped_loss: u64,
    /// Dropped at a port whose link is not up, or a removed node.
    pub dropped_link: u64,
    /// LID-routed and dropped: no LFT entry, DLID beyond LinearFDBTop, DLID not the
    /// receiving port's, or a loop.
    pub dropped_unrouted: u64,
    /// Directed route leads nowhere (a CA in the middle of the path, a port that does not exist).
    pub dropped_bad_path: u64,
    /// Reached a port with no client to take it (SMInfo/trap/response).
    pub dropped_no_client: u64,
    /// Consumed without an answer (TrapRepress).
    pub consumed: u64,
    /// Discarded by an SMA because the M_Key check failed (IBA 14.2.4).
    pub dropped_m_key: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drop {
    Link,
    Unrouted,
    BadPath,
}

#[derive(Debug, Clone)]
struct ClientRec {
    port: u32,
    attached: bool,
    is_sm: bool,
}

/// A request handed to a client: who asked, so that the answer finds its requester.
#[derive(Debug, Clone, Copy)]
struct Forwarded {
    tid: u64,
    responder: ClientId,
    requester: ClientId,
    requester_port: u32,
    requester_lid: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct QKey {
    due: Duration,
    seq: u64,
    slot: u32,
}

#[derive(Clone)]
struct Slot {
    client: ClientId,
    slid: u16,
    mad: Mad,
}

/// The embedded fabric. See the crate documentation. `Clone` gives an independent
/// copy (fabric, queue, PRNG state), handy for snapshotting a scenario.
#[derive(Clone)]
pub struct Sim {
    fabric: Fabric,
    cfg: SimConfig,
    clients: Vec<ClientRec>,
    queue: BinaryHeap<Reverse<QKey>>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    seq: u64,
    latency: Duration,
    loss_rate: f64,
    rng: SplitMix64,
    forwarded: VecDeque<Forwarded>,
    stats: SimStats,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("nodes", &self.fabric.nodes.len())
            .field("ports", &self.fabric.ports.len())
            .field("clients", &self.clients.len())
            .field("queued", &self.queue.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// Builds the fabric: every cabled port trained to Init/LinkUp, LIDs as the topology
    /// carries them (usually 0), no forwarding tables, no clients.
    pub fn new(topology: &Topology, config: SimConfig) -> Sim {
        let fabric = Fabric::build(topology, &config);
        tracing::debug!(
            nodes = fabric.nodes.len(),
            ports = fabric.ports.len(),
            switches = fabric.switches.len(),
            "simulated fabric built"
        );
        Sim {
            fabric,
            latency: config.latency,
            cfg: config,
            clients: Vec::new(),
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            seq: 0,
            loss_rate: 0.0,
            rng: SplitMix64::new(0),
            forwarded: VecDeque::with_capacity(FORWARD_MEMORY),
            stats: SimStats::default(),
        }
    }

    // ---- clients -------------------------------------------------------------------

    /// Attaches an SM endpoint (umad) to CA/router port `port` of `node`. Several clients
    /// may share a port: SMA responses go to the client that sent the request, SMInfo
    /// requests and traps to the port's SM (IsSM set), else to the first attached.
    pub fn attach(&mut self, node: NodeIdx, port: u8) -> Result<ClientId, SimError> {
        let idx = self.user_port(node, port)?;
        let rec = self.node_rec(node)?;
        if rec.switch != NONE || port == 0 {
            return Err(SimError::NotCaPort { node, port });
        }
        if rec.removed {
            return Err(SimError::NodeRemoved(node));
        }
        let id = u32::try_from(self.clients.len()).map_err(|_| SimError::TooManyClients)?;
        self.clients.push(ClientRec {
            port: idx,
            attached: true,
            is_sm: false,
        });
        tracing::debug!(client = id, node = node.0, port, "client attached");
        Ok(ClientId(id))
    }

    /// Detaches a client (its process died or closed umad): clears its IsSM and drops
    /// what is still queued for it.
    pub fn detach(&mut self, client: ClientId) -> Result<(), SimError> {
        self.set_is_sm(client, false)?;
        if let Some(c) = self.clients.get_mut(client.0 as usize) {
            c.attached = false;
        }
        Ok(())
    }

    /// Sets or clears PortInfo.CapabilityMask.IsSM of the client's port, like opening or
    /// closing `/dev/infiniband/issmN`. The bit stays set while any client of the port holds it.
    pub fn set_is_sm(&mut self, client: ClientId, is_sm: bool) -> Result<(), SimError> {
        let port = self.client_rec(client)?.port;
        if let Some(c) = self.clients.get_mut(client.0 as usize) {
            c.is_sm = is_sm;
        }
        let any = self
            .clients
            .iter()
            .any(|c| c.attached && c.port == port && c.is_sm);
        if let Some(pi) = self.fabric.port_info.get_mut(port as usize) {
            pi.capability_mask.set(ibsm_mad::CapabilityMask::IS_SM, any);
        }
        Ok(())
    }

    /// The (node, port) a client is attached to.
    pub fn client_port(&self, client: ClientId) -> Result<(NodeIdx, u8), SimError> {
        let c = self.client_rec(client)?;
        let p = self
            .fabric
            .port(c.port)
            .ok_or(SimError::UnknownClient(client))?;
        Ok((NodeIdx(p.node), p.num))
    }

    // ---- sending -------------------------------------------------------------------

    /// The client sends one MAD (exactly 256 bytes) out of its port at time `now`.
    ///
    /// * Directed-route SMPs follow IBA 14.2.2 (hop pointer, initial and return paths);
    ///   a request must have HopPointer 0, D = 0, DrSLID = DrDLID = 0xFFFF, and, when
    ///   HopCount > 0, InitialPath\[1\] equal to the client's port. A client answering a
    ///   request it was handed sends it back with D = 1 and the HopPointer it received
    ///   (HopCount + 1), or 0 as ibsim's clients do.
    /// * LID-routed SMPs need a destination LID: use [`Sim::send_to`]. `send` accepts one
    ///   only when it answers a LID-routed request this client was handed (the answer
    ///   goes to that request's SLID).
    ///
    /// `Err` only for malformed input; undeliverable MADs vanish as on a fabric.
    pub fn send(&mut self, now: Duration, client: ClientId, mad: &[u8]) -> Result<(), SimError> {
        self.send_inner(now, client, None, mad)
    }

    /// [`Sim::send`] with the LRH DLID of a LID-routed SMP (ignored for directed route).
    pub fn send_to(
        &mut self,
        now: Duration,
        client: ClientId,
        dlid: u16,
        mad: &[u8],
    ) -> Result<(), SimError> {
        self.send_inner(now, client, Some(dlid), mad)
    }

    fn send_inner(
        &mut self,
        now: Duration,
        client: ClientId,
        dlid: Option<u16>,
        bytes: &[u8],
    ) -> Result<(), SimError> {
        let port = self.client_rec(client)?.port;
        let m: &Mad = bytes
            .try_into()
            .map_err(|_| SimError::BadLength { got: bytes.len() })?;
        let mut m = *m;
        if m[wire::BASE_VERSION] != 1 {
            return Err(bad_header(
                "BaseVersion",
                m[wire::BASE_VERSION],
                "must be 1",
            ));
        }
        let class = m[wire::MGMT_CLASS];
        if class != 0x01 && class != 0x81 {
            return Err(bad_header(
                "MgmtClass",
                class,
                "the simulator carries subnet management only (0x01 LID-routed, 0x81 directed route)",
            ));
        }
        if m[wire::CLASS_VERSION] != 1 {
            return Err(bad_header(
                "ClassVersion",
                m[wire::CLASS_VERSION],
                "must be 1",
            ));
        }
        let method = Method(m[wire::METHOD]);
        // TrapRepress answers a Trap: like Linux's ib_response_mad, treat it as a
        // response, so a directed-route TrapRepress travels the return path with D = 1.
        let is_resp = method.is_response() || method == Method::TRAP_REPRESS;
        if method.is_response() && method != Method::GET_RESP {
            return Err(bad_header(
                "Method",
                method.0,
                "the only SMP response methods are GetResp (0x81) and TrapRepress (0x07)",
            ));
        }
        let directed = class == 0x81;
        // Validate completely before anything (loss included) can happen.
        let lid_dest = if directed {
            self.check_dr(port, &m, is_resp)?;
            PERMISSIVE
        } else {
            match (dlid, is_resp) {
                (Some(d), _) => d,
                (None, true) => self
                    .reply_lid(client, wire_tid(&m))
                    .ok_or(SimError::Unsupported(
                        "a LID-routed SMP needs a destination LID: use send_to (no request with this TID was handed to this client)",
                    ))?,
                (None, false) => {
                    return Err(SimError::Unsupported(
                        "a LID-routed request needs a destination LID: use send_to",
                    ))
                }
            }
        };
        self.stats.sent += 1;
        if self.loss_rate > 0.0 && self.rng.next_f64() < self.loss_rate {
            self.stats.dropped_loss += 1;
            tracing::trace!(client = client.0, "MAD dropped by injected loss");
            return Ok(());
        }
        if directed {
            self.send_dr(now, client, port, &mut m, is_resp);
        } else {
            self.send_lid(now, client, port, lid_dest, &mut m, is_resp);
        }
        Ok(())
    }

    /// What an originator may put in a directed-route header (IBA 14.2.2, and ibsim's checks).
    fn check_dr(&self, port: u32, m: &Mad, is_resp: bool) -> Result<(), SimError> {
        let d = wire::direction(m);
        if d != is_resp {
            return Err(bad_dr(
                "D",
                u32::from(d),
                "the D bit must equal the method's response bit",
            ));
        }
        let (slid, dlid) = (wire::rd16(m, wire::DR_SLID), wire::rd16(m, wire::DR_DLID));
        if slid != PERMISSIVE || dlid != PERMISSIVE {
            return Err(SimError::Unsupported(
                "directed-route SMPs with LID-routed parts (DrSLID/DrDLID other than 0xFFFF)",
            ));
        }
        let n = m[wire::HOP_CNT];
        if n > 63 {
            return Err(bad_dr(
                "HopCount",
                u32::from(n),
                "exceeds the IBA maximum of 63",
            ));
        }
        let h = m[wire::HOP_PTR];
        let my_num = self.fabric.port(port).map_or(0, |p| p.num);
        if !is_resp {
            if h != 0 {
                return Err(bad_dr(
                    "HopPointer",
                    u32::from(h),
                    "must be 0 when a request is sent",
                ));
            }
            if n > 0 && wire::initial_path(m, 1) != my_num {
                return Err(bad_dr(
                    "InitialPath[1]",
                    u32::from(wire::initial_path(m, 1)),
                    "must be the port number the client sends from",
                ));
            }
        } else if n > 0 {
            if h != n + 1 && h != 0 {
                return Err(bad_dr(
                    "HopPointer",
                    u32::from(h),
                    "a response starts with the HopPointer of the request it answers (HopCount + 1) or 0",
                ));
            }
            if wire::return_path(m, n) != my_num {
                return Err(bad_dr(
                    "ReturnPath[HopCount]",
                    u32::from(wire::return_path(m, n)),
                    "must be the port the answered request arrived on",
                ));
            }
        } else if h > 1 {
            return Err(bad_dr(
                "HopPointer",
                u32::from(h),
                "a 0-hop response has HopPointer 0 or 1",
            ));
        }
        Ok(())
    }

    fn send_dr(&mut self, now: Duration, client: ClientId, port: u32, m: &mut Mad, is_resp: bool) {
        let n = m[wire::HOP_CNT];
        if !is_resp {
            // C14-9:1 (or C14-9:3 for a 0-hop SMP): the originator's SMI increments the pointer.
            m[wire::HOP_PTR] = 1;
            let arr = if n == 0 {
                Ok(port)
            } else {
                self.walk_out(m, port)
            };
            match arr {
                Ok(arr) => self.at_destination(now, client, arr, PERMISSIVE, m, true),
                Err(why) => self.dropped(why),
            }
        } else {
            let arr = if n == 0 {
                m[wire::HOP_PTR] = 0;
                Ok(port)
            } else {
                // C14-13:1: decrement, leave by ReturnPath[HopCount] (checked to be our port).
                m[wire::HOP_PTR] = n;
                self.walk_back(m, port)
            };
            match arr {
                Ok(arr) => self.deliver_response(now, None, arr, PERMISSIVE, m),
                Err(why) => self.dropped(why),
            }
        }
    }

    fn send_lid(
        &mut self,
        now: Duration,
        client: ClientId,
        port: u32,
        dlid: u16,
        m: &mut Mad,
        is_resp: bool,
    ) {
        let slid = self.fabric.port(port).map_or(0, |p| p.lid);
        match self.route_lid(port, dlid) {
            Ok(arr) if is_resp => self.deliver_response(now, None, arr, slid, m),
            Ok(arr) => self.at_destination(now, client, arr, slid, m, false),
            Err(why) => self.dropped(why),
        }
    }

    // ---- routing -------------------------------------------------------------------

    /// The port at the far end of the link out of `from`, if the link carries SMPs.
    #[inline]
    fn cross(&self, from: u32) -> Result<u32, Drop> {
        let p = self.fabric.ports.get(from as usize).ok_or(Drop::Link)?;
        if !p.link_up() {
            return Err(Drop::Link);
        }
        let r = self.fabric.ports.get(p.remote as usize).ok_or(Drop::Link)?;
        if !r.link_up()
            || self
                .fabric
                .nodes
                .get(r.node as usize)
                .is_none_or(|n| n.removed)
        {
            return Err(Drop::Link);
        }
        Ok(p.remote)
    }

    /// Outbound directed route (D = 0), IBA C14-9. `m` leaves port `from` with the
    /// HopPointer already incremented; returns the port where the SMP reaches its
    /// destination SMA (HopPointer = HopCount + 1, ReturnPath filled in).
    fn walk_out(&self, m: &mut Mad, mut from: u32) -> Result<u32, Drop> {
        let n = m[wire::HOP_CNT];
        loop {
            let arr = self.cross(from)?;
            let a = self.fabric.ports.get(arr as usize).ok_or(Drop::Link)?;
            let h = m[wire::HOP_PTR];
            wire::set_return_path(m, h, a.num);
            if h == n {
                m[wire::HOP_PTR] = n + 1;
                return Ok(arr);
            }
            if h > n {
                return Err(Drop::BadPath);
            }
            // C14-9:2: an intermediate hop must be a switch.
            let node = self.fabric.nodes.get(a.node as usize).ok_or(Drop::Link)?;
            if node.switch == NONE {
                return Err(Drop::BadPath);
            }
            let e = wire::initial_path(m, h + 1);
            if e == 0 || e > node.num_ports {
                return Err(Drop::BadPath);
            }
            m[wire::HOP_PTR] = h + 1;
            from = node.first_port + u32::from(e);
        }
    }

    /// Return trip (D = 1), IBA C14-13. `m` leaves `from` with the HopPointer already
    /// decremented; returns the port where it reaches its requester (HopPointer 0).
    fn walk_back(&self, m: &mut Mad, mut from: u32) -> Result<u32, Drop> {
        let n = m[wire::HOP_CNT];
        loop {
            let arr = self.cross(from)?;
            let h = m[wire::HOP_PTR];
            if h == 1 {
                // C14-13:3 with DrSLID permissive: hand to the SM.
                m[wire::HOP_PTR] = 0;
                return Ok(arr);
            }
            if h < 2 || h > n {
                return Err(Drop::BadPath);
            }
            let a = self.fabric.ports.get(arr as usize).ok_or(Drop::Link)?;
            let node = self.fabric.nodes.get(a.node as usize).ok_or(Drop::Link)?;
            if node.switch == NONE {
                return Err(Drop::BadPath);
            }
            let e = wire::return_path(m, h - 1);
            if e == 0 || e > node.num_ports {
                return Err(Drop::BadPath);
            }
            m[wire::HOP_PTR] = h - 1;
            from = node.first_port + u32::from(e);
        }
    }

    /// LID routing of a packet injected at port `from` (a CA port, or a switch's port 0)
    /// towards `dlid`, through the LFTs the SM has programmed. Returns the receiving
    /// port (for a switch: the port the packet entered by, or port 0 when injected there).
    fn route_lid(&self, from: u32, dlid: u16) -> Result<u32, Drop> {
        let f = &self.fabric;
        let p = f.ports.get(from as usize).ok_or(Drop::Link)?;
        let node = f.nodes.get(p.node as usize).ok_or(Drop::Link)?;
        if node.removed {
            return Err(Drop::Link);
        }
        // `at` is (switch node, port the packet entered by) while inside a switch.
        let mut at = if node.switch != NONE {
            Some((p.node, from))
        } else if dlid != PERMISSIVE && p.owns_lid(dlid) {
            // To our own LID: the HCA loops it back without touching the wire.
            return Ok(from);
        } else {
            None
        };
        let mut cur = from;
        let mut hops = 0u16;
        loop {
            if let Some((sn, entered)) = at {
                let n = f.nodes.get(sn as usize).ok_or(Drop::Link)?;
                let sw = f.switches.get(n.switch as usize).ok_or(Drop::Link)?;
                let own = f.ports.get(n.first_port as usize).map_or(0, |p0| p0.lid);
                if dlid == PERMISSIVE || (own != 0 && dlid == own) {
                    return Ok(entered);
                }
                let e = sw.lft_lookup(dlid).ok_or(Drop::Unrouted)?;
                if e == 0 {
                    return Ok(entered);
                }
                if e > n.num_ports {
                    return Err(Drop::Unrouted);
                }
                hops = hops.saturating_add(1);
                if hops > self.cfg.max_lid_hops || hops == u16::MAX {
                    return Err(Drop::Unrouted);
                }
                cur = n.first_port + u32::from(e);
            }
            let arr = self.cross(cur)?;
            let a = f.ports.get(arr as usize).ok_or(Drop::Link)?;
            let an = f.nodes.get(a.node as usize).ok_or(Drop::Link)?;
            if an.switch != NONE {
                at = Some((a.node, arr));
                continue;
            }
            if dlid == PERMISSIVE || a.owns_lid(dlid) {
                return Ok(arr);
            }
            return Err(Drop::Unrouted);
        }
    }

    // ---- destinations --------------------------------------------------------------

    /// A request reached port `arr`: the SMA answers it, or the port's SM client takes it.
    fn at_destination(
        &mut self,
        now: Duration,
        origin: ClientId,
        arr: u32,
        slid: u16,
        m: &mut Mad,
        directed: bool,
    ) {
        let Some(p) = self.fabric.port(arr).copied() else {
            return self.dropped(Drop::Link);
        };
        if self
            .fabric
            .nodes
            .get(p.node as usize)
            .is_none_or(|n| n.removed)
        {
            return self.dropped(Drop::Link);
        }
        let method = Method(m[wire::METHOD]);
        let attr = AttributeId(wire::rd16(m, wire::ATTR_ID));
        if attr == AttributeId::SM_INFO || method == Method::TRAP {
            // Not the SMA's business: the SM behind this port answers (ibsim does the same).
            let Some(cid) = self.client_at(arr) else {
                self.stats.dropped_no_client += 1;
                tracing::trace!(
                    port = arr,
                    ?attr,
                    "no SM client at the destination port; no answer"
                );
                return;
            };
            if self.forwarded.len() >= FORWARD_MEMORY {
                self.forwarded.pop_front();
            }
            let requester_port = self.clients.get(origin.0 as usize).map_or(NONE, |c| c.port);
            self.forwarded.push_back(Forwarded {
                tid: wire_tid(m),
                responder: cid,
                requester: origin,
                requester_port,
                requester_lid: slid,
            });
            self.stats.forwarded_to_clients += 1;
            self.enqueue(now, cid, slid, m);
            return;
        }
        let amod = wire::rd32(m, wire::ATTR_MOD);
        let m_key = wire::rd64(m, wire::M_KEY);
        let mut data = *wire::data(m);
        match self
            .fabric
            .sma(&self.cfg, now, arr, method, m_key, attr, amod, &mut data)
        {
            SmaAction::Consume => self.stats.consumed += 1,
            SmaAction::MKeyViolation => self.stats.dropped_m_key += 1,
            SmaAction::Respond(status) => {
                self.stats.sma_responses += 1;
                wire::set_data(m, &data);
                wire::make_response(m, directed, status);
                if directed {
                    let n = m[wire::HOP_CNT];
                    let back = if n == 0 {
                        m[wire::HOP_PTR] = 0;
                        Ok(arr)
                    } else {
                        // C14-13:1: leave by ReturnPath[HopCount], the port it came in by.
                        m[wire::HOP_PTR] = n;
                        self.walk_back(m, arr)
                    };
                    match back {
                        Ok(to) => self.deliver_response(now, Some(origin), to, PERMISSIVE, m),
                        Err(why) => self.dropped(why),
                    }
                } else {
                    // The answer goes to the request's SLID, from the responder's LID.
                    let node = self.fabric.nodes.get(p.node as usize);
                    let from = match node {
                        Some(n) if n.switch != NONE => n.first_port,
                        _ => arr,
                    };
                    let my_lid = self.fabric.port(from).map_or(0, |q| q.lid);
                    match self.route_lid(from, slid) {
                        Ok(to) => self.deliver_response(now, Some(origin), to, my_lid, m),
                        Err(why) => self.dropped(why),
                    }
                }
            }
        }
    }

    /// A response reached port `arr`: give it to the client waiting for it.
    fn deliver_response(
        &mut self,
        now: Duration,
        origin: Option<ClientId>,
        arr: u32,
        slid: u16,
        m: &Mad,
    ) {
        let tid = wire_tid(m);
        let at_port = |s: &Sim, c: ClientId| {
            s.clients
                .get(c.0 as usize)
                .is_some_and(|r| r.attached && r.port == arr)
        };
        let target = match origin {
            Some(c) if at_port(self, c) => Some(c),
            _ => {
                let pos = self
                    .forwarded
                    .iter()
                    .rposition(|f| f.tid == tid && f.requester_port == arr);
                match pos.and_then(|i| self.forwarded.remove(i)) {
                    Some(f) if at_port(self, f.requester) => Some(f.requester),
                    _ => self.client_at(arr),
                }
            }
        };
        match target {
            Some(c) => self.enqueue(now, c, slid, m),
            None => {
                self.stats.dropped_no_client += 1;
                tracing::trace!(port = arr, tid, "response reached a port without a client");
            }
        }
    }

    /// The client that takes unsolicited MADs at port `arr`: its SM, else the first attached.
    fn client_at(&self, arr: u32) -> Option<ClientId> {
        let mut first = None;
        for (i, c) in self.clients.iter().enumerate() {
            if c.attached && c.port == arr {
                let id = ClientId(u32::try_from(i).ok()?);
                if c.is_sm {
                    return Some(id);
                }
                first = first.or(Some(id));
            }
        }
        first
    }

    /// The SLID of the LID-routed request with `tid` handed to `client`.
    fn reply_lid(&self, client: ClientId, tid: u64) -> Option<u16> {
        self.forwarded
            .iter()
            .rev()
            .find(|f| f.tid == tid && f.responder == client)
            .map(|f| f.requester_lid)
    }

    fn dropped(&mut self, why: Drop) {
        match why {
            Drop::Link => self.stats.dropped_link += 1,
            Drop::Unrouted => self.stats.dropped_unrouted += 1,
            Drop::BadPath => self.stats.dropped_bad_path += 1,
        }
        tracing::trace!(?why, "MAD dropped in the fabric");
    }

    // ---- delivery queue ------------------------------------------------------------

    fn enqueue(&mut self, now: Duration, client: ClientId, slid: u16, m: &Mad) {
        let slot = Slot {
            client,
            slid,
            mad: *m,
        };
        let idx = match self.free_slots.pop() {
            Some(i) => {
                if let Some(s) = self.slots.get_mut(i as usize) {
                    *s = slot;
                }
                i
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let due = now.checked_add(self.latency).unwrap_or(Duration::MAX);
        self.queue.push(Reverse(QKey {
            due,
            seq: self.seq,
            slot: idx,
        }));
        self.seq += 1;
    }

    /// The next MAD due at or before `now`, with the client it is for. Deliveries come
    /// out in due-time order, ties in the order they were caused.
    pub fn poll_delivery(&mut self, now: Duration) -> Option<(ClientId, [u8; 256])> {
        self.poll_delivery_from(now).map(|d| (d.client, d.mad))
    }

    /// [`Sim::poll_delivery`] with the packet's source LID.
    pub fn poll_delivery_from(&mut self, now: Duration) -> Option<Delivery> {
        loop {
            let Reverse(k) = *self.queue.peek()?;
            if k.due > now {
                return None;
            }
            self.queue.pop();
            self.free_slots.push(k.slot);
            let s = self.slots.get(k.slot as usize)?;
            let (client, slid, mad) = (s.client, s.slid, s.mad);
            if !self
                .clients
                .get(client.0 as usize)
                .is_some_and(|c| c.attached)
            {
                continue;
            }
            self.stats.delivered += 1;
            return Some(Delivery { client, slid, mad });
        }
    }

    /// When the next queued delivery is due, if any.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.queue.peek().map(|Reverse(k)| k.due)
    }

    // ---- faults --------------------------------------------------------------------

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

    // ---- inspection (tests, harnesses) ----------------------------------------------

    /// Counters of what happened to MADs so far.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.fabric.nodes.len()
    }

    /// PortInfo.PortState of a port.
    pub fn port_state(&self, node: NodeIdx, port: u8) -> Result<PortState, SimError> {
        let idx = self.user_port(node, port)?;
        Ok(PortState::from(
            self.fabric.port(idx).map_or(0, |p| p.state),
        ))
    }

    /// PortInfo.PortPhysicalState of a port.
    pub fn phys_state(&self, node: NodeIdx, port: u8) -> Result<PhysPortState, SimError> {
        let idx = self.user_port(node, port)?;
        Ok(PhysPortState::from(
            self.fabric.port(idx).map_or(0, |p| p.phys),
        ))
    }

    /// PortInfo.LID of a port (switches: port 0 holds the switch LID).
    pub fn port_lid(&self, node: NodeIdx, port: u8) -> Result<u16, SimError> {
        let idx = self.user_port(node, port)?;
        Ok(self.fabric.port(idx).map_or(0, |p| p.lid))
    }

    /// The PortInfo a SubnGet would return for this port (LocalPortNum = `port`).
    pub fn port_info(&self, node: NodeIdx, port: u8) -> Result<ibsm_mad::PortInfo, SimError> {
        let idx = self.user_port(node, port)?;
        self.fabric
            .port_info_view(idx, idx)
            .ok_or(SimError::NoSuchPort {
                node,
                port,
                num_ports: 0,
            })
    }

    /// LinearForwardingTable entry of a switch for `lid` (None: not a switch, or unprogrammed).
    pub fn lft_entry(&self, node: NodeIdx, lid: u16) -> Option<u8> {
        let n = self.fabric.nodes.get(node.as_usize())?;
        let sw = self.fabric.switches.get(n.switch as usize)?;
        sw.lft.get(usize::from(lid)).copied().filter(|&p| p != 0xFF)
    }

    /// SwitchInfo.PortStateChange of a switch (None for non-switches).
    pub fn port_state_change(&self, node: NodeIdx) -> Option<bool> {
        let n = self.fabric.nodes.get(node.as_usize())?;
        self.fabric
            .switches
            .get(n.switch as usize)
            .map(|s| s.port_state_change)
    }

    /// Approximate heap bytes of the fabric state (nodes, ports, LFTs).
    pub fn heap_bytes(&self) -> usize {
        self.fabric.heap_bytes()
    }

    // ---- helpers -------------------------------------------------------------------

    fn node_rec(&self, node: NodeIdx) -> Result<&crate::state::NodeRec, SimError> {
        self.fabric
            .nodes
            .get(node.as_usize())
            .ok_or(SimError::UnknownNode(node))
    }

    /// Global index of (node, port), port 0..=NumPorts.
    fn user_port(&self, node: NodeIdx, port: u8) -> Result<u32, SimError> {
        let rec = self.node_rec(node)?;
        if port > rec.num_ports {
            return Err(SimError::NoSuchPort {
                node,
                port,
                num_ports: rec.num_ports,
            });
        }
        Ok(rec.first_port + u32::from(port))
    }

    /// Global index of a physical port (1..=NumPorts).
    fn link_port(&self, node: NodeIdx, port: u8) -> Result<u32, SimError> {
        let rec = self.node_rec(node)?;
        if port == 0 || port > rec.num_ports {
            return Err(SimError::NoSuchPort {
                node,
                port,
                num_ports: rec.num_ports,
            });
        }
        Ok(rec.first_port + u32::from(port))
    }

    fn client_rec(&self, client: ClientId) -> Result<&ClientRec, SimError> {
        self.clients
            .get(client.0 as usize)
            .filter(|c| c.attached)
            .ok_or(SimError::UnknownClient(client))
    }
}

fn wire_tid(m: &Mad) -> u64 {
    ibsm_mad::peek_tid(m).unwrap_or(0)
}

fn bad_header(field: &'static str, value: u8, why: &'static str) -> SimError {
    SimError::BadHeader {
        field,
        value: u32::from(value),
        why,
    }
}

fn bad_dr(field: &'static str, value: u32, why: &'static str) -> SimError {
    SimError::BadDirectedRoute { field, value, why }
}
