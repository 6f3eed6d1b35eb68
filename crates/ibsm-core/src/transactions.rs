//! The MAD agent: a sans-IO transaction layer for SMPs.
//!
//! [`Transactions`] owns everything between "I want this SMP answered" and
//! "here is the answer (or: it never came)":
//!
//! * **TIDs.** Each transmission gets a fresh TransactionID. The high 32 bits
//!   are a per-agent constant ([`TransactionsConfig::tid_high`]), the low 32
//!   bits a counter inside the agent's own [`TidRange`]
//!   ([`TransactionsConfig::tid_low`]) that skips values still in flight. Several
//!   agents sharing one port get disjoint ranges, so whoever reads the port can
//!   tell by the low half alone whose answer a response is. Responses are matched on
//!   the **low 32 bits only**: the Linux umad driver overwrites the high half of
//!   a request's TID with its own agent id (and gives it back in the response),
//!   so a match on the full 64 bits would fail on real hardware.
//! * **Window.** At most [`TransactionsConfig::window`] requests are on the
//!   wire at once; the rest wait in FIFO order. OpenSM keeps 4 in flight
//!   (`max_wire_smps`); we default to 16, because measurements in the fabric lab
//!   (ibsim) show ~1.5x the throughput of 4 and real switches answer in
//!   microseconds, while 16 outstanding SMPs are still far below what a switch
//!   SMA queues.
//! * **Timeouts and retries.** A request that is not answered within
//!   [`TransactionsConfig::timeout`] is sent again, up to
//!   [`TransactionsConfig::retries`] times, then reported as
//!   [`Event::Failed`]. **Every retry uses a new TID**: a late answer to an
//!   earlier attempt then cannot be confused with the answer to the retry, and
//!   it is counted as unmatched and dropped. The request keeps its window slot
//!   across retries.
//! * **M_Key.** With [`Transactions::set_m_keys`] every SMP leaves with an M_Key
//!   the agent picks (IBA 14.2.4): the one learned for its directed route, else
//!   the first candidate. A port whose M_Key check fails discards the SMP
//!   silently, so a timeout may mean "wrong key": each retry moves to the next
//!   candidate (the key being programmed first, then the one the fabric was
//!   left with, e.g. by the previous master). A key is learned for a route when
//!   a SubnSet sent with it succeeds, and from the M_Key field of a PortInfo
//!   answer (the port's own key, readable at protection levels 0 and, with the
//!   key, 1; after a SubnSet(PortInfo) the key just programmed). Without
//!   candidates the submitter's M_Key is sent unchanged.
//! * **Unsolicited requests.** Anything that is not a response (SubnGet/SubnSet
//!   of SMInfo from another SM, Traps, ...) is surfaced as
//!   [`Event::Unsolicited`] for the SM state machine to answer.
//!
//! It is driven like quinn-proto: call [`Transactions::submit`],
//! [`Transactions::handle_incoming`] and [`Transactions::handle_timeout`] with
//! the current time, then drain [`Transactions::poll_transmit`] and
//! [`Transactions::poll_event`], and ask [`Transactions::poll_timeout`] when to
//! call back. It reads no clock.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use ibsm_mad::{AttributeId, Method, Smp, SmpRoute, MAD_SIZE};

/// Tunables of a [`Transactions`] agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionsConfig {
    /// Maximum number of requests on the wire at once (at least 1).
    pub window: usize,
    /// How long to wait for a response before retrying.
    pub timeout: Duration,
    /// How many times to resend an unanswered request before giving up
    /// (OpenSM's `transaction_retries`, default 3).
    pub retries: u32,
    /// The high 32 bits of every TID this agent allocates.
    pub tid_high: u32,
    /// The low 32 bits of every TID this agent allocates lie in this range
    /// (default: all of them).
    pub tid_low: TidRange,
}

/// A range of low TID halves, `base..base + 2^bits` (`bits` 1..=32, `base` a
/// multiple of `2^bits`), that one MAD initiator allocates in and wraps around in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TidRange {
    /// First low half of the range.
    pub base: u32,
    /// log2 of the range's size.
    pub bits: u32,
}

