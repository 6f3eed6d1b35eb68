//! # ibsm-sim: an embedded InfiniBand fabric for tests and drills
//!
//! `Sim` is an in-process fabric built from an [`ibsm_fabric::Topology`]: every node
//! has a subnet management agent (SMA) that answers SMPs with IBA semantics, every
//! switch forwards directed-route SMPs by their paths and LID-routed SMPs by the
//! forwarding tables the SM programmed, and faults (links down, dead nodes, loss,
//! latency) happen on demand. SMs attach as *clients* at CA ports, as they would open
//! `umad`/`issm` on a host.
//!
//! ## API in one breath
//!
//! `Sim::new(&topology, SimConfig)`; `attach(node, port) -> ClientId`, `detach`,
//! `set_is_sm(client, bool)`; `send(now, client, &mad)` (directed route, or the answer to
//! a LID-routed request the client was handed) and `send_to(now, client, dlid, &mad)`
//! (LID-routed); GMPs: `register_gsi_class(client, class)` (a QP1 agent, e.g. the SA's
//! class 0x03) and `send_gmp(now, client, &MadAddress, &mad)`;
//! `poll_delivery(now) -> Option<(ClientId, [u8; 256])>` or
//! `poll_delivery_from(now) -> Option<Delivery>` (adds the packet's SLID, needed to answer
//! LID-routed requests, and its whole source `MadAddress`, where a GMP's answer goes),
//! `poll_timeout()`; faults `link_down`/`link_up`/`remove_node`/
//! `set_loss(rate, seed)`/`set_latency`; inspection `stats`, `port_state`, `port_info`,
//! `lft_entry`, `mft_block`, `mft_ports`, `port_state_change`, `heap_bytes`; test support
//! `set_lft_entry` (an LFT entry as a SubnSet would write it) and `bring_up(sm_port)`
//! (LIDs, min-hop LFTs, Active links, MasterSMLID, as a master would leave the fabric,
//! without running one).
//!
//! ## Why sans-IO
//!
//! The simulator owns no thread, socket or clock. Time is a [`std::time::Duration`]
//! argument ("since the driver's epoch"): `send(now, ..)` computes everything a MAD
//! causes at once and queues the deliveries at `now + latency`; the driver asks
//! [`Sim::poll_timeout`] when the next one is due and drains [`Sim::poll_delivery`].
//! The same `Sim` therefore runs under a real-clock driver (`ibsm-transport`), under
//! a deterministic simulation that advances virtual time, and in unit tests, and it is
//! *deterministic*: the same calls give the same deliveries, drops included (loss uses
//! a seeded SplitMix64, the queue breaks time ties by a sequence number, and no hash
//! map is ever iterated).
//!
//! ## Memory layout
//!
//! A 3-level k=58 fat tree (~53k nodes, ~346k ports, 48k LIDs) must fit comfortably:
//! * nodes and ports are flat vectors; a node's ports are a contiguous run, so a port's
//!   index is `first_port + number` without lookups;
//! * routing reads only a 16-byte hot record per port (cable, LID/LMC, state); the full
//!   PortInfo image each port needs for Get/Set lives in a parallel "cold" vector;
//! * LinearForwardingTables are allocated lazily and only as far as the SM writes them,
//!   so an unprogrammed fabric costs nothing; rarely written tables (P_Key blocks,
//!   GUIDInfo, SLtoVL, VLArbitration, MFT) are sparse maps where defaults are never stored.
//!
//! ## Hot path
//!
//! A directed-route Get walks the packet in place (hop pointer, return path) in a
//! stack `[u8; 256]`; only the attribute is encoded through `ibsm-mad`. The delivery
//! queue reuses its slots, so steady-state sending allocates nothing.
//! `cargo bench -p ibsm-sim` prints SMPs/s for 0/2/4-hop NodeInfo and PortInfo.
//!
//! ## Semantics worth knowing
//!
//! * Directed route follows IBA 14.2.2 (C14-9, C14-13) with the checks of ibsim and the
//!   Linux SMI on what an originator sends: DrSLID = DrDLID = 0xFFFF (LID-routed DR
//!   parts are rejected as [`SimError::Unsupported`]), HopPointer 0, D = R bit,
//!   InitialPath\[1\] = the sending port. The SMA sees HopPointer = HopCount + 1, the
//!   requester gets the response with D = 1 and HopPointer 0.
//! * VL15 needs only a trained link: SMPs (directed or LID-routed) cross ports in Init,
//!   Armed or Active (IBA 7.2), never Down ones. LID-routed SMPs additionally need the
//!   LFT entries on the way (a fresh fabric routes nothing by LID) and DLIDs within
//!   LinearFDBTop; loops are cut after `max_lid_hops`.
//! * SMInfo (any method) and traps are not answered by the SMA: they go to the client
//!   at the destination port (its IsSM client first), as ibsim does; no client, no answer.
//!   That client's answer is routed back by the same rules and reaches the requester.
//! * GMPs (every class but 0x01/0x81) travel between clients on QP1, LID-routed through
//!   the programmed LFTs like LID-routed SMPs but only over Active links (data VLs);
//!   the receiving port checks the GSI Q_Key and the P_Key (the sender's table entry
//!   at its index against the receiver's table). A request goes to the port's client
//!   registered for its class (one per port, like a kernel's umad agent; no IsSM
//!   needed, unlike ibsim, which gives QP1 requests only to its IsSM client); a Get or
//!   Set nobody registered for is answered GetResp status 0x000C, as the Linux kernel
//!   answers it; a response goes to the client whose request (TID) it answers, every
//!   RMPP segment of it. The receiver learns the whole source [`ibsm_mad::MadAddress`]
//!   (LID, QPN 1, Q_Key, SL, path bits, matching P_Key index, GRH). No RMPP is done
//!   for anyone (nor by ibsim): segments are MADs like any other. The `gmp` module doc
//!   has the details.
//! * MulticastForwardingTable: Get/Set on switches with IBA semantics (AttributeModifier
//!   bits 31..28 = position of 16 ports, bits 8..0 = block of 32 MLIDs from 0xC000,
//!   32 big-endian 16-bit port masks), blocks up to SwitchInfo.MulticastFDBCap (1024
//!   by default, as ibsim), positions up to NumPorts / 16, anything else status 0x1C
//!   (ibsim instead reads zeros with status 0); stored per switch, read back with
//!   `mft_block`/`mft_ports`. Multicast is not forwarded (by ibsim neither): a GMP to an
//!   MLID is refused as unsupported.
//! * Port state machine: links train to Init; the SM moves Init->Armed->Active; Down
//!   bounces the link (both ends back to Init unless the cable is pulled or disabled);
//!   anything else is status 0x1C. Link events raise SwitchInfo.PortStateChange (write 1
//!   to clear).
//! * M_Key is checked as IBA 14.2.4 says (protection levels 0-3, M_Key hidden in
//!   PortInfo at level 1, silent discard, M_KeyViolations, lease period), unlike
//!   ibsim; the `mkey` module lists the rules. A discarded SMP counts in
//!   [`SimStats::dropped_m_key`].

mod error;
mod mkey;
mod rng;
mod sim;
mod sma;
mod state;
mod wire;

pub use error::SimError;
pub use sim::{BringUp, ClientId, Delivery, Sim, SimConfig, SimStats};
