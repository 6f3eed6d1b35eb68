//! The node's Subnet Administrator plumbing: a GMP of class 0x03 goes to the
//! [`crate::sa::SaAgent`] with the context it is answered against (the master's
//! fabric snapshot, the SMs this node knows, whether it is MASTER).

use std::time::Duration;

use ibsm_mad::sa::{SmInfoRecord, SA_CLASS};
use ibsm_mad::{MadAddress, SmInfo, MAD_SIZE};

use crate::election::SmState;
use ibsm_fabric::multicast::{EndPort, JoinState, McastMember};

use crate::sa::{
    gid_text, ipoib_groups_of, split_gid, sync_ipoib_groups, GroupChange, Informs, McGroups,
    SaContext, Services,
};

use super::types::{NodeEvent, Output, ReplicatedFabric};

use super::state::Running;

impl Running {
    /// One GMP from QP1.
    pub(crate) fn handle_gmp(&mut self, now: Duration, mad: &[u8; MAD_SIZE], from: MadAddress) {
        if mad[1] != SA_CLASS.0 {
            tracing::trace!(
                class = mad[1],
                lid = from.lid,
                "GMP of a class we do not serve"
            );
            return;
        }
        let is_master = self.election.state() == SmState::Master && self.subnet.is_active();
        let sms = self.sm_info_records();
        let master_lid = self.master_lid();
        let fabric = if is_master {
            self.subnet.sa_fabric().cloned()
        } else {
            None
        };
        let ctx = SaContext {
            fabric: fabric.as_deref(),
            sms: &sms,
            is_master,
            master_lid,
            mfts: is_master.then(|| self.subnet.desired_mfts()),
        };
        self.sa.handle_mad(now, &ctx, mad, from);
    }

    /// A notice the configurator produced (GID in/out of service) or received (traps
    /// 128-131, 144, 145): the SA reports it to its subscribers.
    pub(crate) fn sa_notice(&mut self, now: Duration, n: &ibsm_mad::attr::Notice) {
        let is_master = self.election.state() == SmState::Master && self.subnet.is_active();
        let fabric = if is_master {
            self.subnet.sa_fabric().cloned()
        } else {
            None
        };
        let sms = Vec::new();
        let ctx = SaContext {
            fabric: fabric.as_deref(),
            sms: &sms,
            is_master,
            master_lid: self.lid,
            mfts: None,
        };
        self.sa.handle_notice(now, &ctx, n);
    }

    /// The master's LID as this node knows it (0: none known).
    pub(crate) fn master_lid(&self) -> u16 {
        let master_guid = self.election.master_guid().unwrap_or(0);
        if master_guid == self.port_guid {
            self.lid
        } else {
            self.peers.get(&master_guid).map_or(0, |p| p.lid)
        }
    }

    /// SMInfoRecords of every SM this node knows with a LID (itself first).
    fn sm_info_records(&self) -> Vec<SmInfoRecord> {
        let mut v = vec![SmInfoRecord {
            lid: self.lid,
            sm_info: self.election.sm_info(),
        }];
        for p in self.peers.values() {
            let (false, Some(state), true) = (p.is_self, p.state, p.lid != 0) else {
                continue;
            };
            v.push(SmInfoRecord {
                lid: p.lid,
                sm_info: SmInfo {
                    guid: p.guid,
                    sm_key: 0,
                    act_count: p.act_count,
                    priority: p.priority,
                    sm_state: state,
                },
            });
        }
        v
    }
}

impl Running {
    /// The SA keeps the IPoIB broadcast group of every partition the configurator
    /// programs that has `ipoib` (and the default partition's): called at start, when a
    /// node becomes MASTER (after it inherited the replica's groups) and when the
    /// partitions change while MASTER.
    pub(crate) fn sync_ipoib_groups(&mut self) {
        let want = ipoib_groups_of(
            self.subnet
                .partitions()
                .iter()
                .filter_map(|p| p.ipoib.as_ref().map(|i| (p.p_key, i))),
            self.cfg.sa.packet_life_time,
        );
        sync_ipoib_groups(self.sa.groups_mut(), &want);
    }

