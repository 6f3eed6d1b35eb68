//! GMPs: General Services MADs (every class but the SMP classes 0x01 and 0x81, e.g.
//! Subnet Administration 0x03) from one client to another, on QP1.
//!
//! What travels and why it looks like this:
//!
//! * **LID routed, as data.** A GMP goes from the sender's port to the DLID through the
//!   LinearForwardingTables the SM programmed, exactly like a LID-routed SMP, except
//!   that it rides a data VL: every link it crosses must be Active at both ends (Init
//!   and Armed pass SMPs only). ibsim routes GMPs with the same LFT walk and the same
//!   Active check. Multicast DLIDs are refused ([`SimError::Unsupported`]): the
//!   simulator stores MulticastForwardingTables but does not forward by them (neither
//!   does ibsim).
//! * **QP1 and the keys.** Only QP1 (the GSI) is modelled. At the receiving port a GMP
//!   to QP1 must carry the GSI Q_Key, and its P_Key (the sender's P_Key table entry at
//!   the index it sent with) must match an entry of the receiving port's table (base
//!   values equal, not both limited members); otherwise it is dropped
//!   ([`SimStats::dropped_key`](crate::SimStats::dropped_key)), as a CA drops it.
//! * **Who takes it.** A request goes to the client of that port that registered its
//!   class ([`Sim::register_gsi_class`]), like the umad agent whose method mask holds
//!   it. ibsim instead gives QP1 requests only to the port's IsSM client; the kernel
//!   needs no IsSM, so neither does this. No taker for a Get or Set: the port answers
//!   with GetResp status 0x000C, as the Linux kernel's `generate_unmatched_resp`
//!   does; other methods vanish. A response goes to the client whose request (same
//!   TID, from that port, answered by its sender) was handed over, for every segment of
//!   a multi-packet (RMPP) answer: the record stays until it ages out.
//! * **Source address.** The receiver sees the sender's LID (base LID plus the path
//!   bits it chose), QPN 1 (every client sends from QP1, as every umad agent does; the
//!   answer goes back to QP1 and finds its requester by TID), the Q_Key and SL sent
//!   with, the DLID path bits, the receiving port's matching P_Key index, and, if the
//!   sender asked for a GRH, the sender's port GID.

use std::time::Duration;

use ibsm_mad::{GrhInfo, MadAddress, Method, GSI_QKEY};

use crate::error::SimError;
use crate::state::NONE;
use crate::wire::{self, Mad};

use super::simulator::{wire_tid, Drop, Forwarded, Sim, FORWARD_MEMORY};
use super::types::ClientId;

/// MAD status: the method/attribute combination is not supported.
const STATUS_UNSUPPORTED: u16 = 0x000C;
/// First multicast LID (IBA 4.1.2: 0xC000..=0xFFFE).
const FIRST_MLID: u16 = 0xC000;
/// Largest QP number (24 bits).
const MAX_QPN: u32 = 0x00FF_FFFF;

/// Where a GMP is going and what it carries, once the sender side is resolved.
#[derive(Debug, Clone, Copy)]
struct Outbound {
    origin: ClientId,
    origin_port: u32,
    slid: u16,
    pkey: u16,
}

impl Sim {
    /// The client sends one GMP (exactly 256 bytes, any class but 0x01/0x81) to `to` at
    /// time `now`: to `to.lid`, QP `to.qpn` (only QP1 has anyone behind it), with
    /// `to.qkey`, `to.sl`, the P_Key at `to.pkey_index` of the client's port, from its
    /// LID plus `to.path_bits`, with a GRH if `to.grh` is set. Requests and responses
    /// alike: a response is addressed to the request's [`Delivery::from`](crate::Delivery::from).
    ///
    /// `Err` only for malformed input (see [`SimError`]); a GMP that cannot be delivered
    /// vanishes as on a fabric and shows up in [`Sim::stats`].
    pub fn send_gmp(
        &mut self,
        now: Duration,
        client: ClientId,
        to: &MadAddress,
        mad: &[u8],
    ) -> Result<(), SimError> {
        let port = self.client_rec(client)?.port;
        let m: &Mad = mad
            .try_into()
            .map_err(|_| SimError::BadLength { got: mad.len() })?;
        if m[wire::BASE_VERSION] != 1 {
            return Err(SimError::BadHeader {
                field: "BaseVersion",
                value: u32::from(m[wire::BASE_VERSION]),
                why: "must be 1",
            });
        }
        let class = m[wire::MGMT_CLASS];
        if matches!(class, 0x01 | 0x81) {
            return Err(SimError::NotGmpClass(class));
        }
        check_address(to)?;
        self.stats.sent += 1;
        if self.loss_rate > 0.0 && self.rng.next_f64() < self.loss_rate {
            self.stats.dropped_loss += 1;
            tracing::trace!(client = client.0, "GMP dropped by injected loss");
            return Ok(());
        }
        let Some((slid, pkey)) = self.gmp_source(port, to) else {
            self.stats.dropped_key += 1;
            tracing::trace!(
                client = client.0,
                pkey_index = to.pkey_index,
                "GMP not sent: no valid P_Key at that index"
            );
            return Ok(());
        };
        let out = Outbound {
            origin: client,
            origin_port: port,
            slid,
            pkey,
        };
        match self.route_lid_data(port, to.lid) {
            Ok(arr) => self.gmp_arrive(now, out, arr, to, m),
            Err(why) => self.dropped(why),
        }
        Ok(())
    }

