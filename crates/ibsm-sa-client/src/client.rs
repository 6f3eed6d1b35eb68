//! [`SaClient`]: requests in flight by TID, their timeouts and retries, RMPP
//! reassembly of multi-segment answers with the ACKs that open the SA's window, and
//! unsolicited Reports answered with ReportResp.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::time::{Duration, Instant};

use ibsm_mad::sa::{
    RmppProgress, RmppReassembler, RmppType, SaAttributeId, SaError, SaMad, SaNotice, SaRecord,
    SaStatus, SA_DATA_SIZE, SA_HEADER_SIZE,
};
use ibsm_mad::{MadAddress, Method, MAD_SIZE};
use ibsm_transport::{MadDevice, ReceivedMad};

use crate::error::{method_name, SaClientError};
use crate::local::LocalPort;
use crate::tid::seed_tid;

/// How the client times, retries and windows its requests.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long one try waits for an answer (or, during a multi-segment answer, for
    /// the next segment) before the request is sent again (or the last ACK is).
    pub timeout: Duration,
    /// Tries after the first.
    pub retries: u32,
    /// RMPP receive window: each ACK lets the SA send this many segments more.
    pub rmpp_window: u32,
    /// SM_Key (SA_Key) put in every request: 0 unless the client is trusted.
    pub sm_key: u64,
    /// Largest reassembled answer accepted, in SA data bytes.
    pub max_answer_bytes: usize,
    /// Requests in flight at once ([`SaClient::submit`]).
    pub max_outstanding: usize,
    /// How many leading bytes of each received MAD the device really delivers: 256
    /// on a kernel. ibsim's umad2sim delivers 232 (its reader thread allocates a
    /// `struct sim_request`, 288 bytes, for the 56-byte umad header plus the MAD, so
    /// MAD bytes 232..256, SA data bytes 176..200 of every segment, are whatever
    /// followed that allocation); with less than 256 each [`Answer`] lists the payload
    /// bytes it never got ([`Answer::lost`]).
    pub mad_bytes: usize,
}

/// What umad2sim delivers of each MAD (see [`ClientConfig::mad_bytes`]).
pub const UMAD2SIM_MAD_BYTES: usize = 232;

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_millis(500),
            retries: 3,
            rmpp_window: 16,
            sm_key: 0,
            max_answer_bytes: 16 * RmppReassembler::DEFAULT_LIMIT,
            max_outstanding: 256,
            mad_bytes: MAD_SIZE,
        }
    }
}

/// A whole answer: its first (or only) MAD and the SA data of every segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The first response MAD: method, status, AttributeOffset, ComponentMask.
    pub first: SaMad,
    /// The SA data: one record, or a table of records back to back.
    pub payload: Vec<u8>,
    /// RMPP segments it came in (1 for a plain MAD).
    pub segments: u32,
    /// False when the answer was one MAD without RMPP: its length is not on the wire,
    /// so the payload is all 200 data bytes.
    pub rmpp: bool,
    /// Payload byte ranges the device did not deliver (see
    /// [`ClientConfig::mad_bytes`]); empty on a kernel.
    pub lost: Vec<Range<usize>>,
}

impl Answer {
    /// The records of the answer, `AttributeOffset * 8` bytes apart (the padded record
    /// size when AttributeOffset is 0, as in a plain GetResp). An answer without RMPP
    /// does not say how many records it holds; trailing all-zero records are dropped.
    pub fn records<R: SaRecord>(&self) -> Result<Vec<R>, SaError> {
        Ok(self
            .records_checked()?
            .into_iter()
            .map(|c| c.record)
            .collect())
    }

    /// True for a GetTableResp that came as one MAD with the RMPP Active flag set and
    /// RMPPType 0 (a sender that left segmentation to its kernel: OpenSM registers
    /// its SA agent with kernel RMPP) whose records fill the MAD, so the table may go
    /// on in segments a transport that does no RMPP never sent (umad2sim sends the
    /// first 256 bytes of the write). Such a table that ends inside the MAD (zeros
    /// after its last record) is whole.
    pub fn truncated<R: SaRecord>(&self) -> bool {
        !self.rmpp
            && self.first.method() == Method::GET_TABLE_RESP
            && self.first.rmpp.is_active()
            && self.plain_count(self.stride::<R>()).is_none()
    }