    /// Show what clients did on the event stream (kind `sa`), and hand the SA's
    /// group changes to the configurator, which keeps each group's multicast tree
    /// programmed; true if there were any changes.
    pub(crate) fn apply_group_changes(&mut self, now: Duration) -> bool {
        for text in self.sa.take_activity() {
            if let Some(n) = self.sa_activity_log.take_suppressed(now) {
                tracing::info!(
                    suppressed = n,
                    "SA: {n} more client change(s) logged at debug only (`ibsmctl watch` shows each)"
                );
            }
            if self.sa_activity_log.allow(now) {
                tracing::info!("SA: {text}");
            } else {
                tracing::debug!("SA: {text}");
            }
            self.emit(NodeEvent::record("sa", text));
        }
        let changes = self.sa.groups_mut().take_changes();
        let tables_changed =
            self.sa.services_mut().take_changed() | self.sa.informs_mut().take_changed();
        if changes.is_empty() && !tables_changed {
            return false;
        }
        // The driver shows the SA's state (status, API) and, while MASTER with
        // replication, replicates it.
        self.out.push_back(Output::PublishSa);
        for ch in changes {
            match ch {
                GroupChange::Members { mlid, mgid } => {
                    let members: Vec<McastMember> = self
                        .sa
                        .groups()
                        .by_mlid(mlid)
                        .map(|g| {
                            g.members
                                .iter()
                                .map(|(gid, m)| {
                                    McastMember::new(
                                        EndPort::Guid(split_gid(gid).1),
                                        JoinState::from_bits(m.join_state.0),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    self.emit(NodeEvent::record(
                        "sa",
                        format!(
                            "multicast group {} (MLID {mlid:#06x}): {} members",
                            gid_text(&mgid),
                            members.len()
                        ),
                    ));
                    self.subnet.set_mcast_group(now, mlid, members);
                }
                GroupChange::Deleted { mlid, mgid } => {
                    self.emit(NodeEvent::record(
                        "sa",
                        format!(
                            "multicast group {} (MLID {mlid:#06x}) deleted",
                            gid_text(&mgid)
                        ),
                    ));
                    self.subnet.remove_mcast_group(now, mlid);
                }
            }
        }
        true
    }
}

impl Running {
    /// A standby's SA takes the replicated groups, services and subscriptions (if an
    /// SA ever replicated them). A service's lease restarts at `now`: the replica
    /// holds no expiry time because replicas share no clock (each driver's epoch is its
    /// own process start), so the most a successor can promise is the full lease the
    /// client asked for, counted from when it learned of it; a client renews within
    /// its lease anyway. True if the replica held the SA's group table (an SA
    /// replicated its state).
    pub(crate) fn load_replicated_sa(&mut self, now: Duration, rep: &ReplicatedFabric) -> bool {
        if let Some((services, bad)) = Services::from_tables(&rep.sa, now) {
            if bad > 0 {
                tracing::warn!(
                    bad,
                    "SA: replicated services that do not decode were skipped"
                );
            }
            self.sa.services_mut().replace_with(services);
        }
        if let Some((informs, bad)) = Informs::from_tables(&rep.sa) {
            if bad > 0 {
                tracing::warn!(
                    bad,
                    "SA: replicated subscriptions that do not decode were skipped"
                );
            }
            self.sa.informs_mut().replace_with(informs);
        }
        let Some((groups, bad)) = McGroups::from_tables(&rep.sa) else {
            return false;
        };
        if bad > 0 {
            tracing::warn!(
                bad,
                "SA: replicated entries that do not decode were skipped"
            );
        }
        self.sa.groups_mut().replace_with(groups);
        true
    }

    /// At MASTER: the SA's state is the replica's when the node replicates and an SA
    /// replicated it; true then (clients need not re-register). Without replication, or
    /// when the replica never held SA state (the previous master was not ours), the SA
    /// starts from what it has and clients are asked to re-register.
    pub(crate) fn inherit_sa(&mut self, now: Duration) -> bool {
        if !self.cfg.replicated {
            return false;
        }
        let Some(rep) = self.replicated.clone() else {
            return false;
        };
        if !self.load_replicated_sa(now, &rep) {
            return false;
        }
        tracing::info!(
            groups = self.sa.groups().len(),
            services = self.sa.services().len(),
            subscriptions = self.sa.informs().len(),
            members = self.sa.groups().member_count(),
            "SA: the replica's groups are served as they were; no client re-registration"
        );
        true
    }
}
