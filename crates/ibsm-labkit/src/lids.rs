//! The LIDs a master gave, read back from the fabric: [`parse_ibnetdiscover_ports`]
//! reads `ibnetdiscover -p` (one line per port: type, LID, port number, GUID, ...)
//! into [`PortLid`]s, [`Ibsim::port_lids`] runs it under umad2sim, and
//! [`guid2lid_of`] turns them into the `(port GUID, LID)` list
//! [`OpenSmOptions::guid2lid`](crate::OpenSmOptions::guid2lid) takes, so OpenSM can be
//! started with exactly the LIDs another SM assigned.
//!
//! In `ibnetdiscover -p` a CA line carries the CA port's GUID and LID; a switch
//! appears once per port with the switch's GUID and the LID of its port 0 (every port
//! of a switch answers to that LID), so a switch is one entry, port 0.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::child::run_ok;
use crate::error::{LabError, Result};
use crate::ibsim::Ibsim;
use crate::tools::require_tool;

/// One end port and its LID, as `ibnetdiscover -p` printed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PortLid {
    /// Port GUID (a switch: its GUID, the GUID of its port 0).
    pub guid: u64,
    /// Port number (0 for a switch).
    pub port: u8,
    pub lid: u16,
    pub is_switch: bool,
}

/// Parse `ibnetdiscover -p`: one [`PortLid`] per CA/router port and per switch (port
/// 0), sorted by LID. Lines that are not port lines are skipped; a port line whose
/// LID, port or GUID does not parse is an error, and so is one GUID/port listed with
/// two LIDs.
pub fn parse_ibnetdiscover_ports(text: &str) -> Result<Vec<PortLid>> {
    let mut out: BTreeMap<(u64, u8), PortLid> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(&kind), Some(&lid), Some(&port), Some(&guid)) =
            (f.first(), f.get(1), f.get(2), f.get(3))
        else {
            continue;
        };
        let is_switch = match kind {
            "SW" => true,
            "CA" | "RT" => false,
            _ => continue,
        };
        let err = |message: String| LabError::Parse {
            what: "ibnetdiscover -p output".into(),
            line: i + 1,
            message,
        };
        let lid: u16 = lid
            .parse()
            .map_err(|_| err(format!("bad LID {lid:?} in {line:?}")))?;
        let port: u8 = port
            .parse()
            .map_err(|_| err(format!("bad port {port:?} in {line:?}")))?;
        let guid = guid
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| err(format!("bad GUID {guid:?} in {line:?}")))?;
        let p = PortLid {
            guid,
            port: if is_switch { 0 } else { port },
            lid,
            is_switch,
        };
        match out.insert((p.guid, p.port), p) {
            Some(old) if old.lid != p.lid => {
                return Err(err(format!(
                    "GUID {guid:#x} port {} listed with LIDs {} and {lid}",
                    p.port, old.lid
                )))
            }
            _ => {}
        }
    }
    let mut v: Vec<PortLid> = out.into_values().collect();
    v.sort_by_key(|p| (p.lid, p.guid));
    Ok(v)
}

/// `(port GUID, LID)` of every port, for [`OpenSmOptions::guid2lid`](crate::OpenSmOptions::guid2lid).
pub fn guid2lid_of(ports: &[PortLid]) -> Vec<(u64, u16)> {
    ports.iter().map(|p| (p.guid, p.lid)).collect()
}

impl Ibsim {
    /// `ibnetdiscover -p` under umad2sim from node `host`, parsed: every port's LID as
    /// the fabric holds it (directed route: works before LFTs exist).
    pub fn port_lids(&self, host: &str) -> Result<Vec<PortLid>> {
        require_tool("ibnetdiscover")?;
        let mut cmd = self.command_on(host, "ibnetdiscover");
        cmd.arg("-p");
        parse_ibnetdiscover_ports(&run_ok(&mut cmd, Duration::from_secs(60))?)
    }
}
