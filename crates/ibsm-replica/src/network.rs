//! The Raft transport: a tonic client per peer (one lazily connected `Channel` per peer,
//! reused by every RPC and by every openraft replication stream to that peer) and the
//! tonic service that receives them.
//!
//! Payloads are bincode v1 inside `RaftPayload.payload` (see raft.proto for why).
//! Snapshots are streamed in [`SNAPSHOT_CHUNK_BYTES`] chunks over one client-streaming
//! call and handed to openraft whole (`Raft::install_full_snapshot`).
//!
//! # Who may call it ([`PeerAuth`])
//!
//! Every RPC of the Raft service is checked before its body is decoded: with a
//! [`ClusterSecret`], the call must carry it in the [`CLUSTER_SECRET_HEADER`] metadata
//! (constant-time comparison); with mutual TLS, the client certificate must name a node
//! id (a DNS SAN or the subject CN `ibsm-node-<id>`, [`node_id_of_cert`]) and that id
//! must be the one the RPC speaks for: the vote's node in Vote, AppendEntries and
//! InstallSnapshot, a current member for Forward and Applied. A peer that passes neither
//! gets `UNAUTHENTICATED` / `PERMISSION_DENIED` and changes nothing.
//!
//! Forward accepts only what a member's own code sends: epoch claims, a master's
//! updates, and config keys of the daemon's own families
//! ([`crate::config_keys::forwardable`]), and a voter's request for leadership (the
//! leader pauses its heartbeats for a bounded while, [`crate::leadership`]). Membership
//! changes are never forwarded: they run on the leader, called through its control API.
//!
//! Snapshots: one is received at a time (a second concurrent stream gets
//! `RESOURCE_EXHAUSTED`), a snapshot carrying a vote older than ours is answered on the
//! first chunk with our vote (the sender steps down, nothing more is read), and the
//! data is spooled to a file in the data dir, never past [`MAX_SNAPSHOT_BYTES`].
//!
//! [`FaultSwitch`]: when isolated, this instance's outgoing RPCs fail as unreachable and
//! its service answers UNAVAILABLE, which cuts it off the others in both directions
//! (the network-partition tests and chaos drills use it).

use std::collections::HashMap;
use std::future::Future;
use std::io::Cursor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Snapshot, SnapshotMeta, Vote};
use serde::{de::DeserializeOwned, Serialize};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status, Streaming};

pub use crate::forward::{ForwardError, ForwardReply, ForwardRequest};
use crate::pb;
use crate::pb::raft_client::RaftClient;
pub use crate::peer_auth::{
    node_id_of_cert, node_id_of_pem, ClusterSecret, PeerAuth, CLUSTER_SECRET_HEADER,
    MIN_SECRET_LEN, NODE_CERT_PREFIX,
};
use crate::state::Command;
use crate::{NodeId, TypeConfig};

/// `RaftPayload.format` of this release: bincode v1.
pub const FORMAT_BINCODE_V1: u32 = 1;
/// Size of one `SnapshotChunk.data`. 1 MiB: well under gRPC's 4 MiB default message
/// limit, large enough that a 48k-LID fabric's state (~4 MB) takes a handful of chunks.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// Largest gRPC message accepted: an AppendEntries batch can hold a full topology
/// summary (about 5 MB for 50k nodes) and a few config values of at most 2 MiB.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;
/// Largest snapshot a receiver accepts before refusing the stream (a 48k-LID fabric's
/// state is about 5 MB).
pub const MAX_SNAPSHOT_BYTES: usize = 256 << 20;
/// Errors of the wire encoding.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error(
        "payload format {0} is not bincode v1 ({FORMAT_BINCODE_V1}): peer of another release?"
    )]
    Format(u32),
    #[error("decoding {what}: {source}")]
    Decode {
        what: &'static str,
        source: bincode::Error,
    },
    #[error("encoding {what}: {source}")]
    Encode {
        what: &'static str,
        source: bincode::Error,
    },
}

