//! The in-process network of [`crate::raft_sim`]: openraft's `RaftNetworkFactory` over
//! direct calls into the target's `Raft` handle, with a fault hook on every message.
//!
//! No sockets, no serialization: a message is a function call delayed by a virtual-time
//! sleep, so under tokio's paused clock a whole Raft cluster runs in one thread without
//! waiting for real time. Each request and each reply passes [`SimNet::decide`], which
//! applies the current faults (cut links, drop probability, latency range) with the
//! harness's seeded RNG. A request that gets through is executed even if its reply is
//! then lost, as on a real network. Snapshots go whole (`install_full_snapshot`), like
//! the production gRPC transport's streamed snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ibsm_replica::{NodeId, TypeConfig};
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft, Snapshot, Vote};

use crate::rng::Rng;

/// What the network does to messages right now.
#[derive(Debug, Clone, PartialEq)]
pub struct NetFaults {
    /// Directed links that carry nothing: `(from, to)`.
    pub cut: BTreeSet<(NodeId, NodeId)>,
    /// Probability that one message (request or reply) is lost.
    pub drop: f64,
    /// One-way latency, drawn uniformly in `min..=max` per message.
    pub latency: (Duration, Duration),
}

impl Default for NetFaults {
    fn default() -> Self {
        NetFaults {
            cut: BTreeSet::new(),
            drop: 0.0,
            latency: (Duration::from_micros(200), Duration::from_millis(2)),
        }
    }
}

/// Message counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    pub delivered: u64,
    pub dropped: u64,
    pub refused: u64,
}

struct NetState {
    nodes: BTreeMap<NodeId, Raft<TypeConfig>>,
    faults: NetFaults,
    rng: Rng,
    stats: NetStats,
}

/// The shared network: live nodes, current faults, the RNG that decides each message.
#[derive(Clone)]
pub struct SimNet(Arc<Mutex<NetState>>);

/// Fate of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Arrives after this delay.
    Deliver(Duration),
    /// Lost: the sender notices after this delay (a timeout).
    Drop(Duration),
    /// The link is cut: the sender is refused at once.
    Cut,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Msg(String);

