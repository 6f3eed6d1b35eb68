//! `ibsmd judge`: the fabric-side observer of a drill against a deployed cluster.
//!
//! An operator runs it on a host of the fabric that is not an SM (any node with an HCA
//! port and infiniband-diags), naming each SM port by a directed route from there, as
//! `sminfo -D` would: `ibsmd judge --listen ADDR --target sm1=1,3 --target sm2=1,5`.
//! It reads every SM port's SMInfo every 10 ms (the same [`SmInfoPoller`] the demo
//! uses) and serves the read-only part of `ibsm.demo.v1.Demo`: `ListInstances` (one
//! per target, running while its port answers SMInfo), `PollSmInfo` (every change,
//! dated as in [`crate::poller`]) and `ReadFabric` (`ibnetdiscover -p`, and `ibroute`
//! per switch unless only LIDs are asked, run on this host). `ibsmctl drill --judge`
//! then measures failovers and counts LID changes from what this host reads on the
//! wire (PortInfo), never from what the SMs say about themselves.
//!
//! It acts on nothing: the methods that would (kill, restart, cable, Raft isolation,
//! cable faults) answer `UNIMPLEMENTED` with what to use instead.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ibsm_proto::demo::v1 as pb;
use ibsm_proto::demo::v1::demo_server::{Demo as DemoRpc, DemoServer};
use ibsm_transport::{FabricSpec, UmadDevice};
use ibsmd::auth::Security;
use tonic::{Request, Response, Status};

use crate::poller::SmInfoPoller;
use crate::service::poll_response;

/// How long one infiniband-diags command may run.
const DIAG_TIMEOUT: Duration = Duration::from_secs(60);

/// What `ibsmd judge` was given, checked.
pub struct JudgeOptions {
    /// This host's port (`umad[:CA[:PORT]]`).
    pub fabric: FabricSpec,
    /// Where to serve.
    pub listen: SocketAddr,
    /// Each SM port: a name and a directed route from here.
    pub targets: Vec<(String, Vec<u8>)>,
    /// Credentials callers must present.
    pub security: Security,
}

/// `ibsmd judge`: poll and serve until the process is stopped.
pub async fn run(opts: JudgeOptions) -> anyhow::Result<()> {
    let FabricSpec::Umad(port) = &opts.fabric else {
        anyhow::bail!("ibsmd judge reads SMInfo through umad: give --fabric umad[:CA[:PORT]]");
    };
    // Bind first: a second judge on the same address fails before it opens the fabric.
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("--listen {}: cannot bind", opts.listen))?;
    let bound = listener.local_addr()?;
    let dev = UmadDevice::open(port, Duration::from_millis(200))
        .with_context(|| format!("opening the umad port {port:?}"))?;
    let names: Vec<String> = opts.targets.iter().map(|(n, _)| n.clone()).collect();
    let poller = SmInfoPoller::start_on_device(Box::new(dev), opts.targets)?;
    let mut security = opts.security;
    security.extra_read_only_methods = crate::service::READ_ONLY_METHODS;
    tracing::info!(addr = %bound, targets = ?names, "judge: gRPC API on {bound}");
    tonic::transport::Server::builder()
        .layer(security.layer())
        .add_service(DemoServer::new(JudgeService::new(poller, names)))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await
        .context("judge: gRPC server")
}

/// The judge's service: a poller and the names of its targets.
#[derive(Debug, Clone)]
pub struct JudgeService {
    poller: Arc<SmInfoPoller>,
    names: Vec<String>,
}

impl JudgeService {
    /// Serve `poller`, whose targets are `names`.
    pub fn new(poller: SmInfoPoller, names: Vec<String>) -> JudgeService {
        JudgeService {
            poller: Arc::new(poller),
            names,
        }
    }
}

