//! ibnetdiscover / ibsim net files: [`parse`] and [`write()`].
//!
//! The format is what `ibnetdiscover` prints and what ibsim's `sim_net.c`
//! reads. We follow ibsim's reading of it (checked against ibsim 0.10 as
//! packaged by Debian, plus the NDR token of 0.12) so that a [`Topology`]
//! parsed here has the GUIDs, LIDs, link widths and speeds that ibsim's SMAs
//! will report for the same file:
//!
//! * The quoted name of a node header is its id (what links and `SIM_HOST`
//!   refer to). GUIDs are *not* taken from the name: ibsim allocates them per
//!   node type from a running counter that starts at 0x100000 for CAs,
//!   0x200000 for switches and 0 for routers, set absolutely by
//!   `switchguid=`/`caguid=`/`hcaguids=`/`rtguid=` (`=X`) or relative to the
//!   last absolute value (`+N`). A switch takes one GUID (all its ports
//!   report it); a CA or router with N ports takes N+1: node GUID G, port p
//!   GUID G+p. `(guid)` annotations on port lines are ignored, as ibsim does.
//! * `sysimgguid=` and `vendid=` apply to the next node only; `devid=`,
//!   `width=`, `speed=`, `extspeed=` apply to all later nodes.
//! * Link rates: each port has *enabled* width/speed masks (defaults 4x, SDR)
//!   set by `w=`/`s=`/`e=` options and then by the ibnetdiscover annotation
//!   `lid N <w>x<SPEED>` at the end of a CA or switch port line; the active
//!   rate of a cable is the highest both ends enable.
//! * A description is the quoted text after `#` (or up to ` lid `,
//!   ` base port `...), the node id when missing, cut to 63 bytes.
//!
//! Stricter than ibsim, with a line number and reason instead of silently
//! doing something surprising: unknown lines, a port line outside a record, a
//! record ended by a non-blank line (ibsim would swallow it), a port listed
//! twice, lines ibsim would split (over 254 bytes), a `Ca` port count ibsim
//! would misread, an empty node id (nothing could name the node). `include`,
//! `do`, `module=` and `@alias` need ibsim's file and console context and are
//! rejected as unsupported.

use std::fmt::Write as _;

use crate::topology::{LinkSpeed, LinkWidth, Node, NodeIdx, NodeType, Topology, TopologyError};

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

fn err(line: usize, kind: NetFileErrorKind) -> NetFileError {
    NetFileError { line, kind }
}

// ---------------------------------------------------------------------------
// C-like number reading (strtoul with base 0, atoi), without panics.

/// Skip ASCII whitespace.
fn skip_ws(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_whitespace())
}

/// strtoul(s, _, 0): optional whitespace and '+', then 0x.. hex, 0.. octal or
/// decimal. `None` when no digit follows; saturates on overflow.
fn strtoul(s: &str) -> Option<(u64, &str)> {
    let s = skip_ws(s);
    let s = s.strip_prefix('+').unwrap_or(s);
    let (radix, body) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.starts_with(|c: char| c.is_ascii_hexdigit()) {
            (16, h)
        } else {
            // "0x" with no hex digit: C reads the "0".
            return Some((0, &s[1..]));
        }
    } else if s.starts_with('0') {
        (8, s)
    } else {
        (10, s)
    };
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if end == 0 {
        return None;
    }
    let (digits, rest) = body.split_at(end);
    let v = digits.chars().fold(0u64, |acc, c| {
        acc.saturating_mul(u64::from(radix))
            .saturating_add(u64::from(c.to_digit(radix).unwrap_or(0)))
    });
    Some((v, rest))
}

/// atoi: optional whitespace and sign, decimal digits. `None` without digits.
fn atoi(s: &str) -> Option<(i64, &str)> {
    let s = skip_ws(s);
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let (digits, rest) = s.split_at(end);
    let v = digits.bytes().fold(0i64, |acc, b| {
        acc.saturating_mul(10).saturating_add(i64::from(b - b'0'))
    });
    Some((if neg { -v } else { v }, rest))
}

fn number(line: usize, what: &'static str, s: &str) -> Result<u64, NetFileError> {
    strtoul(s).map(|(v, _)| v).ok_or_else(|| {
        err(
            line,
            NetFileErrorKind::BadNumber {
                what,
                text: s.trim().to_string(),
            },
        )
    })
}

/// The value after the first '=' (or '+', then relative) of an assignment.
fn assignment(line_no: usize, line: &str, what: &'static str) -> Result<(u64, bool), NetFileError> {
    let (pos, relative) = match (line.find('='), line.find('+')) {
        (Some(p), _) => (p, false),
        (None, Some(p)) => (p, true),
        (None, None) => {
            return Err(err(
                line_no,
                NetFileErrorKind::BadNumber {
                    what,
                    text: line.to_string(),
                },
            ))
        }
    };
    let v = number(line_no, what, line.get(pos + 1..).unwrap_or(""))?;
    Ok((v, relative))
}

// ---------------------------------------------------------------------------
// Enabled link rates, as ibsim keeps them per port.

const W_1X: u8 = 1;
const W_4X: u8 = 2;
const W_8X: u8 = 4;
const W_12X: u8 = 8;
const W_2X: u8 = 16;
const S_SDR: u8 = 1;
const S_DDR: u8 = 2;
const S_QDR: u8 = 4;
const E_FDR: u8 = 1;
const E_EDR: u8 = 2;
const E_HDR: u8 = 4;
const E_NDR: u8 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Enabled {
    width: u8,
    speed: u8,
    ext: u8,
    fdr10: bool,
}

