//! Sending: what a client may put on the wire (the header and directed-route checks
//! of ibsim and the Linux SMI, all made before loss can drop anything), and a sent
//! MAD's first steps: out along its directed route or LID-routed to its DLID.

use std::time::Duration;

use ibsm_mad::Method;

use crate::error::SimError;
use crate::wire::{self, Mad};

use super::simulator::{wire_tid, Sim, PERMISSIVE};
use super::types::ClientId;

impl Sim {
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
                "send/send_to carry subnet management only (0x01 LID-routed, 0x81 directed route); other classes are GMPs: use send_gmp",
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
