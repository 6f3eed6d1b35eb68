//! Code generated from the `.proto` files under `proto/` at the top of the repository.
//!
//! Why a crate of its own: the control API (`ibsm.v1.Control`) is shared by `ibsmd`
//! (server) and `ibsmctl` (client), and later the Raft service; generating it once keeps
//! both sides on one schema. The build uses protox, so no system `protoc` is needed.

/// `ibsm.v1`: the control API.
pub mod v1 {
    tonic::include_proto!("ibsm.v1");
}

/// The encoded `FileDescriptorSet` of every proto file, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("ibsm_descriptor");
