//! OpenSM's partitions.conf (opensm(8), "PARTITION CONFIGURATION"), read into the
//! [`Partition`]s the configurator programs.
//!
//! The grammar, as OpenSM reads it:
//!
//! ```text
//! # comment to the end of the line
//! Name[=PKey][,ipoib][,indx0][,defmember=full|limited|both][,rate=N][,mtu=N][,sl=N][,scope=N][,Q_Key=N] :
//!     PortSpec[,PortSpec]... ;        # the list may go on over several lines
//! PortSpec = GUID[=full|limited|both] | ALL | ALL_CAS | ALL_SWITCHES | ALL_ROUTERS | SELF (with =...)
//!          | mgid=GID[,rate=..,mtu=..,sl=..,scope=..,Q_Key=..,TClass=..,FlowLabel=..]  (to the end of the line)
//! ```
//!
//! Semantics kept from OpenSM: numbers are C's `strtoul(.., 0)` (`0x` hex, a
//! leading `0` octal, else decimal); only the low 15 bits of a P_Key count; a name
//! that starts with a digit and has no `=PKey` is the P_Key; a definition without a
//! P_Key takes the partition of that name if there is one, else the next free key
//! from 1; two definitions with one P_Key are merged (the first name stays); a port
//! named again in a partition takes its new membership (the last entry wins, groups
//! and GUIDs alike); a port without `=...` takes the definition's `defmember`
//! (default limited); membership words may be abbreviated (`limi`); `both` means full,
//! as in OpenSM without `allow_both_pkeys`. The default partition 0x7FFF starts as
//! `ALL=limited, SELF=full` (OpenSM's rule when a file exists) and a `Default=0x7fff`
//! definition is merged into it.
//!
//! Where ibsm is stricter: OpenSM logs a warning and goes on (or silently skips the
//! rest of a line) for an unknown flag, a bad flag value, an unknown membership word
//! or a bad mgid; here each is an error with its line and column, and a file with an
//! error is refused as a whole. Multiple `scope=` values (several broadcast groups)
//! are refused too. `mgid=` lines are parsed and checked as OpenSM checks them and
//! returned in [`PartitionsFile::multicast_groups`]: the SA does not create them (it
//! creates each `ipoib` partition's broadcast group only), and the caller says so.

use std::fmt;

use super::config::{
    GroupMember, Membership, Partition, PartitionIpoib, PartitionMember, PortGroup,
};

/// The default partition's P_Key base.
pub const DEFAULT_PKEY: u16 = 0x7FFF;

/// Where in the file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters.
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// A partitions.conf that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {why}")]
pub struct PartitionsConfError {
    /// Where the wrong part starts.
    pub at: Position,
    /// What is wrong.
    pub why: String,
}

/// A multicast group a partition definition asks for (`mgid=...`), as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastGroupDef {
    /// Where it is defined.
    pub at: Position,
    /// The partition's P_Key base.
    pub p_key: u16,
    /// The MGID (for an IP group, with the partition's P_Key filled in).
    pub mgid: [u8; 16],
    /// Its parameters (Q_Key 0x0B1B for IP groups unless given).
    pub params: PartitionIpoib,
}

/// Something the file asks for that is read and checked but not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplied {
    /// Where it is.
    pub at: Position,
    /// What and why.
    pub what: String,
}

/// What a partitions.conf defines.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionsFile {
    /// The partitions, the default one (0x7FFF) first, then in the order of their
    /// first definition.
    pub partitions: Vec<Partition>,
    /// `mgid=` groups, in file order.
    pub multicast_groups: Vec<McastGroupDef>,
    /// Flags read but not applied (IPoIB parameters of the default partition, whose
    /// broadcast group the SA always creates with OpenSM's defaults; non-zero
    /// `TClass=` / `FlowLabel=`), in file order.
    pub not_applied: Vec<NotApplied>,
}

/// Parse a whole partitions.conf.
pub fn parse(text: &str) -> Result<PartitionsFile, PartitionsConfError> {
    Parser::new(text).run()
}

/// One piece of text with its byte offset in the file.
#[derive(Debug, Clone, Copy)]
struct Span<'a> {
    at: usize,
    text: &'a str,
}

