//! The gRPC API of one SM instance: `ibsm.v1.Control` (here), `ibsm.v1.Fabric`,
//! `ibsm.v1.Cluster`, the Raft service of a replicated member, `ibsm.v1.FaultInjection`
//! only with `--fault-injection` ([`crate::fault_injection`]), `grpc.health.v1` and
//! server reflection. A caller adds services of its own (the demo adds its drills)
//! through [`ServeOptions::extra_services`]; this crate names none of them.
//!
//! Security ([`crate::auth`]): TLS (mutual when a client CA is configured) for the
//! whole server, and one tower layer that checks credentials and roles (admin,
//! read-only) on every service but health and Raft (which checks the members' own).
//!
//! Limits a client cannot push past: [`MAX_CONNECTIONS`] open connections,
//! [`MAX_STREAMS_PER_CONNECTION`] concurrent calls per connection, [`MAX_WATCH_STREAMS`]
//! Watch streams, a 64 KiB header list, a 10 s TLS handshake, HTTP/2 keepalive (a dead
//! peer's connection is closed after 40 s), and tonic's 4 MiB message limit on the
//! control services. Health turns NOT_SERVING whenever the instance is not running.
//!
//! The service reaches its instance through an [`InstanceSlot`] rather than holding it,
//! so a supervisor (the demo) can kill and restart an instance behind a live endpoint: while the slot
//! is empty every call answers `UNAVAILABLE`.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ibsm_core::election::{ControlPacket, SmState};
use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_server::{Control, ControlServer};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::Stream;
use tonic::{Request, Response};

use crate::auth::Security;
use crate::cluster_service::ClusterService;
use crate::error::DaemonError;
use crate::instance::{Command, CommandError, EventRecord, Instance, Snapshot};
use crate::listener_limits::limited_incoming;
use crate::replication::Replication;
use crate::status_pb::{ms, pb_state, sm_entry_of, status_of};

pub use crate::slot::{followed_sm, slot, InstanceSlot};

/// How long Handover and SendControl wait for the outcome before answering "pending".
const OUTCOME_WAIT: Duration = Duration::from_secs(5);
/// How long a planned handover waits for the target's replica to catch up.
const CATCH_UP_WAIT: Duration = Duration::from_secs(5);
/// How long a stepping-down master at priority 0 waits for the election to hand over
/// by itself before it sends HANDOVER to the best standby.
const STEP_DOWN_SELF_WAIT: Duration = Duration::from_secs(2);
/// How long Sweep waits for the sweep to finish.
const SWEEP_WAIT: Duration = Duration::from_secs(120);
/// Most TCP connections one endpoint serves at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 256;
/// Most concurrent HTTP/2 streams (calls) on one connection.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 64;
/// Most Watch streams one endpoint serves at once.
pub const MAX_WATCH_STREAMS: usize = 64;

