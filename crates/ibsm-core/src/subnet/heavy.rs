//! The heavy sweep around the discovery walk and the programming SMPs (`program`):
//! its start, LID assignment and the bookkeeping after discovery, routing (reused
//! while nothing it depends on changed, adopted from an inherited fabric after the
//! LFT read-back, or computed), and its end: remembering what was programmed,
//! metrics, `SubnetUp`/`SweepDone`, `TopologyChanged` and the GID in/out of service
//! notices.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ibsm_fabric::routing::ForwardingTables;
use ibsm_mad::attr::{Notice, NoticeType, ProducerType, TrapDetails};

use crate::discovery::{Discovery, DiscoveryResult};
use crate::election::{DrRoute, SmPort, SmRoute};

use super::events::{PhaseSmps, PhaseTimes, SubnetEvent, SweepKind, SweepReason, SweepReport};
use super::inherit::{lft_digest, links_of, InheritReport, Inherited, Readback};
use super::lft_stamp::Stamp as LftStamp;
use super::light::sm_port_paths;
use super::manager::SubnetManager;
use super::routing_job::{compute_routing, RoutingJob};
use super::sa_snapshot::ProgrammedTables;
use super::sa_snapshot_job::{PendingSnapshot, Retired, SaSnapshotJob};
use super::sweep::{Pipeline, Stage, Sweep};

impl SubnetManager {
    pub(super) fn start_heavy(&mut self, now: Duration, reason: SweepReason) {
        tracing::info!(?reason, "heavy sweep");
        self.reason = reason;
        self.marks = [now; 6];
        self.light_smps_start = self.tx.counters().sent;
        self.mark_sent = [self.light_smps_start; 6];
        self.mark_in_flight = [self.tx.in_flight_time(now); 6];
        self.stage = Stage::Discovering(Box::new(Discovery::new(self.cfg.discovery.clone())));
    }

    /// The sweep reached the end of phase `i` (1: discovery ... 5: activation;
    /// see `marks`): its time, SMPs sent and their time in flight so far.
    pub(super) fn mark(&mut self, i: usize, now: Duration) {
        let sent = self.tx.counters().sent;
        let in_flight = self.tx.in_flight_time(now);
        if let Some(m) = self.marks.get_mut(i) {
            *m = now;
        }
        if let Some(c) = self.mark_sent.get_mut(i) {
            *c = sent;
        }
        if let Some(t) = self.mark_in_flight.get_mut(i) {
            *t = in_flight;
        }
    }

