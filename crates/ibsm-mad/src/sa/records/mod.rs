//! The SA records and attributes, one file per family.
//!
//! Every record follows the same shape: a plain `Copy` struct with `SIZE`,
//! `decode(&[u8]) -> Result<Self, SaError>` (at least `SIZE` bytes, more ignored,
//! reserved bits ignored), `encode(&self) -> [u8; SIZE]` (reserved bits zero, narrow
//! fields masked), one `ComponentMask` const per component and `matches`, and the
//! [`crate::sa::SaRecord`] trait. Records that embed an SMP attribute reuse its codec.

mod class_port_info;
mod inform;
mod link;
mod mc_member;
mod multipath;
mod node;
mod notice;
mod path;
mod port_info;
mod service;
mod sm_info;
mod switch;
mod tables;

pub use class_port_info::ClassPortInfo;
pub use inform::{InformInfo, InformInfoRecord};
pub use link::LinkRecord;
pub use mc_member::{JoinState, McMemberRecord};
pub use multipath::MultiPathRecord;
pub use node::NodeRecord;
pub use notice::SaNotice;
pub use path::PathRecord;
pub use port_info::PortInfoRecord;
pub use service::{ServiceName, ServiceRecord};
pub use sm_info::SmInfoRecord;
pub use switch::{LinearForwardingTableRecord, MulticastForwardingTableRecord, SwitchInfoRecord};
pub use tables::{
    GuidInfoRecord, PKeyTableRecord, SlToVlMappingTableRecord, VlArbitrationTableRecord,
};
