//! `ibsm.v1.Cluster`: membership of the replication cluster (list, add, remove), served
//! next to `ibsm.v1.Control`. Add/remove work on any member (a follower forwards them
//! to the Raft leader, see `ibsm_replica::Replica::add_member`).

use std::sync::Arc;

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::cluster_server::Cluster;
use ibsm_replica::ReplicaError;
use tonic::{Request, Response};

use crate::replication::Replication;

/// The Cluster service; `None`: this daemon runs without replication.
#[derive(Debug, Clone)]
pub struct ClusterService {
    repl: Option<Arc<Replication>>,
}

impl ClusterService {
    /// Serve `repl` (or refuse every call when `None`).
    pub fn new(repl: Option<Arc<Replication>>) -> ClusterService {
        ClusterService { repl }
    }

    fn repl(&self) -> Result<&Arc<Replication>, tonic::Status> {
        self.repl.as_ref().ok_or_else(|| {
            tonic::Status::failed_precondition(
                "this ibsmd runs without replication: start it with --node-id N --data-dir DIR (and --peer ID=ADDR for the first cluster)",
            )
        })
    }

    fn members(repl: &Replication) -> pb::ListMembersResponse {
        let m = repl.metrics();
        let mut members: Vec<pb::Member> = m
            .voters
            .iter()
            .map(|(id, addr)| (id, addr, true))
            .chain(m.learners.iter().map(|(id, addr)| (id, addr, false)))
            .map(|(id, addr, voter)| pb::Member {
                node_id: *id,
                addr: addr.clone(),
                voter,
                leader: m.leader == Some(*id),
            })
            .collect();
        members.sort_by_key(|m| m.node_id);
        pb::ListMembersResponse {
            members,
            leader: m.leader.unwrap_or(0),
            term: m.term,
            applied_index: m.last_applied.unwrap_or(0),
            node_id: m.node_id,
        }
    }
}

fn status_of(e: ReplicaError) -> tonic::Status {
    match e {
        ReplicaError::Timeout(_) => tonic::Status::unavailable(e.to_string()),
        ReplicaError::Config(_) => tonic::Status::invalid_argument(e.to_string()),
        _ => tonic::Status::failed_precondition(e.to_string()),
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn list_members(
        &self,
        _req: Request<pb::ListMembersRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, tonic::Status> {
        Ok(Response::new(Self::members(self.repl()?)))
    }

    async fn add_member(
        &self,
        req: Request<pb::AddMemberRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, tonic::Status> {
        let repl = self.repl()?;
        let req = req.into_inner();
        if req.node_id == 0 {
            return Err(tonic::Status::invalid_argument(
                "node_id 0 is reserved: give the new member's --node-id",
            ));
        }
        let addr = req.addr.trim().to_string();
        if addr.is_empty() || !addr.contains(':') {
            return Err(tonic::Status::invalid_argument(format!(
                "addr {:?} is not HOST:PORT (the new member's --grpc)",
                req.addr
            )));
        }
        repl.replica()
            .add_member(req.node_id, addr)
            .await
            .map_err(status_of)?;
        Ok(Response::new(Self::members(repl)))
    }

    async fn remove_member(
        &self,
        req: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, tonic::Status> {
        let repl = self.repl()?;
        let id = req.into_inner().node_id;
        let m = repl.metrics();
        // Only the Raft leader's membership is authoritative: a follower that has not
        // yet applied the membership entry would call every node unknown. Elsewhere the
        // request goes on to be refused with the leader's address.
        let leads = m.leader == Some(m.node_id);
        if leads && !m.voters.contains_key(&id) && !m.learners.contains_key(&id) {
            return Err(tonic::Status::not_found(format!(
                "node {id} is not a member (members: {:?})",
                m.voters.keys().chain(m.learners.keys()).collect::<Vec<_>>()
            )));
        }
        repl.replica().remove_member(id).await.map_err(status_of)?;
        Ok(Response::new(Self::members(repl)))
    }
}
