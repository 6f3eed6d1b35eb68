//! N election state machines on a message bus, with per-step invariant checks.

use std::time::Duration;

use ibsm_core::election::{
    ControlPacket, Election, ElectionConfig, ElectionEvent, SmInfoMsg, SmPort, SmRoute, SmState,
    TransitionReason,
};

/// One SM of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmSpec {
    /// Port GUID.
    pub guid: u64,
    /// Configuration (port_guid is overwritten with `guid`).
    pub config: ElectionConfig,
}

impl SmSpec {
    /// An SM with default config, this GUID and priority.
    pub fn new(guid: u64, priority: u8) -> SmSpec {
        SmSpec {
            guid,
            config: ElectionConfig {
                priority,
                ..ElectionConfig::new(guid)
            },
        }
    }
}

/// A message on the bus.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    /// Sender index.
    pub from: usize,
    /// Receiver index.
    pub to: usize,
    /// Earliest delivery time (settle and sim deliver then; the explorer ignores it).
    pub at: Duration,
    /// The SMP.
    pub msg: SmInfoMsg,
}

/// The world: SMs (None = crashed), the bus, the clock, and the first invariant violation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    /// The SMs as configured.
    pub specs: Vec<SmSpec>,
    /// Live state machines; `None` while crashed.
    pub nodes: Vec<Option<Election>>,
    /// Restarts of each SM (new TID space per incarnation).
    pub incarnation: Vec<u32>,
    /// Virtual time.
    pub now: Duration,
    /// Messages in flight, in send order.
    pub inflight: Vec<InFlight>,
    /// The first safety violation seen, if any.
    pub violation: Option<String>,
}

/// Steps one `run_while` may take before it declares a livelock (the election must
/// not generate work faster than virtual time advances).
pub const STEP_LIMIT: u64 = 100_000;

/// LID of SM `i`.
pub fn lid_of(i: usize) -> u16 {
    u16::try_from(i + 1).unwrap_or(u16::MAX)
}

impl World {
    /// All SMs start at time 0 and get a sweep listing every SM port.
    pub fn new(specs: Vec<SmSpec>) -> World {
        World::with_crashed(specs, &[])
    }

    /// Like [`new`](Self::new), but the SMs listed start crashed (restart them later).
    pub fn with_crashed(specs: Vec<SmSpec>, crashed: &[usize]) -> World {
        let n = specs.len();
        let mut w = World {
            nodes: vec![None; n],
            incarnation: vec![0; n],
            specs,
            now: Duration::ZERO,
            inflight: Vec::new(),
            violation: None,
        };
        for i in (0..n).filter(|i| !crashed.contains(i)) {
            w.start(i, &mut |_| Some(Duration::from_millis(1)));
        }
        w
    }

    /// Every SM port, as a sweep would report it.
    pub fn ports(&self) -> Vec<SmPort> {
        self.specs
            .iter()
            .enumerate()
            .map(|(i, s)| SmPort {
                guid: s.guid,
                route: SmRoute::Lid(lid_of(i)),
                lid: Some(lid_of(i)),
            })
            .collect()
    }

    fn start(&mut self, i: usize, net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>) {
        let Some(spec) = self.specs.get(i) else {
            return;
        };
        let inc = self.incarnation.get(i).copied().unwrap_or(0);
        let cfg = ElectionConfig {
            port_guid: spec.guid,
            tid_base: ((i as u64) << 48) | (u64::from(inc) << 32),
            ..spec.config.clone()
        };
        let ports = self.ports();
        match Election::new(cfg, self.now) {
            Ok(mut e) => {
                e.set_local_lid(lid_of(i));
                e.handle_sweep(self.now, &ports);
                if let Some(slot) = self.nodes.get_mut(i) {
                    *slot = Some(e);
                }
                self.pump(i, None, net);
            }
            Err(err) => self.fail(format!("SM {i}: bad config: {err}")),
        }
    }

    fn fail(&mut self, why: String) {
        if self.violation.is_none() {
            self.violation = Some(why);
        }
    }

