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
//! expires after its retries. The last segment is written short (the header and the
//! data it carries, see `ibsm_mad::sa`'s RMPP doc), every other one whole.

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

/// What a transfer wants sent: a segment and how many bytes of its encoding to
/// write (256, or less for the last segment: [`RmppSegments::wire_len`]).
pub(super) struct Send {
    pub(super) to: MadAddress,
    pub(super) mad: SaMad,
    pub(super) len: usize,
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
        if let (Some(mad), Some(len)) = (segs.segment(t.sent), segs.wire_len(t.sent)) {
            out.push(Send { to: t.to, mad, len });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_mad::sa::{SaAttributeId, SaStatus};
    use ibsm_mad::Method;

    const T: Duration = Duration::from_millis(200);

    fn template(tid: u64) -> SaMad {
        let req = SaMad::new(Method::GET_TABLE, SaAttributeId::MC_MEMBER_RECORD, tid);
        let mut t = req.response(Method::GET_TABLE_RESP, SaStatus::SUCCESS);
        t.attribute_offset = 7;
        t
    }

    /// The requester every test transfer goes to.
    const TO: MadAddress = MadAddress::gsi(7);

    /// A transfer of `payload` to [`TO`] started at time 0, and what it sent first.
    fn started(payload: Vec<u8>) -> (Transfers, Vec<Send>) {
        let mut ts = Transfers::default();
        let mut out = Vec::new();
        ts.start(Duration::ZERO, T, TO, template(9), payload, &mut out)
            .unwrap();
        (ts, out)
    }

    /// The bytes written for one segment.
    fn wire(s: &Send) -> Vec<u8> {
        s.mad.encode()[..s.len].to_vec()
    }

    /// The RMPP header of a DATA segment: version 1, type DATA, RRespTime 0 with
    /// `flags`, status 0, SegmentNumber, PayloadLength (IBA 13.6.2.1).
    fn rmpp_header(flags: u8, seg: u32, payload_length: u32) -> Vec<u8> {
        let mut h = vec![1, 1, flags, 0];
        h.extend_from_slice(&seg.to_be_bytes());
        h.extend_from_slice(&payload_length.to_be_bytes());
        h
    }

    #[test]
    fn a_table_of_one_segment_is_written_as_header_and_records() {
        // Two MCMemberRecords (56 bytes each): 112 data bytes, written as 56 + 112.
        let payload: Vec<u8> = (0..112u8).map(|i| i + 1).collect();
        let (_ts, out) = started(payload.clone());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len, 168);
        let w = wire(&out[0]);
        assert_eq!(w.len(), 168);
        // Active | First | Last; PayloadLength = SA header (20) + 112.
        assert_eq!(w[24..36], rmpp_header(0x07, 1, 132)[..]);
        assert_eq!(w[56..], payload[..]);
    }

    #[test]
    fn only_the_last_segment_is_short() {
        // Five MCMemberRecords: 280 bytes, segments of 200 and 80.
        let payload: Vec<u8> = (0..280u32).map(|i| (i % 251) as u8 + 1).collect();
        let (mut ts, mut out) = started(payload.clone());
        assert_eq!(out.len(), 1, "a window of one");
        let first = wire(&out[0]);
        assert_eq!(first.len(), 256);
        // Active | First; PayloadLength = 280 + 2 SA headers.
        assert_eq!(first[24..36], rmpp_header(0x03, 1, 320)[..]);
        assert_eq!(first[56..], payload[..200]);
        // The receiver ACKs segment 1 and opens the window to 2.
        let ack = out[0].mad.rmpp_ack(2);
        out.clear();
        ts.handle_control(Duration::ZERO, T, &TO, &ack, &mut out);
        assert_eq!(out.len(), 1);
        let last = wire(&out[0]);
        assert_eq!(last.len(), 56 + 80, "no zero padding after the last record");
        // Active | Last; PayloadLength = 20 + 80.
        assert_eq!(last[24..36], rmpp_header(0x05, 2, 100)[..]);
        assert_eq!(last[..24], first[..24], "the same common header");
        assert_eq!(last[36..56], first[36..56], "the same SA header");
        assert_eq!(last[56..], payload[200..]);
        // A resend after a timeout is the same short write.
        out.clear();
        ts.handle_timeout(Duration::from_secs(1), T, 3, &mut out);
        assert_eq!(out.iter().map(wire).collect::<Vec<_>>(), vec![last]);
    }

    #[test]
    fn an_empty_table_is_the_headers_alone() {
        let (_ts, out) = started(Vec::new());
        let w = wire(&out[0]);
        assert_eq!(w.len(), 56);
        assert_eq!(w[24..36], rmpp_header(0x07, 1, 20)[..]);
    }
}
