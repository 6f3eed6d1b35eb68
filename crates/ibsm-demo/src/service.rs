//! `ibsm.demo.v1.Demo`: the drills of `ibsmd demo`, served on every member's endpoint
//! of the embedded demo and on the ibsim demo's own endpoint.
//!
//! A package of its own rather than new `ibsm.v1.Control` RPCs: a production daemon
//! does not serve it at all (its endpoints answer `UNIMPLEMENTED`), so a drill can
//! never stop a production SM, and the production control surface carries no demo
//! method. The read-only methods ([`READ_ONLY_METHODS`]) are given to the auth layer
//! through `ibsmd::auth::Security::extra_read_only_methods`; the rest are admin-only.

use ibsm_proto::demo::v1 as pb;
use ibsm_proto::demo::v1::demo_server::Demo as DemoRpc;
use ibsm_proto::v1 as pb_v1;
use ibsmd::server::ServeOptions;
use tonic::{Request, Response, Status};

use crate::demo::{DemoError, DemoHandle, MemberInfo, Selector};

/// The drills' methods a read-only credential may call (full gRPC paths).
pub const READ_ONLY_METHODS: &[&str] = &[
    "/ibsm.demo.v1.Demo/ListInstances",
    "/ibsm.demo.v1.Demo/PollSmInfo",
    "/ibsm.demo.v1.Demo/ListCables",
    "/ibsm.demo.v1.Demo/ReadFabric",
    "/ibsm.demo.v1.Demo/DescribeJudge",
];

/// The service over one demo.
#[derive(Debug, Clone)]
pub struct DemoService {
    demo: DemoHandle,
}

impl DemoService {
    /// Serve drills for `demo`.
    pub fn new(demo: DemoHandle) -> DemoService {
        DemoService { demo }
    }

    fn ibsim_only(&self, what: &str) -> Result<std::sync::Arc<crate::ibsim::IbsimShared>, Status> {
        match self.demo()?.ibsim() {
            Some(ib) => ib.map_err(status_of),
            None => Err(Status::failed_precondition(format!(
                "{what} is only available on the demo on ibsim (ibsmd demo --fabric ibsim:NETFILE)"
            ))),
        }
    }

    fn demo(&self) -> Result<&DemoHandle, Status> {
        Ok(&self.demo)
    }
}

/// Serve the drills of `demo` on an ibsmd endpoint too: the service under the
/// endpoint's own security layer, its read-only methods given to that layer, and its
/// descriptors to server reflection.
pub fn serve_on(opts: &mut ServeOptions, demo: DemoHandle) {
    let svc = DemoService::new(demo);
    opts.extra_services = Some(std::sync::Arc::new(move |router, _icpt| {
        router.add_service(pb::demo_server::DemoServer::new(svc.clone()))
    }));
    opts.extra_file_descriptor_sets
        .push(ibsm_proto::DEMO_FILE_DESCRIPTOR_SET);
    opts.security.extra_read_only_methods = READ_ONLY_METHODS;
}

/// `PollSmInfo`'s answer from a poller's view (the demo's and `ibsmd judge`'s).
pub(crate) fn poll_response(view: crate::poller::PollView) -> pb::PollSmInfoResponse {
    let now_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    pb::PollSmInfoResponse {
        samples: view
            .samples
            .into_iter()
            .map(|s| pb::SmInfoSample {
                seq: s.seq,
                at_unix_ms: s.at_unix_ms,
                name: s.name,
                guid: s.guid,
                answered: s.state.is_some(),
                state: match s.state {
                    Some(ibsm_mad::SmState::Discovering) => pb_v1::SmState::Discovering,
                    Some(ibsm_mad::SmState::Standby) => pb_v1::SmState::Standby,
                    Some(ibsm_mad::SmState::Master) => pb_v1::SmState::Master,
                    Some(ibsm_mad::SmState::NotActive) | None => pb_v1::SmState::Notactive,
                } as i32,
            })
            .collect(),
        next_seq: view.next_seq,
        now_unix_ms,
        interval_ms: u32::try_from(crate::poller::INTERVAL.as_millis()).unwrap_or(10),
        rounds: view.rounds,
    }
}

fn status_of(e: DemoError) -> Status {
    match e {
        DemoError::NotFound(m) => Status::not_found(m),
        DemoError::FailedPrecondition(m) => Status::failed_precondition(m),
        DemoError::Unavailable(m) => Status::unavailable(m),
    }
}

