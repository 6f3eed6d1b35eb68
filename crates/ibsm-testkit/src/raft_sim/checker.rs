//! The invariant checker of the module doc: the [`Checker`] records every acknowledged
//! write and claim, checks each new acknowledgement against them (one SM per epoch,
//! claims in epoch order, no stale `Update` accepted), and checks each replica's state
//! after every step (acked writes present, epoch never lower, LIDs never changed or
//! shared, `master_guid` the acked claimant). It sees only commands and replica states,
//! not the cluster that produced them.

use std::collections::BTreeMap;

use ibsm_replica::store::SmData;
use ibsm_replica::{Command, ConfigChange, LidRange, NodeId, Op};

use super::report::Violation;
pub(super) struct Acked {
    pub(super) index: u64,
    pub(super) sm: usize,
    pub(super) cmd: Command,
}

#[derive(Default)]
pub(super) struct Checker {
    pub(super) acked: Vec<Acked>,
    /// epoch -> (SM, log index) of its acknowledged claim.
    pub(super) claims: BTreeMap<u64, (usize, u64)>,
    /// The LID every port GUID got first.
    pub(super) lids: BTreeMap<u64, LidRange>,
    pub(super) last_epoch: BTreeMap<NodeId, u64>,
}

impl Checker {
    pub(super) fn on_ack(&mut self, sm: usize, index: u64, cmd: &Command) -> Result<(), Violation> {
        match cmd {
            Command::ClaimMastership { epoch, .. } => {
                if let Some((first, _)) = self.claims.get(epoch) {
                    if *first != sm {
                        return Err(Violation::EpochHeldTwice {
                            epoch: *epoch,
                            first: *first,
                            second: sm,
                        });
                    }
                }
                for (e, (_, i)) in &self.claims {
                    if (*e < *epoch && *i > index) || (*e > *epoch && *i < index) {
                        return Err(Violation::ClaimsOutOfOrder {
                            a: *e,
                            ai: *i,
                            b: *epoch,
                            bi: index,
                        });
                    }
                }
                for a in &self.acked {
                    if let Command::Update { epoch: e, .. } = a.cmd {
                        if e < *epoch && a.index > index {
                            return Err(Violation::StaleWriteAccepted {
                                epoch: e,
                                index: a.index,
                                newer: *epoch,
                                newer_index: index,
                            });
                        }
                    }
                }
                self.claims.insert(*epoch, (sm, index));
            }
            Command::Update { epoch, .. } => {
                let holder = self.claims.get(epoch).map(|(s, _)| *s);
                if holder != Some(sm) {
                    return Err(Violation::ForeignEpochWrite {
                        sm,
                        epoch: *epoch,
                        index,
                        holder,
                    });
                }
                for (e, (_, i)) in &self.claims {
                    if *e > *epoch && *i < index {
                        return Err(Violation::StaleWriteAccepted {
                            epoch: *epoch,
                            index,
                            newer: *e,
                            newer_index: *i,
                        });
                    }
                }
            }
            Command::Config(_) => {}
        }
        self.acked.push(Acked {
            index,
            sm,
            cmd: cmd.clone(),
        });
        Ok(())
    }

    pub(super) fn check_node(
        &mut self,
        node: NodeId,
        d: &SmData,
        sm_guids: &[u64],
    ) -> Result<(), Violation> {
        let st = &d.state;
        let applied = d.last_applied.map(|l| l.index).unwrap_or(0);
        let last = self.last_epoch.entry(node).or_insert(0);
        if st.epoch < *last {
            return Err(Violation::EpochDecreased {
                node,
                from: *last,
                to: st.epoch,
            });
        }
        *last = st.epoch;
        for (g, was) in &self.lids {
            let now = st.guid2lid.get(g);
            // A port once assigned stays assigned (guid2lid only grows) with its LID;
            // only replicas that have not yet applied it may lack it.
            if now.is_some_and(|n| n != was) {
                return Err(Violation::LidChanged {
                    node,
                    port_guid: *g,
                    was: *was,
                    now: now.copied(),
                });
            }
        }
        for a in self.acked.iter().filter(|a| a.index <= applied) {
            let present = match &a.cmd {
                Command::ClaimMastership { epoch, .. } => st.epoch >= *epoch,
                Command::Update { ops, .. } => ops.iter().all(|op| match op {
                    Op::SetGuid2Lid { port_guid, range } => {
                        st.guid2lid.get(port_guid) == Some(range)
                    }
                    Op::ReplaceGuid2Lid(m) => m.iter().all(|(g, r)| st.guid2lid.get(g) == Some(r)),
                    _ => true,
                }),
                Command::Config(ConfigChange::Set { key, value }) => {
                    st.config.get(key) == Some(value)
                }
                Command::Config(ConfigChange::Remove { key }) => !st.config.contains_key(key),
            };
            if !present {
                return Err(Violation::AckedWriteLost {
                    node,
                    applied,
                    index: a.index,
                    what: format!("{:?} by SM {}", a.cmd, a.sm),
                });
            }
        }
        let mut by_lid: BTreeMap<u16, u64> = BTreeMap::new();
        for (g, r) in &st.guid2lid {
            self.lids.entry(*g).or_insert(*r);
            for lid in r.min_lid..=r.max_lid {
                if let Some(other) = by_lid.insert(lid, *g) {
                    return Err(Violation::LidShared {
                        node,
                        lid,
                        a: other,
                        b: *g,
                    });
                }
            }
        }
        if let Some((holder, _)) = self.claims.get(&st.epoch) {
            let want = sm_guids.get(*holder).copied();
            if st.master_guid != want {
                return Err(Violation::MasterMismatch {
                    node,
                    epoch: st.epoch,
                    state: st.master_guid,
                    holder: *holder,
                });
            }
        }
        Ok(())
    }
}