    /// LIDs, and the bookkeeping between discovery and routing.
    pub(super) fn after_discovery(&mut self, mut res: DiscoveryResult) -> Box<Sweep> {
        let n = res.topology.len();
        let mut report = SweepReport {
            nodes: n,
            unreachable: res.unreachable.len(),
            ..SweepReport::default()
        };
        for (_, node) in res.topology.iter() {
            if node.is_switch() {
                report.switches += 1;
            } else {
                report.end_nodes += 1;
            }
        }
        // A switch whose LinearFDBTop is not what we programmed lost its tables
        // (reboot, another SM): forget them so all blocks go out again.
        for (idx, node) in res.topology.iter() {
            if let (Some(Some(si)), Some((top, _))) = (
                res.switch_info.get(idx.as_usize()),
                self.programmed.lfts.get(&node.node_guid),
            ) {
                if si.linear_fdb_top != *top {
                    self.programmed.lfts.remove(&node.node_guid);
                }
            }
        }
        for d in &res.duplicates {
            tracing::error!(
                kind = %d.kind,
                guid = format_args!("{:#018x}", d.guid),
                "ALARM {d}: the port that held the LID keeps it, the other gets none until an operator resolves it"
            );
            self.events.push_back(SubnetEvent::DuplicateGuid(d.clone()));
        }
        if let Some(cap) = res.cap {
            tracing::error!(nodes = n, "ALARM {cap}");
            self.events.push_back(SubnetEvent::TopologyCapped(cap));
        }
        report.duplicates = res.duplicates.clone();
        report.cap = res.cap;
        self.metrics.duplicate_guids = res.duplicates.len() as u64;
        self.metrics.topology_capped = u64::from(res.cap.is_some());
        let mut lids_stable = false;
        match self.lids.assign(&mut res.topology) {
            Ok(lr) => {
                report.lids_withheld = lr.withheld_duplicates;
                lids_stable = lr.assigned == 0 && lr.changed == 0 && lr.duplicates_repaired == 0;
                report.lids = lr.assigned + lr.kept + lr.changed;
                report.lids_unassigned = lr.unassigned;
                if lr.unassigned > 0 {
                    tracing::error!(
                        unassigned = lr.unassigned,
                        "unicast LID space exhausted: ports left without a LID"
                    );
                }
            }
            Err(err) => tracing::error!(%err, "LID assignment failed"),
        }
        let master_lid = res
            .local
            .and_then(|(node, port)| res.topology.node(node)?.port(port).map(|p| p.lid))
            .unwrap_or(0);
        report.sm_ports = sm_port_paths(&res)
            .into_iter()
            .filter_map(|(node, port, path)| {
                let p = res.topology.node(node)?.port(port)?;
                Some(SmPort {
                    guid: p.port_guid,
                    route: SmRoute::Directed(DrRoute::new(&path)),
                    lid: (p.lid != 0).then_some(p.lid),
                })
            })
            .collect();
        Box::new(Sweep {
            res,
            tables: ForwardingTables::default(),
            master_lid,
            client_reregister: self.new_master && self.reregister_clients,
            dead: vec![false; n],
            lft_failed: vec![false; n],
            cursor: 0,
            ops: VecDeque::new(),
            outstanding: 0,
            pipe: Pipeline::default(),
            lft_rounds: std::collections::HashMap::new(),
            lft_next: VecDeque::new(),
            report,
            lids_stable,
            manage_m_key: self.cfg.m_key.key != 0 || self.fabric_m_key != 0,
            port_info_set: std::collections::HashMap::new(),
            verified: false,
            seed: None,
        })
    }

    /// The tables the switches already hold, when nothing routing depends on
    /// changed since they were programmed (same cabling, no LID assigned or
    /// moved, every switch's table known with one LinearFDBTop): a stable fabric
    /// keeps its routes across sweeps, and a new master's adopted routes stay.
    pub(super) fn reuse_routing(&self, sweep: &Sweep) -> Option<ForwardingTables> {
        let prev = self.last.as_ref()?;
        if !sweep.lids_stable || links_of(&prev.topology) != links_of(&sweep.res.topology) {
            return None;
        }
        let mut top = None;
        let mut lfts = Vec::with_capacity(sweep.res.topology.len());
        for (_, node) in sweep.res.topology.iter() {
            if !node.is_switch() {
                lfts.push(None);
                continue;
            }
            let (t, table) = self.programmed.lfts.get(&node.node_guid)?;
            if *top.get_or_insert(*t) != *t {
                return None;
            }
            lfts.push(Some(table.to_vec()));
        }
        let lft_top = top?;
        if lft_top < max_lid(&sweep.res.topology) {
            return None;
        }
        Some(ForwardingTables { lft_top, lfts })
    }

    /// Compute the sweep's tables: here, or (`offload_routing`) as a [`RoutingJob`]
    /// for the driver, the sweep waiting in `Stage::Routing` for its result.
    pub(super) fn route(&mut self, now: Duration, mut sweep: Box<Sweep>) -> (Stage, bool) {
        if self.cfg.offload_routing {
            self.next_routing_job = self.next_routing_job.wrapping_add(1);
            let id = self.next_routing_job;
            self.routing_jobs.push_back(RoutingJob {
                id,
                engine: self.cfg.routing.clone(),
                topology: sweep.res.topology.clone(),
            });
            return (Stage::Routing(sweep, id), true);
        }
        sweep.tables = compute_routing(&self.cfg.routing, &sweep.res.topology);
        self.keep_unaffected_routes(&mut sweep);
        sweep.report.lft_top = sweep.tables.lft_top;
        self.wake_now = Some(now);
        (Stage::RoutingDone(sweep), true)
    }