    /// Bytes between records: AttributeOffset words, or the padded record size
    /// when the answer gives none (a GetResp).
    fn stride<R: SaRecord>(&self) -> usize {
        match usize::from(self.first.attribute_offset) * 8 {
            0 => R::padded_size(),
            s => s,
        }
    }

    /// Records in a one-MAD answer: the first `k` such that every delivered byte
    /// after the `k`th record is zero; `None` when the records reach the end of
    /// what was delivered (the table may go on).
    fn plain_count(&self, stride: usize) -> Option<usize> {
        let keep = self
            .lost
            .first()
            .map_or(self.payload.len(), |l| l.start)
            .min(self.payload.len());
        let data = self.payload.get(..keep)?;
        (0..)
            .map(|k| k * stride)
            .take_while(|&start| start < keep)
            .position(|start| data[start..].iter().all(|&b| b == 0))
    }

    /// [`Answer::records`], each with the bytes of it (record-relative) that were
    /// not delivered (see [`Answer::lost`]). A one-MAD table answer (no RMPP) holds
    /// the records before the zeros that end it.
    pub fn records_checked<R: SaRecord>(&self) -> Result<Vec<Checked<R>>, SaError> {
        let stride = self.stride::<R>();
        let mut chunks: Vec<&[u8]> = self
            .payload
            .chunks(stride)
            .filter(|c| c.len() >= R::SIZE)
            .collect();
        if !self.rmpp && self.first.method() == Method::GET_TABLE_RESP {
            if let Some(k) = self.plain_count(stride) {
                chunks.truncate(k);
            }
        }
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let start = i * stride;
                let end = start + R::SIZE;
                let lost = self
                    .lost
                    .iter()
                    .filter(|l| l.start < end && start < l.end)
                    .map(|l| l.start.max(start) - start..l.end.min(end) - start)
                    .collect();
                R::decode(c).map(|record| Checked { record, lost })
            })
            .collect()
    }
}

/// A record of an [`Answer`] and the bytes of it that never arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked<R> {
    /// The record as decoded (fields over lost bytes hold whatever arrived).
    pub record: R,
    /// Record-relative byte ranges that were not delivered; empty when whole.
    pub lost: Vec<Range<usize>>,
}

impl<R> Checked<R> {
    /// Every byte arrived.
    pub fn is_intact(&self) -> bool {
        self.lost.is_empty()
    }

    /// Bytes `range` of the record arrived.
    pub fn has(&self, range: Range<usize>) -> bool {
        !self
            .lost
            .iter()
            .any(|l| l.start < range.end && range.start < l.end)
    }
}

/// An unsolicited Report (a Notice the SA forwards to a subscriber), already answered
/// with ReportResp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The Notice and its IssuerGID.
    pub notice: SaNotice,
    /// Who sent it (the SA's address).
    pub from: MadAddress,
    /// Its TID.
    pub tid: u64,
}

/// Counters, for a bench and for logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests sent the first time.
    pub requests: u64,
    /// Requests sent again after a timeout.
    pub resends: u64,
    /// RMPP ACKs sent.
    pub acks: u64,
    /// RMPP DATA segments received in order.
    pub segments: u64,
    /// Reports received (duplicates included) and answered.
    pub reports: u64,
    /// Answers that matched no request in flight (late, or duplicates).
    pub stale: u64,
}

#[derive(Debug)]
struct Pending {
    request: SaMad,
    deadline: Instant,
    tries: u32,
    rmpp: Option<RmppReassembler>,
    /// The last segment received in order (for a re-ACK), and the window granted.
    last_segment: Option<SaMad>,
    window_last: u32,
}

/// Where a finished request's outcome waits for its caller.
type Outcome = (u32, Result<Answer, SaClientError>);

/// Recent Report TIDs kept to spot resends.
const REPORT_MEMORY: usize = 64;

/// An SA client on one port: see the crate doc.
#[derive(Debug)]
pub struct SaClient<D: MadDevice> {
    dev: D,
    sa: MadAddress,
    local: LocalPort,
    cfg: ClientConfig,
    next_tid: u32,
    pending: HashMap<u32, Pending>,
    finished: VecDeque<Outcome>,
    reports: VecDeque<Report>,
    seen_reports: VecDeque<(u16, u64)>,
    stats: ClientStats,
}