fn pb_instance(m: &MemberInfo) -> pb::DemoInstance {
    let snap = m
        .before_kill
        .clone()
        .or_else(|| m.instance.as_ref().map(|i| i.status()));
    pb::DemoInstance {
        name: m.name.clone(),
        guid: snap.as_ref().map_or(0, |s| s.guid),
        endpoint: m.endpoint.to_string(),
        running: snap.as_ref().is_some_and(|s| s.running),
        state: snap
            .as_ref()
            .filter(|s| s.running)
            .map_or(pb_v1::SmState::Notactive, |s| match s.state {
                ibsm_core::election::SmState::NotActive => pb_v1::SmState::Notactive,
                ibsm_core::election::SmState::Discovering => pb_v1::SmState::Discovering,
                ibsm_core::election::SmState::Standby => pb_v1::SmState::Standby,
                ibsm_core::election::SmState::Master => pb_v1::SmState::Master,
            }) as i32,
        priority: u32::from(m.priority),
        host: m.host.clone(),
    }
}

/// Turn a request's selectors into one [`Selector`]; exactly one must be set.
pub fn selector(req: &pb::KillInstanceRequest) -> Result<Selector, Status> {
    let mut sels = Vec::new();
    if !req.name.is_empty() {
        sels.push(Selector::Name(req.name.clone()));
    }
    if req.guid != 0 {
        sels.push(Selector::Guid(req.guid));
    }
    if req.master {
        sels.push(Selector::Master);
    }
    match sels.len() {
        1 => sels
            .pop()
            .ok_or_else(|| Status::internal("selector vanished")),
        0 => Err(Status::invalid_argument(
            "say which instance: name, guid or master = true",
        )),
        _ => Err(Status::invalid_argument(
            "give exactly one of name, guid and master = true",
        )),
    }
}

#[tonic::async_trait]
impl DemoRpc for DemoService {
    async fn list_instances(
        &self,
        _req: Request<pb::ListInstancesRequest>,
    ) -> Result<Response<pb::ListInstancesResponse>, Status> {
        if let Some(ib) = self.demo()?.ibsim() {
            return Ok(Response::new(pb::ListInstancesResponse {
                instances: ib.map_err(status_of)?.list(),
            }));
        }
        let members = self.demo()?.members().map_err(status_of)?;
        Ok(Response::new(pb::ListInstancesResponse {
            instances: members.iter().map(pb_instance).collect(),
        }))
    }

    async fn kill_instance(
        &self,
        req: Request<pb::KillInstanceRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        let demo = self.demo()?;
        let sel = selector(req.get_ref())?;
        if let Some(ib) = demo.ibsim() {
            let out = ib.map_err(status_of)?.kill(&sel).await.map_err(status_of)?;
            return Ok(Response::new(out));
        }
        let killed = demo.kill(&sel).await.map_err(status_of)?;
        // GUID and state are those right before the kill; running is now false.
        let mut out = pb_instance(&killed);
        out.running = false;
        Ok(Response::new(out))
    }

    async fn restart_instance(
        &self,
        req: Request<pb::RestartInstanceRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        let demo = self.demo()?;
        let name = req.into_inner().name;
        if name.is_empty() {
            return Err(Status::invalid_argument(
                "name is required (sm1, sm2, ...; ListInstances shows them)",
            ));
        }
        if let Some(ib) = demo.ibsim() {
            let out = ib
                .map_err(status_of)?
                .restart(&name)
                .await
                .map_err(status_of)?;
            return Ok(Response::new(out));
        }
        let m = demo.restart(&name).await.map_err(status_of)?;
        Ok(Response::new(pb_instance(&m)))
    }

    async fn poll_sm_info(
        &self,
        req: Request<pb::PollSmInfoRequest>,
    ) -> Result<Response<pb::PollSmInfoResponse>, Status> {
        let demo = self.demo()?;
        let after_seq = req.into_inner().after_seq;
        let view = match demo.ibsim() {
            Some(ib) => ib.map_err(status_of)?.poll_sm_info(after_seq),
            None => demo.poll_sm_info(after_seq),
        }
        .map_err(status_of)?;
        Ok(Response::new(poll_response(view)))
    }

