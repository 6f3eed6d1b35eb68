//! The writer task and the state it shares with the [`Replication`] handle: the task
//! claims the mastership epoch, writes the published record as a diff and registers
//! the SM port GUID, retrying without quorum, while the handle's calls only change
//! [`Shared`] and wake it, so the SM instance thread never waits for Raft.
//!
//! [`Replication`]: super::handle::Replication

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm_replica::{Command, ConfigChange, Refusal, Replica, ReplicaError};
use tokio::sync::Notify;

use super::cluster::{DEPOSED_RECLAIM, RETRY, SA_WRITE_INTERVAL};
use super::keys::sm_node_key;
use super::record::{diff_ops, FabricRecord};
use super::shared::{lock, Shared};

enum Step {
    Claim(u64, u64),
    Write(u64, u64, Box<FabricRecord>),
    Register(u64),
    /// SA changes alone, too soon after the last such write: wait, then write them.
    Hold,
    Idle,
}

/// What the writer does after a step.
enum Next {
    /// Progress: look for more work at once.
    Again,
    /// A claim or write did not commit: try again after [`RETRY`].
    Retry,
    /// Nothing to do: wait for news (or the retry tick).
    Wait,
}

/// The writer task (see the module doc).
pub(super) async fn writer(replica: Arc<Replica>, shared: Arc<Mutex<Shared>>, wake: Arc<Notify>) {
    // When the last write of SA changes alone started (see SA_WRITE_INTERVAL).
    let mut last_sa_write: Option<tokio::time::Instant> = None;
    loop {
        let step = {
            let s = lock(&shared);
            if s.stop {
                return;
            }
            match (s.master_guid, s.held_epoch, &s.desired) {
                (Some(g), None, _)
                    if s.deposed.is_none_or(|at| at.elapsed() >= DEPOSED_RECLAIM) =>
                {
                    Step::Claim(s.generation, g)
                }
                (_, Some(_), Some(d))
                    if d.is_sa_only()
                        && last_sa_write.is_some_and(|t| t.elapsed() < SA_WRITE_INTERVAL) =>
                {
                    Step::Hold
                }
                (_, Some(e), Some(d)) => {
                    if d.is_sa_only() {
                        last_sa_write = Some(tokio::time::Instant::now());
                    }
                    Step::Write(s.generation, e, Box::new(d.clone()))
                }
                _ => match s.register {
                    Some(g) => Step::Register(g),
                    None => Step::Idle,
                },
            }
        };
        let next = match step {
            Step::Idle => Next::Wait,
            Step::Hold => {
                // More SA changes merge into the record meanwhile.
                if let Some(t) = last_sa_write {
                    tokio::time::sleep_until(t + SA_WRITE_INTERVAL).await;
                }
                Next::Again
            }
            Step::Claim(generation, guid) => claim(&replica, &shared, generation, guid).await,
            Step::Write(generation, epoch, want) => {
                write(&replica, &shared, generation, epoch, *want).await
            }
            Step::Register(guid) => register(&replica, &shared, guid).await,
        };
        match next {
            Next::Again => tokio::task::yield_now().await,
            Next::Retry | Next::Wait => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}

async fn claim(
    replica: &Arc<Replica>,
    shared: &Arc<Mutex<Shared>>,
    generation: u64,
    guid: u64,
) -> Next {
    match replica.claim_mastership(guid).await {
        Ok(epoch) => {
            let ours = {
                let mut s = lock(shared);
                let ours = s.generation == generation;
                if ours {
                    s.held_epoch = Some(epoch);
                    s.deposed = None;
                    if s.degraded {
                        tracing::info!(epoch, "replication: quorum is back");
                    }
                    s.degraded = false;
                    tracing::info!(epoch, "replication: mastership epoch claimed");
                }
                ours
            };
            if ours {
                // Raft leadership follows the SM master (module doc): its own task,
                // so the writer goes on with the record at once.
                super::leadership::spawn_for(replica, shared, generation, epoch);
            }
            Next::Again
        }
        Err(ReplicaError::Refused(Refusal::StaleEpoch { current, .. })) => {
            // Our copy lagged behind a newer epoch; it is catching up: claim above it.
            tracing::debug!(current, "epoch claim raced a newer epoch; retrying");
            tokio::time::sleep(Duration::from_millis(20)).await;
            Next::Again
        }
        Err(ReplicaError::Refused(r)) => {
            let mut s = lock(shared);
            if s.generation == generation && !s.degraded {
                tracing::error!(refusal = %r, "replication: the mastership claim was refused: DEGRADED, running the fabric from the local replica");
                s.degraded = true;
                s.degraded_reason = format!("mastership claim refused: {r}");
            }
            Next::Retry
        }
        Err(e) => {
            let mut s = lock(shared);
            if s.generation == generation && !s.degraded {
                tracing::warn!(%e, "replication: cannot claim the mastership epoch (no quorum?): DEGRADED, running the fabric from the local replica");
                s.degraded = true;
                s.degraded_reason = format!("mastership claim did not commit: {e}");
            }
            Next::Retry
        }
    }
}

async fn write(
    replica: &Replica,
    shared: &Mutex<Shared>,
    generation: u64,
    epoch: u64,
    want: FabricRecord,
) -> Next {
    let ops = replica.with_state(|have| diff_ops(have, &want));
    let done = |s: &mut Shared| {
        if s.generation == generation && s.desired.as_ref() == Some(&want) {
            s.desired = None;
            if s.master_guid.is_none() {
                // The last write after stepping down (see stop_master).
                s.held_epoch = None;
            }
        }
    };
    if ops.is_empty() {
        done(&mut lock(shared));
        return Next::Again;
    }
    let n = ops.len();
    match replica.write(Command::Update { epoch, ops }).await {
        Ok(r) => {
            let mut s = lock(shared);
            if s.generation == generation {
                if s.degraded {
                    tracing::info!(
                        epoch,
                        ops = n,
                        "replication: quorum is back; the assignments made meanwhile are replicated"
                    );
                }
                s.degraded = false;
            }
            done(&mut s);
            tracing::debug!(epoch, ops = n, log_index = r.log_index, "replicated");
            Next::Again
        }
        Err(ReplicaError::Refused(Refusal::StaleEpoch { current, .. })) => {
            let mut s = lock(shared);
            if s.generation == generation {
                tracing::warn!(
                    epoch,
                    current,
                    "replication: another master holds a newer epoch: deposed, not writing"
                );
                s.deposed = Some(std::time::Instant::now());
                s.held_epoch = None;
                s.desired = None;
                if s.master_guid.is_some() {
                    s.degraded = true;
                    s.degraded_reason = format!(
                        "deposed by epoch {current}; claiming again in {} ms if still MASTER",
                        DEPOSED_RECLAIM.as_millis()
                    );
                }
            }
            Next::Again
        }
        Err(e) => {
            let mut s = lock(shared);
            if s.generation == generation && s.master_guid.is_none() {
                // Not master any more and no quorum: give the record up.
                s.desired = None;
                s.held_epoch = None;
                return Next::Again;
            }
            if s.generation == generation && !s.degraded {
                tracing::warn!(%e, "replication: write did not commit (no quorum?): DEGRADED, keeping the assignments to reconcile");
                s.degraded = true;
                s.degraded_reason = format!("fabric state write did not commit: {e}");
            }
            Next::Retry
        }
    }
}

async fn register(replica: &Replica, shared: &Mutex<Shared>, guid: u64) -> Next {
    let node = replica.node_id().to_string();
    let key = sm_node_key(guid);
    let already = replica.with_state(|s| s.config.get(&key) == Some(&node));
    let ok = already
        || replica
            .write(Command::Config(ConfigChange::Set { key, value: node }))
            .await
            .is_ok();
    if !ok {
        return Next::Retry;
    }
    let mut s = lock(shared);
    if s.register == Some(guid) {
        s.register = None;
        s.registered = Some(guid);
    }
    Next::Again
}