    /// Live SMs in MASTER.
    pub fn masters(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.as_ref().is_some_and(|e| e.state() == SmState::Master))
            .map(|(i, _)| i)
            .collect()
    }

    /// The highest-ranked live SM by configured priority, ties to the lower GUID.
    pub fn best_live(&self) -> Option<usize> {
        self.best_live_ignoring(&[])
    }

    /// [`best_live`](Self::best_live) among the SMs not in `ignored` (rogues).
    pub fn best_live_ignoring(&self, ignored: &[usize]) -> Option<usize> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| n.is_some() && !ignored.contains(i))
            .map(|(i, _)| i)
            .max_by(|&a, &b| {
                let (sa, sb) = (&self.specs[a], &self.specs[b]);
                (sa.config.priority, std::cmp::Reverse(sa.guid))
                    .cmp(&(sb.config.priority, std::cmp::Reverse(sb.guid)))
            })
    }

    /// Drains SM `i`'s transmits onto the bus and checks its events. `prev` is the state
    /// before the step. `net` decides per message: `Some(latency)` or `None` (lost).
    fn pump(
        &mut self,
        i: usize,
        prev: Option<SmState>,
        net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>,
    ) {
        let now = self.now;
        let n = self.nodes.len();
        let mut out = Vec::new();
        let mut events = Vec::new();
        let mut state_now = None;
        if let Some(Some(e)) = self.nodes.get_mut(i) {
            let mut requests = 0u32;
            while let Some(t) = e.poll_transmit() {
                if !t.msg.is_response() {
                    requests += 1;
                }
                out.push(t);
            }
            e.handle_smps_sent(requests);
            while let Some(ev) = e.poll_event() {
                events.push(ev);
            }
            state_now = Some(e.state());
        }
        for t in out {
            let SmRoute::Lid(l) = t.dest else {
                self.fail(format!("SM {i}: directed route on the bus: {:?}", t.dest));
                continue;
            };
            let to = usize::from(l).wrapping_sub(1);
            if to >= n {
                self.fail(format!("SM {i}: SMP to unknown LID {l}"));
                continue;
            }
            if let Some(lat) = net(&t.msg) {
                self.inflight.push(InFlight {
                    from: i,
                    to,
                    at: now + lat,
                    msg: t.msg,
                });
            }
        }
        let mut cur = prev;
        let mut sweep = false;
        for ev in events {
            // The model's bus has fixed LID routes: a fresh sweep finds the same SM
            // ports, and is made at once.
            sweep |= ev == ElectionEvent::DiscoveryNeeded;
            if let ElectionEvent::StateChanged { from, to, reason } = &ev {
                if let Some(c) = cur {
                    if c != *from {
                        self.fail(format!("SM {i}: event says {from} -> {to}, but it was {c}"));
                    }
                }
                let legal = matches!(
                    (from, to),
                    (SmState::NotActive, SmState::Standby)
                        | (SmState::Discovering, SmState::Standby | SmState::Master)
                        | (
                            SmState::Standby,
                            SmState::Discovering | SmState::Master | SmState::NotActive
                        )
                        | (SmState::Master, SmState::Standby)
                );
                if !legal {
                    self.fail(format!("SM {i}: illegal transition: {ev}"));
                }
                if *from == SmState::NotActive
                    && !matches!(
                        reason,
                        TransitionReason::Control {
                            packet: ControlPacket::Standby,
                            ..
                        }
                    )
                {
                    self.fail(format!("SM {i}: left NOTACTIVE without STANDBY: {ev}"));
                }
                cur = Some(*to);
            }
        }
        if let (Some(c), Some(s)) = (cur, state_now) {
            if c != s {
                self.fail(format!("SM {i}: events end in {c}, state() is {s}"));
            }
        }
        // An SM with trusted_sm_guids never follows (nor hands over to) an SM outside it.
        if let Some(Some(e)) = self.nodes.get(i) {
            if let Some(m) = e.master_guid().filter(|g| !e.is_trusted(*g)) {
                let why = format!(
                    "SM {i}: {} behind the untrusted SM {m:#x} ({})",
                    e.state(),
                    self.describe()
                );
                self.fail(why);
            }
        }
        if sweep {
            let ports = self.ports();
            if let Some(Some(e)) = self.nodes.get_mut(i) {
                e.handle_sweep(now, &ports);
            }
            self.pump(i, state_now, net);
        }
    }

    /// Delivers in-flight message `k` at `max(now, at)` if `timed`, else at `now`.
    pub fn deliver(
        &mut self,
        k: usize,
        timed: bool,
        net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>,
    ) {
        if k >= self.inflight.len() {
            return;
        }
        let m = self.inflight.remove(k);
        if timed {
            self.now = self.now.max(m.at);
        }
        let now = self.now;
        let prev = match self.nodes.get_mut(m.to) {
            Some(Some(e)) => {
                let prev = e.state();
                e.handle_message(now, SmRoute::Lid(lid_of(m.from)), m.msg);
                prev
            }
            _ => return, // to a crashed SM: lost
        };
        self.pump(m.to, Some(prev), net);
    }

    /// Drops in-flight message `k`.
    pub fn drop_msg(&mut self, k: usize) {
        if k < self.inflight.len() {
            self.inflight.remove(k);
        }
    }

    /// SM `i`'s next timer, if live.
    pub fn timer(&self, i: usize) -> Option<Duration> {
        self.nodes.get(i)?.as_ref()?.poll_timeout()
    }

    /// Fires SM `i`'s timer (the clock moves to it if it is later).
    pub fn fire(&mut self, i: usize, net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>) {
        let Some(t) = self.timer(i) else {
            return;
        };
        self.now = self.now.max(t);
        let now = self.now;
        let prev = match self.nodes.get_mut(i) {
            Some(Some(e)) => {
                let prev = e.state();
                e.handle_timeout(now);
                prev
            }
            _ => return,
        };
        self.pump(i, Some(prev), net);
    }

    /// Calls into live SM `i` now (an operator action such as `handover_to` or
    /// `set_priority`), then puts what it sends on the bus and checks its events.
    pub fn act<R>(
        &mut self,
        i: usize,
        net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>,
        f: impl FnOnce(&mut Election, Duration) -> R,
    ) -> Option<R> {
        let now = self.now;
        let (prev, r) = match self.nodes.get_mut(i) {
            Some(Some(e)) => (e.state(), f(e, now)),
            _ => return None,
        };
        self.pump(i, Some(prev), net);
        Some(r)
    }

    /// Crashes SM `i` (its messages in flight stay on the bus).
    pub fn crash(&mut self, i: usize) {
        if let Some(slot) = self.nodes.get_mut(i) {
            *slot = None;
        }
    }

    /// Restarts crashed SM `i` in DISCOVERING with a fresh sweep.
    pub fn restart(&mut self, i: usize, net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>) {
        if matches!(self.nodes.get(i), Some(None)) {
            if let Some(inc) = self.incarnation.get_mut(i) {
                *inc += 1;
            }
            self.start(i, net);
        }
    }

    /// The earliest pending thing (message arrival or timer) as (time, Some(k) = message k,
    /// None + node = timer of node).
    fn next_event(&self) -> Option<(Duration, Result<usize, usize>)> {
        let msg = self
            .inflight
            .iter()
            .enumerate()
            .min_by_key(|(k, m)| (m.at, *k))
            .map(|(k, m)| (m.at.max(self.now), Ok(k)));
        let tim = (0..self.nodes.len())
            .filter_map(|i| self.timer(i).map(|t| (t.max(self.now), Err(i))))
            .min_by_key(|(t, _)| *t);
        match (msg, tim) {
            (Some(m), Some(t)) => Some(if m.0 <= t.0 { m } else { t }),
            (m, t) => m.or(t),
        }
    }

    /// Runs the world in time order until `until` with `net` deciding loss and latency.
    /// Stops early on a violation. `after_step` sees the world after each step.
    pub fn run_until(
        &mut self,
        until: Duration,
        net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>,
        after_step: &mut dyn FnMut(&World),
    ) {
        self.run_while(until, net, &mut |w| {
            after_step(w);
            true
        });
        self.now = self.now.max(until);
    }

    /// Like [`run_until`](Self::run_until) but stops as soon as `keep_going` says false
    /// (then returns true) or on a violation.
    pub fn run_while(
        &mut self,
        until: Duration,
        net: &mut dyn FnMut(&SmInfoMsg) -> Option<Duration>,
        keep_going: &mut dyn FnMut(&World) -> bool,
    ) -> bool {
        let mut steps = 0u64;
        while self.violation.is_none() {
            let Some((t, what)) = self.next_event() else {
                break;
            };
            steps += 1;
            if steps > STEP_LIMIT {
                self.fail(format!(
                    "livelock: {STEP_LIMIT} steps without reaching {until:?} (at {t:?}, {} in flight: {})",
                    self.inflight.len(),
                    self.describe()
                ));
                break;
            }
            if t > until {
                break;
            }
            match what {
                Ok(k) => self.deliver(k, true, net),
                Err(i) => self.fire(i, net),
            }
            if !keep_going(self) {
                return true;
            }
        }
        false
    }

    /// Checks the end state: exactly one live master, the best live SM, everyone else
    /// live is STANDBY and polls that master (not another standby). `Err` says what is
    /// wrong.
    pub fn check_converged(&self, require_best: bool) -> Result<(), String> {
        self.check_converged_ignoring(require_best, &[])
    }

    /// [`check_converged`](Self::check_converged) among the SMs not in `ignored`: rogues
    /// (untrusted by the others) may be in any state, MASTER included.
    pub fn check_converged_ignoring(
        &self,
        require_best: bool,
        ignored: &[usize],
    ) -> Result<(), String> {
        let masters: Vec<usize> = self
            .masters()
            .into_iter()
            .filter(|i| !ignored.contains(i))
            .collect();
        if masters.len() != 1 {
            return Err(format!(
                "{} masters at {:?} (states: {})",
                masters.len(),
                self.now,
                self.describe()
            ));
        }
        if require_best && masters.first().copied() != self.best_live_ignoring(ignored) {
            return Err(format!(
                "master is SM {:?}, best live SM is {:?} ({})",
                masters.first(),
                self.best_live_ignoring(ignored),
                self.describe()
            ));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if ignored.contains(&i) {
                continue;
            }
            if let Some(e) = n {
                if e.state() != SmState::Master && e.state() != SmState::Standby {
                    return Err(format!("SM {i} still {} ({})", e.state(), self.describe()));
                }
                let master_guid = masters
                    .first()
                    .and_then(|&m| self.specs.get(m))
                    .map(|s| s.guid);
                if e.state() == SmState::Standby && e.master_guid() != master_guid {
                    return Err(format!(
                        "SM {i} is STANDBY behind {:x?}, not behind the master {:x?} ({})",
                        e.master_guid(),
                        master_guid,
                        self.describe()
                    ));
                }
            }
        }
        Ok(())
    }

    /// One line per SM: state, priority, master followed.
    pub fn describe(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| match n {
                None => format!("SM{i}=crashed"),
                Some(e) => format!("SM{i}={}/p{}", e.state(), e.priority()),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}