pub(crate) fn to_payload<T: Serialize>(
    what: &'static str,
    v: &T,
) -> Result<pb::RaftPayload, WireError> {
    Ok(pb::RaftPayload {
        format: FORMAT_BINCODE_V1,
        payload: bincode::serialize(v).map_err(|source| WireError::Encode { what, source })?,
    })
}

pub(crate) fn from_payload<T: DeserializeOwned>(
    what: &'static str,
    p: &pb::RaftPayload,
) -> Result<T, WireError> {
    if p.format != FORMAT_BINCODE_V1 {
        return Err(WireError::Format(p.format));
    }
    bincode::deserialize(&p.payload).map_err(|source| WireError::Decode { what, source })
}

pub(crate) fn decode_bytes<T: DeserializeOwned>(
    what: &'static str,
    b: &[u8],
) -> Result<T, WireError> {
    bincode::deserialize(b).map_err(|source| WireError::Decode { what, source })
}

/// Cuts this instance off the others (both directions) while set. Clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct FaultSwitch(Arc<AtomicBool>);

impl FaultSwitch {
    pub fn set_isolated(&self, isolated: bool) {
        self.0.store(isolated, Ordering::SeqCst);
    }
    pub fn is_isolated(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// One tonic channel per peer, created on first use and reused afterwards (a channel
/// multiplexes every RPC over one HTTP/2 connection and reconnects by itself).
#[derive(Debug)]
pub struct Peers {
    channels: Mutex<HashMap<NodeId, (String, Channel)>>,
    connect_timeout: Duration,
    fault: FaultSwitch,
    /// TLS towards the peers (`https://`), with this member's client certificate
    /// when the peers require one; `None`: plaintext `http://`.
    tls: Option<ClientTlsConfig>,
    /// Sent on every RPC when set.
    secret: Option<ClusterSecret>,
    /// This member's cluster id (see [`crate::identity`]), sent on every RPC once known.
    pub(crate) cluster_id: ClusterIdCell,
}

/// The cluster id a member knows, shared by its client and service sides.
pub type ClusterIdCell = Arc<std::sync::RwLock<Option<String>>>;

/// `body` as a request carrying this member's credentials: the cluster secret and the
/// cluster id, when there are.
pub(crate) fn with_credentials<T>(
    secret: Option<&ClusterSecret>,
    cluster_id: &ClusterIdCell,
    body: T,
) -> Request<T> {
    let mut req = Request::new(body);
    if let Some(s) = secret {
        if let Ok(v) = s.as_str().parse() {
            req.metadata_mut().insert(CLUSTER_SECRET_HEADER, v);
        }
    }
    let id = cluster_id.read().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(id) = id {
        if let Ok(v) = id.parse() {
            req.metadata_mut()
                .insert(crate::identity::CLUSTER_ID_HEADER, v);
        }
    }
    req
}

impl Peers {
    pub fn new(
        connect_timeout: Duration,
        fault: FaultSwitch,
        tls: Option<ClientTlsConfig>,
        secret: Option<ClusterSecret>,
        cluster_id: ClusterIdCell,
    ) -> Self {
        Self {
            channels: Mutex::new(HashMap::new()),
            connect_timeout,
            fault,
            tls,
            secret,
            cluster_id,
        }
    }

    /// The applied log index the peer `id` at `addr` reports over the authenticated
    /// member channel (the planned handover's catch-up check).
    pub async fn applied(&self, id: NodeId, addr: &str) -> Result<u64, String> {
        if self.fault.is_isolated() {
            return Err("isolated by the fault switch".into());
        }
        let mut c = self.client(id, addr)?;
        let p = to_payload("applied request", &()).map_err(|e| e.to_string())?;
        let resp = tokio::time::timeout(
            Duration::from_millis(500),
            c.applied(with_credentials(self.secret.as_ref(), &self.cluster_id, p)),
        )
        .await
        .map_err(|_| format!("peer {id} at {addr}: Applied timed out"))?
        .map_err(|s| format!("peer {id} at {addr}: {s}"))?;
        from_payload("applied reply", resp.get_ref()).map_err(|e| e.to_string())
    }

    /// The reused channel to `id` at `addr` (a new one if the address changed).
    pub fn channel(&self, id: NodeId, addr: &str) -> Result<Channel, tonic::transport::Error> {
        let mut map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((a, ch)) = map.get(&id) {
            if a == addr {
                return Ok(ch.clone());
            }
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut ep = Endpoint::from_shared(format!("{scheme}://{addr}"))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            ep = ep.tls_config(tls.clone())?;
        }
        let ch = ep.connect_lazy();
        map.insert(id, (addr.to_string(), ch.clone()));
        Ok(ch)
    }

    fn client(&self, id: NodeId, addr: &str) -> Result<RaftClient<Channel>, String> {
        let ch = self
            .channel(id, addr)
            .map_err(|e| format!("peer {id} at {addr}: {e}"))?;
        Ok(RaftClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    /// Send a [`ForwardRequest`] to the peer `id` at `addr`.
    pub async fn forward(
        &self,
        id: NodeId,
        addr: &str,
        req: &ForwardRequest,
    ) -> Result<ForwardReply, ForwardError> {
        if self.fault.is_isolated() {
            return Err(ForwardError::Unreachable(
                "isolated by the fault switch".into(),
            ));
        }
        let mut c = self.client(id, addr).map_err(ForwardError::Unreachable)?;
        let p =
            to_payload("forward request", req).map_err(|e| ForwardError::Failed(e.to_string()))?;
        let resp = c
            .forward(with_credentials(self.secret.as_ref(), &self.cluster_id, p))
            .await
            .map_err(|s| match s.code() {
                tonic::Code::Unauthenticated
                | tonic::Code::PermissionDenied
                | tonic::Code::InvalidArgument => {
                    ForwardError::Failed(format!("peer {id} at {addr} refused: {s}"))
                }
                _ => ForwardError::Unreachable(format!("peer {id} at {addr}: {s}")),
            })?;
        let r: Result<ForwardReply, ForwardError> =
            from_payload("forward reply", resp.get_ref())
                .map_err(|e| ForwardError::Failed(e.to_string()))?;
        r
    }
}

/// openraft's network factory: hands out clients that share the per-peer channels.
#[derive(Clone)]
pub struct NetworkFactory {
    pub(crate) peers: Arc<Peers>,
    pub(crate) fault: FaultSwitch,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            client: self.peers.client(target, &node.addr),
            fault: self.fault.clone(),
            secret: self.peers.secret.clone(),
            cluster_id: Arc::clone(&self.peers.cluster_id),
        }
    }
}

/// The client openraft uses to talk to one peer.
pub struct PeerClient {
    target: NodeId,
    client: Result<RaftClient<Channel>, String>,
    fault: FaultSwitch,
    secret: Option<ClusterSecret>,
    cluster_id: ClusterIdCell,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Msg(String);

impl PeerClient {
    fn ready(&self) -> Result<RaftClient<Channel>, Unreachable> {
        if self.fault.is_isolated() {
            return Err(Unreachable::new(
                &Msg("isolated by the fault switch".into()),
            ));
        }
        self.client.clone().map_err(|e| Unreachable::new(&Msg(e)))
    }

    fn status_err<E: std::error::Error>(&self, s: Status) -> RPCError<NodeId, BasicNode, E> {
        let m = Msg(format!("peer {}: {s}", self.target));
        match s.code() {
            tonic::Code::Unavailable => RPCError::Unreachable(Unreachable::new(&m)),
            _ => RPCError::Network(NetworkError::new(&m)),
        }
    }

    async fn unary<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error>(
        &mut self,
        what: &'static str,
        req: &Req,
        ttl: Duration,
        call: impl FnOnce(
            RaftClient<Channel>,
            Request<pb::RaftPayload>,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = Result<Response<pb::RaftPayload>, Status>> + Send>,
        >,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, E>> {
        let c = self.ready().map_err(RPCError::Unreachable)?;
        let p = to_payload(what, req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let p = with_credentials(self.secret.as_ref(), &self.cluster_id, p);
        let resp = match tokio::time::timeout(ttl, call(c, p)).await {
            Ok(Ok(r)) => r,
            Ok(Err(s)) => return Err(self.status_err(s)),
            Err(_) => {
                return Err(RPCError::Network(NetworkError::new(&Msg(format!(
                    "{what} to peer {} timed out after {ttl:?}",
                    self.target
                )))))
            }
        };
        from_payload(what, resp.get_ref()).map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.unary("append entries", &rpc, option.hard_ttl(), |mut c, p| {
            Box::pin(async move { c.append_entries(p).await })
        })
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.unary("vote", &rpc, option.hard_ttl(), |mut c, p| {
            Box::pin(async move { c.vote(p).await })
        })
        .await
    }

    /// Not used: `full_snapshot` below streams the whole snapshot instead of openraft's
    /// one-RPC-per-chunk protocol.
    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        Err(RPCError::Network(NetworkError::new(&Msg(
            "chunked install_snapshot is not used: snapshots are streamed by full_snapshot".into(),
        ))))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let mut c = self.ready()?;
        let net = |e: &dyn std::fmt::Display| {
            StreamingError::Network(NetworkError::new(&Msg(e.to_string())))
        };
        let vote_b = bincode::serialize(&vote).map_err(|e| net(&e))?;
        let meta_b = bincode::serialize(&snapshot.meta).map_err(|e| net(&e))?;
        let data = snapshot.snapshot.into_inner();
        let total = data.len();
        let mut chunks = Vec::with_capacity(total / SNAPSHOT_CHUNK_BYTES + 1);
        let mut offset = 0usize;
        loop {
            let end = (offset + SNAPSHOT_CHUNK_BYTES).min(total);
            let first = offset == 0;
            chunks.push(pb::SnapshotChunk {
                vote: if first { vote_b.clone() } else { Vec::new() },
                meta: if first { meta_b.clone() } else { Vec::new() },
                offset: offset as u64,
                data: data.get(offset..end).unwrap_or_default().to_vec(),
                done: end == total,
            });
            offset = end;
            if offset >= total {
                break;
            }
        }
        tracing::debug!(
            target_node = self.target,
            bytes = total,
            chunks = chunks.len(),
            "streaming snapshot"
        );
        let ttl = option.hard_ttl();
        let target = self.target;
        let req = with_credentials(
            self.secret.as_ref(),
            &self.cluster_id,
            tokio_stream::iter(chunks),
        );
        let call = async move { c.install_snapshot(req).await };
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            r = tokio::time::timeout(ttl, call) => match r {
                Err(_) => Err(net(&format!("snapshot to peer {target} timed out after {ttl:?}"))),
                Ok(Err(s)) => Err(match s.code() {
                    tonic::Code::Unavailable => StreamingError::Unreachable(Unreachable::new(&Msg(s.to_string()))),
                    _ => net(&s),
                }),
                Ok(Ok(resp)) => from_payload("snapshot response", resp.get_ref()).map_err(|e| net(&e)),
            }
        }
    }
}

/// The member's openraft core, shared by the [`crate::Replica`] and its gRPC service.
/// Swappable: openraft stops its core for good on a storage error, and
/// `Replica::restart_core` puts a new one on the same store in its place.
pub type RaftCell = Arc<std::sync::RwLock<openraft::Raft<TypeConfig>>>;

/// The current core in `cell` (a cheap handle clone).
pub(crate) fn current(cell: &RaftCell) -> openraft::Raft<TypeConfig> {
    cell.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The tonic service: add it to a tonic server with [`crate::Replica::grpc_service`].
#[derive(Clone)]
pub struct RaftGrpc {
    pub(crate) raft: RaftCell,
    pub(crate) fault: FaultSwitch,
    pub(crate) auth: PeerAuth,
    /// Where a snapshot being received is spooled.
    pub(crate) spool_dir: std::path::PathBuf,
    /// One snapshot received at a time.
    pub(crate) snapshot_slot: Arc<tokio::sync::Semaphore>,
    /// This member's cluster id (shared with its [`Peers`]).
    pub(crate) cluster_id: ClusterIdCell,
    pub(crate) node_id: NodeId,
    /// The leader's last AppendEntries this member accepted.
    pub(crate) leader_contact: crate::LeaderContact,
}

fn bad(e: WireError) -> Status {
    Status::invalid_argument(e.to_string())
}

/// Who an authenticated call comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// Proved the cluster secret only (no certificate identity).
    Member,
    /// Presented a member certificate naming this node id.
    Node(NodeId),
}

impl RaftGrpc {
    fn check(&self) -> Result<(), Status> {
        if self.fault.is_isolated() {
            return Err(Status::unavailable("isolated by the fault switch"));
        }
        Ok(())
    }

    /// Refuse a caller of another cluster; learn the id from the leader (`adopt`,
    /// AppendEntries and snapshots) when this member does not know it yet.
    fn check_cluster<T>(&self, req: &Request<T>, adopt: bool) -> Result<(), Status> {
        let Some(theirs) = req
            .metadata()
            .get(crate::identity::CLUSTER_ID_HEADER)
            .and_then(|v| v.to_str().ok())
        else {
            return Ok(());
        };
        let ours = self
            .cluster_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match ours {
            Some(o) if o == theirs => Ok(()),
            Some(o) => Err(Status::failed_precondition(format!(
                "Raft service: the caller belongs to cluster {theirs}, this member's data dir to cluster {o}"
            ))),
            None if adopt => {
                let valid = !theirs.is_empty()
                    && theirs.len() <= 64
                    && theirs.bytes().all(|b| b.is_ascii_hexdigit());
                if !valid {
                    return Err(Status::invalid_argument("cluster id is not hex"));
                }
                let id = crate::identity::Identity {
                    format: crate::identity::FORMAT_VERSION,
                    node_id: self.node_id,
                    cluster_id: Some(theirs.to_string()),
                };
                crate::identity::write(&self.spool_dir, &id)
                    .map_err(|e| Status::internal(e.to_string()))?;
                tracing::info!(cluster_id = theirs, "joined cluster: cluster id recorded in the data dir");
                *self.cluster_id.write().unwrap_or_else(|p| p.into_inner()) =
                    Some(theirs.to_string());
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// The credentials check every RPC starts with (see the module doc).
    fn authorize<T>(&self, req: &Request<T>) -> Result<Caller, Status> {
        self.check()?;
        if !self.auth.authenticates() {
            return Ok(Caller::Member);
        }
        if let Some(secret) = &self.auth.secret {
            let ok = req
                .metadata()
                .get(CLUSTER_SECRET_HEADER)
                .is_some_and(|v| secret.matches(v.as_bytes()));
            if !ok {
                return Err(Status::unauthenticated(format!(
                    "Raft service: missing or wrong cluster secret (metadata {CLUSTER_SECRET_HEADER}): only members of this cluster may call it"
                )));
            }
        }
        if self.auth.mtls {
            let id = req
                .peer_certs()
                .and_then(|certs| certs.first().and_then(|c| node_id_of_cert(c.as_ref())));
            return match id {
                Some(id) => Ok(Caller::Node(id)),
                None => Err(Status::permission_denied(format!(
                    "Raft service: the client certificate names no member (a DNS name or CN {NODE_CERT_PREFIX}<node id>)"
                ))),
            };
        }
        Ok(Caller::Member)
    }

    /// A certificate-bound caller may speak only for its own node id.
    fn speaks_for(caller: Caller, what: &str, node: Option<NodeId>) -> Result<(), Status> {
        match caller {
            Caller::Member => Ok(()),
            Caller::Node(id) if node == Some(id) => Ok(()),
            Caller::Node(id) => Err(Status::permission_denied(format!(
                "Raft service: the certificate of node {id} cannot send a {what} for node {}",
                node.map_or("none".to_string(), |n| n.to_string())
            ))),
        }
    }

    /// A certificate-bound caller must be a current member (voter or learner).
    fn is_member(&self, caller: Caller) -> Result<(), Status> {
        let Caller::Node(id) = caller else {
            return Ok(());
        };
        let m = current(&self.raft)
            .metrics()
            .borrow()
            .membership_config
            .clone();
        if m.membership().nodes().any(|(n, _)| *n == id) {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "Raft service: node {id} is not a member of this cluster"
            )))
        }
    }
}

/// Whether a forwarded request is one a member's own code sends (module doc).
fn forward_allowed(req: &ForwardRequest) -> Result<(), String> {
    match req {
        ForwardRequest::Write(Command::ClaimMastership { .. } | Command::Update { .. }) => Ok(()),
        ForwardRequest::Write(Command::Config(c)) => {
            let key = match c {
                crate::state::ConfigChange::Set { key, .. }
                | crate::state::ConfigChange::Remove { key } => key,
            };
            if crate::config_keys::forwardable(key) {
                Ok(())
            } else {
                Err(format!(
                    "config key {:?} is not one a member writes (partition/<pkey>, sm.<guid>.node)",
                    key.chars().take(64).collect::<String>()
                ))
            }
        }
        // Cooperative: pauses the leader's heartbeats for a bounded while, no log change.
        ForwardRequest::YieldLeadership { .. } => Ok(()),
        ForwardRequest::AddMember { .. } | ForwardRequest::RemoveMember { .. } => Err(
            "membership changes are not forwarded: call Cluster/AddMember or RemoveMember on the Raft leader's control API".into(),
        ),
    }
}

#[tonic::async_trait]
impl pb::raft_server::Raft for RaftGrpc {
    async fn vote(
        &self,
        request: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let caller = self.authorize(&request)?;
        self.check_cluster(&request, false)?;
        let req: VoteRequest<NodeId> =
            from_payload("vote request", request.get_ref()).map_err(bad)?;
        Self::speaks_for(caller, "vote", req.vote.leader_id().voted_for())?;
        let resp = current(&self.raft)
            .vote(req)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(
            to_payload("vote response", &resp).map_err(bad)?,
        ))
    }

    async fn append_entries(
        &self,
        request: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let caller = self.authorize(&request)?;
        let req: AppendEntriesRequest<TypeConfig> =
            from_payload("append entries request", request.get_ref()).map_err(bad)?;
        Self::speaks_for(caller, "append entries", req.vote.leader_id().voted_for())?;
        self.check_cluster(&request, true)?;
        let leader = req.vote.leader_id().voted_for();
        let resp = current(&self.raft)
            .append_entries(req)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        self.leader_contact.note_answer(leader, &resp);
        Ok(Response::new(
            to_payload("append entries response", &resp).map_err(bad)?,
        ))
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<pb::SnapshotChunk>>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let caller = self.authorize(&request)?;
        self.check_cluster(&request, true)?;
        let Ok(_slot) = Arc::clone(&self.snapshot_slot).try_acquire_owned() else {
            return Err(Status::resource_exhausted(
                "a snapshot is already being received: one at a time",
            ));
        };
        let mut stream = request.into_inner();
        let mut head: Option<(Vote<NodeId>, SnapshotMeta<NodeId, BasicNode>)> = None;
        let spool = self.spool_dir.join("snapshot.incoming");
        let mut file = std::fs::File::create(&spool).map_err(|e| {
            Status::internal(format!(
                "cannot spool the snapshot to {}: {e}",
                spool.display()
            ))
        })?;
        let mut received: u64 = 0;
        let mut done = false;
        while let Some(chunk) = stream.message().await? {
            self.check()?;
            if head.is_none() {
                let vote: Vote<NodeId> = decode_bytes("snapshot vote", &chunk.vote).map_err(bad)?;
                Self::speaks_for(caller, "snapshot", vote.leader_id().voted_for())?;
                let current = current(&self.raft).metrics().borrow().vote;
                if vote < current {
                    // A deposed leader: answer with our vote on the first chunk, read
                    // nothing more.
                    tracing::info!(?vote, ?current, "refusing a snapshot from a stale vote");
                    let _ = std::fs::remove_file(&spool);
                    return Ok(Response::new(
                        to_payload("snapshot response", &SnapshotResponse { vote: current })
                            .map_err(bad)?,
                    ));
                }
                let meta = decode_bytes("snapshot meta", &chunk.meta).map_err(bad)?;
                head = Some((vote, meta));
            }
            if chunk.offset != received {
                let _ = std::fs::remove_file(&spool);
                return Err(Status::invalid_argument(format!(
                    "snapshot chunk at offset {} but {received} bytes received so far",
                    chunk.offset
                )));
            }
            if received + chunk.data.len() as u64 > MAX_SNAPSHOT_BYTES as u64 {
                let _ = std::fs::remove_file(&spool);
                return Err(Status::resource_exhausted(format!(
                    "snapshot larger than {MAX_SNAPSHOT_BYTES} bytes"
                )));
            }
            std::io::Write::write_all(&mut file, &chunk.data).map_err(|e| {
                Status::internal(format!("spooling the snapshot to {}: {e}", spool.display()))
            })?;
            received += chunk.data.len() as u64;
            if chunk.done {
                done = true;
                break;
            }
        }
        drop(file);
        let Some((vote, meta)) = head else {
            let _ = std::fs::remove_file(&spool);
            return Err(Status::invalid_argument("empty snapshot stream"));
        };
        if !done {
            let _ = std::fs::remove_file(&spool);
            return Err(Status::invalid_argument(
                "snapshot stream ended before the chunk marked done",
            ));
        }
        let data = std::fs::read(&spool).map_err(|e| {
            Status::internal(format!(
                "reading the spooled snapshot {}: {e}",
                spool.display()
            ))
        })?;
        let _ = std::fs::remove_file(&spool);
        let snapshot = Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        };
        let resp = current(&self.raft)
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(
            to_payload("snapshot response", &resp).map_err(bad)?,
        ))
    }

    async fn forward(
        &self,
        request: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let caller = self.authorize(&request)?;
        self.check_cluster(&request, false)?;
        self.is_member(caller)?;
        let req: ForwardRequest =
            from_payload("forward request", request.get_ref()).map_err(bad)?;
        forward_allowed(&req).map_err(Status::permission_denied)?;
        let r = crate::forward::execute_local(&current(&self.raft), req).await;
        Ok(Response::new(to_payload("forward reply", &r).map_err(bad)?))
    }

    async fn applied(
        &self,
        request: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let caller = self.authorize(&request)?;
        self.check_cluster(&request, false)?;
        self.is_member(caller)?;
        let applied = current(&self.raft)
            .metrics()
            .borrow()
            .last_applied
            .map_or(0, |l| l.index);
        Ok(Response::new(
            to_payload("applied reply", &applied).map_err(bad)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_takes_only_what_member_code_sends() {
        use crate::state::ConfigChange;
        let ok = [
            ForwardRequest::Write(Command::ClaimMastership {
                epoch: 1,
                sm_guid: 1,
            }),
            ForwardRequest::Write(Command::Update {
                epoch: 1,
                ops: vec![],
            }),
            ForwardRequest::Write(Command::Config(ConfigChange::Set {
                key: crate::config_keys::partition_key(0x10),
                value: "p|".into(),
            })),
            ForwardRequest::Write(Command::Config(ConfigChange::Set {
                key: crate::config_keys::sm_node_key(5),
                value: "2".into(),
            })),
            ForwardRequest::YieldLeadership { to: 2 },
        ];
        for r in &ok {
            assert!(forward_allowed(r).is_ok(), "{r:?}");
        }
        let refused = [
            ForwardRequest::AddMember {
                node_id: 9,
                addr: "evil:1".into(),
            },
            ForwardRequest::RemoveMember { node_id: 1 },
            ForwardRequest::Write(Command::Config(ConfigChange::Set {
                key: "anything".into(),
                value: "x".into(),
            })),
            ForwardRequest::Write(Command::Config(ConfigChange::Remove {
                key: "anything".into(),
            })),
        ];
        for r in &refused {
            assert!(forward_allowed(r).is_err(), "{r:?}");
        }
    }
}