/// Keep `grpc.health.v1` honest: SERVING only while the instance in `slot` runs.
fn spawn_health_watch(health: tonic_health::server::HealthReporter, slot: InstanceSlot) {
    tokio::spawn(async move {
        let mut last: Option<bool> = None;
        loop {
            let running = match slot.read() {
                Ok(s) => s.as_ref().is_some_and(|i| i.is_running()),
                Err(p) => p.into_inner().as_ref().is_some_and(|i| i.is_running()),
            };
            if last != Some(running) {
                if running {
                    health.set_serving::<ControlServer<ControlService>>().await;
                    health
                        .set_service_status("", tonic_health::ServingStatus::Serving)
                        .await;
                } else {
                    health
                        .set_not_serving::<ControlServer<ControlService>>()
                        .await;
                    health
                        .set_service_status("", tonic_health::ServingStatus::NotServing)
                        .await;
                    tracing::warn!("health: NOT_SERVING, the SM instance is not running");
                }
                last = Some(running);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

/// The standby a handover to "the best standby" picks: highest priority, then lowest
/// GUID, among STANDBY and still-DISCOVERING SMs (0 if none), as the instance ranks them.
fn best_standby(s: &Snapshot) -> u64 {
    s.sms
        .iter()
        .filter(|p| !p.is_self && p.trusted && crate::instance::handover_candidate(p.state))
        .max_by(|a, b| a.priority.cmp(&b.priority).then(b.guid.cmp(&a.guid)))
        .map_or(0, |p| p.guid)
}

fn event_of(r: EventRecord) -> pb::Event {
    pb::Event {
        at_unix_ms: r.at_unix_ms,
        kind: r.kind,
        text: r.text,
        from: r.from.map_or(0, |s| pb_state(s) as i32),
        to: r.to.map_or(0, |s| pb_state(s) as i32),
    }
}

fn grpc_err(e: CommandError) -> tonic::Status {
    match e {
        CommandError::InvalidArgument(m) => tonic::Status::invalid_argument(m),
        CommandError::FailedPrecondition(m) => tonic::Status::failed_precondition(m),
        CommandError::Unavailable(m) => {
            tonic::Status::unavailable(format!("SM instance {m} is not running"))
        }
    }
}

/// `ibsm.v1.Control` served for one [`Instance`].
#[derive(Debug, Clone)]
pub struct ControlService {
    slot: InstanceSlot,
    name: String,
    repl: Option<Arc<Replication>>,
    /// Caps concurrent Watch streams ([`MAX_WATCH_STREAMS`]).
    watch_slots: Arc<tokio::sync::Semaphore>,
    /// The StepDown hold in force.
    holds: Arc<crate::step_down::Holds>,
}

impl ControlService {
    /// Serve `inst`.
    pub fn new(inst: Arc<Instance>) -> ControlService {
        let name = inst.name().to_string();
        ControlService {
            slot: slot(inst),
            name,
            repl: None,
            watch_slots: Arc::new(tokio::sync::Semaphore::new(MAX_WATCH_STREAMS)),
            holds: Arc::default(),
        }
    }

    /// Serve whatever instance `slot` holds at each call (`name` for errors).
    pub fn with_slot(slot: InstanceSlot, name: impl Into<String>) -> ControlService {
        ControlService {
            slot,
            name: name.into(),
            repl: None,
            watch_slots: Arc::new(tokio::sync::Semaphore::new(MAX_WATCH_STREAMS)),
            holds: Arc::default(),
        }
    }

    /// Share `slots` as the cap on concurrent Watch streams.
    pub fn with_watch_slots(mut self, slots: Arc<tokio::sync::Semaphore>) -> ControlService {
        self.watch_slots = slots;
        self
    }

    /// Report `repl`'s epoch/Raft fields in `GetStatus`, and make a planned handover
    /// wait until the target's replica has caught up.
    pub fn with_replication(mut self, repl: Option<Arc<Replication>>) -> ControlService {
        self.repl = repl;
        self
    }

    fn inst(&self) -> Result<Arc<Instance>, tonic::Status> {
        let inst = match self.slot.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        inst.ok_or_else(|| {
            tonic::Status::unavailable(format!(
                "SM instance {} is not running (stopped by a demo drill; RestartInstance starts it again)",
                self.name
            ))
        })
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, tonic::Status> {
        let inst = self.inst()?;
        let (tx, rx) = oneshot::channel();
        inst.send(make(tx)).map_err(grpc_err)?;
        rx.await.map_err(|_| {
            tonic::Status::unavailable(format!(
                "SM instance {} stopped before answering",
                inst.name()
            ))
        })
    }
}

/// Wait for the first event `pick` turns into an outcome, up to [`OUTCOME_WAIT`].
async fn wait_outcome(
    rx: &mut broadcast::Receiver<EventRecord>,
    pick: impl Fn(&EventRecord) -> Option<String>,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + OUTCOME_WAIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(ev)) => {
                if let Some(o) = pick(&ev) {
                    return Some(o);
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => return None,
        }
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::Event, tonic::Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Control for ControlService {
    async fn get_status(
        &self,
        _req: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::Status>, tonic::Status> {
        let snap = self.inst()?.status();
        let leader_applied = match self.repl.as_deref() {
            Some(r) => crate::sa_status::leader_applied(r).await,
            None => 0,
        };
        Ok(Response::new(status_of(
            &snap,
            self.repl.as_deref(),
            leader_applied,
        )))
    }

    async fn list_sms(
        &self,
        _req: Request<pb::ListSmsRequest>,
    ) -> Result<Response<pb::ListSmsResponse>, tonic::Status> {
        let s = self.inst()?.status();
        let sms = s.sms.iter().map(|p| sm_entry_of(&s, p)).collect();
        Ok(Response::new(pb::ListSmsResponse { sms }))
    }

    async fn set_priority(
        &self,
        req: Request<pb::SetPriorityRequest>,
    ) -> Result<Response<pb::Status>, tonic::Status> {
        let p = req.into_inner().priority;
        let priority = u8::try_from(p).ok().filter(|p| *p <= 15).ok_or_else(|| {
            tonic::Status::invalid_argument(format!(
                "priority {p} is out of range 0..=15 (SMInfo.Priority is 4 bits)"
            ))
        })?;
        self.ask(|reply| Command::SetPriority { priority, reply })
            .await?
            .map_err(grpc_err)?;
        // The operator's priority wins over a StepDown's restore.
        self.holds.cancel();
        // The thread publishes after each round; give it one.
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(Response::new(status_of(
            &self.inst()?.status(),
            self.repl.as_deref(),
            0,
        )))
    }

    async fn handover(
        &self,
        req: Request<pb::HandoverRequest>,
    ) -> Result<Response<pb::HandoverResponse>, tonic::Status> {
        let to = req.into_inner().to_guid;
        if let Some(repl) = &self.repl {
            // A planned handover goes only to a replica that has caught up.
            let target = if to != 0 {
                to
            } else {
                best_standby(&self.inst()?.status())
            };
            if target != 0 {
                repl.wait_caught_up(target, CATCH_UP_WAIT)
                    .await
                    .map_err(|e| tonic::Status::failed_precondition(e.to_string()))?;
            }
        }
        let mut rx = self.inst()?.subscribe();
        let target = self
            .ask(|reply| Command::Handover { to, reply })
            .await?
            .map_err(grpc_err)?;
        let outcome = wait_outcome(&mut rx, |ev| match (ev.kind.as_str(), ev.from, ev.to) {
            ("state", Some(SmState::Master), Some(_)) => Some(ev.text.clone()),
            ("handover", _, _) if ev.text.contains("rejected") || ev.text.contains("timed out") => {
                Some(ev.text.clone())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|| {
            format!("handover to {target:#018x} pending: HANDOVER sent, not answered yet")
        });
        Ok(Response::new(pb::HandoverResponse {
            target_guid: target,
            outcome,
        }))
    }

    async fn step_down(
        &self,
        req: Request<pb::StepDownRequest>,
    ) -> Result<Response<pb::StepDownResponse>, tonic::Status> {
        let hold = crate::step_down::hold_of(req.into_inner().hold_ms)
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let s = self.inst()?.status();
        if s.state != SmState::Master {
            return Err(tonic::Status::failed_precondition(format!(
                "this SM is {}, not MASTER: only the master steps down",
                s.state
            )));
        }
        // As a planned handover: only to a standby whose replica has caught up.
        let best = best_standby(&s);
        if let (Some(repl), true) = (&self.repl, best != 0) {
            repl.wait_caught_up(best, CATCH_UP_WAIT)
                .await
                .map_err(|e| tonic::Status::failed_precondition(e.to_string()))?;
        }
        let (restore, id) = self.holds.begin(s.priority);
        let set = |priority| self.ask(move |reply| Command::SetPriority { priority, reply });
        set(0).await?.map_err(grpc_err)?;
        // At priority 0 any standby outranks us: the election hands over by itself as
        // soon as it reads a standby's SMInfo (an explicit Handover now would race
        // it). Only if none outranks us (ties go to the lower GUID) do we ask.
        let t0 = tokio::time::Instant::now();
        let mut asked = false;
        let target = loop {
            let now = self.inst()?.status();
            if now.state != SmState::Master {
                break now.master_guid;
            }
            let waited = t0.elapsed();
            if !asked && waited >= STEP_DOWN_SELF_WAIT {
                asked = true;
                let r = self.ask(|reply| Command::Handover { to: 0, reply }).await?;
                if let Err(e) = r {
                    let e = grpc_err(e);
                    let handing = e.message().contains("in progress")
                        || self.inst()?.status().state != SmState::Master;
                    if !handing {
                        if self.holds.end(id).is_some() {
                            set(restore).await?.map_err(grpc_err)?;
                        }
                        return Err(e);
                    }
                }
            }
            if waited >= STEP_DOWN_SELF_WAIT + OUTCOME_WAIT {
                if self.holds.end(id).is_some() {
                    set(restore).await?.map_err(grpc_err)?;
                }
                return Err(tonic::Status::deadline_exceeded(
                    "no standby took the subnet: this SM is still MASTER, its priority restored",
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let until = std::time::SystemTime::now() + hold;
        tracing::info!(hold_ms = ms(hold), restore, to = target, "stepped down");
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            if let Some(p) = me.holds.end(id) {
                let back = me.ask(move |reply| Command::SetPriority { priority: p, reply });
                match back.await {
                    Ok(Ok(_)) => {
                        tracing::info!(priority = p, "step-down hold over: priority restored")
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(%e, priority = p, "step-down hold over: cannot restore the priority")
                    }
                    Err(e) => {
                        tracing::warn!(%e, priority = p, "step-down hold over: cannot restore the priority")
                    }
                }
            }
        });
        Ok(Response::new(pb::StepDownResponse {
            target_guid: target,
            outcome: format!(
                "{} is MASTER{}",
                format_args!("{target:#018x}"),
                if asked {
                    " (asked by HANDOVER)"
                } else {
                    " (handed over at priority 0)"
                }
            ),
            restored_priority: u32::from(restore),
            until_unix_ms: until
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }))
    }

    async fn send_control(
        &self,
        req: Request<pb::SendControlRequest>,
    ) -> Result<Response<pb::SendControlResponse>, tonic::Status> {
        let req = req.into_inner();
        let packet = match pb::ControlPacket::try_from(req.packet) {
            Ok(pb::ControlPacket::Disable) => ControlPacket::Disable,
            Ok(pb::ControlPacket::Standby) => ControlPacket::Standby,
            Ok(pb::ControlPacket::Discover) => ControlPacket::Discover,
            Ok(pb::ControlPacket::Handover | pb::ControlPacket::Acknowledge) => {
                return Err(tonic::Status::invalid_argument(
                    "HANDOVER and ACKNOWLEDGE are sent by the election itself: use the Handover RPC",
                ))
            }
            Ok(pb::ControlPacket::Unspecified) | Err(_) => {
                return Err(tonic::Status::invalid_argument(format!(
                    "packet {} is not a control packet: expected DISABLE (3), STANDBY (4) or DISCOVER (5)",
                    req.packet
                )))
            }
        };
        if req.guid == 0 {
            return Err(tonic::Status::invalid_argument(
                "guid 0 is not a port GUID: give the target SM's port GUID",
            ));
        }
        let guid = req.guid;
        let mut rx = self.inst()?.subscribe();
        self.ask(|reply| Command::SendControl {
            packet,
            guid,
            reply,
        })
        .await?
        .map_err(grpc_err)?;
        let needle = format!("{packet} to {guid:#018x}");
        let outcome = wait_outcome(&mut rx, |ev| {
            (ev.kind == "control" && ev.text.starts_with(&needle)).then(|| ev.text.clone())
        })
        .await
        .unwrap_or_else(|| format!("{needle} sent, no answer yet"));
        Ok(Response::new(pb::SendControlResponse { outcome }))
    }

    async fn sweep(
        &self,
        req: Request<pb::SweepRequest>,
    ) -> Result<Response<pb::SweepResponse>, tonic::Status> {
        let heavy = req.into_inner().heavy;
        let (tx, rx) = oneshot::channel();
        self.inst()?
            .send(Command::Sweep { heavy, reply: tx })
            .map_err(grpc_err)?;
        let summary = tokio::time::timeout(SWEEP_WAIT, rx)
            .await
            .map_err(|_| tonic::Status::deadline_exceeded("the sweep did not finish in 120 s"))?
            .map_err(|_| tonic::Status::unavailable("the SM instance stopped during the sweep"))?;
        Ok(Response::new(pb::SweepResponse { summary }))
    }

    type WatchStream = EventStream;

    async fn watch(
        &self,
        _req: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, tonic::Status> {
        let permit = Arc::clone(&self.watch_slots)
            .try_acquire_owned()
            .map_err(|_| {
                tonic::Status::resource_exhausted(format!(
                    "{MAX_WATCH_STREAMS} Watch streams are open on this endpoint already: close one first"
                ))
            })?;
        let mut rx = self.inst()?.subscribe();
        // Forward until the instance stops (its last event is "stopped") or the client
        // goes away.
        let (tx, out) = mpsc::channel(64);
        tokio::spawn(async move {
            // The permit (a Watch slot) is held until the client goes away, noticed at
            // once (not at the next event), or the instance stops.
            let _permit = permit;
            loop {
                let next = tokio::select! {
                    _ = tx.closed() => return,
                    r = rx.recv() => r,
                };
                match next {
                    Ok(ev) => {
                        let last = ev.kind == "stopped";
                        if tx.send(Ok(event_of(ev))).await.is_err() || last {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(lost = n, "Watch: a slow client missed events");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(out),
        )))
    }
}

/// Adds more services to an endpoint's router (e.g. the Raft service of
/// `ibsm-replica`): called with the router and the endpoint's token interceptor, so
/// the service can be wrapped (`XServer::with_interceptor(svc, icpt)`) and is covered
/// by the same TLS.
pub type ServiceHook =
    Arc<dyn Fn(SecuredRouter, crate::auth::TokenInterceptor) -> SecuredRouter + Send + Sync>;

/// The server's router behind the credentials layer ([`crate::auth::AuthLayer`]).
pub type SecuredRouter = tonic::transport::server::Router<
    tower_layer::Stack<crate::auth::AuthLayer, tower_layer::Identity>,
>;

/// How a server is secured and what else it serves.
#[derive(Clone, Default)]
pub struct ServeOptions {
    /// TLS and/or token; [`Security::plaintext`] only when the operator asked for it.
    pub security: Security,
    /// More services on the same port, under the same security (their read-only
    /// methods go in [`Security::extra_read_only_methods`]).
    pub extra_services: Option<ServiceHook>,
    /// Encoded `FileDescriptorSet`s of those services, added to server reflection.
    pub extra_file_descriptor_sets: Vec<&'static [u8]>,
    /// The replica: its Raft service and `ibsm.v1.Cluster` are served too, and
    /// `GetStatus` reports its epoch and Raft view.
    pub replication: Option<Arc<Replication>>,
    /// `--fault-injection` (a test facility, off by default): with `replication`, serve
    /// `ibsm.v1.FaultInjection` for this daemon's own replica
    /// ([`crate::fault_injection`]).
    pub fault_injection: bool,
    /// `--partitions-file`: what `Fabric/ReloadPartitions` reads again.
    pub partitions_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("security", &self.security)
            .field(
                "extra_file_descriptor_sets",
                &self.extra_file_descriptor_sets.len(),
            )
            .field("extra_services", &self.extra_services.is_some())
            .field("replication", &self.replication)
            .field("fault_injection", &self.fault_injection)
            .field("partitions_file", &self.partitions_file)
            .finish()
    }
}

/// Bind `addr` now (so a busy port is an error at start) and return the bound
/// address and the future that serves until `shutdown` resolves. Plaintext, no
/// authentication (with a warning); see [`bind_with`].
pub async fn bind(
    inst: Arc<Instance>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<
    (
        SocketAddr,
        impl Future<Output = Result<(), DaemonError>> + Send + 'static,
    ),
    DaemonError,
> {
    let name = inst.name().to_string();
    bind_with(slot(inst), &name, addr, shutdown, ServeOptions::default()).await
}

/// [`bind`] with security and extra services: serves whatever `slot` holds.
pub async fn bind_with(
    slot: InstanceSlot,
    name: &str,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    opts: ServeOptions,
) -> Result<
    (
        SocketAddr,
        impl Future<Output = Result<(), DaemonError>> + Send + 'static,
    ),
    DaemonError,
> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DaemonError::Listen {
            what: "gRPC",
            addr,
            source,
        })?;
    serve_listener(slot, name, listener, shutdown, opts).await
}

/// [`bind_with`] on a listener bound earlier (the replicas of a cluster must know
/// every member's address before any server starts).
pub async fn serve_listener(
    slot: InstanceSlot,
    name: &str,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    opts: ServeOptions,
) -> Result<
    (
        SocketAddr,
        impl Future<Output = Result<(), DaemonError>> + Send + 'static,
    ),
    DaemonError,
> {
    let local = listener
        .local_addr()
        .map_err(|source| DaemonError::LocalAddr {
            what: "gRPC",
            source,
        })?;
    let sec = &opts.security;
    if !sec.authenticates() {
        tracing::warn!(
            addr = %local,
            tls = sec.tls.is_some(),
            "INSECURE: the gRPC control API authenticates nobody (--insecure-plaintext); anyone who can reach it can hand over or disable the SM: keep it on loopback or a trusted network"
        );
    } else if sec.tls.is_none() {
        tracing::warn!(
            addr = %local,
            "gRPC control API: bearer token over plaintext HTTP/2; the token can be sniffed off the network: add --tls-cert/--tls-key unless it is on loopback"
        );
    } else {
        tracing::info!(addr = %local, mtls = sec.mtls, token = sec.token.is_some(), "gRPC control API secured with TLS");
    }
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<ControlServer<ControlService>>().await;
    let mut reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(ibsm_proto::FILE_DESCRIPTOR_SET);
    if opts.fault_injection && opts.replication.is_some() {
        reflection = reflection
            .register_encoded_file_descriptor_set(ibsm_proto::FAULT_INJECTION_FILE_DESCRIPTOR_SET);
    }
    for set in &opts.extra_file_descriptor_sets {
        reflection = reflection.register_encoded_file_descriptor_set(set);
    }
    let reflection = reflection
        .build_v1()
        .map_err(|e| DaemonError::Reflection(e.to_string()))?;
    let incoming = limited_incoming(listener, MAX_CONNECTIONS);
    // Credentials and roles are checked by one layer in front of every service (see
    // crate::auth); the Raft service checks the members' own credentials.
    let icpt = crate::auth::TokenInterceptor::pass_through();
    spawn_health_watch(health.clone(), Arc::clone(&slot));
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .concurrency_limit_per_connection(MAX_STREAMS_PER_CONNECTION as usize)
        .http2_max_pending_accept_reset_streams(Some(64))
        .http2_max_header_list_size(Some(64 << 10))
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .tcp_nodelay(true);
    if let Some(tls) = sec.tls.clone() {
        builder = builder
            .tls_config(tls)
            .map_err(|e| DaemonError::Tls(e.to_string()))?;
    }
    let watch_slots = Arc::new(tokio::sync::Semaphore::new(MAX_WATCH_STREAMS));
    let mut builder = builder.layer(sec.layer());
    let router = builder
        .add_service(health_service)
        .add_service(reflection)
        .add_service(ibsm_proto::v1::fabric_server::FabricServer::new(
            crate::fabric_service::FabricService::new(
                Arc::clone(&slot),
                name,
                opts.replication.clone(),
            )
            .with_partitions_file(opts.partitions_file.clone()),
        ))
        .add_service(ControlServer::new(
            ControlService::with_slot(slot, name)
                .with_replication(opts.replication.clone())
                .with_watch_slots(watch_slots),
        ))
        .add_service(ibsm_proto::v1::cluster_server::ClusterServer::new(
            ClusterService::new(opts.replication.clone()),
        ))
        // Raft between members: the replica's service checks the cluster secret /
        // member certificates itself, see crate::replication ("Security").
        .add_optional_service(opts.replication.as_ref().map(|r| r.grpc_service()))
        .add_optional_service(
            opts.replication
                .as_ref()
                .filter(|_| opts.fault_injection)
                .map(|r| {
                    ibsm_proto::v1::fault_injection_server::FaultInjectionServer::new(
                        crate::fault_injection::FaultInjectionService::new(
                            r.replica().node_id(),
                            r.replica().fault_switch(),
                        ),
                    )
                }),
        );
    let router = match &opts.extra_services {
        Some(hook) => hook(router, icpt),
        None => router,
    };
    let fut = async move {
        router
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
            .map_err(|e| DaemonError::Serve(e.to_string()))
    };
    Ok((local, fut))
}
