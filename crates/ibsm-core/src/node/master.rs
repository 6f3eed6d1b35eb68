//! Becoming, being and leaving MASTER: the election's events, the configurator's
//! events, the takeover prepared while the master goes silent, and what a new MASTER
//! inherits from the replicated state (LIDs, LFT digests, M_Key, partitions).
//!
//! The election's MASTER starts the configurator
//! ([`SubnetManager::become_master`](crate::subnet::SubnetManager::become_master)).
//! If the discovery this node made while DISCOVERING is fresh (seconds old, no trap and
//! no other MASTER since it started) that sweep starts from it instead of walking the
//! fabric a second time. With replication, a STANDBY that has missed all but one poll
//! of its master (or just went DISCOVERING after losing it) and that no known standby
//! outranks prepares the takeover: discovery and the read-back of every LFT start then,
//! read-only, and MASTER continues that sweep instead of starting one. When its last
//! standby discovery is verifiable (`verifiable_discovery`: settled, no topology change
//! seen since) the preparation verifies it instead of discovering (`subnet::verify`)
//! and starts at the first missed poll. The standby's standing LFT read (`standing`:
//! kept while it follows the replica's master at the replica's epoch) goes with it, so
//! the read-back reads block 0 alone of each switch whose stamp holds. Leaving MASTER
//! stops the configurator and the standby sweeps resume.

use std::time::Duration;

use crate::discovery::DiscoveryResult;
use crate::election::{ElectionEvent, SmState};
use crate::subnet::{SubnetEvent, SweepKind};