/// The payload ranges that `segments` MADs of which only the first `mad_bytes` bytes
/// arrived could not carry, within a payload of `len` bytes.
fn lost_ranges(mad_bytes: usize, segments: u32, len: usize) -> Vec<Range<usize>> {
    let keep = mad_bytes.saturating_sub(SA_HEADER_SIZE).min(SA_DATA_SIZE);
    if keep >= SA_DATA_SIZE {
        return Vec::new();
    }
    (0..segments as usize)
        .map(|k| (k * SA_DATA_SIZE + keep).min(len)..((k + 1) * SA_DATA_SIZE).min(len))
        .filter(|r| !r.is_empty())
        .collect()
}

impl<D: MadDevice> SaClient<D> {
    /// A client on `dev` that sends to the master SM's SA: the local port is read
    /// first (0-hop SubnGet), its MasterSMLID is the SA's LID.
    pub fn open(dev: D, cfg: ClientConfig) -> Result<SaClient<D>, SaClientError> {
        SaClient::open_at(dev, None, cfg)
    }

    /// A client that sends to the SA at `sa_lid` (or, for `None`, at the local port's
    /// MasterSMLID).
    pub fn open_at(
        mut dev: D,
        sa_lid: Option<u16>,
        cfg: ClientConfig,
    ) -> Result<SaClient<D>, SaClientError> {
        let local = LocalPort::read(&mut dev, cfg.timeout, cfg.retries + 1)?;
        let lid = match sa_lid {
            Some(l) => l,
            None if local.sm_lid == 0 => return Err(SaClientError::NoMaster),
            None => local.sm_lid,
        };
        let sa = MadAddress {
            sl: local.sm_sl,
            ..MadAddress::gsi(lid)
        };
        tracing::debug!(
            sa_lid = lid,
            port_guid = local.port_guid,
            lid = local.lid,
            "SA client open"
        );
        Ok(SaClient::with_local(dev, sa, local, cfg))
    }

    /// A client with everything given (no MAD is sent).
    pub fn with_local(dev: D, sa: MadAddress, local: LocalPort, cfg: ClientConfig) -> Self {
        SaClient {
            dev,
            sa,
            local,
            cfg,
            next_tid: seed_tid(),
            pending: HashMap::new(),
            finished: VecDeque::new(),
            reports: VecDeque::new(),
            seen_reports: VecDeque::new(),
            stats: ClientStats::default(),
        }
    }

    /// The local port as read at open.
    pub fn local(&self) -> &LocalPort {
        &self.local
    }

    /// The SA's address.
    pub fn sa_address(&self) -> MadAddress {
        self.sa
    }

    /// Send to another SA LID from now on.
    pub fn set_sa_lid(&mut self, lid: u16) {
        self.sa.lid = lid;
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// Requests in flight.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// The device.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// Send `request` (its TID is replaced by one of ours, its SM_Key by the
    /// configured one) without waiting; its outcome comes out of [`SaClient::poll`]
    /// with the returned TID (the low 32 bits, which is all a kernel keeps).
    pub fn submit(&mut self, mut request: SaMad) -> Result<u32, SaClientError> {
        if self.pending.len() >= self.cfg.max_outstanding {
            return Err(SaClientError::TooManyOutstanding {
                limit: self.cfg.max_outstanding,
            });
        }
        let tid = self.alloc_tid();
        request.header.tid = u64::from(tid);
        request.sm_key = self.cfg.sm_key;
        self.dev.send_gmp(&self.sa, &request.encode())?;
        self.stats.requests += 1;
        tracing::trace!(
            tid,
            method = ?request.method(),
            attribute = %request.attribute_id(),
            "SA request sent"
        );
        self.pending.insert(
            tid,
            Pending {
                request,
                deadline: Instant::now() + self.cfg.timeout,
                tries: 1,
                rmpp: None,
                last_segment: None,
                window_last: 1,
            },
        );
        Ok(tid)
    }

    fn alloc_tid(&mut self) -> u32 {
        loop {
            let t = self.next_tid;
            self.next_tid = self.next_tid.wrapping_add(1);
            if t != 0 && !self.pending.contains_key(&t) {
                return t;
            }
        }
    }

    /// Wait up to `timeout` for any request to finish; `None` when none did in time
    /// (or none is in flight and nothing is waiting). Reports that arrive meanwhile are
    /// answered and kept for [`SaClient::next_report`].
    pub fn poll(&mut self, timeout: Duration) -> Result<Option<Outcome>, SaClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(o) = self.finished.pop_front() {
                return Ok(Some(o));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.step(deadline - now)?;
        }
    }