impl<'a> Span<'a> {
    fn trim(self) -> Span<'a> {
        let lead = self.text.len() - self.text.trim_start().len();
        Span {
            at: self.at + lead,
            text: self.text.trim(),
        }
    }
    /// Split at the first `sep`: (before, after it).
    fn split_once(self, sep: char) -> Option<(Span<'a>, Span<'a>)> {
        let i = self.text.find(sep)?;
        Some((
            Span {
                at: self.at,
                text: &self.text[..i],
            },
            Span {
                at: self.at + i + sep.len_utf8(),
                text: &self.text[i + sep.len_utf8()..],
            },
        ))
    }
    fn split(self, sep: char) -> impl Iterator<Item = Span<'a>> {
        let mut at = self.at;
        self.text.split(sep).map(move |p| {
            let here = at;
            at += p.len() + sep.len_utf8();
            Span { at: here, text: p }
        })
    }
}

/// The per-definition settings of a header.
struct Header {
    p_key: u16,
    defmember: Membership,
    ipoib: bool,
    params: PartitionIpoib,
    scope_at: Option<usize>,
}

struct Parser<'a> {
    text: &'a str,
    /// Comments blanked out (same byte offsets as `text`).
    clean: String,
    out: PartitionsFile,
    /// Next candidate for a generated P_Key.
    next_pkey: u16,
    /// [`PartitionsFile::not_applied`], filled from `&self` methods.
    notes: std::cell::RefCell<Vec<NotApplied>>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        // Blank comments byte for byte so offsets stay those of the file.
        let mut clean = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            match line.find('#') {
                Some(i) => {
                    clean.push_str(&line[..i]);
                    let rest = &line[i..];
                    for c in rest.chars() {
                        if c == '\n' {
                            clean.push('\n');
                        } else {
                            for _ in 0..c.len_utf8() {
                                clean.push(' ');
                            }
                        }
                    }
                }
                None => clean.push_str(line),
            }
        }
        let default = Partition {
            name: "Default".into(),
            p_key: DEFAULT_PKEY,
            groups: vec![
                GroupMember {
                    group: PortGroup::All,
                    membership: Membership::Limited,
                    after: 0,
                },
                GroupMember {
                    group: PortGroup::SmPort,
                    membership: Membership::Full,
                    after: 0,
                },
            ],
            ..Partition::default()
        };
        Parser {
            text,
            clean,
            out: PartitionsFile {
                partitions: vec![default],
                multicast_groups: Vec::new(),
                not_applied: Vec::new(),
            },
            next_pkey: 0,
            notes: Default::default(),
        }
    }

    fn position(&self, at: usize) -> Position {
        let at = at.min(self.text.len());
        let before = self.text.get(..at).unwrap_or("");
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before.get(line_start..).map_or(0, |l| l.chars().count()) + 1,
        }
    }

    fn note(&self, at: usize, what: String) {
        self.notes.borrow_mut().push(NotApplied {
            at: self.position(at),
            what,
        });
    }

    fn err<T>(&self, at: usize, why: impl Into<String>) -> Result<T, PartitionsConfError> {
        Err(PartitionsConfError {
            at: self.position(at),
            why: why.into(),
        })
    }

    fn run(mut self) -> Result<PartitionsFile, PartitionsConfError> {
        let clean = std::mem::take(&mut self.clean);
        let whole = Span {
            at: 0,
            text: clean.as_str(),
        };
        for def in whole.split(';') {
            if def.text.trim().is_empty() {
                continue;
            }
            self.definition(def)?;
        }
        self.out.not_applied = self.notes.take();
        Ok(self.out)
    }

    /// One `header : members` definition (without its `;`).
    fn definition(&mut self, def: Span<'_>) -> Result<(), PartitionsConfError> {
        let def = def.trim();
        let Some((head, body)) = def.split_once(':') else {
            return self.err(
                def.at,
                "no partition definition: expected `Name[=PKey][,flags] : members ;` (no ':' before the ';' or the end of the file)",
            );
        };
        let (idx, header) = self.header(head)?;
        self.members(idx, &header, body)
    }

    /// The header: find or make the partition, return its index and settings.
    fn header(&mut self, head: Span<'_>) -> Result<(usize, Header), PartitionsConfError> {
        let mut parts = head.split(',');
        let Some(first) = parts.next() else {
            return self.err(head.at, "empty partition definition");
        };
        let (name, id) = match first.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (first.trim(), None),
        };
        if name.text.contains(char::is_whitespace) {
            return self.err(
                name.at,
                format!("partition name {:?} has blanks in it", name.text),
            );
        }
        let (name, id) = match id {
            None if name.text.starts_with(|c: char| c.is_ascii_digit()) => (None, Some(name)),
            _ => (Some(name), id),
        };
        let mut h = Header {
            p_key: 0,
            defmember: Membership::Limited,
            ipoib: false,
            params: PartitionIpoib::default(),
            scope_at: None,
        };
        let mut index0 = false;
        if let Some(id) = id {
            let Some(v) = strtoul(id.text) else {
                return self.err(id.at, format!("P_Key {:?} is not a number", id.text));
            };
            let Ok(v) = u16::try_from(v) else {
                return self.err(
                    id.at,
                    format!("P_Key {:?} does not fit in 16 bits", id.text),
                );
            };
            h.p_key = v & 0x7FFF;
            if h.p_key == 0 {
                return self.err(id.at, "P_Key 0 (or 0x8000) names no partition");
            }
        }
        for flag in parts {
            let flag = flag.trim();
            let (key, val) = match flag.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (flag, None),
            };
            match key.text {
                "ipoib" => h.ipoib = true,
                "indx0" => index0 = true,
                "defmember" => {
                    let Some(v) = val else {
                        return self.err(key.at, "defmember needs =full, =limited or =both");
                    };
                    h.defmember = self.membership(v)?;
                }
                "" => return self.err(flag.at, "empty partition flag (two commas?)"),
                _ => self.group_flag(&mut h.params, &mut h.scope_at, key, val)?,
            }
        }
        let name_text = name.map(|n| n.text.to_string()).unwrap_or_default();
        let idx = self.partition_for(&name_text, h.p_key, head.at)?;
        let part = &mut self.out.partitions[idx];
        h.p_key = part.p_key;
        part.index0 |= index0;
        let default_ipoib = h.ipoib && part.p_key == DEFAULT_PKEY;
        if h.ipoib && part.ipoib.is_none() && part.p_key != DEFAULT_PKEY {
            part.ipoib = Some(h.params);
        }
        if default_ipoib && h.params != PartitionIpoib::default() {
            self.note(
                head.at,
                format!(
                    "the default partition's ipoib parameters (mtu {}, rate {}, sl {}, scope {}, Q_Key {:#x}) not applied: its broadcast group is OpenSM's default one (mtu 4, rate 3, sl 0, scope 2, Q_Key 0xb1b)",
                    h.params.mtu, h.params.rate, h.params.sl, h.params.scope, h.params.q_key
                ),
            );
        }
        if let Err((field, value, range)) = h.params.check() {
            return self.err(
                head.at,
                format!("{field}={value} is out of range ({range})"),
            );
        }
        Ok((idx, h))
    }

    /// The index of the partition with this P_Key (merging), or by name when no
    /// P_Key is given, else a new one.
    fn partition_for(
        &mut self,
        name: &str,
        p_key: u16,
        at: usize,
    ) -> Result<usize, PartitionsConfError> {
        let parts = &self.out.partitions;
        let found = if p_key != 0 {
            parts.iter().position(|p| p.p_key == p_key)
        } else if !name.is_empty() {
            parts.iter().position(|p| p.name == name)
        } else {
            None
        };
        if let Some(i) = found {
            return Ok(i);
        }
        let p_key = if p_key != 0 {
            p_key
        } else {
            loop {
                self.next_pkey += 1;
                if self.next_pkey >= DEFAULT_PKEY {
                    return self.err(at, "no free P_Key left to generate for this partition");
                }
                let k = self.next_pkey;
                if !self.out.partitions.iter().any(|p| p.p_key == k) {
                    break k;
                }
            }
        };
        self.out.partitions.push(Partition {
            name: name.to_string(),
            p_key,
            ..Partition::default()
        });
        Ok(self.out.partitions.len() - 1)
    }

    /// A flag of a group (`rate`, `mtu`, `sl`, `scope`, `Q_Key`, `TClass`, `FlowLabel`).
    fn group_flag(
        &self,
        params: &mut PartitionIpoib,
        scope_at: &mut Option<usize>,
        key: Span<'_>,
        val: Option<Span<'_>>,
    ) -> Result<(), PartitionsConfError> {
        let known =
            "ipoib, indx0, defmember=, rate=, mtu=, sl=, scope=, Q_Key=, TClass=, FlowLabel=";
        let field = match key.text {
            "rate" | "mtu" | "sl" | "scope" | "Q_Key" | "TClass" | "FlowLabel" => key.text,
            other => return self.err(key.at, format!("unknown flag {other:?} (known: {known})")),
        };
        let Some(val) = val.filter(|v| !v.text.is_empty()) else {
            return self.err(key.at, format!("{field} needs a value ({field}=N)"));
        };
        let Some(v) = strtoul(val.text) else {
            return self.err(
                val.at,
                format!("{field} value {:?} is not a number", val.text),
            );
        };
        let byte = |v: u64| u8::try_from(v).ok();
        let bad = |range: &str| PartitionsConfError {
            at: self.position(val.at),
            why: format!("{field}={} is out of range ({range})", val.text),
        };
        match field {
            "rate" => params.rate = byte(v).ok_or_else(|| bad("a rate code, 2..=24"))?,
            "mtu" => {
                params.mtu = byte(v)
                    .filter(|m| (1..=5).contains(m))
                    .ok_or_else(|| bad("1..=5"))?
            }
            "sl" => params.sl = byte(v).filter(|s| *s <= 15).ok_or_else(|| bad("0..=15"))?,
            "scope" => {
                if let Some(first) = *scope_at {
                    return self.err(
                        key.at,
                        format!(
                            "a second scope= (the first is at {}): several scopes, one group each, are not supported",
                            self.position(first)
                        ),
                    );
                }
                *scope_at = Some(key.at);
                params.scope = byte(v)
                    .filter(|s| (1..=15).contains(s))
                    .ok_or_else(|| bad("1..=15"))?;
            }
            "Q_Key" => params.q_key = u32::try_from(v).map_err(|_| bad("32 bits"))?,
            // TClass and FlowLabel: parsed and range-checked; groups use 0.
            "TClass" => {
                byte(v).ok_or_else(|| bad("0..=255"))?;
            }
            _ => {
                if v > 0xF_FFFF {
                    return Err(bad("0..=0xFFFFF"));
                }
            }
        }
        if matches!(field, "TClass" | "FlowLabel") && v != 0 {
            self.note(
                key.at,
                format!("{field}={} not applied: ibsm's groups use 0", val.text),
            );
        }
        Ok(())
    }

    /// `full`, `limited`, `both` or a prefix of one (`both` is full, see the module doc).
    fn membership(&self, v: Span<'_>) -> Result<Membership, PartitionsConfError> {
        let w = v.text;
        if !w.is_empty() && ("full".starts_with(w) || "both".starts_with(w)) {
            Ok(Membership::Full)
        } else if !w.is_empty() && "limited".starts_with(w) {
            Ok(Membership::Limited)
        } else {
            self.err(
                v.at,
                format!("membership {w:?} is not full, limited or both"),
            )
        }
    }

    /// The member list after the ':'.
    fn members(
        &mut self,
        idx: usize,
        h: &Header,
        body: Span<'_>,
    ) -> Result<(), PartitionsConfError> {
        let mut rest = body;
        loop {
            // An `mgid=` entry runs to the end of its line.
            let (item, next) = match rest.split_once(',') {
                Some((item, next)) => (item, Some(next)),
                None => (rest, None),
            };
            let trimmed = item.trim();
            if trimmed.text.starts_with("mgid") {
                let lead = rest.text.len() - rest.text.trim_start().len();
                let from = Span {
                    at: rest.at + lead,
                    text: &rest.text[lead..],
                };
                let (line, after) = match from.split_once('\n') {
                    Some((line, after)) => (line, Some(after)),
                    None => (from, None),
                };
                self.mgid(h, line.trim())?;
                match after {
                    Some(a) => rest = a,
                    None => return Ok(()),
                }
                continue;
            }
            self.port(idx, h, trimmed)?;
            match next {
                Some(n) => rest = n,
                None => return Ok(()),
            }
        }
    }

    /// One `PortSpec`.
    fn port(&mut self, idx: usize, h: &Header, item: Span<'_>) -> Result<(), PartitionsConfError> {
        let (name, flag) = match item.split_once('=') {
            Some((n, f)) => (n.trim(), Some(f.trim())),
            None => (item, None),
        };
        if name.text.is_empty() || name.text == "NONE" {
            if let Some(f) = flag.filter(|_| name.text.is_empty()) {
                return self.err(f.at, "a membership without a port before its '='");
            }
            return Ok(());
        }
        let membership = match flag {
            Some(f) => self.membership(f)?,
            None => h.defmember,
        };
        let group = match name.text {
            "ALL" => Some(PortGroup::All),
            "ALL_CAS" => Some(PortGroup::AllCas),
            "ALL_SWITCHES" => Some(PortGroup::AllSwitches),
            "ALL_ROUTERS" => Some(PortGroup::AllRouters),
            "SELF" => Some(PortGroup::SmPort),
            _ => None,
        };
        let part = &self.out.partitions[idx];
        if let Some(group) = group {
            let after = part.members.len();
            self.out.partitions[idx].groups.push(GroupMember {
                group,
                membership,
                after,
            });
            return Ok(());
        }
        let guid = match strtoul(name.text) {
            Some(g) if g != 0 => g,
            _ => {
                return self.err(
                    name.at,
                    format!(
                        "{:?} is not a port GUID (a nonzero number) nor ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF, NONE",
                        name.text
                    ),
                )
            }
        };
        let part = &mut self.out.partitions[idx];
        // Named again: moved to the end with its new membership.
        if let Some(j) = part.members.iter().position(|m| m.port_guid == guid) {
            part.members.remove(j);
            for g in &mut part.groups {
                if g.after > j {
                    g.after -= 1;
                }
            }
        }
        part.members.push(PartitionMember {
            port_guid: guid,
            membership,
        });
        Ok(())
    }

    /// `mgid=GID[,flag...]`, checked as OpenSM checks it.
    fn mgid(&mut self, h: &Header, line: Span<'_>) -> Result<(), PartitionsConfError> {
        let mut parts = line.split(',');
        let Some(first) = parts.next() else {
            return Ok(());
        };
        let Some((key, gid)) = first.split_once('=') else {
            return self.err(first.at, "mgid needs a value (mgid=GID)");
        };
        if key.text.trim() != "mgid" {
            return self.err(
                key.at,
                format!("{:?} is not a port nor mgid=", key.text.trim()),
            );
        }
        let gid = gid.trim();
        let Ok(addr) = gid.text.parse::<std::net::Ipv6Addr>() else {
            return self.err(
                gid.at,
                format!("mgid {:?} is not a GID (IPv6 notation)", gid.text),
            );
        };
        let mut mgid = addr.octets();
        if mgid[0] != 0xFF {
            return self.err(
                gid.at,
                format!("mgid {:?} is not a multicast GID (ff..)", gid.text),
            );
        }
        let mut params = h.params;
        params.q_key = 0;
        let mut scope_at = None;
        for flag in parts {
            let flag = flag.trim();
            let (k, v) = match flag.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (flag, None),
            };
            self.group_flag(&mut params, &mut scope_at, k, v)?;
        }
        if scope_at.is_some() {
            mgid[1] = (mgid[1] & 0xF0) | params.scope;
        }
        let is_ip = matches!([mgid[2], mgid[3]], [0x40, 0x1B] | [0x60, 0x1B]);
        if is_ip {
            let m_pkey = u16::from_be_bytes([mgid[4], mgid[5]]);
            let full = h.p_key | 0x8000;
            if m_pkey != 0 && m_pkey != full && m_pkey != h.p_key {
                return self.err(
                    gid.at,
                    format!(
                        "IP multicast group's P_Key bits {m_pkey:#06x} are neither 0 nor the partition's {full:#06x}"
                    ),
                );
            }
            if params.rate != h.params.rate || params.mtu != h.params.mtu {
                return self.err(
                    gid.at,
                    format!(
                        "IP multicast group rate {} / mtu {} differ from the partition's broadcast group ({} / {})",
                        params.rate, params.mtu, h.params.rate, h.params.mtu
                    ),
                );
            }
            mgid[4..6].copy_from_slice(&full.to_be_bytes());
            if params.q_key == 0 {
                params.q_key = 0x0B1B;
            }
        }
        let at = self.position(line.at);
        self.out.multicast_groups.push(McastGroupDef {
            at,
            p_key: h.p_key,
            mgid,
            params,
        });
        Ok(())
    }
}

/// C's `strtoul(s, &end, 0)` over the whole of `s`: `0x` hex, leading `0` octal,
/// else decimal; None if anything is left over or it overflows 64 bits.
pub fn strtoul(s: &str) -> Option<u64> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok();
    }
    if s.len() > 1 && s.starts_with('0') {
        return u64::from_str_radix(&s[1..], 8).ok();
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests;