use super::config::{
    FRESH_DISCOVERY_MAX_AGE, PREPARED_TAKEOVER_MAX_AGE, VERIFIABLE_DISCOVERY_MAX_AGE,
};
use super::state::{Prepared, Running, Timer};
use super::types::{
    effective_partitions, CommandError, CommandReply, NodeEvent, Output, ReplicatedFabric,
};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Running {
    pub(crate) fn on_election_event(&mut self, now: Duration, ev: ElectionEvent) {
        let text = ev.to_string();
        let rec = match &ev {
            ElectionEvent::StateChanged { from, to, reason } => {
                tracing::info!("{text}");
                if from != to {
                    self.state_since = now;
                }
                self.state_reason = reason.to_string();
                self.handed_over_to = match reason {
                    crate::election::TransitionReason::HandoverDone { to, .. } => *to,
                    _ => 0,
                };
                if *to == SmState::Master && !self.subnet.is_active() {
                    self.enter_master(now);
                } else if *to == SmState::Discovering && *from == SmState::Standby {
                    let _ = self.prepare_takeover(now);
                } else if *to != SmState::Master && self.subnet.is_preparing() {
                    tracing::info!(state = %to, "prepared takeover dropped: another SM leads");
                    self.subnet.stop();
                    self.prepared = None;
                }
                if *from == SmState::Master && *to != SmState::Master && self.subnet.is_active() {
                    self.leave_master();
                }
                NodeEvent::Record {
                    kind: "state",
                    text,
                    from: Some(*from),
                    to: Some(*to),
                }
            }
            ElectionEvent::DiscoveryNeeded => {
                // Not a fabric change: a prepared takeover stays valid, and its
                // discovery answers this (now if it is done: it started when the
                // master went silent; else its PreparedDiscovery event will); without
                // one, our own sweep does.
                if self.subnet.is_preparing() {
                    if let Some(ports) = self.prepared_sm_ports.clone() {
                        self.sm_ports_found(now, &ports);
                    }
                } else if !self.subnet.is_active() {
                    self.heavy_wanted_by_round = !self.heavy_wanted;
                    self.heavy_wanted = true;
                }
                tracing::info!("{text}");
                NodeEvent::record("sweep", text)
            }
            ElectionEvent::DiscoveryWithdrawn => {
                tracing::info!("{text}");
                self.emit(NodeEvent::record("sweep", text));
                match self.abandon_standby_sweep(now) {
                    Some(summary) => NodeEvent::record("sweep", summary),
                    None => return,
                }
            }
            ElectionEvent::HeavySweepRequested => {
                self.fabric_changes += 1;
                self.topology_changes += 1;
                if self.subnet.is_active() {
                    self.subnet.start_heavy_sweep(now);
                } else {
                    self.want_heavy_sweep();
                }
                tracing::info!("{text}");
                NodeEvent::record("sweep", text)
            }
            ElectionEvent::PriorityChanged { .. } => {
                tracing::info!("{text}");
                NodeEvent::record("priority", text)
            }
            ElectionEvent::HandoverStarted { .. } | ElectionEvent::HandoverFailed { .. } => {
                tracing::info!("{text}");
                NodeEvent::record("handover", text)
            }
            ElectionEvent::ControlAnswered { .. } | ElectionEvent::ControlRejected { .. } => {
                tracing::info!("{text}");
                NodeEvent::record("control", text)
            }
            ElectionEvent::RemoteSmKeyMismatch { .. } => {
                tracing::warn!("{text}");
                NodeEvent::record("control", text)
            }
            ElectionEvent::UntrustedSmSeen { .. } | ElectionEvent::RogueMaster { .. } => {
                // Logged with structured fields by the election; this is the event feed.
                self.emit(NodeEvent::UntrustedSm);
                NodeEvent::record("trust", text)
            }
        };
        self.emit(rec);
    }

    /// The election went MASTER: the configurator takes over the sweeps; a standby
    /// sweep in progress is dropped and its callers wait for the master's.
    fn enter_master(&mut self, now: Duration) {
        if let Some(s) = self.sweep.take() {
            self.subnet_replies.extend(s.replies);
        }
        self.subnet_replies
            .extend(self.waiting_replies.drain(..).map(|(_, id)| id));
        self.schedule_master_heavy(now);
        tracing::info!("master: configuring the subnet (heavy sweep)");
        self.check_prepared(now);
        let sa_current = self.inherit_sa(now);
        self.subnet.set_reregister_clients(!sa_current);
        if self.cfg.replicated {
            self.take_over(now);
        }
        let rep = self.replicated.clone();
        self.seed_lids_from_file(rep.as_deref());
        self.sync_ipoib_groups();
        if self.cfg.replicated {
            self.out.push_back(Output::ClaimMastership {
                sm_guid: self.port_guid,
            });
        }
        if self.subnet.is_preparing() {
            // Continue the prepared sweep; the standby discovery is older.
            self.last_discovery = None;
            self.subnet.become_master(now);
        } else {
            match self.take_fresh_discovery(now) {
                Some(d) => self.subnet.become_master_with_discovery(now, d),
                None => self.subnet.become_master(now),
            }
        }
    }

    fn leave_master(&mut self) {
        tracing::info!("no longer master: subnet configuration stops");
        self.subnet.stop();
        if self.cfg.replicated {
            self.out.push_back(Output::ReleaseMastership);
        }
        self.partitions_applied = None;
        self.waiting_replies.extend(
            self.subnet_replies
                .drain(..)
                .chain(self.subnet_replies_next.drain(..))
                .map(|id| (true, id)),
        );
        self.waiting_replies
            .extend(self.subnet_light_replies.drain(..).map(|id| (false, id)));
        self.want_heavy_sweep();
    }

    /// A new MASTER takes over from the replicated state: the replicated guid2lid
    /// seeds the LID manager (no replicated LID is reassigned), the replicated LFT
    /// digests and cabling make the first heavy sweep read the switches' LFTs back
    /// and rewrite only what differs, and the partitions set through the API join
    /// the start-up ones before the first heavy sweep programs them.
    fn take_over(&mut self, now: Duration) {
        let Some(rep) = self.replicated.clone() else {
            tracing::info!(
                "new master: no replicated state yet; LIDs are kept from the fabric only"
            );
            return;
        };
        self.seed_m_key(&rep);
        if !rep.guid2lid_file.is_empty() {
            match self.subnet.import_guid2lid(&rep.guid2lid_file) {
                Ok(n) => tracing::info!(
                    ports = n,
                    epoch = rep.epoch,
                    "new master: LIDs seeded from the replica"
                ),
                Err(e) => {
                    tracing::warn!(%e, "new master: replicated guid2lid refused; LIDs are kept from the fabric only")
                }
            }
        }
        self.subnet.inherit(rep.inherited.clone());
        self.apply_partitions(now, &rep);
    }

    /// `--guid2lid` (OpenSM's `honor_guid2lid_file`): seed the LID manager from the
    /// file given at start, but only while nothing better exists: the replica holds
    /// no LID assignment (once it does, it is authoritative and the file is ignored,
    /// said in the log) and this node's LID manager remembers none (a node that was
    /// MASTER before keeps what it assigned since). The text was checked at start.
    fn seed_lids_from_file(&mut self, rep: Option<&ReplicatedFabric>) {
        let Some(seed) = self.cfg.guid2lid_seed.as_deref() else {
            return;
        };
        if let Some(rep) = rep.filter(|r| !r.guid2lid_file.is_empty()) {
            tracing::info!(
                replica_ports = rep.guid2lid_ports,
                epoch = rep.epoch,
                "--guid2lid ignored: the replica already holds LID assignments and is authoritative"
            );
            return;
        }
        if self.subnet.remembered_lids() > 0 {
            return;
        }
        match self.subnet.import_guid2lid(seed) {
            Ok(n) => tracing::info!(
                ports = n,
                "new master: LIDs seeded from --guid2lid (no LID assignment replicated yet)"
            ),
            Err(e) => tracing::error!(%e, "--guid2lid refused; LIDs are kept from the fabric only"),
        }
    }

    /// The replicated M_Key into the configurator: tried after the configured one, so
    /// ports the previous master protected can be reached and, if the operator
    /// configured a new key, rekeyed (the configured key wins).
    fn seed_m_key(&mut self, rep: &ReplicatedFabric) {
        if rep.m_key != 0 && rep.m_key != self.subnet.m_key().key {
            tracing::warn!(
                epoch = rep.epoch,
                "the fabric holds another M_Key than the configured one: reprogramming it with the configured key"
            );
        }
        self.subnet.set_fabric_m_key(rep.m_key);
    }

    /// `NodeCommand::SetConfiguredPartitions`: new start-up partitions, with the
    /// replicated ones on top, to the configurator (which sweeps if MASTER).
    pub(crate) fn set_configured_partitions(
        &mut self,
        now: Duration,
        partitions: Vec<crate::subnet::Partition>,
    ) -> Result<CommandReply, CommandError> {
        let check = crate::subnet::SubnetConfig {
            partitions,
            ..self.cfg.subnet.clone()
        };
        check
            .validate()
            .map_err(|e| CommandError::InvalidArgument(e.to_string()))?;
        self.cfg.subnet.partitions = check.partitions;
        let replicated = self
            .replicated
            .as_ref()
            .map(|r| r.partitions.clone())
            .unwrap_or_default();
        let (want, skipped) = effective_partitions(&self.cfg.subnet.partitions, &replicated);
        for s in &skipped {
            tracing::warn!(
                partition = %s.partition.name,
                pkey = format_args!("{:#06x}", s.partition.p_key),
                why = %s.why,
                "replicated partition not programmed"
            );
        }
        let changed = want.as_slice() != self.subnet.partitions();
        self.subnet
            .set_partitions(now, want)
            .map_err(|e| CommandError::InvalidArgument(e.to_string()))?;
        if changed && self.subnet.is_active() {
            self.partitions_changed("configured partitions reloaded");
        }
        Ok(CommandReply::Done)
    }

    /// The partitions to program changed (`why`) while MASTER: their IPoIB groups
    /// follow, and the P_Keys the coming heavy sweep programs are logged and recorded.
    fn partitions_changed(&mut self, why: &str) {
        self.sync_ipoib_groups();
        let pkeys: Vec<String> = self
            .subnet
            .partitions()
            .iter()
            .map(|p| format!("{:#06x}", p.p_key))
            .collect();
        let text = format!(
            "{why}: programming P_Keys [{}] (heavy sweep)",
            pkeys.join(", ")
        );
        tracing::info!("{text}");
        self.emit(NodeEvent::record("sweep", text));
    }

    /// Hand the partitions to program (start-up plus replicated) to the configurator
    /// if they differ from what it has; true if they changed.
    fn apply_partitions(&mut self, now: Duration, rep: &ReplicatedFabric) -> bool {
        self.partitions_applied = Some(rep.partitions.clone());
        let (want, skipped) = effective_partitions(&self.cfg.subnet.partitions, &rep.partitions);
        if want.as_slice() == self.subnet.partitions() {
            return false;
        }
        for s in &skipped {
            tracing::warn!(
                partition = %s.partition.name,
                pkey = format_args!("{:#06x}", s.partition.p_key),
                why = %s.why,
                "replicated partition not programmed"
            );
        }
        match self.subnet.set_partitions(now, want) {
            Ok(()) => {
                tracing::info!(
                    partitions = self.subnet.partitions().len(),
                    skipped = skipped.len(),
                    "partitions from the replica handed to the configurator"
                );
                true
            }
            Err(e) => {
                // effective_partitions validated them; kept as a guard.
                tracing::error!(%e, "partitions from the replica refused by the configurator");
                false
            }
        }
    }

    /// New replicated state. While MASTER, a changed set of replicated partitions
    /// makes the configurator sweep and reprogram the P_Key tables.
    pub(crate) fn replicated_changed(
        &mut self,
        now: Duration,
        rep: std::sync::Arc<ReplicatedFabric>,
    ) {
        self.replicated = Some(rep.clone());
        if !self.subnet.is_active() {
            // A standby's SA mirrors the master's (ibsmctl reads it; a takeover
            // starts from it).
            self.load_replicated_sa(now, &rep);
        }
        if !self.subnet.is_active() || self.partitions_applied.as_ref() == Some(&rep.partitions) {
            return;
        }
        if self.apply_partitions(now, &rep) {
            self.partitions_changed("partitions changed in the replica");
        }
    }

    /// STANDBY: one poll before the election gives up on its master (at the defaults,
    /// 2 of 3 polls missed), prepare the takeover; when the master answers again, drop
    /// the preparation. True if something started or stopped.
    ///
    /// Why one poll early: discovery plus LFT read-back are ~0.2 s of fabric time on
    /// a k=16 fat tree, about what the last two polls (or the last poll and the
    /// election's final query) take, and "fabric verified" within 0.5 s of a SIGKILL
    /// needs both to overlap. A standby that gets no answer to two polls in a row
    /// almost always lost its master; a false alarm costs one read-only sweep and is
    /// dropped at the next answer (and any answer from a MASTER also voids the
    /// preparation at MASTER time, see `check_prepared`).
    pub(crate) fn watch_master(&mut self, now: Duration) -> bool {
        if self.election.state() != SmState::Standby || self.subnet.is_active() {
            return false;
        }
        let missed = self.election.missed_polls();
        // With a known fabric to verify the preparation is ~3k Gets plus the LFT
        // read-back: start it at the first miss; a full discovery waits for the
        // last poll but one.
        let early = if self.verifiable_discovery(now).is_some() {
            1
        } else {
            self.cfg.election.poll_retries.saturating_sub(1).max(1)
        };
        if missed >= early && !self.subnet.is_preparing() && !self.subnet.is_sweeping() {
            return self.prepare_takeover(now);
        }
        if missed == 0 && self.subnet.is_preparing() {
            tracing::info!("master answered again: prepared takeover dropped");
            self.subnet.stop();
            self.prepared = None;
            return true;
        }
        false
    }

    /// The standby lost its master: start the read-only half of the takeover now
    /// (discovery and the read-back of every LFT, nothing written, no claim) instead
    /// of after the election's last SMInfo query, which only waits for a dead master's
    /// timeout. Only with replication (that is what the read-back is verified against)
    /// and only if no known STANDBY/DISCOVERING SM outranks us, so the other standbys
    /// do not load the fabric with reads they will throw away. True if it started one.
    fn prepare_takeover(&mut self, now: Duration) -> bool {
        if !self.cfg.replicated || self.subnet.is_active() || self.subnet.is_sweeping() {
            return false;
        }
        let me = (self.election.priority(), std::cmp::Reverse(self.port_guid));
        let outranked = self.peers.values().any(|p| {
            !p.is_self
                && matches!(p.state, Some(SmState::Standby | SmState::Discovering))
                && (p.priority, std::cmp::Reverse(p.guid)) > me
        });
        if outranked {
            // (Checked on every turn while the polls stay missed: no log.)
            return false;
        }
        tracing::info!(
            state = %self.election.state(),
            missed = self.election.missed_polls(),
            "master silent: preparing the takeover"
        );
        self.prepared_sm_ports = None;
        let rep = self.replicated.clone().unwrap_or_default();
        self.seed_m_key(&rep);
        if !rep.guid2lid_file.is_empty() {
            if let Err(e) = self.subnet.import_guid2lid(&rep.guid2lid_file) {
                tracing::warn!(%e, "takeover preparation: replicated guid2lid refused");
            }
        }
        self.seed_lids_from_file(Some(&rep));
        let known = self.verifiable_discovery(now).cloned();
        let standing = self.standing_for_takeover(&rep);
        tracing::info!(
            switches = standing.len(),
            "takeover: standing LFT reads handed to the read-back"
        );
        self.subnet
            .prepare_takeover_standing(now, rep.inherited.clone(), known, standing);
        self.prepared = Some(Prepared {
            changes: self.fabric_changes,
            guid2lid_file: rep.guid2lid_file.clone(),
        });
        self.subnet.is_preparing()
    }

    /// The standby's last discovery if a takeover may verify it instead of walking
    /// the fabric: within [`VERIFIABLE_DISCOVERY_MAX_AGE`] and nothing seen since it
    /// started that may have changed the fabric (a trap, a heavy sweep request,
    /// another MASTER). The verification re-reads every node on its route, every
    /// switch's PortStateChange and every end port, so this is only the cheap
    /// pre-check.
    fn verifiable_discovery(&self, now: Duration) -> Option<&DiscoveryResult> {
        let (done, _, changes, result) = self.last_discovery.as_ref()?;
        (*changes == self.topology_changes
            && now.saturating_sub(*done) <= VERIFIABLE_DISCOVERY_MAX_AGE)
            .then_some(result)
    }

    /// At MASTER: keep a prepared takeover only if it is recent, nothing may have
    /// changed the fabric since it started (traps, another MASTER, a sweep request)
    /// and the replicated guid2lid it assigned LIDs from is unchanged; else drop it
    /// and sweep from scratch.
    fn check_prepared(&mut self, now: Duration) {
        let Some(prepared) = self.prepared.take() else {
            return;
        };
        let Some(since) = self.subnet.preparing_since() else {
            return;
        };
        let age = now.saturating_sub(since);
        let lids_same = self
            .replicated
            .as_ref()
            .is_some_and(|r| r.guid2lid_file == prepared.guid2lid_file);
        let changed = prepared.changes != self.fabric_changes;
        if changed || age > PREPARED_TAKEOVER_MAX_AGE || !lids_same {
            tracing::info!(
                age_ms = ms(age),
                fabric_changed = changed,
                lids_same,
                "prepared takeover dropped: sweeping from scratch"
            );
            self.subnet.abandon_prepared();
        } else {
            tracing::info!(
                age_ms = ms(age),
                "master: continuing the takeover prepared before MASTER"
            );
        }
    }

    /// When the MASTER's next periodic heavy sweep is due (never with interval 0).
    pub(crate) fn schedule_master_heavy(&mut self, now: Duration) {
        let every = self.cfg.master_heavy_sweep_interval;
        let at = if every.is_zero() {
            Duration::MAX
        } else {
            now.saturating_add(every)
        };
        self.set_timer(Timer::Heavy, at);
    }

    /// The last standby discovery if a new MASTER may configure from it: finished
    /// within [`FRESH_DISCOVERY_MAX_AGE`], and nothing that may have changed the fabric
    /// (a trap, a heavy sweep request, another SM in MASTER) since it started. Without
    /// the last condition a failover would start from what the old master was still
    /// changing, and programming skips ports that *read* as wanted. Taken once.
    fn take_fresh_discovery(&mut self, now: Duration) -> Option<DiscoveryResult> {
        let (done, changes, _, result) = self.last_discovery.take()?;
        let age = now.saturating_sub(done);
        if changes != self.fabric_changes || age > FRESH_DISCOVERY_MAX_AGE {
            tracing::debug!(
                ?age,
                changed = changes != self.fabric_changes,
                "standby discovery not reused"
            );
            return None;
        }
        tracing::info!(
            age_ms = ms(age),
            nodes = result.topology.len(),
            "master: configuring from the discovery made while DISCOVERING"
        );
        Some(result)
    }

    /// What the MASTER's configurator reports.
    pub(crate) fn on_subnet_event(&mut self, now: Duration, ev: SubnetEvent) {
        match ev {
            SubnetEvent::SubnetUp { phases, report } => {
                let text = format!(
                    "subnet up: {} nodes ({} switches), {} LIDs, LinearFDBTop {:#06x}, {} SMPs, {:.3} s",
                    report.nodes,
                    report.switches,
                    report.lids,
                    report.lft_top,
                    report.smps,
                    phases.total().as_secs_f64()
                );
                self.emit(NodeEvent::record("sweep", text));
            }
            SubnetEvent::SweepDone {
                kind: SweepKind::Heavy,
                phases,
                report,
            } => {
                self.emit(NodeEvent::Sweep(SweepKind::Heavy));
                for (phase, took) in [
                    ("discover", phases.discovery),
                    ("lid", phases.lids),
                    ("routing", phases.routing),
                    ("distribution", phases.distribution),
                    ("activation", phases.activation),
                ] {
                    self.emit(NodeEvent::Phase { phase, took });
                }
                // Our own LID as the configurator assigned it.
                let local_lid = self.subnet.last_discovery().and_then(|res| {
                    let (n, p) = res.local?;
                    res.topology.node(n)?.port(p).map(|p| p.lid)
                });
                if let Some(lid) = local_lid.filter(|l| *l != 0 && *l != self.lid) {
                    self.set_local_lid(lid);
                }
                self.nodes = report.nodes;
                self.unreachable = report.unreachable;
                self.alarms = report.duplicates.iter().map(|d| d.to_string()).collect();
                self.alarms.extend(report.cap.map(|c| c.to_string()));
                self.duplicate_guids = report.duplicates.len() as u64;
                self.topology_capped = report.cap.is_some();
                self.out.push_back(Output::Publish);
                self.sm_ports_found(now, &report.sm_ports);
                self.schedule_master_heavy(now);
                let summary = format!(
                    "master heavy sweep: {} nodes, {} switches, {} LIDs, {} SM ports, {} unreachable, {} LFT blocks, {} PortInfo sets, {} ports Active, {} SMPs, {} failures, {} ms",
                    report.nodes,
                    report.switches,
                    report.lids,
                    report.sm_ports.len() + 1,
                    report.unreachable,
                    report.lft_blocks_sent,
                    report.port_info_sets,
                    report.ports_activated,
                    report.smps,
                    report.failures,
                    phases.total().as_millis()
                );
                self.emit(NodeEvent::record("sweep", summary.clone()));
                let ids: Vec<u64> = self
                    .subnet_replies
                    .drain(..)
                    .chain(self.subnet_light_replies.drain(..))
                    .collect();
                for id in ids {
                    self.done(id, Ok(CommandReply::Swept(summary.clone())));
                }
                self.subnet_replies.append(&mut self.subnet_replies_next);
                if report.changed
                    || report.lft_blocks_sent > 0
                    || report.port_info_sets > 0
                    || report.ports_activated > 0
                    || report.client_reregisters > 0
                {
                    self.last_change_sweep = Some((now, summary.clone()));
                }
                self.last_sweep = summary;
                self.emit(NodeEvent::MasterSweep {
                    report: Box::new(report),
                    took: phases.total(),
                });
            }
            SubnetEvent::SweepDone { report, .. } => {
                self.emit(NodeEvent::Sweep(SweepKind::Light));
                if !self.subnet_light_replies.is_empty() {
                    let summary = format!(
                        "master light sweep: {} SMPs, {}",
                        report.smps,
                        if report.changed {
                            "a change seen: heavy sweep follows"
                        } else {
                            "no change"
                        }
                    );
                    for id in std::mem::take(&mut self.subnet_light_replies) {
                        self.done(id, Ok(CommandReply::Swept(summary.clone())));
                    }
                    self.last_sweep = summary;
                }
            }
            SubnetEvent::TopologyChanged {
                added,
                removed,
                links_changed,
            } => {
                let text = format!(
                    "topology changed: {} nodes added, {} removed, {links_changed} cables changed",
                    added.len(),
                    removed.len()
                );
                self.emit(NodeEvent::record("sweep", text));
            }
            SubnetEvent::Trap144 { issuer_lid, .. } => {
                self.emit(NodeEvent::record(
                    "trap",
                    format!("trap 144 from LID {issuer_lid}"),
                ));
            }
            SubnetEvent::DuplicateGuid(d) => {
                self.emit(NodeEvent::record("alarm", d.to_string()));
            }
            SubnetEvent::TopologyCapped(c) => {
                self.emit(NodeEvent::record("alarm", c.to_string()));
            }
            SubnetEvent::Notice(n) => self.sa_notice(now, &n),
            SubnetEvent::Unsolicited(smp) => {
                tracing::trace!(attr = ?smp.attr_id, "configurator passed a request on");
            }
            SubnetEvent::PreparedDiscovery { sm_ports } => {
                // The takeover's discovery is the fresh sweep a DISCOVERING election
                // waits for (our own sweeps pause while it prepares); kept for a round
                // that starts after it (the preparation starts a poll early).
                self.sm_ports_found(now, &sm_ports);
                self.prepared_sm_ports = Some(sm_ports);
            }
        }
    }
}