    /// The read-back is complete: remember what the switches hold, then adopt
    /// it as the routing or compute a new one (see [`Inherited`]).
    pub(super) fn finish_readback(
        &mut self,
        sweep: &mut Sweep,
        rb: Readback,
        inh: &Inherited,
    ) -> InheritReport {
        let mut report = InheritReport {
            blocks_read: rb.blocks_read,
            switches_standing: rb.switches_standing,
            blocks_trusted: rb.blocks_trusted,
            ..InheritReport::default()
        };
        let mut all_verified = true;
        let mut read: HashMap<u32, Vec<u8>> = HashMap::new();
        for (idx, node) in sweep.res.topology.iter() {
            if !node.is_switch() {
                continue;
            }
            let Ok(n32) = u32::try_from(idx.as_usize()) else {
                continue;
            };
            let table = match rb.tables.get(&n32) {
                Some(t) if !rb.failed.contains(&n32) => t,
                _ => {
                    report.unread += 1;
                    all_verified = false;
                    continue;
                }
            };
            let (top, table) = table;
            report.switches_read += 1;
            if inh.lft_digests.get(&node.node_guid) == Some(&(*top, lft_digest(table))) {
                report.verified += 1;
            } else {
                report.mismatched += 1;
                all_verified = false;
            }
            // What the switch holds, verified or not: only differing blocks go out.
            self.programmed
                .lfts
                .insert(node.node_guid, (*top, Arc::from(table.as_slice())));
            let stamp = rb.stamps.get(&n32).copied().unwrap_or(LftStamp::None);
            self.programmed.lft_stamps.insert(node.node_guid, stamp);
            read.insert(n32, table.clone());
        }
        report.topology_unchanged = inh
            .links
            .as_ref()
            .is_some_and(|l| *l == links_of(&sweep.res.topology));
        let tops: HashSet<u16> = rb.tables.values().map(|(t, _)| *t).collect();
        let max_lid = max_lid(&sweep.res.topology);
        let adopt = all_verified
            && report.topology_unchanged
            && sweep.lids_stable
            && report.switches_read > 0
            && tops.len() == 1
            && tops.iter().all(|t| *t >= max_lid);
        if adopt {
            let top = tops.iter().next().copied().unwrap_or(0);
            let lfts = (0..sweep.res.topology.len())
                .map(|i| u32::try_from(i).ok().and_then(|i| read.remove(&i)))
                .collect();
            sweep.tables = ForwardingTables { lft_top: top, lfts };
            report.adopted = true;
        }
        tracing::info!(
            switches = report.switches_read,
            verified = report.verified,
            mismatched = report.mismatched,
            unread = report.unread,
            blocks = report.blocks_read,
            standing = report.switches_standing,
            blocks_trusted = report.blocks_trusted,
            topology_unchanged = report.topology_unchanged,
            lids_stable = sweep.lids_stable,
            adopted = report.adopted,
            "inherited LFTs read back"
        );
        report
    }

