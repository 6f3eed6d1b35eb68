//! The SMs above the replicas: [`sim_write`] (a write as the daemon's `Replica::write`
//! does it), what every idle SM writes each step (a master's claim and `Update`s, a
//! standby's `Config` writes, the planted bugs), what a write's result does to its SM
//! (mastership won, deposed by `StaleEpoch`), and the seeded election failover.

use std::time::Duration;

use ibsm_replica::{Command, ConfigChange, LidRange, NodeId, Op, Outcome, Refusal};
use openraft::error::{ClientWriteError, RaftError};

use super::cluster::{Done, Sim, SmRole};
use super::config::Plant;
use super::report::Violation;
use crate::raft_sim_net::SimNet;
/// A write as the daemon's `Replica::write` does it, on tokio's clock: to the leader
/// the local node knows (forwarded over the simulated network), retried on "not leader"
/// and lost messages until `timeout`. `Ok((log_index, outcome))` once the entry is
/// committed and applied on the leader.
pub async fn sim_write(
    net: &SimNet,
    from: NodeId,
    cmd: Command,
    timeout: Duration,
) -> Result<(u64, Outcome), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?}"));
        }
        let Some(local) = net.node(from) else {
            return Err(format!("node {from} is down"));
        };
        let leader = local.metrics().borrow().current_leader;
        let target = leader.unwrap_or(from);
        let c = cmd.clone();
        let attempt = async {
            if target == from {
                Ok(local.client_write(c).await)
            } else {
                net.call(from, target, |r| async move { r.client_write(c).await })
                    .await
            }
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Err(_) => return Err(format!("timed out after {timeout:?}")),
            Ok(Ok(Ok(resp))) => return Ok((resp.log_id.index, resp.data)),
            Ok(Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))))) | Ok(Err(_)) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(Ok(Err(e))) => return Err(format!("node {target}: {e}")),
        }
    }
}

