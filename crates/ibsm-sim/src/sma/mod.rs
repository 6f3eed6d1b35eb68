//! The subnet management agent of every simulated node: Get/Set of the SM
//! attributes with IBA semantics, and the port state machine.
//!
//! Status values (IBA 13.4.7, bits 4:2 of the MAD status):
//! * 0x0008 method not supported,
//! * 0x000C method/attribute combination not supported (unknown attribute,
//!   Set of a read-only attribute, attribute the node type does not implement),
//! * 0x001C invalid value in the attribute or its modifier (block out of range,
//!   illegal PortState transition, ...). A Set that fails changes nothing.
//!
//! The files: `dispatch` (the entry point: M_Key check, method, attribute), `common`
//! (the status values, the handler result type and the lookups every handler
//! shares), `node` (NodeInfo, NodeDescription, SwitchInfo, LedInfo), `port_info`
//! (PortInfo Get and Set), `tables` (GUIDInfo, P_KeyTable, SLtoVL, VLArbitration,
//! LFT, MFT) and `link` (the port state machine, also driven by the simulator's
//! faults). Each handler file is an `impl Fabric` block over `crate::state`.

mod common;
mod dispatch;
mod link;
mod node;
mod port_info;
mod tables;

pub(crate) use dispatch::SmaAction;