    pub(super) fn finish_heavy(&mut self, now: Duration, mut sweep: Box<Sweep>) {
        let sweep_no = self.metrics.heavy_sweeps + 1;
        let events_from = self.events.len();
        // The sweep goes to the SA snapshot (built here or by the driver); what the
        // configurator keeps of it is taken out first, the discovery shared.
        let res = Arc::new(std::mem::take(&mut sweep.res));
        let lfts = std::mem::take(&mut sweep.tables.lfts);
        let tables = ForwardingTables {
            lft_top: sweep.tables.lft_top,
            lfts,
        };
        let lft_failed = std::mem::take(&mut sweep.lft_failed);
        let mut report = std::mem::take(&mut sweep.report);
        let m = self.marks;
        let phases = PhaseTimes {
            discovery: m[1].saturating_sub(m[0]),
            lids: m[2].saturating_sub(m[1]),
            routing: m[3].saturating_sub(m[2]),
            distribution: m[4].saturating_sub(m[3]),
            activation: m[5].saturating_sub(m[4]),
        };
        report.smps = self.tx.counters().sent - self.light_smps_start;
        let (c, t) = (self.mark_sent, self.mark_in_flight);
        report.phase_smps = PhaseSmps {
            discovery: c[1] - c[0],
            lids_routing: c[3] - c[1],
            distribution: c[4] - c[3],
            activation: c[5] - c[4],
            in_flight: [
                t[1].saturating_sub(t[0]),
                t[3].saturating_sub(t[1]),
                t[4].saturating_sub(t[3]),
                t[5].saturating_sub(t[4]),
            ],
            ..report.phase_smps
        };
        // Remember what the switches now hold.
        let top = tables.lft_top;
        for (i, lft) in tables.lfts.into_iter().enumerate() {
            let (Some(lft), Some(node)) = (lft, res.topology.nodes().get(i)) else {
                continue;
            };
            if lft_failed.get(i).copied().unwrap_or(true) {
                self.programmed.lfts.remove(&node.node_guid);
            } else {
                // A table the switch already held stays the one shared copy.
                let slot = self.programmed.lfts.entry(node.node_guid);
                let slot = slot.or_insert_with(|| (top, Arc::from([].as_slice())));
                if slot.0 != top || *slot.1 != *lft {
                    *slot = (top, Arc::from(lft));
                }
            }
        }
        let programmed = ProgrammedTables::of(&self.programmed, &res.topology);
        self.mcast_after_sweep();
        self.detect_changes(&res);
        self.metrics.heavy_sweeps += 1;
        self.metrics.last_phases = phases;
        self.metrics.lft_blocks_sent += report.lft_blocks_sent;
        self.metrics.client_reregisters += report.client_reregisters;
        self.metrics.failures += report.failures;
        self.metrics.lids = report.lids as u64;
        if !self.subnet_up_sent {
            self.subnet_up_sent = true;
            let ps = report.phase_smps;
            tracing::info!(
                nodes = report.nodes,
                switches = report.switches,
                lids = report.lids,
                smps = report.smps,
                discovery_smps = ps.discovery,
                distribution_smps = ps.distribution,
                port_info_sets = report.port_info_sets,
                lft_blocks = report.lft_blocks_sent,
                activation_smps = ps.activation,
                activation_overlapped = ps.activation_overlapped,
                discovery_in_flight = mean_in_flight(ps.in_flight[0], phases.discovery),
                distribution_in_flight = mean_in_flight(ps.in_flight[2], phases.distribution),
                activation_in_flight = mean_in_flight(ps.in_flight[3], phases.activation),
                "subnet up in {:.3} s: discovery {:.3} s, LIDs {:.3} s, routing {:.3} s, distribution {:.3} s, activation {:.3} s",
                phases.total().as_secs_f64(),
                phases.discovery.as_secs_f64(),
                phases.lids.as_secs_f64(),
                phases.routing.as_secs_f64(),
                phases.distribution.as_secs_f64(),
                phases.activation.as_secs_f64(),
            );
            self.events.push_back(SubnetEvent::SubnetUp {
                phases,
                report: report.clone(),
            });
        } else {
            tracing::info!(
                reason = ?self.reason,
                lft_blocks = report.lft_blocks_sent,
                lft_stamp_sets = report.lft_stamp_sets,
                lft_opens_failed = report.lft_opens_failed,
                failures = report.failures,
                "heavy sweep done in {:.3} s",
                phases.total().as_secs_f64()
            );
        }
        self.events.push_back(SubnetEvent::SweepDone {
            kind: SweepKind::Heavy,
            phases,
            report,
        });
        self.new_master = false;
        let previous = self.last.replace(res);
        self.next_light = Some(now + self.cfg.sweep_interval);
        self.last_heavy_end = Some(now);
        self.snapshot_sa(sweep, sweep_no, programmed, previous, events_from);
    }

    /// The SA snapshot of the sweep that just ended: built here, or handed to the
    /// driver (`offload_sa_snapshot`) with the sweep's events (those from
    /// `events_from` on) held until it comes back.
    fn snapshot_sa(
        &mut self,
        sweep: Box<Sweep>,
        sweep_no: u64,
        tables: ProgrammedTables,
        previous: Option<Arc<DiscoveryResult>>,
        events_from: usize,
    ) {
        self.next_sa_job = self.next_sa_job.wrapping_add(1);
        let res = self.last.clone().unwrap_or_default();
        let mut job = SaSnapshotJob {
            id: self.next_sa_job,
            sweep_no,
            sweep,
            res,
            cfg: self.cfg.clone(),
            tables,
            prepare_paths: self.cfg.offload_sa_snapshot,
            retired: Retired::default(),
        };
        if !self.cfg.offload_sa_snapshot {
            let done = job.run();
            self.sa_fabric = Some(done.fabric);
            return;
        }
        job.retired = std::mem::take(&mut self.sa_retired);
        job.retired.discoveries.extend(previous);
        let events = self.events.drain(events_from..).collect();
        self.sa_pending
            .push_back(PendingSnapshot { id: job.id, events });
        self.sa_jobs.push_back(job);
    }