    async fn set_link_state(
        &self,
        req: Request<pb::SetLinkStateRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        let demo = self.demo()?;
        let req = req.into_inner();
        if req.name.is_empty() {
            return Err(Status::invalid_argument(
                "name is required (sm1, sm2, ...; ListInstances shows them)",
            ));
        }
        if let Some(ib) = demo.ibsim() {
            let out = ib
                .map_err(status_of)?
                .set_link(&req.name, req.up)
                .await
                .map_err(status_of)?;
            return Ok(Response::new(out));
        }
        let m = demo.set_link(&req.name, req.up).map_err(status_of)?;
        Ok(Response::new(pb_instance(&m)))
    }

    async fn set_raft_isolation(
        &self,
        req: Request<pb::SetRaftIsolationRequest>,
    ) -> Result<Response<pb::DemoInstance>, Status> {
        let demo = self.demo()?;
        let req = req.into_inner();
        if let Some(ib) = demo.ibsim() {
            let ib = ib.map_err(status_of)?;
            if req.name.is_empty() {
                return Err(Status::invalid_argument(
                    "on ibsim, name the instance (sm1, sm2, ...)",
                ));
            }
            let out = ib
                .set_raft_isolation(&req.name, req.isolated)
                .await
                .map_err(status_of)?;
            return Ok(Response::new(out));
        }
        let sel = match (req.name.is_empty(), req.guid) {
            (false, 0) => Selector::Name(req.name),
            (true, g) if g != 0 => Selector::Guid(g),
            (true, _) => {
                return Err(Status::invalid_argument(
                    "say which instance: name (sm1, sm2, ...) or guid",
                ))
            }
            (false, _) => {
                return Err(Status::invalid_argument(
                    "give exactly one of name and guid",
                ))
            }
        };
        let m = demo
            .set_raft_isolation(&sel, req.isolated)
            .map_err(status_of)?;
        Ok(Response::new(pb_instance(&m)))
    }

    async fn list_cables(
        &self,
        _req: Request<pb::ListCablesRequest>,
    ) -> Result<Response<pb::ListCablesResponse>, Status> {
        let ib = self.ibsim_only("ListCables")?;
        Ok(Response::new(pb::ListCablesResponse {
            cables: ib.cables(),
        }))
    }

    async fn set_cable_fault(
        &self,
        req: Request<pb::SetCableFaultRequest>,
    ) -> Result<Response<pb::ListCablesResponse>, Status> {
        let ib = self.ibsim_only("SetCableFault")?;
        let req = req.into_inner();
        let port = u8::try_from(req.port)
            .map_err(|_| Status::invalid_argument(format!("port {} is not a port", req.port)))?;
        let loss = u8::try_from(req.loss_percent)
            .ok()
            .filter(|l| *l <= 100)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "loss_percent {} is not 0..=100",
                    req.loss_percent
                ))
            })?;
        ib.set_cable_fault(&req.node, port, req.up, loss)
            .await
            .map_err(status_of)?;
        Ok(Response::new(pb::ListCablesResponse {
            cables: ib.cables(),
        }))
    }

    async fn read_fabric(
        &self,
        req: Request<pb::ReadFabricRequest>,
    ) -> Result<Response<pb::ReadFabricResponse>, Status> {
        let ib = self.ibsim_only("ReadFabric")?;
        let multicast = req.into_inner().multicast;
        Ok(Response::new(
            ib.read_fabric(multicast).await.map_err(status_of)?,
        ))
    }

    async fn describe_judge(
        &self,
        _req: Request<pb::DescribeJudgeRequest>,
    ) -> Result<Response<pb::DescribeJudgeResponse>, Status> {
        let ib = self.ibsim_only("DescribeJudge")?;
        Ok(Response::new(ib.describe_judge()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kill(name: &str, guid: u64, master: bool) -> pb::KillInstanceRequest {
        pb::KillInstanceRequest {
            name: name.into(),
            guid,
            master,
        }
    }

    #[test]
    fn a_kill_names_exactly_one_instance() {
        assert!(matches!(selector(&kill("sm2", 0, false)), Ok(Selector::Name(n)) if n == "sm2"));
        assert!(matches!(
            selector(&kill("", 7, false)),
            Ok(Selector::Guid(7))
        ));
        assert!(matches!(selector(&kill("", 0, true)), Ok(Selector::Master)));
        for bad in [
            kill("", 0, false),
            kill("sm1", 7, false),
            kill("sm1", 0, true),
        ] {
            let code = selector(&bad).err().map(|s| s.code());
            assert_eq!(code, Some(tonic::Code::InvalidArgument), "{bad:?}");
        }
    }
}
