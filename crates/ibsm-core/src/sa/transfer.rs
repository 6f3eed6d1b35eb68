//! RMPP sending of GetTableResp answers (IBA 13.6), sans-IO.
//!
//! The SA does RMPP itself rather than leave it to the transport: ibsim's umad2sim
//! passes segments through untouched, and a kernel agent registered without RMPP
//! does too, so one code path serves both. A transfer starts with a window of one
//! segment (the receiver's first ACK opens it, IBA 13.6.2.3), each ACK moves the
//! window to its NewWindowLast, a window that is not acknowledged within
//! [`super::SaConfig::rmpp_timeout`] is sent again up to `rmpp_retries` times, and a
//! STOP or ABORT from the receiver ends it. A receiver that does no RMPP (saquery
//! under umad2sim) takes the first segment and never acknowledges; the transfer then
//! expires after its retries.

use std::collections::HashMap;
use std::time::Duration;

use ibsm_mad::sa::{RmppSegments, RmppType, SaMad};
use ibsm_mad::MadAddress;

/// A transfer is known by its receiver and the request's TID.
pub(super) type TransferKey = (u16, u32, u64);

#[derive(Debug)]
struct Transfer {
    to: MadAddress,
    template: SaMad,
    payload: Vec<u8>,
    count: u32,
    /// Highest segment acknowledged (0: none).
    acked: u32,
    /// Highest segment the receiver lets us send.
    window_last: u32,
    /// Highest segment sent.
    sent: u32,
    deadline: Duration,
    retries: u32,
}

/// What a transfer wants sent.
pub(super) struct Send {
    pub(super) to: MadAddress,
    pub(super) mad: SaMad,
}

/// The SA's RMPP transfers in flight.
#[derive(Debug, Default)]
pub(super) struct Transfers {
    map: HashMap<TransferKey, Transfer>,
    pub(super) completed: u64,
    pub(super) aborted: u64,
}

impl Transfers {
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Starts sending `payload` (a GetTableResp table) to `to`; queues its first
    /// window into `out`. A request retried with the same TID restarts its transfer.
    pub(super) fn start(
        &mut self,
        now: Duration,
        timeout: Duration,
        to: MadAddress,
        template: SaMad,
        payload: Vec<u8>,
        out: &mut Vec<Send>,
    ) -> Result<(), ibsm_mad::sa::SaError> {
        let count = RmppSegments::new(&template, &payload)?.segment_count();
        let key = (to.lid, to.qpn, template.header.tid);
        let t = Transfer {
            to,
            template,
            payload,
            count,
            acked: 0,
            window_last: 1,
            sent: 0,
            deadline: now + timeout,
            retries: 0,
        };
        self.map.insert(key, t);
        if let Some(t) = self.map.get_mut(&key) {
            send_window(t, out);
        }
        Ok(())
    }

    /// An RMPP ACK, STOP or ABORT from a receiver.
    pub(super) fn handle_control(
        &mut self,
        now: Duration,
        timeout: Duration,
        from: &MadAddress,
        mad: &SaMad,
        out: &mut Vec<Send>,
    ) {
        let key = (from.lid, from.qpn, mad.header.tid);
        let Some(t) = self.map.get_mut(&key) else {
            return;
        };
        match mad.rmpp.rmpp_type {
            RmppType::ACK => {
                let seg = mad.rmpp.seg_num().min(t.count);
                if seg < t.acked {
                    return;
                }
                t.acked = seg;
                t.window_last = mad.rmpp.new_window_last().clamp(seg, t.count).max(1);
                if t.acked >= t.count {
                    self.map.remove(&key);
                    self.completed += 1;
                    return;
                }
                t.retries = 0;
                t.deadline = now + timeout;
                send_window(t, out);
            }
            RmppType::STOP | RmppType::ABORT => {
                tracing::debug!(
                    lid = from.lid,
                    tid = mad.header.tid,
                    status = mad.rmpp.status,
                    "SA: the receiver ended an RMPP transfer"
                );
                self.map.remove(&key);
                self.aborted += 1;
            }
            _ => {}
        }
    }

    /// The earliest deadline.
    pub(super) fn poll_timeout(&self) -> Option<Duration> {
        self.map.values().map(|t| t.deadline).min()
    }

    /// Windows not acknowledged in time are sent again; spent ones are dropped.
    pub(super) fn handle_timeout(
        &mut self,
        now: Duration,
        timeout: Duration,
        retries: u32,
        out: &mut Vec<Send>,
    ) {
        let mut dead = Vec::new();
        for (k, t) in self.map.iter_mut() {
            if t.deadline > now {
                continue;
            }
            if t.retries >= retries {
                dead.push(*k);
                continue;
            }
            t.retries += 1;
            t.deadline = now + timeout;
            t.sent = t.acked;
            send_window(t, out);
        }
        for k in dead {
            self.map.remove(&k);
            self.aborted += 1;
        }
    }
}

fn send_window(t: &mut Transfer, out: &mut Vec<Send>) {
    let Ok(segs) = RmppSegments::new(&t.template, &t.payload) else {
        return;
    };
    while t.sent < t.window_last.min(t.count) {
        t.sent += 1;
        if let Some(mad) = segs.segment(t.sent) {
            out.push(Send { to: t.to, mad });
        }
    }
}