impl Enabled {
    /// Apply an ibnetdiscover `lid N <w>x<SPEED>` annotation (starting at
    /// "lid"). Like ibsim, a part that does not parse leaves the port as is.
    fn apply_annotation(&mut self, s: &str) {
        let Some(rest) = s.strip_prefix("lid") else {
            return;
        };
        let Some((_rlid, rest)) = atoi(rest) else {
            return;
        };
        let Some((width, rest)) = atoi(rest) else {
            return;
        };
        let Some(rest) = rest.strip_prefix('x') else {
            return;
        };
        let rest = skip_ws(rest);
        let token: String = rest
            .chars()
            .take_while(|c| !c.is_ascii_whitespace())
            .take(9)
            .collect();
        if token.is_empty() {
            return;
        }
        match width {
            12 => self.width = W_1X | W_4X | W_12X,
            8 => self.width = W_8X,
            4 => self.width = W_1X | W_4X,
            2 => self.width = W_2X,
            1 => self.width = W_1X,
            _ => tracing::debug!(width, "net file: unknown link width ignored, as ibsim does"),
        }
        // ibsim compares the token as a prefix of each name, in this order.
        const ORDER: [&str; 8] = ["SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "FDR10"];
        let all = S_SDR | S_DDR | S_QDR;
        match ORDER
            .iter()
            .position(|name| name.starts_with(token.as_str()))
        {
            Some(0) => self.speed = S_SDR,
            Some(1) => self.speed = S_SDR | S_DDR,
            Some(2) => self.speed = all,
            Some(3) => (self.speed, self.ext, self.fdr10) = (all, E_FDR, true),
            Some(4) => (self.speed, self.ext, self.fdr10) = (all, E_FDR | E_EDR, true),
            Some(5) => (self.speed, self.ext, self.fdr10) = (all, E_FDR | E_EDR | E_HDR, true),
            Some(6) => {
                (self.speed, self.ext, self.fdr10) = (all, E_FDR | E_EDR | E_HDR | E_NDR, true)
            }
            Some(_) => (self.speed, self.fdr10) = (all, true),
            None => tracing::debug!(%token, "net file: unknown link speed ignored, as ibsim does"),
        }
    }

    /// The active width of a cable between ports enabling `self` and `other`.
    fn active_width(self, other: Enabled) -> Option<LinkWidth> {
        let w = self.width & other.width;
        [
            (W_12X, LinkWidth::X12),
            (W_8X, LinkWidth::X8),
            (W_4X, LinkWidth::X4),
            (W_2X, LinkWidth::X2),
            (W_1X, LinkWidth::X1),
        ]
        .into_iter()
        .find(|(bit, _)| w & bit != 0)
        .map(|(_, lw)| lw)
    }

    /// The active speed of a cable between ports enabling `self` and `other`.
    fn active_speed(self, other: Enabled) -> Option<LinkSpeed> {
        let base = self.speed & other.speed;
        let base = if base & S_QDR != 0 {
            LinkSpeed::Qdr
        } else if base & S_DDR != 0 {
            LinkSpeed::Ddr
        } else if base & S_SDR != 0 {
            LinkSpeed::Sdr
        } else {
            return None;
        };
        let ext = self.ext & other.ext;
        Some(if ext & E_NDR != 0 {
            LinkSpeed::Ndr
        } else if ext & E_HDR != 0 {
            LinkSpeed::Hdr
        } else if ext & E_EDR != 0 {
            LinkSpeed::Edr
        } else if ext & E_FDR != 0 {
            LinkSpeed::Fdr
        } else if self.fdr10 && other.fdr10 {
            LinkSpeed::Fdr10
        } else {
            base
        })
    }
}

// ---------------------------------------------------------------------------
// Parser.

#[derive(Debug)]
struct PendingPort {
    line: usize,
    remote: String,
    remote_port: u64,
}

#[derive(Debug)]
struct Record {
    idx: NodeIdx,
    node_type: NodeType,
    num_ports: u8,
    listed: u8,
}

struct Parser {
    topo: Topology,
    /// Current and absolute GUID counters, by NodeType::to_iba() - 1.
    guids: [u64; 3],
    abs_guids: [u64; 3],
    devid: u16,
    vendid: u32,
    sysimgguid: u64,
    defaults: Enabled,
    /// Per node, per port number: enabled rates and the listed cable.
    enabled: Vec<Vec<Enabled>>,
    pending: Vec<Vec<Option<PendingPort>>>,
    record: Option<Record>,
}

fn type_slot(t: NodeType) -> usize {
    match t {
        NodeType::Ca => 0,
        NodeType::Switch => 1,
        NodeType::Router => 2,
    }
}

/// The first `"..."` in `s`: (contents, text after the closing quote).
fn quoted(s: &str) -> Option<(&str, &str)> {
    let start = s.find('"')?;
    let after = s.get(start + 1..)?;
    let end = after.find('"')?;
    Some((after.get(..end)?, after.get(end + 1..)?))
}

fn check_node_id(line: usize, id: &str) -> Result<(), NetFileError> {
    let why = if id.is_empty() {
        Some("empty: no port line could name the node, and ibsim's console cannot either")
    } else if id.contains('#') || id.contains('@') {
        Some("'#' and '@' are reserved")
    } else if id.len() > MAX_NODE_ID {
        Some("longer than 64 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(err(
            line,
            NetFileErrorKind::BadNodeId {
                id: id.to_string(),
                why,
            },
        )),
        None => Ok(()),
    }
}

/// Cut to at most `max` bytes on a char boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

/// ibsim's description rule: after '#', a quoted string, or text up to a
/// known keyword. Returns (description, rest of line to read lid/lmc from).
fn node_desc(after_id: &str) -> (Option<&str>, Option<&str>) {
    let Some(hash) = after_id.find('#') else {
        return (None, Some(after_id));
    };
    let s = skip_ws(after_id.get(hash + 1..).unwrap_or(""));
    if let Some(q) = s.strip_prefix('"') {
        return match q.find('"') {
            Some(e) => (q.get(..e), q.get(e + 1..)),
            None => (Some(q), None),
        };
    }
    for kw in [" enhanced port ", " base port ", " lid ", " lmc "] {
        if let Some(e) = s.find(kw) {
            return (s.get(..e), s.get(e + 1..));
        }
    }
    (Some(s), None)
}

/// strstr(s, key) then strtoul, as ibsim reads "lid "/"lmc ".
fn keyed_number(s: &str, key: &str) -> Option<u64> {
    let at = s.find(key)?;
    Some(strtoul(s.get(at + key.len()..)?).map_or(0, |(v, _)| v))
}

impl Parser {
    fn new() -> Parser {
        Parser {
            topo: Topology::new(),
            guids: [0x10_0000, 0x20_0000, 0],
            abs_guids: [0x10_0000, 0x20_0000, 0],
            devid: 0,
            vendid: 0,
            sysimgguid: 0,
            defaults: Enabled {
                width: W_4X,
                speed: S_SDR,
                ext: 0,
                fdr10: false,
            },
            enabled: Vec::new(),
            pending: Vec::new(),
            record: None,
        }
    }