impl TidRange {
    /// Every low half.
    pub const ALL: TidRange = TidRange { base: 0, bits: 32 };

    fn mask(self) -> u32 {
        match self.bits {
            0 => 0,
            b if b >= 32 => u32::MAX,
            b => (1u32 << b) - 1,
        }
    }

    /// Whether a low half is in this range.
    pub fn contains(self, low: u32) -> bool {
        low & !self.mask() == self.base & !self.mask()
    }

    /// The `n`th low half of the range (wrapping).
    pub fn nth(self, n: u32) -> u32 {
        (self.base & !self.mask()) | (n & self.mask())
    }
}

impl Default for TransactionsConfig {
    /// Window 16, 200 ms timeout (OpenSM's `transaction_timeout`), 3 retries.
    fn default() -> Self {
        TransactionsConfig {
            window: 16,
            timeout: Duration::from_millis(200),
            retries: 3,
            tid_high: 0x1b5a_0000,
            tid_low: TidRange::ALL,
        }
    }
}

/// What the agent reports to its owner.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<T> {
    /// A response matched the request submitted with `token`. The SMP status
    /// is not interpreted here: a non-zero status is still a response.
    Response {
        /// The token given to [`Transactions::submit`].
        token: T,
        /// The decoded response.
        smp: Smp,
    },
    /// The request submitted with `token` went unanswered after all retries.
    Failed {
        /// The token given to [`Transactions::submit`].
        token: T,
        /// The request as last sent.
        request: Smp,
    },
    /// A request (not a response) addressed to us: SubnGet/SubnSet(SMInfo)
    /// from another SM, a Trap, ...
    Unsolicited(Smp),
}

/// Counters, for logs, benchmarks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Requests accepted by [`Transactions::submit`].
    pub submitted: u64,
    /// Transmissions handed out (first sends and retries).
    pub sent: u64,
    /// Responses matched to an outstanding request.
    pub responses: u64,
    /// Individual attempts that timed out.
    pub timeouts: u64,
    /// Retransmissions.
    pub retries: u64,
    /// Requests given up after all retries.
    pub failures: u64,
    /// Responses that matched no outstanding request (late or duplicate).
    pub unmatched: u64,
    /// Requests from the fabric surfaced as [`Event::Unsolicited`].
    pub unsolicited: u64,
    /// Incoming MADs that did not decode as SMPs.
    pub malformed: u64,
}

#[derive(Debug)]
struct InFlight<T> {
    token: T,
    smp: Smp,
    deadline: Duration,
    retries_left: u32,
}

/// The sans-IO MAD agent. `T` is the caller's token, handed back with the
/// response or failure of the request it was submitted with.
#[derive(Debug)]
pub struct Transactions<T> {
    cfg: TransactionsConfig,
    next_low: u32,
    queued: VecDeque<(Smp, T)>,
    /// Keyed by the low 32 bits of the TID of the current attempt.
    in_flight: HashMap<u32, InFlight<T>>,
    deadlines: BTreeSet<(Duration, u32)>,
    transmit: VecDeque<[u8; MAD_SIZE]>,
    events: VecDeque<Event<T>>,
    counters: Counters,
    /// M_Key candidates, preferred first (empty: keep the submitter's M_Key).
    m_keys: Vec<u64>,
    /// The M_Key that works at a directed route's end (HopCount, InitialPath).
    learned: HashMap<(u8, [u8; 64]), u64>,
    /// Sum over requests of the time each spent on the wire, up to `accounted_to`
    /// (see [`Transactions::in_flight_time`]).
    in_flight_time: Duration,
    accounted_to: Duration,
}

