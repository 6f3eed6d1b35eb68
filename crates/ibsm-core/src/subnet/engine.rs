//! The engine that moves every sweep along: the MADs and timeouts the driver feeds
//! in, what it drains (SMPs, events, routing jobs, the next timeout), and the pump
//! that hands requests to the shared MAD agent within its window, dispatches its
//! outcomes to the stage that sent them (dropping those of an abandoned
//! generation) and advances each stage once it is complete.

use std::time::Duration;

use ibsm_fabric::NodeIdx;
use ibsm_mad::{AttributeId, Method, Smp};

use crate::discovery::DiscoveryResult;
use crate::transactions::{Event, Transactions};

use super::activation;
use super::events::{Outgoing, PhaseTimes, SubnetEvent, SweepKind, SweepReason, SweepReport};
use super::inherit::{start_readback, Readback};
use super::lft_write;
use super::manager::SubnetManager;
use super::port_digest;
use super::program;
use super::routing_job::{RoutingDone, RoutingJob};
use super::sa_snapshot_job::{SaSnapshotDone, SaSnapshotJob};
use super::sweep::{Op, Stage, Tagged, Token};

impl SubnetManager {
    /// Feed a MAD received from the device (its source LID unknown: a LID-routed
    /// trap's repress then goes to the notice's IssuerLID). Prefer
    /// [`SubnetManager::handle_incoming_from`].
    pub fn handle_incoming(&mut self, now: Duration, bytes: &[u8]) {
        self.handle_incoming_from(now, bytes, 0);
    }

    /// Feed a MAD received from the device with the LRH SLID it came from
    /// (`ReceivedMad::slid`; 0 or 0xFFFF when not known): a LID-routed trap is
    /// repressed there, and rate-limited per that source.
    pub fn handle_incoming_from(&mut self, now: Duration, bytes: &[u8], slid: u16) {
        if !self.running() {
            return;
        }
        let smp = match Smp::decode(bytes) {
            Ok(smp) => smp,
            Err(err) => {
                tracing::debug!(%err, "dropping undecodable MAD");
                return;
            }
        };
        if smp.method == Method::TRAP && smp.attr_id == AttributeId::NOTICE {
            self.handle_trap_from(now, &smp, slid);
        } else if smp.method.0 & 0x80 != 0 {
            self.tx.handle_incoming(now, bytes);
        } else {
            self.events.push_back(SubnetEvent::Unsolicited(smp));
        }
        self.pump(now);
    }