    fn line(&mut self, no: usize, line: &str) -> Result<(), NetFileError> {
        if line.len() > MAX_LINE {
            return Err(err(no, NetFileErrorKind::LineTooLong(line.len())));
        }
        if self.record.is_some() {
            if line.starts_with('#') {
                return Ok(());
            }
            if line.starts_with('@') {
                return Err(err(no, NetFileErrorKind::Unsupported("an @alias port")));
            }
            if line.starts_with('[') {
                return self.port_line(no, line);
            }
            self.record = None;
            if line.trim().is_empty() {
                return Ok(());
            }
            return Err(err(no, NetFileErrorKind::SwallowedLine(line.to_string())));
        }
        let starts = |p: &str| line.starts_with(p);
        if starts("Switch") {
            self.header(no, line, NodeType::Switch, "Switch".len(), 6)
        } else if starts("Hca") {
            self.header(no, line, NodeType::Ca, "Hca".len(), 3)
        } else if starts("Ca") {
            self.header(no, line, NodeType::Ca, "Ca".len(), 3)
        } else if starts("Rt") {
            self.header(no, line, NodeType::Router, "Rt".len(), 3)
        } else if starts("switchguid") {
            self.guid_base(no, line, NodeType::Switch)
        } else if starts("hcaguids") || starts("caguid") {
            self.guid_base(no, line, NodeType::Ca)
        } else if starts("rtguid") {
            self.guid_base(no, line, NodeType::Router)
        } else if starts("vendid") {
            let (v, _) = assignment(no, line, "vendor id")?;
            self.vendid = u32::try_from(v)
                .ok()
                .filter(|v| *v <= 0xff_ffff)
                .ok_or_else(|| err(no, range("vendor id", v, "0..=0xffffff")))?;
            Ok(())
        } else if starts("devid") {
            let (v, _) = assignment(no, line, "device id")?;
            self.devid =
                u16::try_from(v).map_err(|_| err(no, range("device id", v, "0..=0xffff")))?;
            Ok(())
        } else if starts("sysimgguid") {
            self.sysimgguid = assignment(no, line, "system image GUID")?.0;
            Ok(())
        } else if starts("width") {
            let (v, _) = assignment(no, line, "width")?;
            self.defaults.width = u8::try_from(v)
                .ok()
                .filter(|v| (1..=31).contains(v))
                .ok_or_else(|| err(no, range("enabled width", v, "1..=31")))?;
            Ok(())
        } else if starts("speed") {
            let (v, _) = assignment(no, line, "speed")?;
            self.defaults.speed = u8::try_from(v)
                .ok()
                .filter(|v| (1..=7).contains(v))
                .ok_or_else(|| err(no, range("enabled speed", v, "1..=7")))?;
            Ok(())
        } else if starts("extspeed") {
            let (v, _) = assignment(no, line, "extended speed")?;
            self.defaults.ext = u8::try_from(v)
                .ok()
                .filter(|v| *v <= 15)
                .ok_or_else(|| err(no, range("enabled extended speed", v, "0..=15")))?;
            Ok(())
        } else if starts("module") {
            Err(err(
                no,
                NetFileErrorKind::Unsupported("module= (node id prefix)"),
            ))
        } else if starts("include") {
            Err(err(no, NetFileErrorKind::Unsupported("include")))
        } else if starts("pdebug") {
            Ok(())
        } else if starts("do") {
            Err(err(
                no,
                NetFileErrorKind::Unsupported("do <console command>"),
            ))
        } else if line.starts_with('[') || line.starts_with('@') {
            Err(err(no, NetFileErrorKind::PortOutsideRecord))
        } else if line.trim().is_empty() || line.starts_with('#') {
            Ok(())
        } else {
            Err(err(
                no,
                NetFileErrorKind::UnrecognizedLine(line.to_string()),
            ))
        }
    }

    fn guid_base(&mut self, no: usize, line: &str, t: NodeType) -> Result<(), NetFileError> {
        let (v, relative) = assignment(no, line, "GUID")?;
        let slot = type_slot(t);
        let (Some(cur), Some(abs)) = (self.guids.get_mut(slot), self.abs_guids.get_mut(slot))
        else {
            return Ok(());
        };
        if relative {
            *cur = abs.wrapping_add(v);
        } else {
            *abs = v;
            *cur = v;
        }
        Ok(())
    }

    fn header(
        &mut self,
        no: usize,
        line: &str,
        t: NodeType,
        kw_len: usize,
        ibsim_offset: usize,
    ) -> Result<(), NetFileError> {
        // Port count: ibsim skips non-digits from a fixed offset.
        let count_at = |from: usize| -> Option<(u64, usize)> {
            let s = line.get(from..)?;
            let skip = s.find(|c: char| c.is_ascii_digit())?;
            if s.get(..skip)?.contains('"') {
                return None;
            }
            strtoul(s.get(skip..)?).map(|(v, _)| (v, skip))
        };
        let (ours, _) =
            count_at(kw_len).ok_or_else(|| err(no, NetFileErrorKind::MissingPortCount))?;
        let ibsim = count_at(ibsim_offset).map_or(0, |(v, _)| v);
        if ibsim != ours {
            return Err(err(
                no,
                NetFileErrorKind::AmbiguousPortCount { ours, ibsim },
            ));
        }
        let num_ports = u8::try_from(ours)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(no, range("port count", ours, "1..=255")))?;
        let (id, after_id) =
            quoted(line).ok_or_else(|| err(no, NetFileErrorKind::MissingNodeId))?;
        check_node_id(no, id)?;
        let (desc, rest) = node_desc(after_id);
        let desc = truncate(
            desc.filter(|d| !d.is_empty()).unwrap_or(id),
            MAX_DESCRIPTION,
        );

