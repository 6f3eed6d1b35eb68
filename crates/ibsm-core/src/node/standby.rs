//! Sweeps while not MASTER (DISCOVERING, STANDBY). A *heavy* sweep is a
//! directed-route discovery followed by a *probe* (SubnGet(PortInfo) of every CA port
//! and switch port 0: LIDs, port states, which ports advertise IsSM); a *light* sweep
//! is the probe alone, over the ports the last discovery found. The SM ports found
//! feed [`crate::election::Election::handle_sweep`] and their SMInfo is read for the
//! roster. Nothing is configured. The last discovery is kept: a new MASTER configures
//! from it when it is fresh.

use std::collections::BTreeSet;
use std::time::Duration;

use ibsm_mad::attr::LinearForwardingTable;
use ibsm_mad::{AttributeId, CapabilityMask, PortInfo, Smp};

use crate::discovery::{Discovery, DiscoveryResult};
use crate::election::{wire, DrRoute, SmInfoMsg, SmPort, SmRoute};
use crate::subnet::SweepKind;
use crate::transactions::Event;

use super::state::{Job, Phase, Running, Sweep, Target, Timer};
use super::types::{CommandReply, NodeEvent, PeerView};

impl Running {
    pub(crate) fn start_sweep(&mut self, now: Duration, heavy: bool) {
        let heavy = heavy || self.targets.is_empty();
        let mut replies = Vec::new();
        let waiting = std::mem::take(&mut self.waiting_replies);
        for (wants_heavy, id) in waiting {
            if heavy || !wants_heavy {
                replies.push(id);
            } else {
                self.waiting_replies.push((wants_heavy, id));
            }
        }
        if heavy {
            self.heavy_wanted = false;
            self.heavy_wanted_by_round = false;
            self.set_timer(
                Timer::Heavy,
                now.saturating_add(self.cfg.heavy_sweep_interval),
            );
        }
        self.set_timer(
            Timer::Light,
            now.saturating_add(self.cfg.light_sweep_interval),
        );
        self.emit(NodeEvent::Sweep(if heavy {
            SweepKind::Heavy
        } else {
            SweepKind::Light
        }));
        // The configurator's own discovery settings, so a new MASTER can start from
        // this discovery.
        let phase = if heavy {
            Phase::Discover(Box::new(Discovery::new(self.cfg.subnet.discovery.clone())))
        } else {
            Phase::Probe
        };
        self.sweep_seq += 1;
        self.sweep = Some(Sweep {
            seq: self.sweep_seq,
            heavy,
            changes_at_start: self.fabric_changes,
            topology_at_start: self.topology_changes,
            started: now,
            phase_started: now,
            phase,
            outstanding: 0,
            replies,
            smps_at_start: self.tx.counters().sent,
            in_flight_at_start: self.tx.in_flight_time(now),
        });
        if !heavy {
            self.launch_probe(now);
        }
    }

    fn launch_probe(&mut self, now: Duration) {
        let seq = self.sweep_seq;
        let mut n = 0;
        for (i, t) in self.targets.iter().enumerate() {
            let attr_mod = if t.is_switch { 0 } else { u32::from(t.port) };
            match Smp::try_get_dr(&t.path, AttributeId::PORT_INFO, attr_mod, 0) {
                Ok(smp) => {
                    self.tx.submit(now, smp, Job::Probe(seq, i));
                    n += 1;
                }
                Err(err) => tracing::warn!(%err, "cannot address a port"),
            }
        }
        if let Some(s) = self.sweep.as_mut() {
            s.phase = Phase::Probe;
            s.outstanding = n;
        }
    }

    pub(crate) fn on_tx_event(&mut self, now: Duration, ev: Event<Job>) {
        let (job, smp) = match ev {
            Event::Response { token, smp } => (token, Some(smp)),
            Event::Failed { token, .. } => (token, None),
            Event::Unsolicited(_) => return,
        };
        let current = self.sweep.as_ref().map(|s| s.seq);
        match job {
            Job::Disc(seq, _) | Job::Probe(seq, _) if current != Some(seq) => {
                // An answer to a sweep that was stopped (abandoned, or dropped when
                // we went MASTER or lost our link): not this sweep's.
            }
            Job::Disc(_, token) => {
                if let Some(Sweep {
                    phase: Phase::Discover(d),
                    ..
                }) = self.sweep.as_mut()
                {
                    match &smp {
                        Some(smp) => d.handle_response(token, smp),
                        None => d.handle_failure(token, "no response after retries"),
                    }
                }
            }
            Job::Probe(_, i) => {
                let info = smp
                    .filter(|s| s.status == 0)
                    .and_then(|s| s.attribute::<PortInfo>().ok());
                if let Some(t) = self.targets.get_mut(i) {
                    t.info = info;
                }
                self.finish_probe_one(now);
            }
            Job::StandingLft {
                generation,
                guid,
                block,
            } => {
                let ports = smp
                    .filter(|s| s.status == 0)
                    .and_then(|s| s.attribute::<LinearForwardingTable>().ok())
                    .map(|t| t.ports);
                self.standing
                    .on_block(generation, guid, block, ports.as_ref());
            }
            Job::PeerSmInfo(guid) => {
                let msg = smp
                    .filter(|s| s.status == 0)
                    .and_then(|smp| wire::decode_for_election(&smp))
                    .filter(|m| matches!(m, SmInfoMsg::GetResp { info, .. } if info.guid == guid));
                match msg {
                    Some(msg) => self.note_sm_info(now, &msg),
                    None => {
                        if let Some(p) = self.peers.get_mut(&guid) {
                            p.missed_polls = p.missed_polls.saturating_add(1);
                        }
                    }
                }
            }
        }
    }