/// Where a directed-route SMP goes, as a map key; None for LID-routed SMPs.
fn route_key(smp: &Smp) -> Option<(u8, [u8; 64])> {
    match &smp.route {
        SmpRoute::Directed(dr) => {
            let mut path = dr.initial_path;
            let n = usize::from(dr.hop_cnt).min(63);
            // Entries beyond the hop count are not part of the route.
            if let Some(rest) = path.get_mut(n + 1..) {
                rest.fill(0);
            }
            path[0] = 0;
            Some((dr.hop_cnt, path))
        }
        SmpRoute::Lid => None,
    }
}

impl<T> Transactions<T> {
    /// A new agent. A window of 0 is treated as 1.
    pub fn new(mut cfg: TransactionsConfig) -> Self {
        cfg.window = cfg.window.max(1);
        Transactions {
            cfg,
            next_low: 1,
            queued: VecDeque::new(),
            in_flight: HashMap::new(),
            deadlines: BTreeSet::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            counters: Counters::default(),
            m_keys: Vec::new(),
            learned: HashMap::new(),
            in_flight_time: Duration::ZERO,
            accounted_to: Duration::ZERO,
        }
    }

    /// The M_Keys to try, preferred first (see the module doc); duplicates, and
    /// 0 after the first place (a port with M_Key 0 passes any key), are dropped.
    /// An empty list, or just `[0]`, sends every SMP with the submitter's M_Key.
    /// Learned keys are kept.
    pub fn set_m_keys(&mut self, keys: &[u64]) {
        self.m_keys.clear();
        for (i, &k) in keys.iter().enumerate() {
            if (i == 0 || k != 0) && !self.m_keys.contains(&k) {
                self.m_keys.push(k);
            }
        }
        if self.m_keys == [0] {
            self.m_keys.clear();
        }
    }

    /// The M_Key learned for the directed route of `smp`, if any.
    pub fn learned_m_key(&self, smp: &Smp) -> Option<u64> {
        route_key(smp).and_then(|k| self.learned.get(&k).copied())
    }

    /// The M_Key for a first attempt of `smp`.
    fn pick_m_key(&self, smp: &Smp) -> Option<u64> {
        let first = *self.m_keys.first()?;
        Some(self.learned_m_key(smp).unwrap_or(first))
    }

    /// The M_Key for a retry after `current` went unanswered: the next candidate.
    fn next_m_key(&self, current: u64) -> Option<u64> {
        if self.m_keys.len() < 2 {
            return None;
        }
        let next = match self.m_keys.iter().position(|&k| k == current) {
            Some(i) => (i + 1) % self.m_keys.len(),
            None => 0,
        };
        self.m_keys.get(next).copied()
    }