    /// Call when [`SubnetManager::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Duration) {
        if !self.running() {
            return;
        }
        self.wake_now = None;
        self.tx.handle_timeout(now);
        self.flush_trap_log(now);
        // A requested heavy sweep (held down, or about to start) stands for a light one.
        if matches!(self.stage, Stage::Idle)
            && self.heavy_requested.is_none()
            && self.next_light.is_some_and(|t| t <= now)
        {
            self.start_light(now);
        }
        self.pump(now);
    }

    /// When to call [`SubnetManager::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if !self.running() {
            return None;
        }
        let idle = matches!(self.stage, Stage::Idle);
        let held = match self.heavy_requested {
            Some(r @ SweepReason::Trap(_)) if idle => {
                self.hold_down_until().filter(|_| self.held_down_at_all(r))
            }
            _ => None,
        };
        [
            self.tx.poll_timeout(),
            self.wake_now,
            if idle { self.next_light } else { None },
            held,
            self.trap_log.next_report(),
            if idle || matches!(self.stage, Stage::Light { .. }) {
                self.mcast_due()
            } else {
                None
            },
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The next SMP to send.
    pub fn poll_transmit(&mut self) -> Option<Outgoing> {
        if let Some(o) = self.transmit.pop_front() {
            return Some(o);
        }
        self.tx
            .poll_transmit()
            .map(|mad| Outgoing { dlid: None, mad })
    }

    /// The next event.
    /// With [`SubnetConfig::offload_routing`](super::config::SubnetConfig::offload_routing):
    /// the next routing computation to run (on any thread: it owns its inputs); give
    /// its result to [`SubnetManager::handle_routing_done`]. A result for a sweep that
    /// was dropped meanwhile is ignored.
    pub fn poll_routing_job(&mut self) -> Option<RoutingJob> {
        self.routing_jobs.pop_front()
    }

    /// A [`RoutingJob`]'s result: the waiting sweep goes on to distribution at the
    /// next [`SubnetManager::handle_timeout`] (its timer is due at once).
    pub fn handle_routing_done(&mut self, now: Duration, done: RoutingDone) {
        let waiting = matches!(&self.stage, Stage::Routing(_, id) if *id == done.id);
        if !waiting {
            tracing::debug!(job = done.id, "routing result for a dropped sweep ignored");
            return;
        }
        if let Stage::Routing(mut sweep, _) = std::mem::replace(&mut self.stage, Stage::Idle) {
            sweep.tables = done.tables;
            self.keep_unaffected_routes(&mut sweep);
            sweep.report.lft_top = sweep.tables.lft_top;
            self.wake_now = Some(now);
            self.stage = Stage::RoutingDone(sweep);
        }
    }

    /// With [`SubnetConfig::offload_sa_snapshot`](super::config::SubnetConfig::offload_sa_snapshot):
    /// the next SA snapshot to build (on any thread: it owns its inputs); give its
    /// result to [`SubnetManager::handle_sa_snapshot_done`].
    pub fn poll_sa_snapshot_job(&mut self) -> Option<SaSnapshotJob> {
        self.sa_jobs.pop_front()
    }

    /// An [`SaSnapshotJob`]'s result: the SA answers from it from now on, and the
    /// events its sweep held come out (in the order the sweeps ended). A result of a
    /// mastership that ended ([`SubnetManager::stop`]), or older than the snapshot the
    /// SA already has, is dropped.
    pub fn handle_sa_snapshot_done(&mut self, done: SaSnapshotDone) {
        let Some(at) = self.sa_pending.iter().position(|p| p.id == done.id) else {
            tracing::debug!(job = done.id, "SA snapshot of an ended mastership dropped");
            self.sa_retired.fabrics.push(done.fabric);
            return;
        };
        // Results come back in order; one that overtook an earlier job releases that
        // job's events too (its own snapshot is newer).
        for p in self.sa_pending.drain(..=at) {
            self.events.extend(p.events);
        }
        let newer = self
            .sa_fabric
            .as_ref()
            .is_none_or(|old| old.sweep < done.fabric.sweep);
        if !newer {
            tracing::debug!(
                job = done.id,
                sweep = done.fabric.sweep,
                "SA snapshot older than the one served dropped"
            );
            self.sa_retired.fabrics.push(done.fabric);
            return;
        }
        if let Some(old) = self.sa_fabric.replace(done.fabric) {
            self.sa_retired.fabrics.push(old);
        }
    }

    /// SA snapshots handed to the driver and not back yet.
    pub fn sa_snapshots_pending(&self) -> usize {
        self.sa_pending.len()
    }

    pub fn poll_event(&mut self) -> Option<SubnetEvent> {
        self.events.pop_front()
    }

    // ---- internals ------------------------------------------------------------

    /// Master, or preparing a takeover (read-only).
    fn running(&self) -> bool {
        self.active || self.preparing.is_some()
    }

    pub(super) fn request_heavy(&mut self, reason: SweepReason) {
        match self.heavy_requested {
            None => self.heavy_requested = Some(reason),
            // A held-down trap request gives way to one that is not held down.
            Some(SweepReason::Trap(_)) if !matches!(reason, SweepReason::Trap(_)) => {
                self.heavy_requested = Some(reason);
            }
            Some(_) => {}
        }
    }

    /// Move outcomes into the stages and requests into the agent until quiet.
    pub(super) fn pump(&mut self, now: Duration) {
        if !self.running() {
            return;
        }
        loop {
            let mut progressed = false;
            while let Some(ev) = self.tx.poll_event() {
                progressed = true;
                self.dispatch(ev);
            }
            progressed |= self.feed(now);
            progressed |= self.advance(now);
            if !progressed {
                break;
            }
        }
    }

    fn dispatch(&mut self, ev: Event<Tagged>) {
        let ev = match ev {
            Event::Response { token, smp } if token.generation == self.generation => {
                Event::Response {
                    token: token.token,
                    smp,
                }
            }
            Event::Failed { token, request } if token.generation == self.generation => {
                Event::Failed {
                    token: token.token,
                    request,
                }
            }
            Event::Unsolicited(smp) => Event::Unsolicited(smp),
            Event::Response { .. } | Event::Failed { .. } => {
                tracing::trace!("outcome of an abandoned sweep's request dropped");
                return;
            }
        };
        match ev {
            Event::Unsolicited(smp) => self.events.push_back(SubnetEvent::Unsolicited(smp)),
            Event::Response { token, smp } => match token {
                Token::Disc(t) => {
                    if let Stage::Discovering(d) = &mut self.stage {
                        d.handle_response(t, &smp);
                    }
                }
                Token::Prog(op) => {
                    if let Stage::Programming(sw) = &mut self.stage {
                        sw.outstanding = sw.outstanding.saturating_sub(1);
                        if smp.status == 0 {
                            if let (
                                Op::PortInfo { node, port } | Op::State { node, port, .. },
                                Ok(pi),
                            ) = (op, smp.attribute::<ibsm_mad::PortInfo>())
                            {
                                sw.port_info_set.insert((node, port), pi);
                            }
                            program::remember(sw, &self.cfg, &mut self.programmed, op);
                        } else {
                            sw.report.failures += 1;
                            tracing::warn!(?op, status = smp.status, "programming SMP rejected");
                        }
                        let outcome = if smp.status == 0 {
                            lft_write::Outcome::Answered
                        } else {
                            lft_write::Outcome::Failed
                        };
                        lft_write::finish(sw, &mut self.programmed, op, outcome);
                        activation::op_done(sw, op);
                    }
                }
                Token::Light(op) => self.on_light(op, Some(&smp)),
                Token::Verify(op) => {
                    if let Stage::Verifying(v) = &mut self.stage {
                        v.on_response(op, &smp);
                    }
                }
                Token::Mft(w) => self.on_mft(w, smp.status == 0),
                Token::ReadLft { node, block } => {
                    let rb = match &mut self.stage {
                        Stage::ReadingLfts(_, rb) => Some(&mut **rb),
                        _ => self.early_readback.as_deref_mut(),
                    };
                    if let Some(rb) = rb {
                        rb.outstanding = rb.outstanding.saturating_sub(1);
                        match smp.attribute::<ibsm_mad::attr::LinearForwardingTable>() {
                            Ok(t) if smp.status == 0 => rb.store(node, block, &t.ports),
                            _ => {
                                rb.failed.insert(node);
                            }
                        }
                    }
                }
            },
            Event::Failed { token, .. } => match token {
                Token::Disc(t) => {
                    if let Stage::Discovering(d) = &mut self.stage {
                        d.handle_failure(t, "no response after retries");
                    }
                }
                Token::Prog(op) => {
                    if let Stage::Programming(sw) = &mut self.stage {
                        sw.outstanding = sw.outstanding.saturating_sub(1);
                        sw.report.failures += 1;
                        let node = op.node();
                        if let Some(d) = sw.dead.get_mut(node as usize) {
                            if !*d {
                                tracing::warn!(
                                    node,
                                    ?op,
                                    "node stopped answering; skipped for this sweep"
                                );
                                sw.report.dead_nodes += 1;
                            }
                            *d = true;
                        }
                        if let Some(f) = sw.lft_failed.get_mut(node as usize) {
                            *f = true;
                        }
                        let failed = lft_write::Outcome::Failed;
                        lft_write::finish(sw, &mut self.programmed, op, failed);
                        activation::op_done(sw, op);
                    }
                }
                Token::Light(op) => self.on_light(op, None),
                Token::Verify(op) => {
                    if let Stage::Verifying(v) = &mut self.stage {
                        v.on_failure(op);
                    }
                }
                Token::Mft(w) => self.on_mft(w, false),
                Token::ReadLft { node, .. } => {
                    let rb = match &mut self.stage {
                        Stage::ReadingLfts(_, rb) => Some(&mut **rb),
                        _ => self.early_readback.as_deref_mut(),
                    };
                    if let Some(rb) = rb {
                        rb.outstanding = rb.outstanding.saturating_sub(1);
                        rb.failed.insert(node);
                    }
                }
            },
        }
    }

    /// Submit requests while the agent's backlog is below one window.
    fn feed(&mut self, now: Duration) -> bool {
        let window = self.tx.config().window;
        let mut progressed = false;
        match &mut self.stage {
            Stage::Discovering(d) => {
                while self.tx.queued() < window {
                    let Some(token) = d.poll_request() else { break };
                    progressed = true;
                    match token.to_smp() {
                        Ok(smp) => self.tx.submit(
                            now,
                            smp,
                            Tagged {
                                generation: self.generation,
                                token: Token::Disc(token),
                            },
                        ),
                        Err(err) => d.handle_failure(token, &err.to_string()),
                    }
                }
            }
            Stage::Verifying(v) => {
                while self.tx.queued() < window {
                    let Some((op, smp)) = v.next() else { break };
                    progressed = true;
                    self.tx.submit(
                        now,
                        smp,
                        Tagged {
                            generation: self.generation,
                            token: Token::Verify(op),
                        },
                    );
                }
                // The LFT read-back of the known switches shares the window (see
                // `verify`): it needs only their routes and LinearFDBTop.
                if let Some(rb) = self.early_readback.as_deref_mut() {
                    if v.failed.is_none() {
                        progressed |=
                            feed_readback(&mut self.tx, self.generation, now, window, rb, &v.res);
                    }
                }
            }
            Stage::ReadingLfts(sw, rb) => {
                progressed |=
                    feed_readback(&mut self.tx, self.generation, now, window, rb, &sw.res);
            }
            Stage::Programming(sw) => {
                while self.tx.queued() < window {
                    let Some(op) = program::next_op(sw, &self.cfg, &self.programmed) else {
                        break;
                    };
                    progressed = true;
                    match program::op_smp(sw, &self.cfg, op) {
                        Ok(smp) => {
                            sw.outstanding += 1;
                            program::count(&mut sw.report, op);
                            if matches!(op, Op::State { .. }) && !sw.pipe.dist_end_marked {
                                sw.report.phase_smps.activation_overlapped += 1;
                            }
                            if matches!(op, Op::PortInfo { .. } | Op::State { state: 3, .. })
                                && smp
                                    .attribute::<ibsm_mad::PortInfo>()
                                    .is_ok_and(|p| p.client_reregister)
                            {
                                sw.report.client_reregisters += 1;
                            }
                            self.tx.submit(
                                now,
                                smp,
                                Tagged {
                                    generation: self.generation,
                                    token: Token::Prog(op),
                                },
                            );
                        }
                        Err(err) => {
                            sw.report.failures += 1;
                            tracing::warn!(?op, %err, "cannot build programming SMP");
                            let not_sent = lft_write::Outcome::NotSent;
                            lft_write::finish(sw, &mut self.programmed, op, not_sent);
                            activation::op_done(sw, op);
                        }
                    }
                }
            }
            Stage::Idle | Stage::Light { .. } if self.active => {
                progressed |= self.feed_mft(now);
            }
            _ => {}
        }
        progressed
    }

    /// Move to the next stage when the current one is complete.
    fn advance(&mut self, now: Duration) -> bool {
        let stage = std::mem::replace(&mut self.stage, Stage::Idle);
        let (next, progressed) = match stage {
            Stage::Idle => match self.heavy_requested {
                Some(reason) if self.held_down(now, reason) => (Stage::Idle, false),
                Some(reason) => {
                    self.heavy_requested = None;
                    self.start_heavy(now, reason);
                    return true;
                }
                None => (Stage::Idle, false),
            },
            Stage::Discovering(d) if d.is_done() => (self.discovered(now, d.into_result()), true),
            Stage::Verifying(v) if v.is_done() => (self.verified(now, *v), true),
            // Compute phases resume only from handle_timeout (which clears
            // wake_now), so the phase time is measured between two calls.
            Stage::LidsDone(mut sweep) if self.wake_now.is_none() => {
                // LIDs took from marks[1] to now (this call came after the wake-up).
                self.mark(2, now);
                if self.inherit.is_some() {
                    // A new master: read back what the switches hold first.
                    let standing = std::mem::take(&mut self.standing_lfts);
                    let rb = self.early_readback.take().map_or_else(
                        || start_readback(&sweep.res, self.inherit.as_ref(), &standing),
                        |rb| *rb,
                    );
                    (Stage::ReadingLfts(sweep, Box::new(rb)), true)
                } else {
                    match self.reuse_routing(&sweep) {
                        Some(t) => {
                            sweep.tables = t;
                            sweep.report.lft_top = sweep.tables.lft_top;
                            self.wake_now = Some(now);
                            (Stage::RoutingDone(sweep), true)
                        }
                        None => self.route(now, sweep),
                    }
                }
            }
            // A prepared takeover waits here for MASTER (and the replicated state
            // as it is then) before comparing.
            Stage::ReadingLfts(mut sweep, rb)
                if rb.queue.is_empty() && rb.outstanding == 0 && self.active =>
            {
                let inh = self.inherit.take().unwrap_or_default();
                let report = self.finish_readback(&mut sweep, *rb, &inh);
                // A verified takeover over the replicated cabling and LIDs: what the
                // previous master programmed into the ports may be trusted where its
                // digest equals ours (see `port_digest`).
                if sweep.verified && report.topology_unchanged && sweep.lids_stable {
                    sweep.seed = Some(inh.port_digests);
                }
                let adopted = report.adopted;
                self.inherit_report = Some(report);
                if adopted {
                    sweep.report.lft_top = sweep.tables.lft_top;
                    self.wake_now = Some(now);
                    (Stage::RoutingDone(sweep), true)
                } else {
                    self.route(now, sweep)
                }
            }
            Stage::RoutingDone(mut sweep) if self.wake_now.is_none() => {
                self.mark(3, now);
                if let Some(p) = self.pending_partitions.take() {
                    self.cfg.partitions = p;
                }
                if let Some(digests) = sweep.seed.take() {
                    let r = port_digest::seed(&sweep, &self.cfg, &mut self.programmed, &digests);
                    tracing::info!(
                        seeded = r.seeded,
                        differ = r.differ,
                        replicated = digests.len(),
                        "takeover: ports whose P_Key/SLtoVL/VLArb tables match the replicated digests are not written"
                    );
                    self.port_seed = Some(r);
                }
                sweep.pipe = activation::pipeline(sweep.res.topology.len());
                sweep.cursor = 0;
                (Stage::Programming(sweep), true)
            }
            Stage::Programming(mut sweep) => {
                let mut progressed = false;
                let all_planned = sweep.cursor >= sweep.res.topology.len();
                if all_planned && sweep.pipe.dist_left == 0 && !sweep.pipe.dist_end_marked {
                    sweep.pipe.dist_end_marked = true;
                    self.mark(4, now);
                    progressed = true;
                }
                if all_planned
                    && sweep.outstanding == 0
                    && sweep.ops.is_empty()
                    && sweep.lft_next.is_empty()
                    && sweep.pipe.ready.is_empty()
                {
                    if !sweep.pipe.dist_end_marked {
                        self.mark(4, now);
                    }
                    self.mark(5, now);
                    self.finish_heavy(now, sweep);
                    (Stage::Idle, true)
                } else {
                    (Stage::Programming(sweep), progressed)
                }
            }
            Stage::Light {
                outstanding: 0,
                changed,
            } => {
                self.metrics.light_sweeps += 1;
                let report = SweepReport {
                    smps: self.tx.counters().sent - self.light_smps_start,
                    changed,
                    ..SweepReport::default()
                };
                self.events.push_back(SubnetEvent::SweepDone {
                    kind: SweepKind::Light,
                    phases: PhaseTimes::default(),
                    report,
                });
                if changed {
                    tracing::info!("light sweep saw a change");
                    self.request_heavy(SweepReason::LightSweepChange);
                } else {
                    self.next_light = Some(now + self.cfg.sweep_interval);
                }
                (Stage::Idle, true)
            }
            other => (other, false),
        };
        self.stage = next;
        progressed
    }
}

/// Submit LFT read-back Gets (one per block) of `rb`'s queue over `res`'s routes while
/// the agent's backlog is below `window`; a switch without a route is marked failed.
/// True if any block was taken. Both the read-back after discovery and the one beside
/// a verification (`Stage::Verifying`) use it.
fn feed_readback(
    tx: &mut Transactions<Tagged>,
    generation: u32,
    now: Duration,
    window: usize,
    rb: &mut Readback,
    res: &DiscoveryResult,
) -> bool {
    let mut progressed = false;
    while tx.queued() < window {
        let Some((node, block)) = rb.queue.pop_front() else {
            break;
        };
        progressed = true;
        let smp = res.path(NodeIdx(node)).and_then(|path| {
            Smp::try_get_dr(
                path,
                AttributeId::LINEAR_FORWARDING_TABLE,
                u32::from(block),
                0,
            )
            .ok()
        });
        match smp {
            Some(smp) => {
                rb.outstanding += 1;
                tx.submit(
                    now,
                    smp,
                    Tagged {
                        generation,
                        token: Token::ReadLft { node, block },
                    },
                );
            }
            None => {
                rb.failed.insert(node);
            }
        }
    }
    progressed
}
