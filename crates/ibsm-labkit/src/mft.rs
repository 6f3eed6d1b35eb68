//! A switch's MulticastForwardingTable as `ibroute -M <lid>` prints it:
//! [`parse_ibroute_mft`] (both the default port-column layout and `-n`'s port masks)
//! into a [`SwitchMft`] (MLID -> set of ports), and [`Ibsim::ibroute_mft`] to run it
//! under umad2sim.
//!
//! What OpenSM 3.3.23 programs (fixtures `ibroute_m_*.txt`): at start it creates the
//! IPoIB broadcast group (MGID ff12:401b:ffff::ffff:ffff, MLID 0xC000) in the SA but
//! writes no MFT entry for it while it has no members, and nothing under ibsim joins
//! (no IPoIB): `ibroute -M` prints "0 valid mlids dumped". OpenSM's `osmtest -f m`
//! run from two HCAs joins them; then every switch on the tree between them has 0xC000
//! (and the test groups with two members) with the member and inter-switch ports.
//! A group with a single member got no MFT entries at all.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::child::run_ok;
use crate::error::{LabError, Result};
use crate::ibsim::Ibsim;
use crate::tools::require_tool;
/// One switch's multicast forwarding table as ibroute printed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchMft {
    /// The switch's LID (from `switch Lid 16`).
    pub lid: u16,
    pub node_guid: u64,
    /// Its NodeDescription.
    pub name: String,
    /// The MLID range ibroute read (`[0xc000-0xc3ff]`: up to MulticastFDBCap/Top).
    pub first_mlid: u16,
    pub last_mlid: u16,
    /// Every MLID with a non-empty port mask, and its ports (0 = the switch itself).
    pub entries: BTreeMap<u16, BTreeSet<u8>>,
}

fn perr(line: usize, message: impl Into<String>) -> LabError {
    LabError::Parse {
        what: "ibroute -M output".into(),
        line,
        message: message.into(),
    }
}

fn hex_u64(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

fn hex_u16(text: &str) -> Option<u16> {
    u16::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

/// `Multicast mlids [0xc000-0xc3ff] of switch Lid 16 guid 0x0000000000200000 (Switch1):`
fn parse_title(line: &str, mft: &mut SwitchMft) -> Option<()> {
    let rest = line.strip_prefix("Multicast mlids [")?;
    let (range, rest) = rest.split_once(']')?;
    let (a, b) = range.split_once('-')?;
    mft.first_mlid = hex_u16(a)?;
    mft.last_mlid = hex_u16(b)?;
    let rest = rest.trim_start().strip_prefix("of switch")?.trim_start();
    let lid_text = rest.strip_prefix("Lid ")?;
    let lid: String = lid_text.chars().take_while(char::is_ascii_digit).collect();
    mft.lid = lid.parse().ok()?;
    let guid = rest.split("guid ").nth(1)?.split_whitespace().next()?;
    mft.node_guid = hex_u64(guid)?;
    let open = rest.find('(')?;
    let close = rest.rfind(')')?;
    mft.name = rest.get(open + 1..close)?.to_string();
    Some(())
}

/// Parse `ibroute -M` (or `ibroute -M -n`) output of one switch.
pub fn parse_ibroute_mft(text: &str) -> Result<SwitchMft> {
    let mut mft = SwitchMft::default();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (n, title) = lines.next().ok_or_else(|| perr(1, "empty output"))?;
    parse_title(title, &mut mft).ok_or_else(|| perr(n, format!("not an MFT title: {title:?}")))?;
    let mut ports: Option<usize> = None;
    let mut brief = false;
    let mut dumped: Option<usize> = None;
    for (n, line) in lines {
        let t = line.trim();
        if let Some(list) = t.strip_prefix("Ports:") {
            ports = Some(list.split_whitespace().count());
            continue;
        }
        if t == "MLid"
            || t.is_empty()
            || (ports.is_none()
                && !t.starts_with("0x")
                && t.chars().all(|c| c.is_ascii_digit() || c == ' '))
        {
            continue;
        }
        if t.starts_with("MLid") && t.contains("Port Mask") {
            brief = true;
            continue;
        }
        if let Some(count) = t.strip_suffix("mlids dumped") {
            let count = count.trim().trim_end_matches("valid").trim();
            dumped = Some(
                count
                    .parse()
                    .map_err(|_| perr(n, format!("bad count in {t:?}")))?,
            );
            continue;
        }
        let (mlid_text, rest) = line
            .split_at_checked(6)
            .ok_or_else(|| perr(n, format!("unexpected line {line:?}")))?;
        let mlid = mlid_text
            .strip_prefix("0x")
            .and_then(|h| u16::from_str_radix(h, 16).ok())
            .ok_or_else(|| perr(n, format!("unexpected line {line:?}")))?;
        let set = if brief {
            brief_ports(rest).ok_or_else(|| perr(n, format!("bad port mask in {line:?}")))?
        } else {
            let nports = ports.ok_or_else(|| perr(n, "MLID row before the Ports: header"))?;
            column_ports(rest, nports)
                .ok_or_else(|| perr(n, format!("bad port columns in {line:?}")))?
        };
        if mft.entries.insert(mlid, set).is_some() {
            return Err(perr(n, format!("MLID {mlid:#06x} listed twice")));
        }
    }
    match dumped {
        Some(d) if d == mft.entries.len() => Ok(mft),
        Some(d) => Err(perr(
            text.lines().count(),
            format!(
                "ibroute says {d} mlids dumped, {} parsed",
                mft.entries.len()
            ),
        )),
        None => Err(perr(
            text.lines().count(),
            "no `mlids dumped` trailer (truncated output?)",
        )),
    }
}

/// The default layout: after the MLID, 6 spaces, then two columns per port (`x` or
/// space, then a space) for ports 0..nports.
fn column_ports(rest: &str, nports: usize) -> Option<BTreeSet<u8>> {
    let cols = rest.get(6..)?.as_bytes();
    let mut set = BTreeSet::new();
    for (i, &c) in cols.iter().enumerate() {
        match (i % 2, c) {
            (_, b' ') => {}
            (0, b'x') if i / 2 < nports => {
                set.insert(u8::try_from(i / 2).ok()?);
            }
            _ => return None,
        }
    }
    Some(set)
}

/// `-n`: one 16-bit hex mask per 16 ports, port 16*j + bit.
fn brief_ports(rest: &str) -> Option<BTreeSet<u8>> {
    let masks = rest.trim();
    if masks.is_empty() || !masks.len().is_multiple_of(4) {
        return None;
    }
    let mut set = BTreeSet::new();
    for (j, chunk) in masks.as_bytes().chunks(4).enumerate() {
        let mask = u16::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
        for bit in 0..16 {
            if mask & (1 << bit) != 0 {
                set.insert(u8::try_from(j * 16 + bit).ok()?);
            }
        }
    }
    Some(set)
}

impl Ibsim {
    /// `ibroute -M <lid>` under umad2sim from node `host` (LID-routed: needs the
    /// master's LFTs), parsed.
    pub fn ibroute_mft(&self, host: &str, lid: u16) -> Result<SwitchMft> {
        require_tool("ibroute")?;
        let mut cmd = self.command_on(host, "ibroute");
        cmd.arg("-M").arg(lid.to_string());
        tracing::debug!(host, lid, "ibroute -M");
        let out = run_ok(&mut cmd, Duration::from_secs(30))?;
        parse_ibroute_mft(&out)
    }
}
