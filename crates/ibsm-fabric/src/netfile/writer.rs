//! [`write()`]: a topology as a net file that ibsim and
//! [`parse`](crate::netfile::parse) read back to the same GUIDs, cables, LIDs and link
//! rates, with node ids and descriptions made safe for ibsim's reader.

use std::fmt::Write as _;

use super::error::{MAX_DESCRIPTION, MAX_NODE_ID};
use super::rates::{S_DDR, S_QDR, S_SDR};
use super::scan::truncate;
use crate::topology::{LinkSpeed, NodeIdx, NodeType, Topology};

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

/// Write a topology as a net file that both ibsim and [`parse`](crate::netfile::parse)
/// read back to the same GUIDs, cables, LIDs and link rates.
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