    /// Send `request` and wait for its whole answer (other requests in flight keep
    /// going; their outcomes stay for [`SaClient::poll`]). A non-zero status is
    /// [`SaClientError::Status`].
    pub fn request(&mut self, request: SaMad) -> Result<Answer, SaClientError> {
        let tid = self.submit(request)?;
        loop {
            if let Some(i) = self.finished.iter().position(|(t, _)| *t == tid) {
                if let Some((_, r)) = self.finished.remove(i) {
                    return r;
                }
            }
            // Every request ends after its tries, so this loop does too.
            let wait = self.cfg.timeout;
            self.step(wait)?;
        }
    }

    /// Wait up to `timeout` for a Report (one received earlier comes out first).
    pub fn next_report(&mut self, timeout: Duration) -> Result<Option<Report>, SaClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.reports.pop_front() {
                return Ok(Some(r));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.step(deadline - now)?;
        }
    }

    /// One round: expire what is due, wait up to `max_wait` (less when a deadline
    /// comes first) for MADs, handle all that arrived, expire again.
    fn step(&mut self, max_wait: Duration) -> Result<(), SaClientError> {
        self.expire(Instant::now())?;
        if !self.finished.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        let wait = self
            .pending
            .values()
            .map(|p| p.deadline.saturating_duration_since(now))
            .min()
            .map_or(max_wait, |d| d.min(max_wait));
        if let Some(r) = self.dev.recv(wait)? {
            self.handle(&r)?;
            while let Some(r) = self.dev.recv(Duration::ZERO)? {
                self.handle(&r)?;
            }
        }
        self.expire(Instant::now())
    }

    /// Resend requests (or re-ACK transfers) whose try timed out; fail spent ones.
    fn expire(&mut self, now: Instant) -> Result<(), SaClientError> {
        let due: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for tid in due {
            let Some(p) = self.pending.get_mut(&tid) else {
                continue;
            };
            let attribute = p.request.attribute_id();
            if p.tries > self.cfg.retries {
                let err = match (&p.rmpp, &p.last_segment) {
                    (Some(_), Some(seg)) => SaClientError::RmppStalled {
                        attribute,
                        tid,
                        last: seg.rmpp.seg_num(),
                        tries: p.tries - 1,
                    },
                    _ => SaClientError::Timeout {
                        lid: self.sa.lid,
                        method: method_name(p.request.method()),
                        attribute,
                        tid,
                        tries: p.tries,
                    },
                };
                self.pending.remove(&tid);
                self.finished.push_back((tid, Err(err)));
                continue;
            }
            p.tries += 1;
            p.deadline = now + self.cfg.timeout;
            match p.last_segment {
                // A transfer under way: say again what we have; the SA resends the rest.
                Some(seg) => {
                    let ack = seg.rmpp_ack(p.window_last);
                    tracing::debug!(
                        tid,
                        seg = seg.rmpp.seg_num(),
                        "RMPP: segments late, ACK again"
                    );
                    self.dev.send_gmp(&self.sa, &ack.encode())?;
                    self.stats.acks += 1;
                }
                None => {
                    tracing::debug!(tid, attribute = %attribute, try_ = p.tries, "SA request resent");
                    self.dev.send_gmp(&self.sa, &p.request.encode())?;
                    self.stats.resends += 1;
                }
            }
        }
        Ok(())
    }

    /// One received MAD.
    fn handle(&mut self, r: &ReceivedMad) -> Result<(), SaClientError> {
        if r.is_smp() {
            return Ok(());
        }
        let mad = match SaMad::decode(&r.mad) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, lid = r.from.lid, "not an SA MAD: dropped");
                return Ok(());
            }
        };
        if mad.method() == Method::REPORT {
            return self.answer_report(r, &mad);
        }
        if !mad.method().is_response() {
            tracing::trace!(method = ?mad.method(), "SA request to a client: dropped");
            return Ok(());
        }
        let tid = mad.tid() as u32;
        let Some(p) = self.pending.get_mut(&tid) else {
            self.stats.stale += 1;
            return Ok(());
        };
        if mad.attribute_id() != p.request.attribute_id() {
            self.stats.stale += 1;
            return Ok(());
        }
        let request = p.request;
        let rmpp_on = mad.rmpp.is_active() && mad.rmpp.rmpp_type != RmppType::NONE;
        if !rmpp_on {
            self.pending.remove(&tid);
            let answer = Answer {
                first: mad,
                payload: mad.data.to_vec(),
                segments: 1,
                rmpp: false,
                lost: lost_ranges(self.cfg.mad_bytes, 1, SA_DATA_SIZE),
            };
            self.finish(tid, &request, answer);
            return Ok(());
        }
        if mad.rmpp.rmpp_type == RmppType::ACK {
            return Ok(());
        }
        let limit = self.cfg.max_answer_bytes;
        let reasm = p.rmpp.get_or_insert_with(|| RmppReassembler::new(limit));
        let window = self.cfg.rmpp_window.max(1);
        match reasm.push(&mad) {
            Ok(RmppProgress::Incomplete { last }) => {
                self.stats.segments += 1;
                p.last_segment = Some(mad);
                p.tries = 1;
                p.deadline = Instant::now() + self.cfg.timeout;
                if last >= p.window_last {
                    p.window_last = last + window;
                    let ack = mad.rmpp_ack(p.window_last);
                    self.dev.send_gmp(&r.from, &ack.encode())?;
                    self.stats.acks += 1;
                }
            }
            Ok(RmppProgress::Complete(msg)) => {
                self.stats.segments += 1;
                self.pending.remove(&tid);
                // The last ACK ends the SA's transfer.
                let seg = mad.rmpp.seg_num();
                self.dev.send_gmp(&r.from, &mad.rmpp_ack(seg).encode())?;
                self.stats.acks += 1;
                let lost = lost_ranges(self.cfg.mad_bytes, seg, msg.payload.len());
                let answer = Answer {
                    first: msg.first,
                    payload: msg.payload,
                    segments: seg,
                    rmpp: true,
                    lost,
                };
                self.finish(tid, &request, answer);
            }
            Err(SaError::RmppDuplicate { .. } | SaError::RmppOutOfOrder { .. }) => {
                // A resent window, or a gap: tell the SA where we are.
                if let Some(seg) = p.last_segment {
                    let ack = seg.rmpp_ack(p.window_last);
                    self.dev.send_gmp(&r.from, &ack.encode())?;
                    self.stats.acks += 1;
                }
            }
            Err(e) => {
                self.pending.remove(&tid);
                self.finished.push_back((
                    tid,
                    Err(SaClientError::Rmpp {
                        attribute: request.attribute_id(),
                        tid,
                        source: e,
                    }),
                ));
            }
        }
        Ok(())
    }

    fn finish(&mut self, tid: u32, request: &SaMad, answer: Answer) {
        let status = answer.first.status();
        let outcome = if status == SaStatus::SUCCESS {
            Ok(answer)
        } else {
            Err(SaClientError::Status {
                method: method_name(request.method()),
                attribute: request.attribute_id(),
                status,
            })
        };
        self.finished.push_back((tid, outcome));
    }

    fn answer_report(&mut self, r: &ReceivedMad, mad: &SaMad) -> Result<(), SaClientError> {
        let mut resp = mad.response(Method::REPORT_RESP, SaStatus::SUCCESS);
        resp.data = mad.data;
        self.dev.send_gmp(&r.from, &resp.encode())?;
        self.stats.reports += 1;
        let key = (r.from.lid, mad.tid());
        if self.seen_reports.contains(&key) {
            tracing::debug!(tid = mad.tid(), "Report resent by the SA: answered again");
            return Ok(());
        }
        if self.seen_reports.len() >= REPORT_MEMORY {
            self.seen_reports.pop_front();
        }
        self.seen_reports.push_back(key);
        if mad.attribute_id() != SaAttributeId::NOTICE {
            tracing::debug!(attribute = %mad.attribute_id(), "Report of a non-Notice: answered, dropped");
            return Ok(());
        }
        match SaNotice::decode(&mad.data[..SA_DATA_SIZE]) {
            Ok(notice) => self.reports.push_back(Report {
                notice,
                from: r.from,
                tid: mad.tid(),
            }),
            Err(e) => tracing::debug!(error = %e, "Report with a bad Notice: answered, dropped"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_mad::sa::LinkRecord;

    #[test]
    fn umad2sim_loses_the_last_24_data_bytes_of_every_segment() {
        assert!(lost_ranges(MAD_SIZE, 3, 600).is_empty());
        assert_eq!(
            lost_ranges(UMAD2SIM_MAD_BYTES, 3, 520),
            vec![176..200, 376..400]
        );
        assert_eq!(
            lost_ranges(UMAD2SIM_MAD_BYTES, 1, 100),
            Vec::<Range<usize>>::new()
        );
    }

    #[test]
    fn records_over_lost_bytes_are_flagged() {
        let links: Vec<LinkRecord> = (1..=30)
            .map(|i| LinkRecord {
                from_lid: i,
                from_port: 1,
                to_port: 2,
                to_lid: 100 + i,
            })
            .collect();
        let mut payload = Vec::new();
        for l in &links {
            payload.extend_from_slice(&l.encode());
            payload.resize(payload.len().next_multiple_of(8), 0);
        }
        let mut first = SaMad::new(Method::GET_TABLE_RESP, LinkRecord::ATTRIBUTE_ID, 1);
        first.attribute_offset = 1;
        let answer = Answer {
            first,
            lost: lost_ranges(UMAD2SIM_MAD_BYTES, 2, payload.len()),
            payload,
            segments: 2,
            rmpp: true,
        };
        let got = answer.records_checked::<LinkRecord>().unwrap();
        assert_eq!(got.len(), 30);
        let damaged: Vec<u16> = got
            .iter()
            .filter(|c| !c.is_intact())
            .map(|c| c.record.from_lid)
            .collect();
        assert_eq!(got[22].lost, vec![0..6]);
        assert!(got[21].has(0..6));
        // Bytes 176..200 are records 22, 23 and 24 (8 bytes each, from 0).
        assert_eq!(damaged, vec![23, 24, 25]);
    }

    #[test]
    fn a_one_mad_table_is_whole_when_it_ends_inside_the_mad() {
        use ibsm_mad::sa::{McMemberRecord, RmppFlags};
        let mut first = SaMad::new(Method::GET_TABLE_RESP, McMemberRecord::ATTRIBUTE_ID, 1);
        first.attribute_offset = 7; // 56 bytes
        first.rmpp.flags = RmppFlags::ACTIVE; // RMPPType 0: left to a kernel
        let rec = McMemberRecord {
            mgid: [0xFF, 0x12, 0x40, 0x1B, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            mlid: 0xC000,
            q_key: 0x0B1B,
            ..McMemberRecord::default()
        };
        let mut payload = vec![0u8; SA_DATA_SIZE];
        for k in 0..2 {
            payload[k * 56..k * 56 + McMemberRecord::SIZE].copy_from_slice(&rec.encode());
        }
        let mut a = Answer {
            first,
            payload,
            segments: 1,
            rmpp: false,
            lost: lost_ranges(UMAD2SIM_MAD_BYTES, 1, SA_DATA_SIZE),
        };
        assert!(!a.truncated::<McMemberRecord>());
        assert_eq!(a.records::<McMemberRecord>().unwrap().len(), 2);
        // Records up to the last delivered byte: the table may go on.
        for k in 2..4 {
            let end = (k * 56 + McMemberRecord::SIZE).min(SA_DATA_SIZE);
            let bytes = rec.encode();
            a.payload[k * 56..end].copy_from_slice(&bytes[..end - k * 56]);
        }
        assert!(a.truncated::<McMemberRecord>());
    }
}