    /// Learn from the answer `resp` to `req` which M_Key works at its route's end.
    fn learn_m_key(&mut self, req: &Smp, resp: &Smp) {
        if self.m_keys.is_empty() || resp.status != 0 {
            return;
        }
        let Some(key) = route_key(req) else {
            return;
        };
        // PortInfo carries the port's M_Key at bytes 0..8 (0 when hidden or unset).
        let pi_key = (resp.attr_id == AttributeId::PORT_INFO).then(|| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&resp.data[..8]);
            u64::from_be_bytes(b)
        });
        let learned = match pi_key {
            Some(k) if k != 0 => Some(k),
            _ if req.method == Method::SET => Some(req.m_key),
            _ => None,
        };
        if let Some(k) = learned {
            if self.learned.insert(key, k) != Some(k) {
                tracing::trace!(hops = key.0, "M_Key learned for a route");
            }
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &TransactionsConfig {
        &self.cfg
    }

    /// Queue `smp` for sending. Its TID is overwritten by the agent. It goes
    /// on the wire as soon as the window has room, possibly right now.
    pub fn submit(&mut self, now: Duration, smp: Smp, token: T) {
        self.account(now);
        self.counters.submitted += 1;
        self.queued.push_back((smp, token));
        self.fill_window(now);
    }

    /// Feed a MAD received from the device.
    pub fn handle_incoming(&mut self, now: Duration, bytes: &[u8]) {
        let smp = match Smp::decode(bytes) {
            Ok(smp) => smp,
            Err(err) => {
                self.counters.malformed += 1;
                tracing::debug!(%err, "dropping undecodable MAD");
                return;
            }
        };
        if smp.method.0 & 0x80 == 0 {
            self.counters.unsolicited += 1;
            self.events.push_back(Event::Unsolicited(smp));
            return;
        }
        let key = tid_low(smp.tid);
        self.account(now);
        match self.in_flight.remove(&key) {
            Some(entry) => {
                // Only the low half is compared: see the module doc.
                self.deadlines.remove(&(entry.deadline, key));
                self.counters.responses += 1;
                self.learn_m_key(&entry.smp, &smp);
                self.events.push_back(Event::Response {
                    token: entry.token,
                    smp,
                });
                self.fill_window(now);
            }
            None => {
                self.counters.unmatched += 1;
                tracing::debug!(tid = smp.tid, "dropping unmatched response");
            }
        }
    }

    /// Retry or fail every attempt whose deadline is at or before `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.account(now);
        while let Some(&(deadline, key)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.remove(&(deadline, key));
            let Some(mut entry) = self.in_flight.remove(&key) else {
                continue;
            };
            self.counters.timeouts += 1;
            if entry.retries_left == 0 {
                self.counters.failures += 1;
                tracing::debug!(tid = entry.smp.tid, attr = ?entry.smp.attr_id, "request failed after retries");
                self.events.push_back(Event::Failed {
                    token: entry.token,
                    request: entry.smp,
                });
                continue;
            }
            entry.retries_left -= 1;
            self.counters.retries += 1;
            if let Some(k) = self.next_m_key(entry.smp.m_key) {
                entry.smp.m_key = k;
            }
            self.launch(now, entry);
        }
        self.fill_window(now);
    }

    /// When [`Transactions::handle_timeout`] must be called next, if anything
    /// is outstanding.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    /// The next MAD to put on the wire.
    pub fn poll_transmit(&mut self) -> Option<[u8; MAD_SIZE]> {
        self.transmit.pop_front()
    }

    /// The next event for the owner.
    pub fn poll_event(&mut self) -> Option<Event<T>> {
        self.events.pop_front()
    }

    /// Requests on the wire (never more than the window).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Requests waiting for a window slot.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// True when nothing is queued, in flight, to transmit or to report.
    pub fn is_idle(&self) -> bool {
        self.queued.is_empty()
            && self.in_flight.is_empty()
            && self.transmit.is_empty()
            && self.events.is_empty()
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The sum over requests of the time each has spent on the wire, up to
    /// `now`: the integral of [`Transactions::in_flight`]
    /// over time. Its growth over an interval divided by the interval is the mean
    /// number of SMPs in flight then, i.e. how full the window was kept.
    pub fn in_flight_time(&self, now: Duration) -> Duration {
        let n = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
        self.in_flight_time
            .saturating_add(now.saturating_sub(self.accounted_to).saturating_mul(n))
    }

    /// Add the requests on the wire since the last accounted time to
    /// `in_flight_time` (a `now` earlier than that adds nothing).
    fn account(&mut self, now: Duration) {
        if now > self.accounted_to {
            let n = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
            self.in_flight_time = self
                .in_flight_time
                .saturating_add((now - self.accounted_to).saturating_mul(n));
            self.accounted_to = now;
        }
    }

    fn fill_window(&mut self, now: Duration) {
        while self.in_flight.len() < self.cfg.window {
            let Some((mut smp, token)) = self.queued.pop_front() else {
                break;
            };
            // Picked when it leaves the queue: a key learned meanwhile applies.
            if let Some(k) = self.pick_m_key(&smp) {
                smp.m_key = k;
            }
            let entry = InFlight {
                token,
                smp,
                deadline: now,
                retries_left: self.cfg.retries,
            };
            self.launch(now, entry);
        }
    }

    /// Give `entry` a fresh TID and deadline, queue it for transmission.
    fn launch(&mut self, now: Duration, mut entry: InFlight<T>) {
        let low = self.alloc_low();
        entry.smp.tid = (u64::from(self.cfg.tid_high) << 32) | u64::from(low);
        entry.deadline = now.saturating_add(self.cfg.timeout);
        self.transmit.push_back(entry.smp.encode());
        self.counters.sent += 1;
        self.deadlines.insert((entry.deadline, low));
        self.in_flight.insert(low, entry);
    }

    /// A low TID half in the agent's range that is not 0 and not in flight. The
    /// window is far smaller than any range a caller gives (2^16 and up), so this
    /// terminates after a step or two.
    fn alloc_low(&mut self) -> u32 {
        loop {
            let low = self.cfg.tid_low.nth(self.next_low);
            self.next_low = self.next_low.wrapping_add(1);
            if low != 0 && !self.in_flight.contains_key(&low) {
                return low;
            }
        }
    }
}

