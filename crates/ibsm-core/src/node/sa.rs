//! The node's Subnet Administrator plumbing: a GMP of class 0x03 goes to the
//! [`crate::sa::SaAgent`] with the context it is answered against (the master's
//! fabric snapshot, the SMs this node knows, whether it is MASTER).

use std::time::Duration;

use ibsm_mad::sa::{SmInfoRecord, SA_CLASS};
use ibsm_mad::{MadAddress, SmInfo, MAD_SIZE};

use crate::election::SmState;
use ibsm_fabric::multicast::{EndPort, JoinState, McastMember};

use crate::sa::{gid_text, split_gid, GroupChange, McGroups, SaContext};

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
    /// Hand the SA's group changes to the configurator, which keeps each group's
    /// multicast tree programmed; true if there were any.
    pub(crate) fn apply_group_changes(&mut self, now: Duration) -> bool {
        let changes = self.sa.groups_mut().take_changes();
        if changes.is_empty() {
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
    /// A standby's SA takes the replicated groups (if an SA ever replicated them).
    pub(crate) fn load_replicated_sa(&mut self, rep: &ReplicatedFabric) {
        let Some((groups, bad)) = McGroups::from_tables(&rep.sa) else {
            return;
        };
        if bad > 0 {
            tracing::warn!(
                bad,
                "SA: replicated entries that do not decode were skipped"
            );
        }
        self.sa.groups_mut().replace_with(groups);
    }

    /// At MASTER: the SA's state is the replica's when the node replicates and an SA
    /// replicated it; true then (clients need not re-register). Without replication, or
    /// when the replica never held SA state (the previous master was not ours), the SA
    /// starts from what it has and clients are asked to re-register.
    pub(crate) fn inherit_sa(&mut self) -> bool {
        if !self.cfg.replicated {
            return false;
        }
        let Some(rep) = self.replicated.clone() else {
            return false;
        };
        if McGroups::from_tables(&rep.sa).is_none() {
            return false;
        }
        self.load_replicated_sa(&rep);
        tracing::info!(
            groups = self.sa.groups().len(),
            members = self.sa.groups().member_count(),
            "SA: the replica's groups are served as they were; no client re-registration"
        );
        true
    }
}