    /// The SLID (base LID plus the path bits within the LMC) and the P_Key a GMP leaves
    /// port `port` with; None when the P_Key table has no valid entry at the index.
    fn gmp_source(&self, port: u32, to: &MadAddress) -> Option<(u16, u16)> {
        let p = self.fabric.port(port)?;
        let mask = (1u16 << (p.lmc & 7)) - 1;
        let slid = if p.lid == 0 {
            0
        } else {
            p.lid | (u16::from(to.path_bits) & mask)
        };
        let pkey = self.pkey_entry(port, to.pkey_index)?;
        (pkey & 0x7FFF != 0).then_some((slid, pkey))
    }

    /// Entry `index` of the P_Key table of CA port or switch port 0 `port`.
    fn pkey_entry(&self, port: u32, index: u16) -> Option<u16> {
        if index >= self.cfg.partition_cap {
            return None;
        }
        Some(match self.fabric.tables.pkeys.get(&port) {
            Some(t) => t.get(usize::from(index)).copied().unwrap_or(0),
            None if index == 0 => 0xFFFF,
            None => 0,
        })
    }

    /// The index of the entry of `port`'s P_Key table that accepts a packet with `pkey`
    /// (same base, at least one of the two a full member).
    fn pkey_match(&self, port: u32, pkey: u16) -> Option<u16> {
        let accepts = |e: u16| e & 0x7FFF == pkey & 0x7FFF && (e | pkey) & 0x8000 != 0;
        (0..self.cfg.partition_cap).find(|&i| self.pkey_entry(port, i).is_some_and(accepts))
    }

    /// The GID of port `port` at GID index `index`: its GIDPrefix and the GUID at that
    /// GUIDInfo index (0: the hardwired port GUID).
    fn port_gid(&self, port: u32, index: u8) -> [u8; 16] {
        let prefix = self
            .fabric
            .port_info
            .get(port as usize)
            .map_or(0xFE80_0000_0000_0000, |pi| pi.gid_prefix);
        let guid = if index == 0 {
            self.fabric
                .guids_hw
                .get(port as usize)
                .copied()
                .unwrap_or(0)
        } else {
            self.fabric
                .tables
                .guids
                .get(&port)
                .and_then(|t| t.get(usize::from(index)).copied())
                .unwrap_or(0)
        };
        let mut gid = [0u8; 16];
        gid[..8].copy_from_slice(&prefix.to_be_bytes());
        gid[8..].copy_from_slice(&guid.to_be_bytes());
        gid
    }

    /// A GMP reached port `arr` (a CA port, or the port a switch was entered by).
    fn gmp_arrive(&mut self, now: Duration, out: Outbound, arr: u32, to: &MadAddress, m: &Mad) {
        let Some(node) = self
            .fabric
            .port(arr)
            .and_then(|p| self.fabric.nodes.get(p.node as usize))
        else {
            return self.dropped(Drop::Link);
        };
        if node.removed {
            return self.dropped(Drop::Link);
        }
        // A switch takes GMPs at its management port 0 (its LID, its P_Key table).
        let mgmt = if node.switch != NONE {
            node.first_port
        } else {
            arr
        };
        if to.qpn == 1 && to.qkey != GSI_QKEY {
            self.stats.dropped_key += 1;
            tracing::trace!(
                qkey = to.qkey,
                "GMP to QP1 with a Q_Key other than the GSI one"
            );
            return;
        }
        let Some(pkey_index) = self.pkey_match(mgmt, out.pkey) else {
            self.stats.dropped_key += 1;
            tracing::trace!(pkey = out.pkey, "GMP with a P_Key the receiving port lacks");
            return;
        };
        if to.qpn != 1 {
            // QP0 takes no GMP (the kernel filters them), and no other QP is modelled.
            self.stats.dropped_no_client += 1;
            tracing::trace!(qpn = to.qpn, "GMP to a QP other than QP1");
            return;
        }
        let path_bits = self.fabric.port(mgmt).map_or(0, |p| {
            if p.owns_lid(to.lid) {
                // owns_lid: to.lid - p.lid < 2^LMC <= 128.
                u8::try_from(to.lid - p.lid).unwrap_or(0)
            } else {
                0
            }
        });
        let from = MadAddress {
            lid: out.slid,
            qpn: 1,
            qkey: to.qkey,
            sl: to.sl,
            path_bits,
            pkey_index,
            grh: to.grh.map(|g| GrhInfo {
                gid: self.port_gid(out.origin_port, g.gid_index),
                gid_index: 0,
                ..g
            }),
        };
        let class = m[wire::MGMT_CLASS];
        let method = Method(m[wire::METHOD]);
        let tid = wire_tid(m);
        if !method.is_response() {
            match self.gsi_client_at(arr, class) {
                Some(c) => {
                    self.remember_gmp(tid, c, out);
                    self.stats.gmps_to_clients += 1;
                    self.enqueue(now, c, from, m);
                }
                None if method == Method::GET || method == Method::SET => {
                    self.unclaimed(now, out, mgmt, to, m);
                }
                None => {
                    self.stats.dropped_no_client += 1;
                    tracing::trace!(class, ?method, "GMP request nobody registered for");
                }
            }
            return;
        }
        let requester = self
            .forwarded
            .iter()
            .rev()
            .find(|f| f.gmp && f.tid == tid && f.requester_port == arr && f.responder == out.origin)
            .map(|f| f.requester)
            .filter(|c| {
                self.clients
                    .get(c.0 as usize)
                    .is_some_and(|r| r.attached && r.port == arr)
            });
        match requester {
            Some(c) => {
                self.stats.gmps_to_clients += 1;
                self.enqueue(now, c, from, m);
            }
            None => {
                self.stats.dropped_no_client += 1;
                tracing::trace!(tid, "GMP response nobody is waiting for");
            }
        }
    }

