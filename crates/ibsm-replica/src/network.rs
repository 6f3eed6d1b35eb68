//! The Raft transport: a tonic client per peer (one lazily connected `Channel` per peer,
//! reused by every RPC and by every openraft replication stream to that peer) and the
//! tonic service that receives them.
//!
//! Payloads are bincode v1 inside `RaftPayload.payload` (see raft.proto for why).
//! Snapshots are streamed in [`SNAPSHOT_CHUNK_BYTES`] chunks over one client-streaming
//! call and handed to openraft whole (`Raft::install_full_snapshot`).
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
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status, Streaming};

use crate::pb;
use crate::pb::raft_client::RaftClient;
use crate::state::{Command, Outcome};
use crate::{NodeId, TypeConfig};

/// `RaftPayload.format` of this release: bincode v1.
pub const FORMAT_BINCODE_V1: u32 = 1;
/// Size of one `SnapshotChunk.data`. 1 MiB: well under gRPC's 4 MiB default message
/// limit, large enough that a 48k-LID fabric's state (~4 MB) takes a handful of chunks.
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// Largest gRPC message accepted: an AppendEntries batch can hold a full topology
/// summary (a few MB for 50k nodes).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;
/// Largest snapshot a receiver accepts before refusing the stream.
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 30;

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

/// A request a follower forwards to the leader (or the leader runs itself).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardRequest {
    Write(Command),
    AddMember { node_id: NodeId, addr: String },
    RemoveMember { node_id: NodeId },
}

/// The leader's answer to a [`ForwardRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardReply {
    Written { log_index: u64, outcome: Outcome },
    MembershipChanged { log_index: u64 },
}

/// Why a forwarded request did not go through.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardError {
    /// Ask that node instead (or retry later if unknown).
    NotLeader { leader: Option<(NodeId, String)> },
    /// The peer could not be reached.
    Unreachable(String),
    /// A membership change is still in progress: retry shortly.
    Busy(String),
    /// Raft refused the request.
    Failed(String),
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
}

impl Peers {
    pub fn new(
        connect_timeout: Duration,
        fault: FaultSwitch,
        tls: Option<ClientTlsConfig>,
    ) -> Self {
        Self {
            channels: Mutex::new(HashMap::new()),
            connect_timeout,
            fault,
            tls,
        }
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
            .forward(p)
            .await
            .map_err(|s| ForwardError::Unreachable(format!("peer {id} at {addr}: {s}")))?;
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
        }
    }
}

/// The client openraft uses to talk to one peer.
pub struct PeerClient {
    target: NodeId,
    client: Result<RaftClient<Channel>, String>,
    fault: FaultSwitch,
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
            pb::RaftPayload,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = Result<Response<pb::RaftPayload>, Status>> + Send>,
        >,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, E>> {
        let c = self.ready().map_err(RPCError::Unreachable)?;
        let p = to_payload(what, req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
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
        let call = async move { c.install_snapshot(tokio_stream::iter(chunks)).await };
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

/// The tonic service: add it to a tonic server with [`crate::Replica::grpc_service`].
#[derive(Clone)]
pub struct RaftGrpc {
    pub(crate) raft: openraft::Raft<TypeConfig>,
    pub(crate) fault: FaultSwitch,
}

fn bad(e: WireError) -> Status {
    Status::invalid_argument(e.to_string())
}

impl RaftGrpc {
    fn check(&self) -> Result<(), Status> {
        if self.fault.is_isolated() {
            return Err(Status::unavailable("isolated by the fault switch"));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl pb::raft_server::Raft for RaftGrpc {
    async fn vote(
        &self,
        request: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        self.check()?;
        let req: VoteRequest<NodeId> =
            from_payload("vote request", request.get_ref()).map_err(bad)?;
        let resp = self
            .raft
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
        self.check()?;
        let req: AppendEntriesRequest<TypeConfig> =
            from_payload("append entries request", request.get_ref()).map_err(bad)?;
        let resp = self
            .raft
            .append_entries(req)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(
            to_payload("append entries response", &resp).map_err(bad)?,
        ))
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<pb::SnapshotChunk>>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        self.check()?;
        let mut stream = request.into_inner();
        let mut head: Option<(Vote<NodeId>, SnapshotMeta<NodeId, BasicNode>)> = None;
        let mut data: Vec<u8> = Vec::new();
        let mut done = false;
        while let Some(chunk) = stream.message().await? {
            self.check()?;
            if head.is_none() {
                let vote = decode_bytes("snapshot vote", &chunk.vote).map_err(bad)?;
                let meta = decode_bytes("snapshot meta", &chunk.meta).map_err(bad)?;
                head = Some((vote, meta));
            }
            if chunk.offset != data.len() as u64 {
                return Err(Status::invalid_argument(format!(
                    "snapshot chunk at offset {} but {} bytes received so far",
                    chunk.offset,
                    data.len()
                )));
            }
            if data.len() + chunk.data.len() > MAX_SNAPSHOT_BYTES {
                return Err(Status::resource_exhausted(format!(
                    "snapshot larger than {MAX_SNAPSHOT_BYTES} bytes"
                )));
            }
            data.extend_from_slice(&chunk.data);
            if chunk.done {
                done = true;
                break;
            }
        }
        let Some((vote, meta)) = head else {
            return Err(Status::invalid_argument("empty snapshot stream"));
        };
        if !done {
            return Err(Status::invalid_argument(
                "snapshot stream ended before the chunk marked done",
            ));
        }
        let snapshot = Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        };
        let resp = self
            .raft
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
        self.check()?;
        let req: ForwardRequest =
            from_payload("forward request", request.get_ref()).map_err(bad)?;
        let r = crate::replica::execute_local(&self.raft, req).await;
        Ok(Response::new(to_payload("forward reply", &r).map_err(bad)?))
    }
}
