//! [`SaClientError`]: everything an SA request can end with besides its records.

use ibsm_mad::sa::{SaAttributeId, SaError, SaStatus};
use ibsm_mad::Method;
use ibsm_transport::TransportError;

/// Why an SA request (or the client itself) failed.
#[derive(Debug, thiserror::Error)]
pub enum SaClientError {
    /// The device failed to send or receive.
    #[error("MAD device: {0}")]
    Transport(#[from] TransportError),
    /// A request could not be encoded, or an answer's record could not be decoded.
    #[error("SA codec: {0}")]
    Codec(#[from] SaError),
    /// The SA answered with a non-zero MAD status (no records, invalid component
    /// mask, insufficient components, request denied...).
    #[error("the SA answered {method} {attribute} with status {status}")]
    Status {
        /// The request's method name (Get, GetTable, Set, Delete).
        method: &'static str,
        /// The request's attribute.
        attribute: SaAttributeId,
        /// The MAD status of the answer.
        status: SaStatus,
    },
    /// No answer after every try.
    #[error("no answer from the SA at LID {lid} to {method} {attribute} (TID {tid:#x}) after {tries} tries")]
    Timeout {
        /// The SA's LID.
        lid: u16,
        /// The request's method name.
        method: &'static str,
        /// The request's attribute.
        attribute: SaAttributeId,
        /// Low 32 bits of the TID.
        tid: u32,
        /// Sends (the first and the retries).
        tries: u32,
    },
    /// A multi-segment answer stalled: segments stopped coming after the ACKs.
    #[error("the RMPP transfer of {attribute} (TID {tid:#x}) stalled after segment {last} ({tries} re-ACKs)")]
    RmppStalled {
        /// The request's attribute.
        attribute: SaAttributeId,
        /// Low 32 bits of the TID.
        tid: u32,
        /// Highest in-order segment received.
        last: u32,
        /// ACKs sent again.
        tries: u32,
    },
    /// The SA sent RMPP STOP or ABORT, or a segment that cannot be reassembled.
    #[error("RMPP transfer of {attribute} (TID {tid:#x}) failed: {source}")]
    Rmpp {
        /// The request's attribute.
        attribute: SaAttributeId,
        /// Low 32 bits of the TID.
        tid: u32,
        /// What the reassembler said.
        source: SaError,
    },
    /// A Get, Set or Delete was answered with something other than exactly one record.
    #[error("{method} {attribute} answered {got} records, expected one")]
    NotOneRecord {
        /// The request's method name.
        method: &'static str,
        /// The attribute.
        attribute: SaAttributeId,
        /// Records in the answer.
        got: usize,
    },
    /// A multi-record answer came as one MAD with RMPP left undone: the SA handed
    /// segmentation to its kernel and the transport sent only the first MAD (OpenSM
    /// under ibsim's umad2sim). Ask record by record (Get) instead.
    #[error("the {attribute} table came as one MAD whose RMPP nobody did (the SA's kernel RMPP is missing, as under umad2sim): the rest of the table never left the SA; ask record by record")]
    Truncated {
        /// The attribute.
        attribute: SaAttributeId,
    },
    /// Too many requests in flight ([`crate::ClientConfig::max_outstanding`]).
    #[error("{limit} requests already in flight")]
    TooManyOutstanding {
        /// The limit.
        limit: usize,
    },
    /// The local port could not be read with a 0-hop SubnGet.
    #[error("local port: {0}")]
    LocalPort(String),
    /// The local port knows no master SM (PortInfo.MasterSMLID is 0) and no SA LID
    /// was given.
    #[error("the local port has no master SM (MasterSMLID 0): is an SM running?")]
    NoMaster,
}

impl SaClientError {
    /// The SA status of a [`SaClientError::Status`] error.
    pub fn status(&self) -> Option<SaStatus> {
        match self {
            SaClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when the SA answered ERR_NO_RECORDS.
    pub fn is_no_records(&self) -> bool {
        self.status() == Some(SaStatus::ERR_NO_RECORDS)
    }
}

/// IBA name of a request method, for errors.
pub(crate) fn method_name(m: Method) -> &'static str {
    m.name().unwrap_or("method")
}
