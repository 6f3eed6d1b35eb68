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

/// How long an operator's --kill-cmd or --restart-cmd may run.
const OPERATOR_CMD_TIMEOUT: Duration = Duration::from_secs(60);

/// How a scenario's action is undone.
pub(super) enum Restore {
    Nothing,
    /// A StepDown's hold ends at this unix ms (the SM gets its priority back itself).
    HoldEnds(u64),
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
            Scenario::KillMaster if self.cluster.is_some() => {
                let cmd = self.cluster.as_ref().and_then(|c| c.kill_cmd.clone());
                self.run_operator_cmd("--kill-cmd", cmd.as_deref(), master)
                    .await?;
                Ok((
                    format!("killed {master} (--kill-cmd)"),
                    Restore::Restart(master.to_string()),
                ))
            }
            Scenario::MasterStepDown => {
                let hold_ms = self
                    .cluster
                    .as_ref()
                    .map_or(5, |c| c.step_down_hold_s)
                    .saturating_mul(1000);
                let m = self.member(master)?;
                let (mt, control) = (m.target.clone(), m.control.clone());
                let (r, attempt_at) = while_settling(|| {
                    let (mt, mut c) = (mt.clone(), control.clone());
                    async move {
                        unary(
                            &mt,
                            "StepDown",
                            c.step_down(pb::StepDownRequest { hold_ms }),
                        )
                        .await
                    }
                })
                .await?;
                self.acted_at = Some(attempt_at);
                Ok((
                    format!(
                        "{master} stepped down for {} s, handover to {}: {}",
                        hold_ms / 1000,
                        fmt_guid(r.target_guid),
                        r.outcome
                    ),
                    Restore::HoldEnds(r.until_unix_ms),
                ))
            }
            Scenario::KillMaster => {
                unary(
                    &t,
                    "KillInstance",
                    self.demo_client()?.kill_instance(dpb::KillInstanceRequest {
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
                let (mt, control) = (m.target.clone(), m.control.clone());
                let (r, attempt_at) = while_settling(|| {
                    let (mt, mut c) = (mt.clone(), control.clone());
                    async move {
                        unary(
                            &mt,
                            "Handover",
                            c.handover(pb::HandoverRequest { to_guid: 0 }),
                        )
                        .await
                    }
                })
                .await?;
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
                    self.demo_client()?
                        .set_link_state(dpb::SetLinkStateRequest {
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
                    self.demo_client()?
                        .set_raft_isolation(dpb::SetRaftIsolationRequest {
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
            Restore::HoldEnds(at) => {
                // The master gets its priority back by itself; the next stable cluster
                // must come after that, not during the hold.
                let wait = at.saturating_sub(now_ms()) + 200;
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Restore::Restart(name) if self.cluster.is_some() => {
                let cmd = self.cluster.as_ref().and_then(|c| c.restart_cmd.clone());
                self.run_operator_cmd("--restart-cmd", cmd.as_deref(), &name)
                    .await?;
            }
            Restore::Restart(name) => {
                unary(
                    &t,
                    "RestartInstance",
                    self.demo_client()?
                        .restart_instance(dpb::RestartInstanceRequest { name }),
                )
                .await?;
            }
            Restore::LinkUp(name) => {
                unary(
                    &t,
                    "SetLinkState",
                    self.demo_client()?
                        .set_link_state(dpb::SetLinkStateRequest { name, up: true }),
                )
                .await?;
            }
            Restore::HealRaft(name) => {
                unary(
                    &t,
                    "SetRaftIsolation",
                    self.demo_client()?
                        .set_raft_isolation(dpb::SetRaftIsolationRequest {
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

impl Drill {
    /// Run an operator's command for member `name` (`sh -c`, placeholders {name}
    /// {endpoint} {host} {guid} replaced), bounded by [`OPERATOR_CMD_TIMEOUT`]; a
    /// failure stops the drill with the command's exit status and stderr.
    async fn run_operator_cmd(
        &mut self,
        flag: &str,
        template: Option<&str>,
        name: &str,
    ) -> Result<(), DrillError> {
        let template = template
            .ok_or_else(|| DrillError::Setup(format!("{flag} is needed for this drill")))?;
        let m = self.member(name)?;
        let endpoint = m
            .target
            .endpoint
            .split_once("://")
            .map_or(m.target.endpoint.as_str(), |(_, r)| r)
            .to_string();
        let cmd = expand(template, name, &endpoint, m.guid);
        let out = tokio::time::timeout(
            OPERATOR_CMD_TIMEOUT,
            tokio::process::Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .map_err(|_| {
            DrillError::Setup(format!(
                "{flag} `{cmd}` did not finish within {OPERATOR_CMD_TIMEOUT:?}"
            ))
        })?
        .map_err(|e| DrillError::Setup(format!("{flag} `{cmd}`: cannot run sh: {e}")))?;
        if !out.status.success() {
            return Err(DrillError::Setup(format!(
                "{flag} `{cmd}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        eprintln!("{flag}: ran `{cmd}`");
        Ok(())
    }
}

/// Call `rpc` until the master stops refusing it as not ready (FAILED_PRECONDITION
/// saying "retry": its best standby is still settling, e.g. re-discovering after the
/// last cycle's handover; or "in progress": a handover is already under way), as an
/// operator would, for at most [`HANDOVER_RETRY_MS`]. Returns the answer and when the
/// attempt that went through started (the cycle is measured from it).
async fn while_settling<T, F, Fut>(mut rpc: F) -> Result<(T, u64), DrillError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, CtlError>>,
{
    let deadline = now_ms() + HANDOVER_RETRY_MS;
    loop {
        let attempt_at = now_ms();
        match rpc().await {
            Err(CtlError::Rpc { status, .. })
                if status.code() == tonic::Code::FailedPrecondition
                    && (status.message().contains("retry")
                        || status.message().contains("in progress"))
                    && now_ms() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return Ok((other?, attempt_at)),
        }
    }
}

/// A --kill-cmd/--restart-cmd template with its placeholders replaced: {name} (the
/// judge's name of the SM), {endpoint} (host:port of its API), {host} (the endpoint's
/// host), {guid} (its port GUID, 0x-hex).
pub(super) fn expand(template: &str, name: &str, endpoint: &str, guid: u64) -> String {
    let host = endpoint
        .rsplit_once(':')
        .map_or(endpoint, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    template
        .replace("{name}", name)
        .replace("{endpoint}", endpoint)
        .replace("{host}", host)
        .replace("{guid}", &fmt_guid(guid))
}

#[cfg(test)]
mod tests {
    #[test]
    fn operator_commands_get_the_member_they_act_on() {
        assert_eq!(
            super::expand(
                "ssh {host} systemctl kill -s KILL ibsmd # {name} {endpoint} {guid}",
                "sm2",
                "10.0.0.2:50051",
                0x1a
            ),
            "ssh 10.0.0.2 systemctl kill -s KILL ibsmd # sm2 10.0.0.2:50051 0x000000000000001a"
        );
        assert_eq!(super::expand("{host}", "a", "[::1]:7", 0), "::1");
    }
}