/// Run an infiniband-diags tool on this host, bounded by [`DIAG_TIMEOUT`].
fn run_diag(args: &[&str]) -> Result<String, String> {
    let tool = args.first().copied().unwrap_or_default();
    let mut cmd = Command::new(tool);
    cmd.args(args.get(1..).unwrap_or(&[]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG");
    let out = ibsm_labkit::run_with_timeout(&mut cmd, DIAG_TIMEOUT).map_err(|e| {
        format!(
            "{}: {e} (the judge reads the fabric with infiniband-diags: is it installed?)",
            args.join(" ")
        )
    })?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn acts(what: &str) -> Status {
    Status::unimplemented(format!(
        "{what}: this is an `ibsmd judge`, which only watches the fabric; a drill against \
         a deployed cluster kills and restarts SMs with `ibsmctl drill --kill-cmd/--restart-cmd`"
    ))
}

#[tonic::async_trait]
impl DemoRpc for JudgeService {
    async fn list_instances(
        &self,
        _req: Request<pb::ListInstancesRequest>,
    ) -> Result<Response<pb::ListInstancesResponse>, Status> {
        let instances = self
            .names
            .iter()
            .map(|name| {
                let (guid, state) = self.poller.latest(name).unwrap_or((0, None));
                pb::DemoInstance {
                    name: name.clone(),
                    guid,
                    running: state.is_some(),
                    state: match state {
                        Some(ibsm_mad::SmState::Discovering) => {
                            ibsm_proto::v1::SmState::Discovering
                        }
                        Some(ibsm_mad::SmState::Standby) => ibsm_proto::v1::SmState::Standby,
                        Some(ibsm_mad::SmState::Master) => ibsm_proto::v1::SmState::Master,
                        _ => ibsm_proto::v1::SmState::Notactive,
                    } as i32,
                    ..Default::default()
                }
            })
            .collect();
        Ok(Response::new(pb::ListInstancesResponse { instances }))
    }

    async fn kill_instance(
        &self,
        _req: Request<pb::KillInstanceRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        Err(acts("KillInstance"))
    }

    async fn restart_instance(
        &self,
        _req: Request<pb::RestartInstanceRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        Err(acts("RestartInstance"))
    }

    async fn poll_sm_info(
        &self,
        req: Request<pb::PollSmInfoRequest>,
    ) -> Result<Response<pb::PollSmInfoResponse>, Status> {
        let view = self.poller.since(req.into_inner().after_seq);
        Ok(Response::new(poll_response(view)))
    }

    async fn set_link_state(
        &self,
        _req: Request<pb::SetLinkStateRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        Err(acts("SetLinkState"))
    }

    async fn set_raft_isolation(
        &self,
        _req: Request<pb::SetRaftIsolationRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        Err(acts("SetRaftIsolation"))
    }

    async fn list_cables(
        &self,
        _req: Request<pb::ListCablesRequest>,
    ) -> Result<Response<pb::ListCablesResponse>, Status> {
        Err(acts("ListCables"))
    }

    async fn set_cable_fault(
        &self,
        _req: Request<pb::SetCableFaultRequest>,
    ) -> Result<Response<pb::ListCablesResponse>, Status> {
        Err(acts("SetCableFault"))
    }

    async fn read_fabric(
        &self,
        req: Request<pb::ReadFabricRequest>,
    ) -> Result<Response<pb::ReadFabricResponse>, Status> {
        let r = req.into_inner();
        let read = tokio::task::spawn_blocking(move || {
            crate::ibsim::read_fabric_by(&run_diag, "", r.multicast, r.lids_only)
        })
        .await
        .map_err(|e| Status::internal(format!("ReadFabric: {e}")))?;
        Ok(Response::new(read.map_err(Status::unavailable)?))
    }

    async fn describe_judge(
        &self,
        _req: Request<pb::DescribeJudgeRequest>,
    ) -> Result<Response<pb::DescribeJudgeResponse>, Status> {
        Err(Status::failed_precondition(
            "DescribeJudge names the ibsim demo's judge HCA; an `ibsmd judge` runs on a real host",
        ))
    }
}
