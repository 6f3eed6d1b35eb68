//! ibsm-replica (doc in progress)

pub mod network;
mod replica;
pub mod state;
pub mod store;

pub use network::FaultSwitch;
pub use replica::{
    Listen, PeerArg, RaftTimers, Replica, ReplicaConfig, ReplicaError, ReplicaMetrics, Role,
    WriteReceipt,
};
pub use state::*;

/// Raft node id of an ibsmd instance.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft types of the ibsm replica: [`Command`] in, [`Outcome`] out.
    pub TypeConfig: D = Command, R = Outcome, SnapshotData = std::io::Cursor<Vec<u8>>
);

/// Generated from `proto/ibsm/v1/raft.proto`.
pub mod pb {
    tonic::include_proto!("ibsm.v1");
}