fn tid_low(tid: u64) -> u32 {
    (tid & 0xffff_ffff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_mad::{AttributeId, Method};
    use proptest::prelude::*;
    use std::collections::HashMap;

    const MS: Duration = Duration::from_millis(1);

    fn cfg(window: usize, retries: u32) -> TransactionsConfig {
        TransactionsConfig {
            window,
            timeout: 10 * MS,
            retries,
            tid_high: 0xabcd,
            tid_low: crate::transactions::TidRange::ALL,
        }
    }

    fn get(hops: u8) -> Smp {
        Smp::get_dr(&vec![1; usize::from(hops)], AttributeId::NODE_INFO, 0, 0)
    }

    #[test]
    fn tids_stay_in_the_agents_low_range_across_a_wrap() {
        let range = TidRange {
            base: 0x4000_0000,
            bits: 16,
        };
        let mut tx = Transactions::new(TransactionsConfig {
            tid_low: range,
            ..cfg(1, 0)
        });
        for i in 0..70_000u32 {
            tx.submit(Duration::ZERO, get(1), i);
            let sent = tx.poll_transmit().unwrap();
            let low = Smp::peek_tid(&sent).unwrap() as u32;
            assert!(range.contains(low), "{low:#x} outside the range");
            assert_ne!(low, 0);
            tx.handle_incoming(Duration::ZERO, &answer(&sent));
            assert!(matches!(tx.poll_event(), Some(Event::Response { token, .. }) if token == i));
        }
        assert!(!TidRange { base: 0, bits: 30 }.contains(range.nth(5)));
        assert!(TidRange::ALL.contains(u32::MAX));
    }

    #[test]
    fn m_key_retries_move_to_the_next_candidate_and_a_working_key_is_learned() {
        const NEW: u64 = 0x11;
        const OLD: u64 = 0x22;
        let mut tx = Transactions::new(cfg(4, 3));
        tx.set_m_keys(&[NEW, OLD, 0, NEW]);
        let set = Smp::set_dr(&[1, 2], AttributeId::SWITCH_INFO, 0, 0, [0; 64]);
        tx.submit(Duration::ZERO, set, 1u32);
        let first = Smp::decode(&tx.poll_transmit().unwrap()).unwrap();
        assert_eq!(first.m_key, NEW, "the configured key first");
        // Unanswered (a port holding the old key drops it): the retry tries OLD.
        tx.handle_timeout(10 * MS);
        let retry = tx.poll_transmit().unwrap();
        assert_eq!(Smp::decode(&retry).unwrap().m_key, OLD);
        tx.handle_incoming(11 * MS, &answer(&retry));
        assert!(matches!(
            tx.poll_event(),
            Some(Event::Response { token: 1, .. })
        ));
        // The route's key is known now: the next SMP there starts with it...
        tx.submit(12 * MS, set, 2);
        assert_eq!(
            Smp::decode(&tx.poll_transmit().unwrap()).unwrap().m_key,
            OLD
        );
        // ...while another route still starts with the configured key.
        tx.submit(12 * MS, get(1), 3);
        assert_eq!(
            Smp::decode(&tx.poll_transmit().unwrap()).unwrap().m_key,
            NEW
        );
    }

    #[test]
    fn port_info_answers_teach_the_key_they_carry() {
        let mut tx = Transactions::new(cfg(4, 3));
        tx.set_m_keys(&[0x11, 0x22]);
        let pi = ibsm_mad::PortInfo {
            m_key: 0x33,
            ..Default::default()
        };
        let set = Smp::set_dr_attr(&[1], 1, 0, &pi);
        tx.submit(Duration::ZERO, set, 1u32);
        let sent = tx.poll_transmit().unwrap();
        // The SMA answers with the PortInfo as it is now: M_Key 0x33 just programmed.
        tx.handle_incoming(MS, &answer(&sent));
        tx.submit(MS, get(1), 2);
        assert_eq!(
            Smp::decode(&tx.poll_transmit().unwrap()).unwrap().m_key,
            0x33
        );
    }

    #[test]
    fn without_m_keys_the_submitters_key_is_sent() {
        let mut tx = Transactions::new(cfg(4, 1));
        tx.set_m_keys(&[0, 0]);
        let mut smp = get(2);
        smp.m_key = 0x44;
        tx.submit(Duration::ZERO, smp, 1u32);
        assert_eq!(
            Smp::decode(&tx.poll_transmit().unwrap()).unwrap().m_key,
            0x44
        );
        tx.handle_timeout(10 * MS);
        assert_eq!(
            Smp::decode(&tx.poll_transmit().unwrap()).unwrap().m_key,
            0x44
        );
        // A zero key in any place but the first is no candidate: M_Key 0 ports pass any.
        tx.set_m_keys(&[0x55, 0]);
        tx.submit(10 * MS, get(3), 2);
        assert_eq!(
            Smp::decode(&tx.poll_transmit().unwrap()).unwrap().m_key,
            0x55
        );
        tx.handle_timeout(30 * MS);
        let retries: Vec<u64> = std::iter::from_fn(|| tx.poll_transmit())
            .map(|m| Smp::decode(&m).unwrap().m_key)
            .collect();
        assert!(retries.iter().all(|&k| k == 0x55), "{retries:?}");
    }

    /// The response a fabric would send to `request`.
    fn answer(request: &[u8; MAD_SIZE]) -> [u8; MAD_SIZE] {
        Smp::decode(request)
            .expect("we sent it")
            .response()
            .encode()
    }

    /// The time SMPs spent in flight is the integral of the window's use: two
    /// requests through a window of 2 from 0 ms, one answered at 10 ms, the other
    /// timing out at 20 ms and retried, answered at 25 ms.
    #[test]
    fn in_flight_time_integrates_the_requests_on_the_wire() {
        let mut tx = Transactions::new(TransactionsConfig {
            timeout: 20 * MS,
            ..cfg(2, 1)
        });
        tx.submit(Duration::ZERO, get(0), 0u32);
        tx.submit(Duration::ZERO, get(1), 1u32);
        let a = tx.poll_transmit().unwrap();
        let _lost = tx.poll_transmit().unwrap();
        assert_eq!(tx.in_flight_time(5 * MS), 10 * MS);
        tx.handle_incoming(10 * MS, &answer(&a));
        assert_eq!(tx.in_flight_time(10 * MS), 20 * MS);
        tx.handle_timeout(20 * MS);
        let retry = tx.poll_transmit().unwrap();
        assert_eq!(tx.in_flight_time(20 * MS), 30 * MS);
        tx.handle_incoming(25 * MS, &answer(&retry));
        assert_eq!(tx.in_flight(), 0);
        assert_eq!(tx.in_flight_time(25 * MS), 35 * MS);
        assert_eq!(
            tx.in_flight_time(60 * MS),
            35 * MS,
            "nothing on the wire since"
        );
    }

    #[test]
    fn response_matches_by_tid_and_frees_the_window() {
        let mut tx = Transactions::new(cfg(1, 0));
        tx.submit(Duration::ZERO, get(0), "a");
        tx.submit(Duration::ZERO, get(1), "b");
        assert_eq!((tx.in_flight(), tx.queued()), (1, 1));
        let first = tx.poll_transmit().unwrap();
        assert!(tx.poll_transmit().is_none(), "window of 1 exceeded");
        assert_eq!(
            Smp::peek_tid(&first).unwrap() >> 32,
            0xabcd,
            "per-agent TID high part"
        );
        tx.handle_incoming(MS, &answer(&first));
        match tx.poll_event() {
            Some(Event::Response { token: "a", smp }) => assert_eq!(smp.method, Method::GET_RESP),
            other => panic!("unexpected {other:?}"),
        }
        let second = tx
            .poll_transmit()
            .expect("queued request goes out when the slot frees");
        assert_ne!(
            Smp::peek_tid(&first),
            Smp::peek_tid(&second),
            "TIDs are unique"
        );
        tx.handle_incoming(MS, &answer(&second));
        assert!(matches!(
            tx.poll_event(),
            Some(Event::Response { token: "b", .. })
        ));
        assert!(tx.is_idle());
        assert_eq!(tx.counters().responses, 2);
    }

    #[test]
    fn matching_ignores_a_rewritten_tid_high_half() {
        // The Linux umad driver replaces the high 32 bits with its agent id.
        let mut tx = Transactions::new(cfg(4, 0));
        tx.submit(Duration::ZERO, get(0), 1u32);
        let mut smp = Smp::decode(&tx.poll_transmit().unwrap())
            .unwrap()
            .response();
        smp.tid = (smp.tid & 0xffff_ffff) | (7u64 << 32);
        tx.handle_incoming(MS, &smp.encode());
        assert!(matches!(
            tx.poll_event(),
            Some(Event::Response { token: 1, .. })
        ));
    }

    #[test]
    fn retry_uses_a_new_tid_and_a_late_answer_to_the_old_one_is_dropped() {
        let mut tx = Transactions::new(cfg(4, 1));
        tx.submit(Duration::ZERO, get(2), ());
        let first = tx.poll_transmit().unwrap();
        assert_eq!(tx.poll_timeout(), Some(10 * MS));
        tx.handle_timeout(9 * MS);
        assert!(tx.poll_transmit().is_none(), "retried before the deadline");
        tx.handle_timeout(10 * MS);
        let retry = tx.poll_transmit().expect("retry");
        assert_ne!(Smp::peek_tid(&first), Smp::peek_tid(&retry));
        tx.handle_incoming(11 * MS, &answer(&first));
        assert!(
            tx.poll_event().is_none(),
            "late answer to the first attempt matched"
        );
        assert_eq!(tx.counters().unmatched, 1);
        tx.handle_incoming(12 * MS, &answer(&retry));
        assert!(matches!(tx.poll_event(), Some(Event::Response { .. })));
        let c = tx.counters();
        assert_eq!((c.sent, c.retries, c.timeouts, c.failures), (2, 1, 1, 0));
    }

    #[test]
    fn gives_up_after_retries() {
        let mut tx = Transactions::new(cfg(4, 2));
        tx.submit(Duration::ZERO, get(1), 5u8);
        let mut now = Duration::ZERO;
        while let Some(t) = tx.poll_timeout() {
            now = t;
            tx.handle_timeout(now);
        }
        assert_eq!(now, 30 * MS);
        assert!(matches!(
            tx.poll_event(),
            Some(Event::Failed { token: 5, .. })
        ));
        let c = tx.counters();
        assert_eq!((c.sent, c.retries, c.timeouts, c.failures), (3, 2, 3, 1));
        assert!(tx.poll_event().is_none());
    }

    #[test]
    fn requests_from_the_fabric_are_unsolicited_events() {
        let mut tx: Transactions<()> = Transactions::new(cfg(4, 0));
        let sminfo_get = Smp::get_dr(&[], AttributeId::SM_INFO, 0, 0x55);
        tx.handle_incoming(MS, &sminfo_get.encode());
        match tx.poll_event() {
            Some(Event::Unsolicited(smp)) => assert_eq!(smp.attr_id, AttributeId::SM_INFO),
            other => panic!("unexpected {other:?}"),
        }
        tx.handle_incoming(MS, &sminfo_get.response().encode());
        assert!(
            tx.poll_event().is_none(),
            "a stray response is not an event"
        );
        tx.handle_incoming(MS, &[0u8; 10]);
        let c = tx.counters();
        assert_eq!((c.unsolicited, c.unmatched, c.malformed), (1, 1, 1));
    }

    #[derive(Debug, Clone)]
    enum Step {
        /// Answer wire item i (it stays on the wire, so it can be answered twice).
        Answer(usize),
        /// Lose wire item i.
        Lose(usize),
        /// Advance time and handle timeouts.
        Tick(u64),
        /// Submit another request.
        Submit,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => any::<usize>().prop_map(Step::Answer),
            2 => any::<usize>().prop_map(Step::Lose),
            2 => (0u64..25).prop_map(Step::Tick),
            1 => Just(Step::Submit),
        ]
    }

    proptest! {
        /// Whatever the order of answers, duplicates and losses: every request
        /// ends in exactly one Response or Failed, and the window is never exceeded.
        #[test]
        fn every_request_ends_exactly_once(
            window in 1usize..6,
            retries in 0u32..3,
            initial in 0usize..20,
            steps in proptest::collection::vec(step(), 0..200),
        ) {
            let mut tx = Transactions::new(cfg(window, retries));
            let mut now = Duration::ZERO;
            let mut next_token = 0u32;
            let mut wire: Vec<[u8; MAD_SIZE]> = Vec::new();
            let mut ended: HashMap<u32, u32> = HashMap::new();
            let mut submit = |tx: &mut Transactions<u32>, now| {
                tx.submit(now, get(1), next_token);
                next_token += 1;
            };
            for _ in 0..initial {
                submit(&mut tx, now);
            }
            let drain = |tx: &mut Transactions<u32>, wire: &mut Vec<_>, ended: &mut HashMap<u32, u32>| {
                prop_assert!(tx.in_flight() <= window, "window exceeded");
                while let Some(m) = tx.poll_transmit() {
                    wire.push(m);
                }
                while let Some(ev) = tx.poll_event() {
                    match ev {
                        Event::Response { token, .. } | Event::Failed { token, .. } => {
                            *ended.entry(token).or_default() += 1;
                        }
                        Event::Unsolicited(_) => prop_assert!(false, "no unsolicited traffic here"),
                    }
                }
                Ok(())
            };
            drain(&mut tx, &mut wire, &mut ended)?;
            for s in steps {
                match s {
                    Step::Answer(i) if !wire.is_empty() => {
                        let m = wire[i % wire.len()];
                        tx.handle_incoming(now, &answer(&m));
                    }
                    Step::Lose(i) if !wire.is_empty() => {
                        wire.remove(i % wire.len());
                    }
                    Step::Tick(ms) => {
                        now += Duration::from_millis(ms);
                        tx.handle_timeout(now);
                    }
                    Step::Submit => submit(&mut tx, now),
                    _ => {}
                }
                drain(&mut tx, &mut wire, &mut ended)?;
            }
            // The fabric goes silent: everything must still end.
            while let Some(t) = tx.poll_timeout() {
                prop_assert!(t >= now, "deadline in the past");
                now = t;
                tx.handle_timeout(now);
                drain(&mut tx, &mut wire, &mut ended)?;
            }
            prop_assert!(tx.is_idle());
            prop_assert_eq!(ended.len() as u32, next_token, "some request never ended");
            prop_assert!(ended.values().all(|&n| n == 1), "a request ended twice");
            let c = tx.counters();
            prop_assert_eq!(c.responses + c.failures, u64::from(next_token));
            prop_assert_eq!(c.sent, c.submitted + c.retries);
        }
    }
}
