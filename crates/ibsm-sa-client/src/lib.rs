//! ibsm-sa-client: a Subnet Administration client over any
//! [`ibsm_transport::MadDevice`] (a umad port, also under ibsim's umad2sim, or the
//! embedded simulator).
//!
//! It does what a host's SA users do (IPoIB's joins, rdma_cm's PathRecords, a
//! service's registration) and what `saquery` cannot do under umad2sim: take a whole
//! multi-segment GetTableResp. `ibsmctl sa` and the lab tests are built on it.
//!
//! - [`SaClient::open`] reads the local port with 0-hop SubnGets ([`LocalPort`]: its
//!   GID for joins and services, its MasterSMLID: where the SA is) and sends
//!   requests to the SA's QP1 with the GSI Q_Key ([`SaClient::open_at`] takes a LID).
//! - Requests are matched on the low 32 bits of their TID (a kernel and ibsim rewrite
//!   the high half), sent again after [`ClientConfig::timeout`] up to
//!   [`ClientConfig::retries`] times with the same TID (as IBA retries are), and end
//!   in an [`Answer`] or a typed [`SaClientError`] (the SA's status for refusals:
//!   ERR_NO_RECORDS, ERR_REQ_INVALID, ERR_REQ_INSUFFICIENT_COMPONENTS...).
//! - Multi-segment answers (RMPP, IBA 13.6) are reassembled with
//!   [`ibsm_mad::sa::RmppReassembler`], and the client ACKs as a receiver must: the
//!   SA starts with a window of one segment, so the first segment is ACKed at once
//!   with NewWindowLast = SegmentNumber + [`ClientConfig::rmpp_window`], each
//!   segment that reaches the granted window is ACKed the same way, the last one is
//!   ACKed to end the transfer, and a duplicate or a gap (a window the SA resent, a
//!   lost segment) is answered with the ACK of the last segment received in order.
//!   When segments stop, the last ACK is sent again on the request's timer.
//! - Several requests can be in flight ([`SaClient::submit`], [`SaClient::poll`]):
//!   what a load test needs; [`SaClient::request`] is the blocking one-at-a-time form.
//! - Unsolicited Reports (the Notices of InformInfo subscriptions) are answered with
//!   ReportResp (the Notice echoed, same TID) whenever the client reads its device,
//!   and handed out by [`SaClient::next_report`]; a Report the SA resends (our
//!   ReportResp was lost) is answered again but handed out once.
//! - Typed operations ([`SaClient::get`], [`SaClient::get_table`], [`SaClient::set`],
//!   [`SaClient::delete`]) decode records with `ibsm_mad::sa`'s types; on top of them
//!   [`SaClient::join`] / [`SaClient::leave`] (MCMemberRecord, with an MGID the SA
//!   allocates or a given one), [`SaClient::register_service`] /
//!   [`SaClient::delete_service`] and [`SaClient::subscribe`] /
//!   [`SaClient::unsubscribe`].
//!
//! On a umad port, [`open_umad`] registers a QP1 agent for class 0x03 with only the
//! Report method in its mask: responses reach the agent that sent the request, and
//! Reports are the one request a client takes. Under ibsim a request to QP1 reaches
//! only a port's IsSM client, so a subscriber there must also hold `issmN` open
//! ([`ibsm_umad::open_issm`]) to get its Reports.

mod client;
mod error;
mod local;
mod ops;
mod tid;
mod umad;

pub use client::{
    Answer, Checked, ClientConfig, ClientStats, Report, SaClient, UMAD2SIM_MAD_BYTES,
};
pub use error::SaClientError;
pub use local::{LocalPort, DEFAULT_SUBNET_PREFIX};
pub use ops::{trap_subscription, GroupParams, JoinRequest};
pub use umad::{open_umad, SA_CLIENT_CLASS};
