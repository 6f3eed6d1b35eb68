//! The election state machine itself. See the module doc of `election` for the rules.
//!
//! [`Election`] and the state it keeps are defined in `state`; every other file is one
//! `impl Election` block for one responsibility: `driver` (the sans-IO inputs and
//! drains), `requests` (our SMInfo requests and their responses), `peers` (the other
//! SMs, trust and ranking), `route` (addressing), `transitions`, one file per SMState
//! that has behaviour of its own (`discovering`, `standby`, `master`), `control`
//! (received control packets) and `commands` (the operator's).

mod commands;
mod control;
mod discovering;
mod driver;
mod master;
mod peers;
mod requests;
mod route;
mod standby;
mod state;
mod transitions;

pub(crate) use route::requester_port_among;
pub use route::route_for_new_request;
pub use state::Election;
