//! Code generated from the `.proto` files under `proto/` at the top of the repository.
//!
//! Why a crate of its own: the control API (`ibsm.v1.Control`) is shared by `ibsmd`
//! (server) and `ibsmctl` (client); generating it once keeps
//! both sides on one schema. The build uses protox, so no system `protoc` is needed.

/// `ibsm.v1`: the control API.
pub mod v1 {
    tonic::include_proto!("ibsm.v1");
}

/// `ibsm.demo.v1`: the drills only `ibsmd demo` serves (crate ibsm-demo), apart from
/// the production services so a daemon on a real fabric carries none of them.
pub mod demo {
    /// Version 1 of the demo's drills.
    pub mod v1 {
        tonic::include_proto!("ibsm.demo.v1");
    }
}

/// The encoded `FileDescriptorSet` of the production proto files (`ibsm.v1`), for gRPC
/// server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("ibsm_descriptor");

/// The encoded `FileDescriptorSet` of `ibsm.v1.FaultInjection`, for the reflection of
/// a daemon started with `--fault-injection`.
pub const FAULT_INJECTION_FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("ibsm_fault_injection_descriptor");

/// The encoded `FileDescriptorSet` of the demo's proto file and what it imports, for
/// the demo's reflection.
pub const DEMO_FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("ibsm_demo_descriptor");