    fn finish_probe_one(&mut self, now: Duration) {
        let Some(s) = self.sweep.as_mut() else {
            return;
        };
        if !matches!(s.phase, Phase::Probe) {
            return;
        }
        s.outstanding = s.outstanding.saturating_sub(1);
        if s.outstanding == 0 {
            self.probe_done(now);
        }
    }

    /// Discovery progress; returns true if it did something.
    pub(crate) fn advance_sweep(&mut self, now: Duration) -> bool {
        let Some(Sweep {
            phase: Phase::Discover(d),
            ..
        }) = self.sweep.as_mut()
        else {
            return false;
        };
        let seq = self.sweep_seq;
        let mut progressed = false;
        while self.tx.queued() < self.tx.config().window {
            let Some(token) = d.poll_request() else {
                break;
            };
            progressed = true;
            match token.to_smp() {
                Ok(smp) => self.tx.submit(now, smp, Job::Disc(seq, token)),
                Err(err) => d.handle_failure(token, &err.to_string()),
            }
        }
        if !d.is_done() {
            return progressed;
        }
        let Some(s) = self.sweep.as_mut() else {
            return progressed;
        };
        let Phase::Discover(d) = std::mem::replace(&mut s.phase, Phase::Probe) else {
            return progressed;
        };
        let result = d.into_result();
        let changes_at_start = s.changes_at_start;
        let topology_at_start = s.topology_at_start;
        self.phase_done(now, "discover");
        self.discovered(&result);
        if let Some(why) = crate::subnet::unsettled(&result) {
            // A takeover verifies only a discovery of a settled fabric (the master
            // was still bringing ports up): discover again at the next light-sweep
            // tick rather than in a heavy-sweep interval.
            tracing::debug!(%why, "standby discovery of an unsettled fabric: another soon");
            let at = now.saturating_add(self.cfg.light_sweep_interval);
            if at < self.timer(Timer::Heavy) {
                self.set_timer(Timer::Heavy, at);
            }
        }
        self.last_discovery = Some((now, changes_at_start, topology_at_start, result));
        self.launch_probe(now);
        if self.sweep.as_ref().is_some_and(|s| s.outstanding == 0) {
            self.probe_done(now);
        }
        true
    }

    /// Something other than the election's round wants a heavy standby sweep (a
    /// command, a trap, our link back, MASTER left): a `DiscoveryWithdrawn` must not
    /// take it back.
    pub(crate) fn want_heavy_sweep(&mut self) {
        self.heavy_wanted = true;
        self.heavy_wanted_by_round = false;
    }

    /// The election concluded its round without the sweep it asked for
    /// (`ElectionEvent::DiscoveryWithdrawn`: a MASTER answered, or a higher SM that
    /// is taking over): stop our
    /// heavy standby sweep, whose reads would compete for the fabric with the new
    /// master's takeover, and take back the heavy sweep the round wanted if it has not
    /// started. A sweep a command waits for is kept. What a stopped sweep read is
    /// dropped: `last_discovery` stays the one before (only a finished discovery is
    /// recorded), so nothing half-read is reused or verified. Returns a summary when
    /// it stopped one.
    pub(crate) fn abandon_standby_sweep(&mut self, now: Duration) -> Option<String> {
        if self.heavy_wanted_by_round {
            self.heavy_wanted = false;
            self.heavy_wanted_by_round = false;
        }
        let s = self.sweep.as_ref()?;
        if !s.heavy || !s.replies.is_empty() || self.subnet.is_active() {
            return None;
        }
        let s = self.sweep.take()?;
        let smps = self.tx.counters().sent.saturating_sub(s.smps_at_start);
        let phase = match s.phase {
            Phase::Discover(_) => "discovery",
            Phase::Probe => "probe",
        };
        let summary = format!(
            "heavy sweep abandoned in its {phase} after {} ms, {smps} SMPs: the election no longer needs it",
            now.saturating_sub(s.started).as_millis()
        );
        tracing::info!("{summary}");
        Some(summary)
    }