        let slot = type_slot(t);
        let guid = self.guids.get(slot).copied().unwrap_or(0);
        let mut node = Node::new(t, guid, num_ports, desc);
        node.name = id.to_string();
        node.vendor_id = self.vendid;
        node.device_id = self.devid;
        if self.sysimgguid != 0 {
            node.system_image_guid = self.sysimgguid;
        }
        if t == NodeType::Switch {
            if let (Some(rest), Some(p0)) = (rest, node.ports.first_mut()) {
                let lid = keyed_number(rest, "lid ").unwrap_or(0);
                let lmc = keyed_number(rest, "lmc ").unwrap_or(0);
                p0.lid =
                    u16::try_from(lid).map_err(|_| err(no, range("LID", lid, "0..=0xffff")))?;
                p0.lmc = u8::try_from(lmc)
                    .ok()
                    .filter(|l| *l <= 7)
                    .ok_or_else(|| err(no, range("LMC", lmc, "0..=7")))?;
            }
        }
        let idx = self.topo.add_node(node).map_err(|e| err(no, e.into()))?;
        if let Some(g) = self.guids.get_mut(slot) {
            *g = g.wrapping_add(if t == NodeType::Switch {
                1
            } else {
                u64::from(num_ports) + 1
            });
        }
        self.vendid = 0;
        self.sysimgguid = 0;
        let slots = usize::from(num_ports) + 1;
        self.enabled.push(vec![self.defaults; slots]);
        self.pending.push((0..slots).map(|_| None).collect());
        self.record = Some(Record {
            idx,
            node_type: t,
            num_ports,
            listed: 0,
        });
        Ok(())
    }

    fn port_line(&mut self, no: usize, line: &str) -> Result<(), NetFileError> {
        let Some(rec) = self.record.as_mut() else {
            return Err(err(no, NetFileErrorKind::PortOutsideRecord));
        };
        let (idx, t, num_ports) = (rec.idx, rec.node_type, rec.num_ports);
        rec.listed = rec.listed.saturating_add(1);
        if rec.listed >= num_ports {
            // ibsim reads at most NumPorts port lines per record.
            self.record = None;
        }
        let after_bracket = line.get(1..).unwrap_or("");
        let port = atoi(after_bracket).map_or(0, |(v, _)| v);
        let port = u8::try_from(port)
            .ok()
            .filter(|p| *p >= 1 && *p <= num_ports)
            .ok_or_else(|| err(no, NetFileErrorKind::BadPortNumber { port, num_ports }))?;
        let (remote, rest) =
            quoted(line).ok_or_else(|| err(no, NetFileErrorKind::MissingNodeId))?;
        if remote.contains('@') {
            return Err(err(no, NetFileErrorKind::Unsupported("an @alias remote")));
        }
        let remote_port = match rest.strip_prefix('[') {
            Some(rp) => match atoi(rp) {
                Some((v, _)) if v > 0 => v.unsigned_abs(),
                _ => {
                    return Err(err(
                        no,
                        NetFileErrorKind::BadRemotePort(rp.chars().take(8).collect()),
                    ))
                }
            },
            None => 1,
        };
        let slot = self
            .pending
            .get_mut(idx.as_usize())
            .and_then(|v| v.get_mut(usize::from(port)));
        match slot {
            Some(Some(_)) => return Err(err(no, NetFileErrorKind::DuplicatePort(port))),
            Some(s) => {
                *s = Some(PendingPort {
                    line: no,
                    remote: remote.to_string(),
                    remote_port,
                })
            }
            None => {}
        }
        let mut en = self
            .enabled
            .get(idx.as_usize())
            .and_then(|v| v.get(usize::from(port)))
            .copied()
            .unwrap_or(self.defaults);
        // Options: every '=' after the first character past the remote id,
        // named by the nearest letter before it (ibsim scans comments too).
        let rest_off = line.len() - rest.len();
        let bytes = line.as_bytes();
        for (i, _) in rest.match_indices('=').filter(|(i, _)| *i >= 1) {
            let eq = rest_off + i;
            let opt = bytes
                .get(..eq)
                .and_then(|b| b.iter().rev().find(|c| c.is_ascii_alphabetic()))
                .map(|c| char::from(*c));
            let Some(opt @ ('w' | 's' | 'e')) = opt else {
                continue;
            };
            let val_text = line.get(eq + 1..).unwrap_or("");
            let v = strtoul(val_text).map(|(v, _)| v).ok_or_else(|| {
                err(
                    no,
                    NetFileErrorKind::BadNumber {
                        what: "port option value",
                        text: val_text.chars().take(8).collect(),
                    },
                )
            })?;
            let bad = || err(no, NetFileErrorKind::BadOption { opt, value: v });
            match opt {
                'w' => {
                    en.width = u8::try_from(v)
                        .ok()
                        .filter(|v| (1..=31).contains(v))
                        .ok_or_else(bad)?
                }
                's' => {
                    en.speed = match v {
                        0 => S_QDR,
                        1..=7 => u8::try_from(v).map_err(|_| bad())?,
                        _ => return Err(bad()),
                    }
                }
                _ => en.ext = u8::try_from(v).ok().filter(|v| *v <= 15).ok_or_else(bad)?,
            }
        }
        // ibnetdiscover annotations: "lid" with no quote after it.
        if t != NodeType::Router {
            let tail_from = rest.rfind('"').map_or(0, |q| q + 1);
            if let Some(at) = rest.get(tail_from..).and_then(|t| t.find("lid")) {
                if t == NodeType::Ca {
                    let lid = keyed_number(rest, "lid ").unwrap_or(0);
                    let lmc = keyed_number(rest, "lmc ").unwrap_or(0);
                    let lid =
                        u16::try_from(lid).map_err(|_| err(no, range("LID", lid, "0..=0xffff")))?;
                    let lmc = u8::try_from(lmc)
                        .ok()
                        .filter(|l| *l <= 7)
                        .ok_or_else(|| err(no, range("LMC", lmc, "0..=7")))?;
                    self.topo
                        .set_port_lid(idx, port, lid, lmc)
                        .map_err(|e| err(no, e.into()))?;
                }
                if let Some(ann) = rest.get(tail_from + at..) {
                    en.apply_annotation(ann);
                }
            }
        }
        if let Some(e) = self
            .enabled
            .get_mut(idx.as_usize())
            .and_then(|v| v.get_mut(usize::from(port)))
        {
            *e = en;
        }
        Ok(())
    }

    /// Cable every listed port, checking both ends agree (ibsim's connect_ports).
    fn link(mut self) -> Result<Topology, NetFileError> {
        for a in 0..self.pending.len() {
            let a_idx = NodeIdx(u32::try_from(a).map_err(|_| err(0, TopologyError::Full.into()))?);
            let nports = self.pending.get(a).map_or(0, Vec::len);
            for pa in 1..nports {
                let Some(Some(p)) = self.pending.get(a).and_then(|v| v.get(pa)) else {
                    continue;
                };
                let pa = u8::try_from(pa).unwrap_or(u8::MAX);
                if self.topo.neighbor(a_idx, pa).is_some() {
                    continue;
                }
                let no = p.line;
                let b = self.topo.find_by_name(&p.remote).ok_or_else(|| {
                    err(
                        no,
                        NetFileErrorKind::UnknownRemote {
                            port: pa,
                            remote: p.remote.clone(),
                        },
                    )
                })?;
                let b_ports = self.topo.node(b).map_or(0, |n| n.num_ports());
                let pb = u8::try_from(p.remote_port)
                    .ok()
                    .filter(|rp| *rp <= b_ports)
                    .ok_or_else(|| {
                        err(
                            no,
                            NetFileErrorKind::RemotePortOutOfRange {
                                port: pa,
                                remote: p.remote.clone(),
                                remote_port: p.remote_port,
                                num_ports: b_ports,
                            },
                        )
                    })?;
                let a_name = self.topo.node(a_idx).map_or("", |n| n.name.as_str());
                let back = self
                    .pending
                    .get(b.as_usize())
                    .and_then(|v| v.get(usize::from(pb)))
                    .and_then(Option::as_ref);
                let agrees =
                    back.is_some_and(|q| q.remote == a_name && q.remote_port == u64::from(pa));
                if !agrees {
                    let back = back.map_or_else(
                        || "nothing".to_string(),
                        |q| format!("{:?}[{}]", q.remote, q.remote_port),
                    );
                    return Err(err(
                        no,
                        NetFileErrorKind::Asymmetric {
                            port: pa,
                            remote: p.remote.clone(),
                            remote_port: pb,
                            back,
                        },
                    ));
                }
                let en = |n: NodeIdx, port: u8| {
                    self.enabled
                        .get(n.as_usize())
                        .and_then(|v| v.get(usize::from(port)))
                        .copied()
                };
                let (Some(ea), Some(eb)) = (en(a_idx, pa), en(b, pb)) else {
                    continue;
                };
                let mismatch = |what| {
                    err(
                        no,
                        NetFileErrorKind::RateMismatch {
                            port: pa,
                            remote: p.remote.clone(),
                            remote_port: pb,
                            what,
                        },
                    )
                };
                let width = ea.active_width(eb).ok_or_else(|| mismatch("width"))?;
                let speed = ea.active_speed(eb).ok_or_else(|| mismatch("speed"))?;
                self.topo
                    .connect(a_idx, pa, b, pb)
                    .map_err(|e| err(no, e.into()))?;
                self.topo
                    .set_link_rate(a_idx, pa, width, speed)
                    .map_err(|e| err(no, e.into()))?;
            }
        }
        Ok(self.topo)
    }
}