impl SimNet {
    pub fn new(seed: u64) -> SimNet {
        SimNet(Arc::new(Mutex::new(NetState {
            nodes: BTreeMap::new(),
            faults: NetFaults::default(),
            rng: Rng::new(seed),
            stats: NetStats::default(),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, NetState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make `raft` reachable as `id` (after a start or restart).
    pub fn attach(&self, id: NodeId, raft: Raft<TypeConfig>) {
        self.lock().nodes.insert(id, raft);
    }

    /// `id` crashed: messages to it are refused.
    pub fn detach(&self, id: NodeId) -> Option<Raft<TypeConfig>> {
        self.lock().nodes.remove(&id)
    }

    /// The live handle of `id`.
    pub fn node(&self, id: NodeId) -> Option<Raft<TypeConfig>> {
        self.lock().nodes.get(&id).cloned()
    }

    pub fn faults(&self) -> NetFaults {
        self.lock().faults.clone()
    }

    pub fn set_faults(&self, f: NetFaults) {
        self.lock().faults = f;
    }

    pub fn stats(&self) -> NetStats {
        self.lock().stats
    }

    /// Whether `from` can reach `to` at all (ignoring random loss).
    pub fn linked(&self, from: NodeId, to: NodeId) -> bool {
        from == to || !self.lock().faults.cut.contains(&(from, to))
    }

    /// Decide the fate of one message `from -> to` (the fault hook).
    pub fn decide(&self, from: NodeId, to: NodeId) -> Fate {
        let mut g = self.lock();
        let st = &mut *g;
        if from != to && st.faults.cut.contains(&(from, to)) {
            st.stats.refused += 1;
            return Fate::Cut;
        }
        let (lo, hi) = st.faults.latency;
        let span = hi.saturating_sub(lo).as_micros() as u64;
        let delay = lo + Duration::from_micros(st.rng.below(span + 1));
        if st.rng.chance(st.faults.drop) {
            st.stats.dropped += 1;
            // The sender gives up after a while; a lost packet is not noticed at once.
            return Fate::Drop(delay * 4 + Duration::from_millis(5));
        }
        st.stats.delivered += 1;
        Fate::Deliver(delay)
    }

    /// Carry one request `from -> to`, run it on the target, carry the reply back.
    /// `Err` is the transport's failure (cut, lost, target down) as text plus whether
    /// it is "unreachable" (back off) rather than a transient network error.
    pub async fn call<T, F, Fut>(&self, from: NodeId, to: NodeId, f: F) -> Result<T, (bool, String)>
    where
        F: FnOnce(Raft<TypeConfig>) -> Fut,
        Fut: Future<Output = T>,
    {
        match self.decide(from, to) {
            Fate::Cut => return Err((true, format!("link {from}->{to} cut"))),
            Fate::Drop(d) => {
                tokio::time::sleep(d).await;
                return Err((false, format!("request {from}->{to} lost")));
            }
            Fate::Deliver(d) => tokio::time::sleep(d).await,
        }
        // The link or the target may have gone while the message was in flight.
        if !self.linked(from, to) {
            return Err((true, format!("link {from}->{to} cut in flight")));
        }
        let Some(target) = self.node(to) else {
            return Err((true, format!("node {to} is down")));
        };
        let out = f(target).await;
        match self.decide(to, from) {
            Fate::Cut => Err((true, format!("reply {to}->{from}: link cut"))),
            Fate::Drop(d) => {
                tokio::time::sleep(d).await;
                Err((false, format!("reply {to}->{from} lost")))
            }
            Fate::Deliver(d) => {
                tokio::time::sleep(d).await;
                Ok(out)
            }
        }
    }
}

/// openraft's network factory for node `from`.
#[derive(Clone)]
pub struct SimNetworkFactory {
    pub from: NodeId,
    pub net: SimNet,
}

impl RaftNetworkFactory<TypeConfig> for SimNetworkFactory {
    type Network = SimClient;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> SimClient {
        SimClient {
            from: self.from,
            target,
            net: self.net.clone(),
        }
    }
}

/// The client node `from` uses to talk to `target`.
pub struct SimClient {
    from: NodeId,
    target: NodeId,
    net: SimNet,
}

fn rpc_err<E: std::error::Error>(
    (unreachable, m): (bool, String),
) -> RPCError<NodeId, BasicNode, E> {
    if unreachable {
        RPCError::Unreachable(Unreachable::new(&Msg(m)))
    } else {
        RPCError::Network(NetworkError::new(&Msg(m)))
    }
}

async fn within<T, E: std::error::Error>(
    ttl: Duration,
    what: &str,
    fut: impl Future<Output = Result<T, RPCError<NodeId, BasicNode, E>>>,
) -> Result<T, RPCError<NodeId, BasicNode, E>> {
    match tokio::time::timeout(ttl, fut).await {
        Ok(r) => r,
        Err(_) => Err(RPCError::Network(NetworkError::new(&Msg(format!(
            "{what} timed out after {ttl:?}"
        ))))),
    }
}

impl RaftNetwork<TypeConfig> for SimClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let target = self.target;
        let call = async {
            match self
                .net
                .call(
                    self.from,
                    target,
                    |r| async move { r.append_entries(rpc).await },
                )
                .await
            {
                Ok(Ok(resp)) => Ok(resp),
                Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(target, e))),
                Err(e) => Err(rpc_err(e)),
            }
        };
        within(option.hard_ttl(), "append entries", call).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let target = self.target;
        let call = async {
            match self
                .net
                .call(self.from, target, |r| async move { r.vote(rpc).await })
                .await
            {
                Ok(Ok(resp)) => Ok(resp),
                Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(target, e))),
                Err(e) => Err(rpc_err(e)),
            }
        };
        within(option.hard_ttl(), "vote", call).await
    }

    /// Not used: [`Self::full_snapshot`] hands the whole snapshot over, as the
    /// production transport does.
    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        Err(RPCError::Network(NetworkError::new(&Msg(
            "chunked install_snapshot is not used: full_snapshot sends it whole".into(),
        ))))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let target = self.target;
        let ttl = option.hard_ttl();
        let call = self.net.call(self.from, target, |r| async move {
            r.install_full_snapshot(vote, snapshot).await
        });
        // `biased`: no runtime-seeded branch choice, so a seed replays the same way.
        tokio::select! {
            biased;
            closed = cancel => Err(StreamingError::Closed(closed)),
            r = tokio::time::timeout(ttl, call) => match r {
                Err(_) => Err(StreamingError::Network(NetworkError::new(&Msg(format!(
                    "snapshot to {target} timed out after {ttl:?}"
                ))))),
                Ok(Ok(Ok(resp))) => Ok(resp),
                Ok(Ok(Err(fatal))) => Err(StreamingError::RemoteError(RemoteError::new(target, fatal))),
                Ok(Err((true, m))) => Err(StreamingError::Unreachable(Unreachable::new(&Msg(m)))),
                Ok(Err((false, m))) => Err(StreamingError::Network(NetworkError::new(&Msg(m)))),
            }
        }
    }
}