impl Sim {
    pub(super) fn on_done(&mut self, d: Done) -> Result<(), Violation> {
        let line = format!(
            "done sm{} gen{} {} -> {}",
            d.sm,
            d.generation,
            short(&d.cmd),
            match &d.result {
                Ok((i, o)) => format!("index {i} {o:?}"),
                Err(e) => format!("error {e}"),
            }
        );
        self.log(line);
        if let Ok((index, Outcome::Applied { .. })) = &d.result {
            // Acknowledged: committed, whether or not the SM that sent it is still alive.
            self.checker.on_ack(d.sm, *index, &d.cmd)?;
        }
        let Some(sm) = self.sms.get_mut(d.sm) else {
            return Err(Violation::Harness(format!("no SM {}", d.sm)));
        };
        if sm.generation != d.generation {
            return Ok(());
        }
        sm.busy = false;
        match (&d.cmd, &d.result) {
            (Command::ClaimMastership { epoch, .. }, Ok((index, Outcome::Applied { .. }))) => {
                sm.role = SmRole::Master {
                    epoch: *epoch,
                    claim_index: *index,
                    record: None,
                };
            }
            (Command::Update { .. }, Ok((_, Outcome::Refused(Refusal::StaleEpoch { .. })))) => {
                // Deposed: another master claimed a newer epoch.
                self.stale_refused += 1;
                sm.role = SmRole::Standby;
            }
            (Command::Update { .. }, Ok((_, Outcome::Refused(r)))) => {
                return Err(Violation::UnexpectedRefusal(format!("SM {}: {r}", d.sm)));
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn elected_down(&self) -> bool {
        match self.sms.get(self.elected) {
            Some(s) => self.node(s.node).is_none(),
            None => true,
        }
    }

    pub(super) fn failover(&mut self) {
        let live: Vec<usize> = (0..self.sms.len())
            .filter(|i| *i != self.elected)
            .filter(|i| {
                self.sms
                    .get(*i)
                    .is_some_and(|s| self.node(s.node).is_some())
            })
            .collect();
        let Some(new) = self.pick(&live) else { return };
        let old = self.elected;
        let told = self.rng.chance(0.5);
        if told {
            if let Some(s) = self.sms.get_mut(old) {
                s.role = SmRole::Standby;
            }
        }
        self.elected = new;
        self.failovers += 1;
        self.log(format!(
            "failover: sm{old} -> sm{new} (old {})",
            if told { "steps down" } else { "not told" }
        ));
    }

    /// Every idle SM does what the daemon's replication writer would do now.
    pub(super) fn sm_step(&mut self) {
        for i in 0..self.sms.len() {
            let Some(sm) = self.sms.get(i) else { continue };
            let Some(node) = self.node(sm.node) else {
                continue;
            };
            if sm.busy {
                continue;
            }
            let (applied, view, view_epoch) = node.read(|d| {
                (
                    d.last_applied.map(|l| l.index).unwrap_or(0),
                    d.state.guid2lid.clone(),
                    d.state.epoch,
                )
            });
            let cmd = match sm.role.clone() {
                SmRole::Standby if i == self.elected => Command::ClaimMastership {
                    epoch: view_epoch + 1,
                    sm_guid: sm.guid,
                },
                SmRole::Standby => {
                    if !self.faulty || !self.rng.chance(0.05) {
                        continue;
                    }
                    Command::Config(ConfigChange::Set {
                        key: format!("sim.{}.sm{i}", self.step),
                        value: format!("{}", self.rng.next_u64()),
                    })
                }
                SmRole::Master {
                    epoch,
                    claim_index,
                    record,
                } => {
                    // Seed from the replica only once it has applied our own claim: it
                    // then holds every write of every earlier master that committed.
                    if applied < claim_index {
                        continue;
                    }
                    let mut record = record.unwrap_or_else(|| view.clone());
                    let mut next = record
                        .values()
                        .chain(view.values())
                        .map(|r| r.max_lid)
                        .max()
                        .unwrap_or(0);
                    for p in &self.ports {
                        if !record.contains_key(p) {
                            next += 1;
                            record.insert(
                                *p,
                                LidRange {
                                    min_lid: next,
                                    max_lid: next,
                                },
                            );
                        }
                    }
                    if self.cfg.plant == Some(Plant::RenumberPort) && record.len() >= 2 {
                        if let Some(r) = record.values_mut().next() {
                            next += 1;
                            *r = LidRange {
                                min_lid: next,
                                max_lid: next,
                            };
                        }
                    }
                    let mut ops: Vec<Op> = record
                        .iter()
                        .filter(|(g, r)| view.get(g) != Some(r))
                        .map(|(g, r)| Op::SetGuid2Lid {
                            port_guid: *g,
                            range: *r,
                        })
                        .collect();
                    if self.cfg.plant == Some(Plant::ForgetAckedPort)
                        && !ops.is_empty()
                        && record.len() >= 2
                    {
                        let mut m = record.clone();
                        if let Some(first) = m.keys().next().copied() {
                            m.remove(&first);
                        }
                        ops = vec![Op::ReplaceGuid2Lid(m)];
                    }
                    let stamped = if self.cfg.plant == Some(Plant::UnfencedEpoch) {
                        epoch.max(view_epoch)
                    } else {
                        epoch
                    };
                    if let Some(s) = self.sms.get_mut(i) {
                        s.role = SmRole::Master {
                            epoch,
                            claim_index,
                            record: Some(record),
                        };
                    }
                    if ops.is_empty() {
                        continue;
                    }
                    Command::Update {
                        epoch: stamped,
                        ops,
                    }
                }
            };
            let Some(sm) = self.sms.get_mut(i) else {
                continue;
            };
            sm.busy = true;
            let (from, generation) = (sm.node, sm.generation);
            let line = format!("sm{i} sends {}", short(&cmd));
            let (net, tx, timeout) = (self.net.clone(), self.tx.clone(), self.cfg.write_timeout);
            tokio::spawn(async move {
                let result = sim_write(&net, from, cmd.clone(), timeout).await;
                let _ = tx.send(Done {
                    sm: i,
                    generation,
                    cmd,
                    result,
                });
            });
            self.log(line);
        }
    }
}

fn short(c: &Command) -> String {
    match c {
        Command::ClaimMastership { epoch, sm_guid } => {
            format!("Claim(e{epoch} {sm_guid:#x})")
        }
        Command::Update { epoch, ops } => format!("Update(e{epoch} {} ops)", ops.len()),
        Command::Config(ConfigChange::Set { key, .. }) => format!("Config({key})"),
        Command::Config(ConfigChange::Remove { key }) => format!("Config(-{key})"),
    }
}
