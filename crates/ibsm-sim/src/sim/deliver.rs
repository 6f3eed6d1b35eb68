//! A MAD at its destination port: a request answered by the SMA (its response routed
//! back) or handed to the port's SM client (remembered, so the answer finds its
//! requester), a response given to the client waiting for it, drops counted; and the
//! delivery queue, in due-time order with ties in causal order, reusing its slots.

use std::cmp::Reverse;
use std::time::Duration;

use ibsm_mad::{AttributeId, Method};

use crate::sma::SmaAction;
use crate::state::NONE;
use crate::wire::{self, Mad};

use ibsm_mad::MadAddress;

use super::simulator::{wire_tid, Drop, Forwarded, QKey, Sim, Slot, FORWARD_MEMORY, PERMISSIVE};
use super::types::{smp_source, ClientId, Delivery};

impl Sim {
    /// A request reached port `arr`: the SMA answers it, or the port's SM client takes it.
    pub(super) fn at_destination(
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
                gmp: false,
            });
            self.stats.forwarded_to_clients += 1;
            self.enqueue(now, cid, smp_source(slid), m);
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
    pub(super) fn deliver_response(
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
                    .rposition(|f| !f.gmp && f.tid == tid && f.requester_port == arr);
                match pos.and_then(|i| self.forwarded.remove(i)) {
                    Some(f) if at_port(self, f.requester) => Some(f.requester),
                    _ => self.client_at(arr),
                }
            }
        };
        match target {
            Some(c) => self.enqueue(now, c, smp_source(slid), m),
            None => {
                self.stats.dropped_no_client += 1;
                tracing::trace!(port = arr, tid, "response reached a port without a client");
            }
        }
    }

    pub(super) fn dropped(&mut self, why: Drop) {
        match why {
            Drop::Link => self.stats.dropped_link += 1,
            Drop::Unrouted => self.stats.dropped_unrouted += 1,
            Drop::BadPath => self.stats.dropped_bad_path += 1,
        }
        tracing::trace!(?why, "MAD dropped in the fabric");
    }

    /// Queue `m` for `client` at `now + latency`, `from` being where it came from.
    pub(super) fn enqueue(&mut self, now: Duration, client: ClientId, from: MadAddress, m: &Mad) {
        let slot = Slot {
            client,
            from,
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
            let (client, from, mad) = (s.client, s.from, s.mad);
            if !self
                .clients
                .get(client.0 as usize)
                .is_some_and(|c| c.attached)
            {
                continue;
            }
            self.stats.delivered += 1;
            return Some(Delivery {
                client,
                slid: from.lid,
                from,
                mad,
            });
        }
    }

    /// When the next queued delivery is due, if any.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.queue.peek().map(|Reverse(k)| k.due)
    }
}
