//! `ibsm.v1.FaultInjection`: a test facility of the daemon itself, served only by a
//! daemon started with `--fault-injection` and replication, and only to the admin
//! credential (it is not in [`crate::auth::READ_ONLY_METHODS`]).
//!
//! `SetRaftIsolation` flips this daemon's own replica [`ibsm_replica::FaultSwitch`]:
//! its Raft traffic stops both ways while its SM keeps running on the fabric
//! (mastership is in-band SMInfo, not Raft). The demo on ibsim and the soak run their
//! member processes with the flag because a separate process's switch cannot be reached
//! any other way. A daemon without the flag does not serve the service at all
//! (`UNIMPLEMENTED`), so no call can cut a production SM off its peers.

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::fault_injection_server::FaultInjection;
use tonic::{Request, Response, Status};

/// The service over one replica's fault switch.
#[derive(Debug, Clone)]
pub struct FaultInjectionService {
    node_id: u64,
    fault: ibsm_replica::FaultSwitch,
}

impl FaultInjectionService {
    /// Serve `fault`, the switch of replica `node_id` (this daemon's).
    pub fn new(node_id: u64, fault: ibsm_replica::FaultSwitch) -> Self {
        FaultInjectionService { node_id, fault }
    }
}

#[tonic::async_trait]
impl FaultInjection for FaultInjectionService {
    async fn set_raft_isolation(
        &self,
        req: Request<pb::SetRaftIsolationRequest>,
    ) -> Result<Response<pb::RaftIsolation>, Status> {
        let isolated = req.into_inner().isolated;
        self.fault.set_isolated(isolated);
        tracing::warn!(
            node_id = self.node_id,
            isolated,
            "fault injection: this daemon's Raft traffic set (FaultInjection/SetRaftIsolation)"
        );
        Ok(Response::new(pb::RaftIsolation {
            node_id: self.node_id,
            isolated: self.fault.is_isolated(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn isolation_flips_this_daemons_switch_and_heals_it() {
        let fault = ibsm_replica::FaultSwitch::default();
        let svc = FaultInjectionService::new(3, fault.clone());
        let r = svc
            .set_raft_isolation(Request::new(pb::SetRaftIsolationRequest { isolated: true }))
            .await
            .expect("isolate")
            .into_inner();
        assert!(fault.is_isolated());
        assert_eq!((r.node_id, r.isolated), (3, true));
        let r = svc
            .set_raft_isolation(Request::new(pb::SetRaftIsolationRequest {
                isolated: false,
            }))
            .await
            .expect("heal")
            .into_inner();
        assert!(!fault.is_isolated());
        assert!(!r.isolated);
    }
}