    /// Turn a discovery into the probe's target list.
    fn discovered(&mut self, result: &DiscoveryResult) {
        let topo = &result.topology;
        let mut targets = Vec::new();
        for (idx, node) in topo.iter() {
            let Some(path) = result.path(idx) else {
                continue;
            };
            if node.is_switch() {
                targets.push(Target {
                    port_guid: node.port(0).map_or(node.node_guid, |p| p.port_guid),
                    path: path.to_vec(),
                    port: 0,
                    is_switch: true,
                    info: None,
                });
                continue;
            }
            // The CA port this path enters: ours for the local node, else the one
            // whose cable comes from the last switch on the path.
            let port = if result.local.map(|(n, _)| n) == Some(idx) {
                result.local.map(|(_, p)| p)
            } else {
                node.physical_ports().find_map(|(num, p)| {
                    let (rn, rp) = p.remote?;
                    let mut via = result.path(rn)?.to_vec();
                    via.push(rp);
                    (via == path).then_some(num)
                })
            };
            let Some(port) = port else {
                continue;
            };
            let Some(p) = node.port(port) else {
                continue;
            };
            targets.push(Target {
                port_guid: p.port_guid,
                path: path.to_vec(),
                port,
                is_switch: false,
                info: None,
            });
        }
        self.nodes = topo.len();
        self.unreachable = result.unreachable.len();
        self.targets = targets;
    }

    /// The probe finished: feed the election, read SMInfo of the SM ports.
    fn probe_done(&mut self, now: Duration) {
        self.phase_done(now, "probe");
        let mut ports = Vec::new();
        let mut lid = None;
        for t in &self.targets {
            let Some(pi) = &t.info else {
                continue;
            };
            if t.port_guid == self.port_guid && pi.lid != self.lid {
                lid = Some(pi.lid);
            }
            if !t.is_switch && pi.capability_mask.0 & CapabilityMask::IS_SM != 0 {
                ports.push(SmPort {
                    guid: t.port_guid,
                    route: SmRoute::Directed(DrRoute::new(&t.path)),
                    lid: (pi.lid != 0).then_some(pi.lid),
                });
            }
        }
        if let Some(lid) = lid {
            self.set_local_lid(lid);
        }
        self.sm_ports_found(now, &ports);
        if self.sweep.as_ref().is_some_and(|s| s.outstanding == 0) {
            self.sweep_done(now);
        }
    }

    pub(crate) fn set_local_lid(&mut self, lid: u16) {
        self.lid = lid;
        self.election.set_local_lid(lid);
    }

    /// A sweep (ours or the master's) found these SM ports: keep `peers` to them,
    /// read their SMInfo for the roster, and tell the election.
    pub(crate) fn sm_ports_found(&mut self, now: Duration, ports: &[SmPort]) {
        let present: BTreeSet<u64> = ports.iter().map(|p| p.guid).collect();
        let me = self.port_guid;
        self.peers.retain(|g, _| present.contains(g) && *g != me);
        for p in ports {
            if p.guid == self.port_guid {
                continue;
            }
            let entry = self
                .peers
                .entry(p.guid)
                .or_insert_with(|| PeerView::unknown(p.guid));
            entry.lid = p.lid.unwrap_or(0);
            if let SmRoute::Directed(dr) = &p.route {
                let hops = dr.initial_path.get(1..).unwrap_or(&[]);
                if let Ok(smp) = Smp::try_get_dr(hops, AttributeId::SM_INFO, 0, 0) {
                    self.tx.submit(now, smp, Job::PeerSmInfo(p.guid));
                }
            }
        }
        self.election.handle_sweep(now, ports);
    }

    /// Record how long the current sweep phase took and start the next one's clock.
    fn phase_done(&mut self, now: Duration, phase: &'static str) {
        let Some(s) = self.sweep.as_mut() else {
            return;
        };
        let took = now.saturating_sub(s.phase_started);
        s.phase_started = now;
        self.emit(NodeEvent::Phase { phase, took });
    }

    fn sweep_done(&mut self, now: Duration) {
        let Some(s) = self.sweep.take() else {
            return;
        };
        let sm_ports = self.peers.len() + 1;
        let took = now.saturating_sub(s.started);
        let smps = self.tx.counters().sent.saturating_sub(s.smps_at_start);
        let in_flight = self
            .tx
            .in_flight_time(now)
            .saturating_sub(s.in_flight_at_start);
        let mean_in_flight = if took.is_zero() {
            0.0
        } else {
            in_flight.as_secs_f64() / took.as_secs_f64()
        };
        let summary = format!(
            "{} sweep: {} nodes, {} ports probed, {} SM ports, {} unreachable, {} ms, {} SMPs, {:.1} in flight",
            if s.heavy { "heavy" } else { "light" },
            self.nodes,
            self.targets.len(),
            sm_ports,
            self.unreachable,
            took.as_millis(),
            smps,
            mean_in_flight
        );
        if s.heavy {
            tracing::info!("{summary}");
            self.emit(NodeEvent::record("sweep", summary.clone()));
        } else {
            tracing::debug!("{summary}");
        }
        for id in s.replies {
            self.done(id, Ok(CommandReply::Swept(summary.clone())));
        }
        self.last_sweep = summary;
    }
}