fn range(what: &'static str, value: u64, range: &'static str) -> NetFileErrorKind {
    NetFileErrorKind::OutOfRange { what, value, range }
}

/// Parse a net file (ibnetdiscover output or an ibsim topology).
pub fn parse(text: &str) -> Result<Topology, NetFileError> {
    let mut p = Parser::new();
    for (i, line) in text.lines().enumerate() {
        p.line(i + 1, line)?;
    }
    let topo = p.link()?;
    tracing::debug!(nodes = topo.len(), "parsed net file");
    Ok(topo)
}

// ---------------------------------------------------------------------------
// Writer.

/// A description safe inside `"..."` on a port line: no quotes, no '=' (ibsim
/// scans port lines for `w=`/`s=`/`e=` options), no line breaks.
fn safe_desc(s: &str) -> String {
    truncate(s, MAX_DESCRIPTION)
        .chars()
        .map(|c| match c {
            '"' => '\'',
            '=' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

/// A description safe inside `"..."` on a node header: no quotes, no line breaks,
/// replaced as [`safe_desc`] replaces them, so the header and the port lines that
/// name the node say the same after a parse -> write round trip.
fn header_desc(s: &str) -> String {
    truncate(s, MAX_DESCRIPTION)
        .chars()
        .map(|c| match c {
            '"' => '\'',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

fn valid_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NODE_ID && !s.contains(['"', '#', '@', '\n', '\r'])
}

/// Node ids as written: the node's name when ibsim can use it, else
/// `S-`/`H-`/`R-` and the GUID as ibnetdiscover prints them.
fn file_ids(topo: &Topology) -> Vec<String> {
    topo.nodes()
        .iter()
        .map(|n| {
            if valid_id(&n.name) {
                n.name.clone()
            } else {
                let mut unnamed = n.clone();
                unnamed.name.clear();
                unnamed.net_name()
            }
        })
        .collect()
}

fn rate(port: &crate::topology::Port) -> String {
    format!("{}x{}", port.link_width.lanes(), port.link_speed.name())
}

/// ibsim port options giving exactly this active rate (used for routers,
/// whose annotations ibsim ignores).
fn rate_options(port: &crate::topology::Port) -> String {
    let speed = match port.link_speed {
        LinkSpeed::Sdr => S_SDR,
        LinkSpeed::Ddr => S_DDR,
        _ => S_QDR,
    };
    let ext = port.link_speed.speed_ext_active();
    format!("w={} s={} e={}", port.link_width.to_iba(), speed, ext)
}

/// Write a topology as a net file that both ibsim and [`parse`] read back to
/// the same GUIDs, cables, LIDs and link rates.
///
/// Every node is preceded by `vendid=`, `devid=`, `sysimgguid=` and an
/// absolute `switchguid=`/`caguid=`/`rtguid=`, so ibsim's GUID counters give
/// each node its own GUID. CA and router port GUIDs are always written back
/// as node GUID + port (ibsim cannot express anything else). Descriptions are
/// cut to 63 bytes and lose `"` (becomes `'`) and, on port lines, `=`.
pub fn write(topo: &Topology) -> String {
    let ids = file_ids(topo);
    let id = |n: NodeIdx| ids.get(n.as_usize()).map_or("", String::as_str);
    let mut out = String::with_capacity(topo.len() * 160);
    let c = topo.counts();
    let _ = writeln!(
        out,
        "# ibsm-fabric net file: {} nodes, {} switches, {} CAs, {} links",
        c.nodes, c.switches, c.hcas, c.links
    );
    for (idx, node) in topo.iter() {
        out.push('\n');
        let _ = writeln!(out, "vendid={:#x}", node.vendor_id);
        let _ = writeln!(out, "devid={:#x}", node.device_id);
        let _ = writeln!(out, "sysimgguid={:#x}", node.system_image_guid);
        let (guid_kw, header) = match node.node_type {
            NodeType::Switch => ("switchguid", "Switch\t"),
            NodeType::Ca => ("caguid", "Hca\t"),
            NodeType::Router => ("rtguid", "Rt\t"),
        };
        let _ = writeln!(out, "{guid_kw}={:#x}", node.node_guid);
        let desc = header_desc(&node.description);
        let _ = write!(
            out,
            "{header}{} \"{}\"\t\t# \"{}\"",
            node.num_ports(),
            id(idx),
            desc
        );
        if node.is_switch() {
            let (lid, lmc) = node.ports.first().map_or((0, 0), |p| (p.lid, p.lmc));
            let _ = write!(out, " base port 0 lid {lid} lmc {lmc}");
        }
        out.push('\n');
        for (p, port) in node.physical_ports() {
            let Some((r, rp)) = port.remote else {
                continue;
            };
            let Some(rnode) = topo.node(r) else {
                continue;
            };
            let rlid = match rnode.node_type {
                NodeType::Switch => rnode.ports.first().map_or(0, |p0| p0.lid),
                _ => rnode.port(rp).map_or(0, |x| x.lid),
            };
            let rdesc = safe_desc(&rnode.description);
            match node.node_type {
                NodeType::Switch => {
                    let _ = writeln!(
                        out,
                        "[{p}]\t\"{}\"[{rp}]\t\t# \"{rdesc}\" lid {rlid} {}",
                        id(r),
                        rate(port)
                    );
                }
                NodeType::Ca => {
                    let _ = writeln!(
                        out,
                        "[{p}]({:x}) \t\"{}\"[{rp}]\t\t# lid {} lmc {} \"{rdesc}\" lid {rlid} {}",
                        port.port_guid,
                        id(r),
                        port.lid,
                        port.lmc,
                        rate(port)
                    );
                }
                NodeType::Router => {
                    let _ = writeln!(
                        out,
                        "[{p}]({:x}) \t\"{}\"[{rp}]\t{}\t# \"{rdesc}\" {}",
                        port.port_guid,
                        id(r),
                        rate_options(port),
                        rate(port)
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;
    use proptest::prelude::*;

    const EXAMPLE: &str = "# like ibsim's net-examples/net
#
Switch\t8 \"Switch1\"
[1]\t\"Hca1\"[1]
[2]\t\"Hca2\"[2]
[3]\t\"Switch2\"[3]
[4]\t\"Switch2\"[4]

Switch 8 \"Switch2\"
[3]\t\"Switch1\"[3]
# a comment inside a record
[4]\t\"Switch1\"[4]

Hca\t2 \"Hca1\"
[1]\t\"Switch1\"[1]

Hca\t2 \"Hca2\"
[2]\t\"Switch1\"[2]
";

    #[test]
    fn guids_follow_ibsims_allocation() {
        let t = parse(EXAMPLE).unwrap();
        let sw1 = t.find_by_name("Switch1").unwrap();
        let sw2 = t.find_by_name("Switch2").unwrap();
        let h1 = t.find_by_name("Hca1").unwrap();
        let h2 = t.find_by_name("Hca2").unwrap();
        let g = |i: NodeIdx| t.node(i).unwrap().node_guid;
        assert_eq!((g(sw1), g(sw2)), (0x200000, 0x200001));
        // A 2-port CA reserves 3 GUIDs: node, port 1, port 2.
        assert_eq!((g(h1), g(h2)), (0x100000, 0x100003));
        assert_eq!(t.find_by_port_guid(0x100005), Some((h2, 2)));
        assert_eq!(t.find_by_port_guid(0x200001), Some((sw2, 0)));
        assert_eq!(t.neighbor(sw1, 2), Some((h2, 2)));
        assert_eq!(t.neighbor(sw2, 4), Some((sw1, 4)));
        assert_eq!(t.node(h1).unwrap().description, "Hca1");
        assert_eq!(t.node(sw1).unwrap().system_image_guid, 0x200000);
        let c = t.counts();
        assert_eq!(
            (c.nodes, c.switches, c.hcas, c.links, c.ports),
            (4, 2, 2, 4, 8)
        );
        let p = t.node(sw1).unwrap().port(1).unwrap();
        assert_eq!(
            (p.link_width, p.link_speed),
            (LinkWidth::X4, LinkSpeed::Sdr)
        );
    }

    /// What ibnetdiscover prints, with rates and LIDs; the expected values
    /// were checked against ibsim 0.10 + ibnetdiscover on this machine.
    const ANNOTATED: &str = "vendid=0x2c9
devid=0xc738
sysimgguid=0x8f104004125af
switchguid=0x8f104004125af(8f104004125af)
Switch\t8 \"S-0008f104004125af\"\t\t# \"ISR9024 Voltaire\" base port 0 lid 7 lmc 1
[1]\t\"H-0002c90200000001\"[1](2c90200000002) \t\t# \"a HCA-1\" lid 3 4xQDR
[2]\t\"H-0002c90200000010\"[1](2c90200000011) \t\t# \"b\" lid 9 4xFDR
[3]\t\"c\"[1]\t\t# \"x\" lid 3 12xEDR
[4]\t\"d\"[1]\t\t# \"x\" lid 3 4xFDR10
[5]\t\"e\"[1] w=3 s=7 # no annotation
[6]\t\"r\"[2]

vendid=0x2c9
devid=0x6282
sysimgguid=0x77
caguid=0x2c90200000001
Ca\t1 \"H-0002c90200000001\"\t\t# \"a HCA-1\"
[1](2c90200000002) \t\"S-0008f104004125af\"[1]\t\t# lid 3 lmc 0 \"ISR9024 Voltaire\" lid 7 4xQDR

caguid=0x2c90200000010
Ca\t1 \"H-0002c90200000010\"\t\t# \"b\"
[1](2c90200000011) \t\"S-0008f104004125af\"[2]\t\t# lid 9 lmc 2 \"ISR9024 Voltaire\" lid 7 4xFDR

Hca 1 \"c\"
[1] \"S-0008f104004125af\"[3] # lid 10 lmc 0 \"sw\" lid 7 12xEDR

Hca 1 \"d\"
[1] \"S-0008f104004125af\"[4] # lid 11 lmc 0 \"sw\" lid 7 4xFDR10

Hca 1 \"e\"
[1] \"S-0008f104004125af\"[5] # lid 12 lmc 0 \"sw\" lid 7 1xQDR

rtguid=0x500
Rt 2 \"r\"
[2] \"S-0008f104004125af\"[6]
";

    #[test]
    fn annotations_set_lids_rates_and_ids() {
        let t = parse(ANNOTATED).unwrap();
        let sw = t.find_by_guid(0x8f104004125af).unwrap();
        let swn = t.node(sw).unwrap();
        assert_eq!(swn.description, "ISR9024 Voltaire");
        assert_eq!((swn.vendor_id, swn.device_id), (0x2c9, 0xc738));
        assert_eq!((swn.ports[0].lid, swn.ports[0].lmc), (7, 1));
        let rate = |p: u8| {
            let port = swn.port(p).unwrap();
            (port.link_width, port.link_speed)
        };
        assert_eq!(rate(1), (LinkWidth::X4, LinkSpeed::Qdr));
        assert_eq!(rate(2), (LinkWidth::X4, LinkSpeed::Fdr));
        assert_eq!(rate(3), (LinkWidth::X12, LinkSpeed::Edr));
        assert_eq!(rate(4), (LinkWidth::X4, LinkSpeed::Fdr10));
        // w=3 (1x|4x) against an annotated 1x port: 1x; s=7 vs QDR: QDR.
        assert_eq!(rate(5), (LinkWidth::X1, LinkSpeed::Qdr));
        // Routers ignore annotations: ibsim defaults, 4x SDR.
        assert_eq!(rate(6), (LinkWidth::X4, LinkSpeed::Sdr));

        let a = t.find_by_guid(0x2c90200000001).unwrap();
        let an = t.node(a).unwrap();
        assert_eq!(
            (an.vendor_id, an.device_id, an.system_image_guid),
            (0x2c9, 0x6282, 0x77)
        );
        assert_eq!(an.ports[1].port_guid, 0x2c90200000002);
        assert_eq!(an.ports[1].lid, 3);
        let b = t.find_by_guid(0x2c90200000010).unwrap();
        let bn = t.node(b).unwrap();
        // vendid and sysimgguid hold for one node; devid sticks.
        assert_eq!((bn.vendor_id, bn.device_id), (0, 0x6282));
        assert_eq!(bn.system_image_guid, bn.node_guid);
        assert_eq!((bn.ports[1].lid, bn.ports[1].lmc), (9, 2));
        // "c" continues caguid's counter after "b" (1 port: 2 GUIDs).
        let c = t.find_by_name("c").unwrap();
        assert_eq!(t.node(c).unwrap().node_guid, 0x2c90200000012);
        assert_eq!(t.node(c).unwrap().ports[1].lid, 10);
        let r = t.find_by_name("r").unwrap();
        assert_eq!(t.node(r).unwrap().node_type, NodeType::Router);
        assert_eq!(t.node(r).unwrap().node_guid, 0x500);
        assert_eq!(t.find_by_port_guid(0x502), Some((r, 2)));
    }

    #[test]
    fn relative_guid_and_defaults() {
        let text = "switchguid=0x1000\ncaguid=0x5000\ncaguid+0x10\nwidth=8\nspeed=2\n\
                    Switch 2 \"s\"\n[1] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"\n";
        let t = parse(text).unwrap();
        assert_eq!(
            t.node(t.find_by_name("h").unwrap()).unwrap().node_guid,
            0x5010
        );
        let s = t.node(t.find_by_name("s").unwrap()).unwrap();
        assert_eq!(s.node_guid, 0x1000);
        assert_eq!(
            (s.ports[1].link_width, s.ports[1].link_speed),
            // width= is an enabled mask: 8 is the 12x bit.
            (LinkWidth::X12, LinkSpeed::Ddr)
        );
    }

    fn error_of(text: &str) -> (usize, NetFileErrorKind) {
        let e = parse(text).unwrap_err();
        (e.line, e.kind)
    }

    #[test]
    fn errors_name_the_line_and_reason() {
        use NetFileErrorKind as K;
        type Check = fn(&K) -> bool;
        let cases: Vec<(&str, usize, Check)> = vec![
            ("Switch 8 \"a\"\n[1] \"b\"[1]\n\n", 2, |k| {
                matches!(k, K::UnknownRemote { port: 1, .. })
            }),
            ("Switch \"a\"\n", 1, |k| matches!(k, K::MissingPortCount)),
            ("Switch 0 \"a\"\n", 1, |k| matches!(k, K::OutOfRange { .. })),
            ("Switch 300 \"a\"\n", 1, |k| {
                matches!(k, K::OutOfRange { .. })
            }),
            ("Switch 8\n", 1, |k| matches!(k, K::MissingNodeId)),
            ("Switch 8 \"a#b\"\n", 1, |k| {
                matches!(k, K::BadNodeId { .. })
            }),
            ("\n\nSwitch 8 \"a\"\n[9] \"b\"[1]\n", 4, |k| {
                matches!(k, K::BadPortNumber { port: 9, .. })
            }),
            ("Switch 8 \"a\"\n[0] \"b\"[1]\n", 2, |k| {
                matches!(k, K::BadPortNumber { port: 0, .. })
            }),
            ("Switch 8 \"a\"\n[1] \"a\"[2]\n[1] \"a\"[3]\n", 3, |k| {
                matches!(k, K::DuplicatePort(1))
            }),
            ("Switch 8 \"a\"\n[1] b[1]\n", 2, |k| {
                matches!(k, K::MissingNodeId)
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[0]\n", 2, |k| {
                matches!(k, K::BadRemotePort(_))
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[1]\nHca 1 \"b\"\n", 3, |k| {
                matches!(k, K::SwallowedLine(_))
            }),
            ("Hca 1 \"b\"\n[1] \"a\"[1]\n[1] \"a\"[1]\n", 3, |k| {
                matches!(k, K::PortOutsideRecord)
            }),
            ("[1] \"a\"[1]\n", 1, |k| matches!(k, K::PortOutsideRecord)),
            ("Swich 8 \"a\"\n", 1, |k| {
                matches!(k, K::UnrecognizedLine(_))
            }),
            ("include \"x\"\n", 1, |k| matches!(k, K::Unsupported(_))),
            ("do Dump\n", 1, |k| matches!(k, K::Unsupported(_))),
            ("Switch 8 \"a\"\n@1 \"x\"\n", 2, |k| {
                matches!(k, K::Unsupported(_))
            }),
            ("devid=zz\n", 1, |k| matches!(k, K::BadNumber { .. })),
            ("devid=0x10000\n", 1, |k| matches!(k, K::OutOfRange { .. })),
            ("switchguid\n", 1, |k| matches!(k, K::BadNumber { .. })),
            ("Ca12 \"a\"\n", 1, |k| {
                matches!(k, K::AmbiguousPortCount { ours: 12, ibsim: 2 })
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[1] w=0\n", 2, |k| {
                matches!(k, K::BadOption { opt: 'w', value: 0 })
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[1] s=9\n", 2, |k| {
                matches!(k, K::BadOption { opt: 's', value: 9 })
            }),
            ("Switch 8 \"a\"\n[1] \"a\"[1]\n", 2, |k| {
                matches!(k, K::Topology(TopologyError::SelfLink { .. }))
            }),
            ("Switch 8 \"a\"\n\nSwitch 8 \"a\"\n", 3, |k| {
                matches!(k, K::Topology(TopologyError::DuplicateName { .. }))
            }),
            (
                "switchguid=5\nSwitch 8 \"a\"\n\nswitchguid=5\nSwitch 8 \"b\"\n",
                5,
                |k| {
                    matches!(
                        k,
                        K::Topology(TopologyError::DuplicateNodeGuid { guid: 5, .. })
                    )
                },
            ),
            (
                "Switch 8 \"a\"\n[1] \"b\"[1]\n\nHca 2 \"b\"\n[1] \"a\"[2]\n",
                2,
                |k| {
                    matches!(
                        k,
                        K::Asymmetric {
                            port: 1,
                            remote_port: 1,
                            ..
                        }
                    )
                },
            ),
            (
                "Switch 8 \"a\"\n[1] \"b\"[2]\n\nHca 1 \"b\"\n[1] \"a\"[1]\n",
                2,
                |k| matches!(k, K::RemotePortOutOfRange { remote_port: 2, .. }),
            ),
            (
                "Switch 8 \"a\"\n[1] \"b\"[1] w=1\n\nHca 1 \"b\"\n[1] \"a\"[1]\n",
                2,
                |k| matches!(k, K::RateMismatch { what: "width", .. }),
            ),
        ];
        for (text, line, check) in cases {
            let (got_line, kind) = error_of(text);
            assert!(check(&kind), "{text:?}: unexpected {kind:?}");
            assert_eq!(got_line, line, "{text:?}: {kind}");
        }
        let long = format!("# {}\n", "x".repeat(300));
        assert_eq!(error_of(&long), (1, NetFileErrorKind::LineTooLong(302)));
        // The message carries line and reason.
        let msg = parse("\nSwitch 8 \"a\"\n[1] \"zz\"[1]\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("line 3") && msg.contains("\"zz\""), "{msg}");
    }

    /// Found by the netfile fuzz target: a description with carriage returns
    /// (`Switch 5 "a" #Sw\r\r...`) was written with `'` on its header but spaces on
    /// the port lines naming it, so a second parse -> write changed the port lines.
    #[test]
    fn description_with_carriage_returns_is_written_the_same_everywhere() {
        let text = "Switch 5 \"a\" #Sw\r\rx\r\n[1] \"b\"[1]\n\nHca 1 \"b\"\n[1] \"a\"[1]\n";
        let t = parse(text).unwrap();
        let once = write(&t);
        assert!(once.contains("# \"Sw  x\""), "{once}");
        assert!(once.contains("lmc 0 \"Sw  x\""), "{once}");
        assert_eq!(write(&parse(&once).unwrap()), once);
    }

    /// Found by the netfile fuzz target: `Switch 8 ""` parsed, with an empty id and
    /// so an empty description, which `write` cannot give back (it names the node by
    /// GUID instead and an empty description reads back as the node id).
    #[test]
    fn switch_with_empty_node_id_is_refused() {
        let (line, kind) = error_of("Switch 8 \"\"\x01\0\08b\"[1]\0D \"a'[2Y]\n");
        assert_eq!(line, 1);
        assert!(
            matches!(&kind, NetFileErrorKind::BadNodeId { id, .. } if id.is_empty()),
            "{kind:?}"
        );
        let (line, kind) = error_of("Switch 8 \"a\"\n[1] \"\"[1]\n");
        assert_eq!(line, 2, "{kind}");
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "\"",
            "[",
            "Switch",
            "Switch 1 \"",
            "Hca 1 \"a\"\n[",
            "Hca 1 \"a\"\n[1",
            "Hca 1 \"a\"\n[1]\"",
            "Ca\u{e9}\u{e9} \"\u{e9}\"",
            "Switch 1 \"a\" # \"unterminated",
        ] {
            let _ = parse(text);
        }
    }

    #[test]
    fn description_rules() {
        let t = parse("Switch 1 \"a\" # plain words lid 4\n\nSwitch 1 \"b\" #   \"quoted # x\" lid 5\n\nSwitch 1 \"c\" #\n").unwrap();
        let d = |n: &str| {
            let n = t.node(t.find_by_name(n).unwrap()).unwrap();
            (n.description.clone(), n.ports[0].lid)
        };
        assert_eq!(d("a"), ("plain words".to_string(), 4));
        assert_eq!(d("b"), ("quoted # x".to_string(), 5));
        assert_eq!(d("c"), ("c".to_string(), 0));
        let long = format!("Hca 1 \"h\" # \"{}\"\n", "y".repeat(80));
        let t = parse(&long).unwrap();
        assert_eq!(t.nodes()[0].description.len(), MAX_DESCRIPTION);
    }

    fn varied_topology() -> Topology {
        let mut t = gen::fat_tree_2level(4).unwrap();
        let rates = [
            (LinkWidth::X1, LinkSpeed::Sdr),
            (LinkWidth::X4, LinkSpeed::Ddr),
            (LinkWidth::X8, LinkSpeed::Qdr),
            (LinkWidth::X12, LinkSpeed::Fdr),
            (LinkWidth::X2, LinkSpeed::Edr),
            (LinkWidth::X4, LinkSpeed::Hdr),
            (LinkWidth::X4, LinkSpeed::Ndr),
            (LinkWidth::X4, LinkSpeed::Fdr10),
        ];
        let links: Vec<_> = t.links().collect();
        for (i, ((a, pa), _)) in links.into_iter().enumerate() {
            let (w, s) = rates[i % rates.len()];
            t.set_link_rate(a, pa, w, s).unwrap();
        }
        for i in 0..t.len() {
            let idx = NodeIdx(i as u32);
            let is_switch = t.node(idx).unwrap().is_switch();
            let port = if is_switch { 0 } else { 1 };
            t.set_port_lid(idx, port, i as u16 + 1, (i % 3) as u8)
                .unwrap();
        }
        t.set_node_info(NodeIdx(0), "host \"zero\" = w=1 s=2", 0x2c9, 7, 0x99)
            .unwrap();
        // A router between two leaves' spare... leaves are full; add fresh nodes.
        let mut r = Node::new(NodeType::Router, 0x7000, 2, "router");
        r.name = "rt-0".into();
        let r = t.add_node(r).unwrap();
        let mut s = Node::new(NodeType::Switch, 0x8000, 3, "edge sw");
        s.name = "extra".into();
        let s = t.add_node(s).unwrap();
        let mut h = Node::new(NodeType::Ca, 0x9000, 2, "dual");
        h.name = "dual".into();
        let h = t.add_node(h).unwrap();
        t.connect(r, 2, s, 1).unwrap();
        t.set_link_rate(r, 2, LinkWidth::X12, LinkSpeed::Edr)
            .unwrap();
        t.connect(h, 1, s, 2).unwrap();
        t.connect(h, 2, s, 3).unwrap();
        t
    }

    #[test]
    fn write_then_parse_round_trips() {
        let t = varied_topology();
        let text = write(&t);
        let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back.len(), t.len());
        for (idx, n) in t.iter() {
            let m = back.node(idx).unwrap();
            let mut expect = n.clone();
            // Quotes do not survive, '=' only on port lines (not here).
            expect.description = expect.description.replace('"', "'");
            assert_eq!(m, &expect, "node {idx}");
        }
        assert_eq!(back, {
            let mut t2 = t.clone();
            t2.set_node_info(NodeIdx(0), "host 'zero' = w=1 s=2", 0x2c9, 7, 0x99)
                .unwrap();
            t2
        });
    }

    #[test]
    fn unnamed_nodes_get_ibnetdiscover_names() {
        let mut t = Topology::new();
        let a = t
            .add_node(Node::new(NodeType::Switch, 0xabc, 4, "sw"))
            .unwrap();
        let b = t
            .add_node(Node::new(NodeType::Ca, 0xdef0, 1, "ca"))
            .unwrap();
        t.connect(a, 3, b, 1).unwrap();
        let text = write(&t);
        assert!(text.contains("\"S-0000000000000abc\""), "{text}");
        let back = parse(&text).unwrap();
        assert_eq!(back.find_by_name("H-000000000000def0"), Some(b));
        assert_eq!(back.neighbor(a, 3), Some((b, 1)));
    }

    proptest! {
        #[test]
        fn random_fabrics_round_trip(seed in any::<u64>(), switches in 1u32..12, per_switch in 0u32..5) {
            let t = gen::random(seed, switches, switches * per_switch, 8).unwrap();
            let back = parse(&write(&t)).unwrap();
            prop_assert_eq!(back, t);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "[\\[\\]\"#@=0-9a-zSwitchHcaCaRt lidmcx\\n\\t]{0,200}") {
            let _ = parse(&text);
        }
    }
}
