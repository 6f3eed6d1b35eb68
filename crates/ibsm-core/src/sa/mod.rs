//! The Subnet Administrator (IBA chapter 15): the master's agent for management class
//! 0x03 on QP1, answering the queries applications make (PathRecord, MCMemberRecord,
//! ServiceRecord, InformInfo, and the records of the fabric itself).
//!
//! Sans-IO like the rest of the node: a request comes in with its source address and
//! the time, answers and Reports go out through the node's outputs.

mod fabric;

pub use fabric::{make_gid, split_gid, EndPort, SaFabric, DEFAULT_SUBNET_PREFIX};
