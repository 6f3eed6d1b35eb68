//! `ReadFabric`: LIDs, cables and unicast LFTs as infiniband-diags read them from the
//! fabric (`ibnetdiscover -p`, `ibroute LID`), and on request the multicast ones
//! (`ibroute -M LID`), parsed.

use std::process::Stdio;

use ibsm_labkit::Ibsim;
use ibsm_proto::demo::v1 as pb;

use super::options::DIAG_TIMEOUT;

/// Run `ibnetdiscover -p` and `ibroute LID` (with `multicast`, also `ibroute -M LID`)
/// for each switch on `host`; parse them.
pub(super) fn read_fabric_with(
    sim: &Ibsim,
    host: &str,
    multicast: bool,
) -> Result<pb::ReadFabricResponse, String> {
    let run = |args: &[&str]| -> Result<String, String> {
        let tool = args.first().copied().unwrap_or_default();
        ibsm_labkit::require_tool(tool).map_err(|e| e.to_string())?;
        let mut cmd = sim.command_on(host, tool);
        cmd.args(args.get(1..).unwrap_or(&[]))
            .stdin(Stdio::null())
            .env_remove("RUST_LOG");
        let out = sim
            .run(&mut cmd, DIAG_TIMEOUT)
            .map_err(|e| format!("{}: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "{} on {host} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    read_fabric_by(&run, &format!("SIM_HOST={host} "), multicast, false)
}

/// The same reads through `run` (a tool and its arguments to its output): on ibsim
/// above, on the judge's own host in `ibsmd judge`. `prefix` goes before each command
/// in the report's list; `lids_only` stops after `ibnetdiscover -p` (LIDs and cables).
pub(crate) fn read_fabric_by(
    run: &dyn Fn(&[&str]) -> Result<String, String>,
    prefix: &str,
    multicast: bool,
    lids_only: bool,
) -> Result<pb::ReadFabricResponse, String> {
    let mut commands = vec![format!("{prefix}ibnetdiscover -p")];
    let disc = run(&["ibnetdiscover", "-p"])?;
    let lids = parse_ibnetdiscover_ports(&disc);
    let mut switches = Vec::new();
    for l in lids.iter().filter(|l| l.kind == "SW" && !lids_only) {
        let lid = l.lid.to_string();
        commands.push(format!("{prefix}ibroute {lid}"));
        let text = run(&["ibroute", &lid])?;
        let mut mft = Vec::new();
        if multicast {
            commands.push(format!("{prefix}ibroute -M {lid}"));
            let text = run(&["ibroute", "-M", &lid])?;
            let parsed = ibsm_labkit::parse_ibroute_mft(&text)
                .map_err(|e| format!("{prefix}ibroute -M {lid}: {e}"))?;
            mft = parsed
                .entries
                .into_iter()
                .map(|(mlid, ports)| pb::MftEntry {
                    mlid: u32::from(mlid),
                    ports: ports.into_iter().map(u32::from).collect(),
                })
                .collect();
        }
        switches.push(pb::SwitchLft {
            node_guid: l.port_guid,
            lid: l.lid,
            description: l.description.clone(),
            entries: parse_ibroute(&text),
            mft,
        });
    }
    Ok(pb::ReadFabricResponse {
        lids,
        switches,
        commands,
        links: parse_ibnetdiscover_links(&disc),
    })
}

/// The cables `ibnetdiscover -p` lists (`SW 2 5 0x..01 4x SDR - SW 4 5 0x..00 ( ... )`:
/// kind, LID, port, GUID, width, speed, `-`, then the same of the remote end), as
/// printed (each from both ends).
pub fn parse_ibnetdiscover_links(text: &str) -> Vec<pb::FabricLink> {
    let guid = |w: &str| {
        w.strip_prefix("0x")
            .and_then(|g| u64::from_str_radix(g, 16).ok())
    };
    text.lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            if !matches!(w.first(), Some(&"CA" | &"SW")) || w.get(6) != Some(&"-") {
                return None;
            }
            Some(pb::FabricLink {
                port_guid: guid(w.get(3)?)?,
                port: w.get(2)?.parse().ok()?,
                remote_port_guid: guid(w.get(10)?)?,
                remote_port: w.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// The ports `ibnetdiscover -p` lists, one per port GUID (a switch once, by its port
/// 0 GUID and LID): `CA  3  1 0x000000000010000a 4x SDR - SW ... ( 'Hca4' - 'Switch2' )`.
pub fn parse_ibnetdiscover_ports(text: &str) -> Vec<pb::FabricLid> {
    let mut seen = std::collections::BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(kind), Some(lid), Some(_port), Some(guid)) =
            (w.next(), w.next(), w.next(), w.next())
        else {
            continue;
        };
        if kind != "CA" && kind != "SW" {
            continue;
        }
        let (Ok(lid), Some(Ok(guid))) = (
            lid.parse::<u32>(),
            guid.strip_prefix("0x").map(|g| u64::from_str_radix(g, 16)),
        ) else {
            continue;
        };
        let description = line
            .split('\'')
            .nth(1)
            .map(str::to_string)
            .unwrap_or_default();
        seen.entry(guid).or_insert(pb::FabricLid {
            port_guid: guid,
            lid,
            kind: kind.to_string(),
            description,
        });
    }
    seen.into_values().collect()
}

/// The entries `ibroute` prints: `0x0003 002 : (Channel Adapter portguid ...)`.
/// LID 0 is no destination: the line ibroute prints for it on a switch ibsmd
/// programmed (`0x0000 002 : (path #1 out of 1)`) is the LFT stamp ibsmd keeps in
/// that entry (`ibsm_core::subnet::lft_stamp`), not a route, and is left out.
pub fn parse_ibroute(text: &str) -> Vec<pb::LftEntry> {
    text.lines()
        .filter_map(|line| {
            let mut w = line.split_whitespace();
            let lid = w.next()?.strip_prefix("0x")?;
            let port = w.next()?;
            if w.next() != Some(":") {
                return None;
            }
            Some(pb::LftEntry {
                lid: u32::from_str_radix(lid, 16).ok()?,
                port: port.parse().ok()?,
            })
        })
        .filter(|e| e.lid != 0)
        .collect()
}