    /// TopologyChanged and the GID in/out of service notices.
    fn detect_changes(&mut self, res: &DiscoveryResult) {
        let end_ports: HashSet<u64> = res
            .topology
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .flat_map(|(_, n)| {
                n.physical_ports()
                    .filter(|(_, p)| p.lid != 0 && p.port_guid != 0)
                    .map(|(_, p)| p.port_guid)
            })
            .collect();
        if let Some(prev) = &self.last {
            let guids = |r: &DiscoveryResult| -> HashSet<u64> {
                r.topology.iter().map(|(_, n)| n.node_guid).collect()
            };
            let links = |r: &DiscoveryResult| -> HashSet<(u64, u8, u64, u8)> {
                r.topology
                    .links()
                    .filter_map(|((a, pa), (b, pb))| {
                        let ga = r.topology.node(a)?.node_guid;
                        let gb = r.topology.node(b)?.node_guid;
                        Some(if (ga, pa) < (gb, pb) {
                            (ga, pa, gb, pb)
                        } else {
                            (gb, pb, ga, pa)
                        })
                    })
                    .collect()
            };
            let (old, new) = (guids(prev), guids(res));
            let mut added: Vec<u64> = new.difference(&old).copied().collect();
            let mut removed: Vec<u64> = old.difference(&new).copied().collect();
            added.sort_unstable();
            removed.sort_unstable();
            let links_changed = links(prev).symmetric_difference(&links(res)).count();
            if !added.is_empty() || !removed.is_empty() || links_changed > 0 {
                tracing::info!(
                    added = added.len(),
                    removed = removed.len(),
                    links_changed,
                    "topology changed"
                );
                self.events.push_back(SubnetEvent::TopologyChanged {
                    added,
                    removed,
                    links_changed,
                });
            }
            let gid_prefix = 0xFE80_0000_0000_0000u64;
            let gid = |guid: u64| {
                let mut g = [0u8; 16];
                g[..8].copy_from_slice(&gid_prefix.to_be_bytes());
                g[8..].copy_from_slice(&guid.to_be_bytes());
                g
            };
            let mut appeared: Vec<u64> = end_ports
                .difference(&self.last_end_ports)
                .copied()
                .collect();
            let mut gone: Vec<u64> = self
                .last_end_ports
                .difference(&end_ports)
                .copied()
                .collect();
            appeared.sort_unstable();
            gone.sort_unstable();
            let issuer = res
                .local
                .and_then(|(n, p)| res.topology.node(n)?.port(p).map(|p| p.lid))
                .unwrap_or(0);
            for (guids, in_service) in [(appeared, true), (gone, false)] {
                for g in guids {
                    let details = if in_service {
                        TrapDetails::GidInService { gid: gid(g) }
                    } else {
                        TrapDetails::GidOutOfService { gid: gid(g) }
                    };
                    self.events.push_back(SubnetEvent::Notice(Notice::generic(
                        NoticeType::from(4u8),
                        ProducerType::CLASS_MANAGER,
                        issuer,
                        &details,
                    )));
                }
            }
        }
        self.last_end_ports = end_ports;
    }
}

/// Highest LID any port of `t` carries (with its LMC block).
fn max_lid(t: &ibsm_fabric::Topology) -> u16 {
    t.iter()
        .flat_map(|(_, n)| n.ports.iter())
        .filter(|p| p.lid != 0)
        .map(|p| p.lid.saturating_add((1u16 << p.lmc.min(7)) - 1))
        .max()
        .unwrap_or(0)
}

/// Mean SMPs in flight over a phase (see [`PhaseSmps`]), to one decimal, for logs.
fn mean_in_flight(in_flight: Duration, took: Duration) -> f64 {
    if took.is_zero() {
        return 0.0;
    }
    (in_flight.as_secs_f64() / took.as_secs_f64() * 10.0).round() / 10.0
}
