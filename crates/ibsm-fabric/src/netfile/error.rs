//! The limits ibsim puts on a net file ([`MAX_LINE`], [`MAX_NODE_ID`],
//! [`MAX_DESCRIPTION`]) and [`NetFileError`], the line and reason a file is refused
//! for. A leaf of the net file code: the scanner, the parser and the writer import it.

use crate::topology::TopologyError;

/// Longest line ibsim reads in one piece.
pub const MAX_LINE: usize = 254;
/// Longest node id ibsim keeps.
pub const MAX_NODE_ID: usize = 64;
/// Longest description ibsim keeps (NodeDescription is 64 bytes, NUL-terminated).
pub const MAX_DESCRIPTION: usize = 63;

/// A net file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("net file line {line}: {kind}")]
pub struct NetFileError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub kind: NetFileErrorKind,
}

/// What was wrong with a net file line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetFileErrorKind {
    /// ibsim reads lines of at most [`MAX_LINE`] bytes and would split this one.
    #[error("line is {0} bytes long; ibsim splits lines longer than {MAX_LINE}")]
    LineTooLong(usize),
    /// A construct that needs ibsim's own context.
    #[error("{0} is not supported")]
    Unsupported(&'static str),
    /// Not a node header, port line, assignment, comment or blank line.
    #[error("unrecognized line {0:?}")]
    UnrecognizedLine(String),
    /// A number was expected.
    #[error("bad {what}: {text:?}")]
    BadNumber {
        /// Which value.
        what: &'static str,
        /// The text found.
        text: String,
    },
    /// A number out of its range.
    #[error("{what} {value} out of range ({range})")]
    OutOfRange {
        /// Which value.
        what: &'static str,
        /// The value.
        value: u64,
        /// The allowed range.
        range: &'static str,
    },
    /// A node header without a port count.
    #[error("node header has no port count")]
    MissingPortCount,
    /// ibsim reads a different port count than the one written.
    #[error(
        "ibsim would read {ibsim} ports here, not {ours}; separate the count from the keyword"
    )]
    AmbiguousPortCount {
        /// What the line says.
        ours: u64,
        /// What ibsim's fixed-offset reading gets.
        ibsim: u64,
    },
    /// A node header or port line without a quoted node id.
    #[error("missing quoted node id")]
    MissingNodeId,
    /// A node id ibsim cannot use.
    #[error("bad node id {id:?}: {why}")]
    BadNodeId {
        /// The id.
        id: String,
        /// Why.
        why: &'static str,
    },
    /// A port line that belongs to no node record.
    #[error("port line outside a node record")]
    PortOutsideRecord,
    /// A record ended by a line that is not blank; ibsim consumes that line
    /// as the end of the record and ignores it.
    #[error("node record ends with {0:?}; ibsim would drop that line, put a blank line before it")]
    SwallowedLine(String),
    /// Port 0 or a port beyond the node's count.
    #[error("bad port number {port} (node has {num_ports} ports; port 0 cannot be listed)")]
    BadPortNumber {
        /// The port number.
        port: i64,
        /// NodeInfo.NumPorts.
        num_ports: u8,
    },
    /// The same port listed twice in a record.
    #[error("port {0} listed twice")]
    DuplicatePort(u8),
    /// A remote port number that is not positive.
    #[error("bad remote port {0:?}")]
    BadRemotePort(String),
    /// A `w=`/`s=`/`e=` option ibsim rejects.
    #[error("bad port option {opt}={value}")]
    BadOption {
        /// The option letter.
        opt: char,
        /// Its value.
        value: u64,
    },
    /// A port names a node id that no header defines.
    #[error("port {port} connects to unknown node {remote:?}")]
    UnknownRemote {
        /// The local port.
        port: u8,
        /// The remote id.
        remote: String,
    },
    /// The remote port does not exist.
    #[error(
        "port {port} connects to port {remote_port} of {remote:?}, which has {num_ports} ports"
    )]
    RemotePortOutOfRange {
        /// The local port.
        port: u8,
        /// The remote id.
        remote: String,
        /// The remote port.
        remote_port: u64,
        /// The remote's NumPorts.
        num_ports: u8,
    },
    /// The two ends of a cable disagree.
    #[error("port {port} connects to {remote:?}[{remote_port}], but that port lists {back}")]
    Asymmetric {
        /// The local port.
        port: u8,
        /// The remote id.
        remote: String,
        /// The remote port.
        remote_port: u8,
        /// What the remote port lists instead.
        back: String,
    },
    /// The two ends enable no common width or speed.
    #[error("port {port} and {remote:?}[{remote_port}] share no enabled link {what}")]
    RateMismatch {
        /// The local port.
        port: u8,
        /// The remote id.
        remote: String,
        /// The remote port.
        remote_port: u8,
        /// "width" or "speed".
        what: &'static str,
    },
    /// The topology refused the node or cable (duplicate name or GUID...).
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

pub(super) fn err(line: usize, kind: NetFileErrorKind) -> NetFileError {
    NetFileError { line, kind }
}