    /// Remember that the request `tid` from `out` was handed to `responder`, so that its
    /// answers (all segments of them) find the requester. A request repeated with the
    /// same TID (RMPP ACKs of one transfer, retries) is remembered once.
    fn remember_gmp(&mut self, tid: u64, responder: ClientId, out: Outbound) {
        let known = self.forwarded.iter().rev().take(16).any(|f| {
            f.gmp
                && f.tid == tid
                && f.responder == responder
                && f.requester == out.origin
                && f.requester_port == out.origin_port
        });
        if known {
            return;
        }
        if self.forwarded.len() >= FORWARD_MEMORY {
            self.forwarded.pop_front();
        }
        self.forwarded.push_back(Forwarded {
            tid,
            responder,
            requester: out.origin,
            requester_port: out.origin_port,
            requester_lid: out.slid,
            gmp: true,
        });
    }

    /// A Get/Set nobody at the port registered for: the port answers GetResp with
    /// status 0x000C (the Linux MAD layer's unmatched response), LID-routed back.
    fn unclaimed(&mut self, now: Duration, out: Outbound, mgmt: u32, to: &MadAddress, m: &Mad) {
        self.stats.gmps_unclaimed += 1;
        let mut resp = *m;
        resp[wire::METHOD] = Method::GET_RESP.0;
        wire::wr16(&mut resp, wire::STATUS, STATUS_UNSUPPORTED);
        let back = match self.route_lid_data(mgmt, out.slid) {
            Ok(back) => back,
            Err(why) => return self.dropped(why),
        };
        let waiting = self
            .clients
            .get(out.origin.0 as usize)
            .is_some_and(|c| c.attached && c.port == back);
        if !waiting {
            self.stats.dropped_no_client += 1;
            return;
        }
        let origin_lid = self.fabric.port(out.origin_port).map_or(0, |p| p.lid);
        let from = MadAddress {
            lid: to.lid,
            qpn: 1,
            qkey: GSI_QKEY,
            sl: to.sl,
            path_bits: u8::try_from(out.slid.saturating_sub(origin_lid)).unwrap_or(0),
            pkey_index: to.pkey_index,
            grh: None,
        };
        self.stats.gmps_to_clients += 1;
        self.enqueue(now, out.origin, from, &resp);
    }
}

/// What a GMP's destination address may hold.
fn check_address(to: &MadAddress) -> Result<(), SimError> {
    let bad = |field, value, why| Err(SimError::BadAddress { field, value, why });
    if to.lid == 0 {
        return bad("lid", 0, "LID 0 is reserved and addresses nobody");
    }
    if (FIRST_MLID..0xFFFF).contains(&to.lid) {
        return Err(SimError::Unsupported(
            "multicast GMPs: the simulator keeps MulticastForwardingTables but does not forward by them",
        ));
    }
    if to.qpn > MAX_QPN {
        return bad("qpn", to.qpn, "a QP number has 24 bits");
    }
    if to.sl > 15 {
        return bad("sl", u32::from(to.sl), "a service level has 4 bits");
    }
    if to.path_bits > 0x7F {
        return bad(
            "path_bits",
            u32::from(to.path_bits),
            "at most 7 path bits (LMC <= 7)",
        );
    }
    Ok(())
}
