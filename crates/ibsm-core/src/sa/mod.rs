//! The Subnet Administrator (IBA chapter 15): the master's agent for management class
//! 0x03 on QP1, answering the queries applications make (PathRecord, MCMemberRecord,
//! ServiceRecord, InformInfo, and the records of the fabric itself).
//!
//! Sans-IO like the rest of the node: [`SaAgent::handle_mad`] takes a request with its
//! source address ([`ibsm_mad::MadAddress`]), the time, and an [`SaContext`] (the
//! [`SaFabric`] snapshot of the last heavy sweep, the SMs the master knows, whether
//! this SM is master); answers come out of [`SaAgent::poll_transmit`]; RMPP
//! retransmissions run from [`SaAgent::handle_timeout`] once
//! [`SaAgent::poll_timeout`] has passed.
//!
//! Files: `agent` (decode, refuse, dispatch, answer), `transfer` (RMPP sending),
//! `records` (fabric records), `tables` (switch and port table records: SwitchInfo,
//! GUIDInfo, P_Key, SLtoVL, VLArbitration, LFT and MFT), `groups` (multicast groups), `ipoib` (the IPoIB broadcast groups of the
//! partitions), `services`
//! (ServiceRecords and their leases), `inform` (InformInfo subscriptions and Reports),
//! `notices` (notices in their SA form), `replicated` (the tables a successor loads), `path/` (PathRecord queries, in `multipath`
//! the MultiPathRecord queries of SubnAdmGetMulti, and in `params` the numbers of one path), `context` (what a request is answered against and
//! partition visibility), `reader` (SubnAdmGet of fabric records answered from a
//! snapshot alone, ahead of the node's other work), `fabric` (the snapshot and its path table), `config`.

mod agent;
mod config;
mod context;
mod fabric;
mod groups;
mod inform;
mod ipoib;
mod notices;
mod path;
mod reader;
mod records;
mod replicated;
mod services;
mod tables;
mod transfer;

pub use agent::{SaAgent, SaMetrics, SaTransmit};
pub use config::SaConfig;
pub use context::{share_pkey, shared_pkey, Requester, SaContext};
pub use fabric::{make_gid, split_gid, EndPort, PortTables, SaFabric, DEFAULT_SUBNET_PREFIX};
pub use groups::{gid_text, GroupChange, McGroup, McGroups, Member, MLID_FIRST, MLID_LAST};
pub use inform::{Informs, Subscription};
pub use ipoib::{
    default_groups, ipoib_broadcast_mgid, ipoib_groups_of, is_ipoib_broadcast, sync_ipoib_groups,
    IpoibGroup, IPOIB_Q_KEY,
};
pub use notices::{group_notice, sa_notice};
pub use reader::{ReaderAnswer, SaReader};
pub use records::class_port_info;
pub use replicated::{SaTableKind, SaTables};
pub use services::{lease_end, Service, ServiceKey, Services};
