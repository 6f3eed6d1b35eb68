//! The writes-lost check: before each action the drill writes a marker partition
//! through the master's API (a replicated write), once the cycle's master is
//! verified every running instance must list it, and at the end the drill deletes
//! it (the module doc of `drill` says why every cycle reuses one P_Key).

use std::time::Duration;

use ibsm_proto::v1 as pb;

use super::options::DrillError;
use super::session::Drill;
use super::summary::Cycle;
use super::timeline::now_ms;
use crate::control::{unary, CtlError};

/// How long every running instance may take to list an acknowledged marker.
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(20);

/// How many times a drill tries to write its marker before the cycle says it was not
/// acknowledged.
const MARKER_ATTEMPTS: usize = 4;

/// The P_Key of the drills' marker partition (the highest one below the default
/// 0x7fff, out of the way of hand-made partitions).
pub const MARKER_P_KEY: u32 = 0x7ffe;

/// A marker write: the partition's name and P_Key, and whether the API acknowledged it
/// (with why not).
#[derive(Debug, Clone)]
pub(super) struct Marker {
    name: String,
    p_key: u32,
    acked: Result<(), String>,
}

impl Cycle {
    pub(super) fn set_marker(&mut self, m: &Marker) {
        self.marker = Some(format!("{} P_Key {:#06x}", m.name, m.p_key));
        self.marker_acked = m.acked.is_ok();
        if let Err(e) = &m.acked {
            self.note = format!("{}; marker not acknowledged: {e}", self.note);
        }
    }
}

impl Drill {
    /// Write cycle `index`'s marker partition through `master`'s API (a replicated
    /// write: `Fabric/SetPartition` commits it to the replica before answering).
    pub(super) async fn write_marker(
        &mut self,
        master: &str,
        index: u32,
    ) -> Result<Marker, DrillError> {
        let guid = self.port_guid(master).await;
        let name = format!("drill-{}-c{index}", self.started);
        let p_key = MARKER_P_KEY;
        let m = self.member(master)?;
        let t = m.target.clone();
        let request = pb::SetPartitionRequest {
            partition: Some(pb::PartitionEntry {
                groups: Vec::new(),
                index0: false,
                name: name.clone(),
                p_key,
                members: vec![pb::PartitionMemberEntry {
                    port_guid: guid,
                    full: true,
                }],
                ipoib: None,
            }),
        };
        let acked = if guid == 0 {
            Err(format!("{master} did not tell its port GUID"))
        } else {
            // As any client of the API would: an UNAVAILABLE answer (no Raft leader
            // for the moment, the write timed out) or a call that timed out is tried
            // again; SetPartition is idempotent, so a retry cannot write twice.
            let mut failures = Vec::new();
            loop {
                let r = unary(&t, "SetPartition", m.fabric.set_partition(request.clone())).await;
                let retry = match &r {
                    Ok(_) => break Ok(()),
                    Err(CtlError::Rpc { status, .. }) => status.code() == tonic::Code::Unavailable,
                    Err(CtlError::Timeout { .. }) => true,
                    Err(_) => false,
                };
                failures.push(r.err().map(|e| e.to_string()).unwrap_or_default());
                if !retry || failures.len() >= MARKER_ATTEMPTS {
                    break Err(failures.join("; then "));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        };
        Ok(Marker { name, p_key, acked })
    }

    /// Take the marker partition out again (best effort, through the first member
    /// that answers), so a drill leaves no P_Key behind on a running demo.
    pub(super) async fn remove_marker(&mut self) {
        for m in &mut self.members {
            let t = m.target.clone();
            let r = unary(
                &t,
                "DeletePartition",
                m.fabric.delete_partition(pb::DeletePartitionRequest {
                    p_key: MARKER_P_KEY,
                }),
            )
            .await;
            match r {
                Ok(_) => return,
                Err(e) => eprintln!(
                    "drill: marker partition not removed through {}: {e}",
                    m.name
                ),
            }
        }
    }

    /// Every running instance must list an acknowledged marker within
    /// [`MARKER_TIMEOUT`]; each one that does not is a lost write.
    pub(super) async fn check_marker(
        &mut self,
        marker: &Marker,
        c: &mut Cycle,
    ) -> Result<(), DrillError> {
        if marker.acked.is_err() {
            return Ok(());
        }
        let running = self.running().await?;
        let deadline = now_ms() + u64::try_from(MARKER_TIMEOUT.as_millis()).unwrap_or(20_000);
        let mut missing = Vec::new();
        for name in &running {
            let m = self.member(name)?;
            let t = m.target.clone();
            let mut last = String::new();
            let found = loop {
                match unary(
                    &t,
                    "ListPartitions",
                    m.fabric.list_partitions(pb::ListPartitionsRequest {}),
                )
                .await
                {
                    Ok(r) => {
                        if r.partitions
                            .iter()
                            .any(|p| p.p_key == marker.p_key && p.name == marker.name)
                        {
                            break true;
                        }
                        last = format!("not among {} partitions", r.partitions.len());
                    }
                    Err(e) => last = e.to_string(),
                }
                if now_ms() > deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            if !found {
                missing.push(format!(
                    "{} ({:#06x}) missing on {}: {last}",
                    marker.name, marker.p_key, name
                ));
            }
        }
        if !missing.is_empty() {
            c.writes_lost += 1;
            c.writes_lost_detail.extend(missing);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_p_key_is_a_valid_partition_key() {
        // 15-bit base key, neither 0 (invalid) nor 0x7fff (the default partition).
        assert!((1..0x7fff).contains(&MARKER_P_KEY));
    }
}
