//! What each failover scenario does to the cluster ([`Drill::act`]) and how the
//! drill undoes it ([`Drill::restore`], [`Restore`]): kill and restart the master,
//! hand over, pull and plug back the master's cable, cut and heal its Raft traffic,
//! raise a standby's priority and give it back.

use std::time::Duration;

use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::v1 as pb;

use super::options::{DrillError, Scenario};
use super::session::Drill;
use super::timeline::now_ms;
use crate::args::fmt_guid;
use crate::control::{unary, CtlError};

/// How long a planned handover is retried while the master says its best standby
/// is not ready yet.
const HANDOVER_RETRY_MS: u64 = 10_000;

/// How a scenario's action is undone.
pub(super) enum Restore {
    Nothing,
    Restart(String),
    LinkUp(String),
    Priority(String, u32),
    HealRaft(String),
}

impl Drill {
    pub(super) async fn act(
        &mut self,
        scenario: Scenario,
        master: &str,
    ) -> Result<(String, Restore), DrillError> {
        let t = self.target.clone();
        match scenario {
            Scenario::KillMaster => {
                unary(
                    &t,
                    "KillInstance",
                    self.demo.kill_instance(dpb::KillInstanceRequest {
                        name: master.to_string(),
                        ..Default::default()
                    }),
                )
                .await?;
                Ok((
                    format!("killed {master}"),
                    Restore::Restart(master.to_string()),
                ))
            }
            Scenario::PlannedHandover => {
                let m = self.member(master)?;
                let mt = m.target.clone();
                // The master refuses (FAILED_PRECONDITION, "retry") while the best
                // standby is still settling, e.g. re-discovering after the last
                // cycle's handover: retry as an operator would, bounded.
                let deadline = now_ms() + HANDOVER_RETRY_MS;
                let mut attempt_at;
                let r = loop {
                    attempt_at = now_ms();
                    match unary(
                        &mt,
                        "Handover",
                        m.control.handover(pb::HandoverRequest { to_guid: 0 }),
                    )
                    .await
                    {
                        Err(CtlError::Rpc { status, .. })
                            if status.code() == tonic::Code::FailedPrecondition
                                && status.message().contains("retry")
                                && now_ms() < deadline =>
                        {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        other => break other?,
                    }
                };
                // The cycle is measured from the handover that went through.
                self.acted_at = Some(attempt_at);
                Ok((
                    format!("handover to {}: {}", fmt_guid(r.target_guid), r.outcome),
                    Restore::Nothing,
                ))
            }
            Scenario::MasterPortDown => {
                unary(
                    &t,
                    "SetLinkState",
                    self.demo.set_link_state(dpb::SetLinkStateRequest {
                        name: master.to_string(),
                        up: false,
                    }),
                )
                .await?;
                Ok((
                    format!("cable of {master} pulled"),
                    Restore::LinkUp(master.to_string()),
                ))
            }
            Scenario::PriorityFlap => {
                let lowest = self
                    .members
                    .iter()
                    .filter(|m| m.name != master)
                    .min_by_key(|m| m.priority)
                    .map(|m| (m.name.clone(), m.priority))
                    .ok_or_else(|| DrillError::Setup("no standby to raise".into()))?;
                let m = self.member(&lowest.0)?;
                let mt = m.target.clone();
                unary(
                    &mt,
                    "SetPriority",
                    m.control
                        .set_priority(pb::SetPriorityRequest { priority: 15 }),
                )
                .await?;
                Ok((
                    format!("{} raised to priority 15", lowest.0),
                    Restore::Priority(lowest.0, lowest.1),
                ))
            }
            Scenario::Soak => Err(DrillError::Setup(
                "soak is a mix of actions, not one action".into(),
            )),
            Scenario::RaftPartition => {
                unary(
                    &t,
                    "SetRaftIsolation",
                    self.demo.set_raft_isolation(dpb::SetRaftIsolationRequest {
                        name: master.to_string(),
                        isolated: true,
                        ..Default::default()
                    }),
                )
                .await?;
                Ok((
                    format!("Raft traffic of {master} cut"),
                    Restore::HealRaft(master.to_string()),
                ))
            }
        }
    }

    pub(super) async fn restore(&mut self, r: Restore) -> Result<(), DrillError> {
        let t = self.target.clone();
        match r {
            Restore::Nothing => {}
            Restore::Restart(name) => {
                unary(
                    &t,
                    "RestartInstance",
                    self.demo
                        .restart_instance(dpb::RestartInstanceRequest { name }),
                )
                .await?;
            }
            Restore::LinkUp(name) => {
                unary(
                    &t,
                    "SetLinkState",
                    self.demo
                        .set_link_state(dpb::SetLinkStateRequest { name, up: true }),
                )
                .await?;
            }
            Restore::HealRaft(name) => {
                unary(
                    &t,
                    "SetRaftIsolation",
                    self.demo.set_raft_isolation(dpb::SetRaftIsolationRequest {
                        name,
                        isolated: false,
                        ..Default::default()
                    }),
                )
                .await?;
            }
            Restore::Priority(name, p) => {
                let m = self.member(&name)?;
                let mt = m.target.clone();
                unary(
                    &mt,
                    "SetPriority",
                    m.control
                        .set_priority(pb::SetPriorityRequest { priority: p }),
                )
                .await?;
            }
        }
        Ok(())
    }
}
