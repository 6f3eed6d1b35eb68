//! `topology`, `lids`, `route`, `partitions` (`ibsm.v1.Fabric`) and `members`
//! (`ibsm.v1.Cluster`): what the master configured, and the replication cluster.
//!
//! Partition arguments are checked here before any RPC (P_Key 15 bits, not 0, not the
//! default 0x7fff; members `GUID[:full|limited]`), with the reason in the message; the
//! daemon checks them again against the fabric (unknown GUIDs).

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::cluster_client::ClusterClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use serde_json::{json, Value};

use crate::args::{fmt_guid, parse_guid};
use crate::control::{channel, unary, CtlError, Target};

/// One Fabric/Cluster request, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum FabricRequest {
    Topology,
    Lids { format: LidsFormat },
    Route { src: u16, dst: u16 },
    Groups,
    Services,
    Subscriptions,
    Partitions,
    SetPartition(pb::PartitionEntry),
    DeletePartition(u16),
    ReloadPartitions,
    Members,
    AddMember { id: u64, addr: String },
    RemoveMember { id: u64 },
}

/// How `ibsmctl lids` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LidsFormat {
    /// A table.
    Text,
    /// JSON (as `--json`).
    Json,
    /// OpenSM's guid2lid cache file.
    Guid2lid,
}

/// The LIDs as OpenSM's guid2lid cache file: `0x<port guid> 0x<min lid> 0x<max lid>`
/// per port, sorted by GUID, each line followed by the empty line OpenSM's
/// persistent-db parser needs to end an entry (without it OpenSM reads the whole file
/// as one entry and keeps only the first port's LID).
pub fn lids_guid2lid(r: &pb::GetLidsResponse) -> String {
    let mut lids: Vec<&pb::LidEntry> = r.lids.iter().collect();
    lids.sort_by_key(|l| l.port_guid);
    let mut out = String::with_capacity(lids.len() * 34);
    for l in lids {
        let span = 1u32 << l.lmc.min(7);
        let max = l.base_lid.saturating_add(span - 1);
        out.push_str(&format!(
            "0x{:016x} 0x{:04x} 0x{:04x}\n\n",
            l.port_guid, l.base_lid, max
        ));
    }
    out
}

/// A unicast LID, 1-0xBFFF (decimal or 0x-hex).
pub fn parse_lid(text: &str) -> Result<u16, String> {
    let t = text.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    }
    .map_err(|_| format!("{text:?} is not a LID (decimal or 0x-hex)"))?;
    u16::try_from(v)
        .ok()
        .filter(|l| (1..=0xBFFF).contains(l))
        .ok_or_else(|| {
            format!("LID {v} is not a unicast LID: IBA unicast LIDs are 1-0xBFFF (49151)")
        })
}

/// A partition's base P_Key: 15 bits, not 0, not the default 0x7fff.
pub fn parse_pkey(text: &str) -> Result<u16, String> {
    let t = text.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    }
    .map_err(|_| format!("{text:?} is not a P_Key (0x-hex such as 0x0012, or decimal)"))?;
    match v {
        0 => Err("P_Key 0 is invalid: IBA reserves 0x0000 (no partition)".into()),
        0x7fff => Err("P_Key 0x7fff is the default partition (every port is a member); pick 0x0001-0x7ffe".into()),
        0x8000.. => Err(format!(
            "P_Key {v:#x} does not fit in 15 bits: give the base key 0x0001-0x7ffe (bit 15 is the membership bit; say :full or :limited per member)"
        )),
        v => u16::try_from(v).map_err(|_| format!("P_Key {v:#x} is out of range")),
    }
}

/// `--ipoib [rate=R,mtu=M,sl=S,scope=C,qkey=Q]`: the IPoIB broadcast group of a
/// partition; values not given take OpenSM's defaults (10 Gb/s, 2048 bytes, SL 0,
/// link-local, Q_Key 0x0B1B). Ranges are checked here and again by ibsmd.
pub fn parse_ipoib(text: &str) -> Result<pb::PartitionIpoib, String> {
    let mut i = pb::PartitionIpoib {
        rate: 3,
        mtu: 4,
        sl: 0,
        scope: 2,
        q_key: 0x0B1B,
    };
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(|| {
            format!("--ipoib {item:?}: expected NAME=VALUE (rate, mtu, sl, scope, qkey)")
        })?;
        let v = parse_guid(v)
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("--ipoib {item:?}: {v:?} is not a 32-bit number"))?;
        let (field, ok) = match k.trim().to_ascii_lowercase().as_str() {
            "rate" => (&mut i.rate, (2..=24).contains(&v)),
            "mtu" => (&mut i.mtu, (1..=5).contains(&v)),
            "sl" => (&mut i.sl, v <= 15),
            "scope" => (&mut i.scope, v <= 15),
            "qkey" | "q_key" => (&mut i.q_key, true),
            other => {
                return Err(format!(
                    "--ipoib {item:?}: {other:?} is not rate, mtu, sl, scope or qkey"
                ))
            }
        };
        if !ok {
            return Err(format!(
                "--ipoib {item:?}: out of range (rate 2-24, mtu 1-5, sl 0-15, scope 0-15)"
            ));
        }
        *field = v;
    }
    Ok(i)
}

/// `mtu=M rate=R sl=S scope=C qkey=Q` of a partition's IPoIB group ("-": none).
fn ipoib_text(i: Option<&pb::PartitionIpoib>) -> String {
    i.map_or("-".into(), |i| {
        format!(
            "mtu={} rate={} sl={} scope={} qkey={:#x}",
            i.mtu, i.rate, i.sl, i.scope, i.q_key
        )
    })
}

/// The members of a `partitions set` (a newtype so clap takes the list as one value).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberList(pub Vec<pb::PartitionMemberEntry>);

/// [`parse_members`] for clap.
pub fn parse_member_list(text: &str) -> Result<MemberList, String> {
    parse_members(text).map(MemberList)
}

/// `GUID[:full|limited],...` (membership defaults to full, as ibsmd's --partition).
pub fn parse_members(text: &str) -> Result<Vec<pb::PartitionMemberEntry>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (g, kind) = match item.split_once(':') {
            Some((g, k)) => (g, Some(k)),
            None => (item, None),
        };
        let full = match kind.map(str::to_ascii_lowercase).as_deref() {
            None | Some("full") => true,
            Some("limited") => false,
            Some(other) => {
                return Err(format!(
                    "member {item:?}: membership {other:?} is neither full nor limited"
                ))
            }
        };
        let port_guid = parse_guid(g).map_err(|e| format!("member {item:?}: {e}"))?;
        if port_guid == 0 {
            return Err(format!("member {item:?}: GUID 0 names no port"));
        }
        if out
            .iter()
            .any(|m: &pb::PartitionMemberEntry| m.port_guid == port_guid)
        {
            return Err(format!(
                "member {item:?}: port {} is listed twice",
                fmt_guid(port_guid)
            ));
        }
        out.push(pb::PartitionMemberEntry { port_guid, full });
    }
    if out.is_empty() {
        return Err("a partition needs at least one member GUID".into());
    }
    Ok(out)
}

fn node_type(t: u32) -> &'static str {
    match t {
        1 => "CA",
        2 => "Switch",
        3 => "Router",
        _ => "?",
    }
}

fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// JSON of a topology answer.
pub fn topology_json(t: &pb::TopologyResponse) -> Value {
    json!({
        "source": t.source,
        "taken_unix_ms": t.taken_unix_ms,
        "switches": t.switches,
        "cas": t.cas,
        "routers": t.routers,
        "links": t.links,
        "nodes": t.nodes.iter().map(|n| json!({
            "node_guid": fmt_guid(n.node_guid),
            "type": node_type(n.node_type),
            "description": n.description,
            "num_ports": n.num_ports,
            "lids": n.ports.iter().filter(|p| p.lid != 0).map(|p| p.lid).collect::<Vec<_>>(),
            "ports": n.ports.iter().map(|p| json!({
                "num": p.num,
                "port_guid": fmt_guid(p.port_guid),
                "lid": p.lid,
                "lmc": p.lmc,
                "remote_node_guid": fmt_guid(p.remote_node_guid),
                "remote_port": p.remote_port,
                "port_state": p.port_state,
                "phys_state": p.phys_state,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Summary line plus one row per node.
pub fn topology_text(t: &pb::TopologyResponse) -> String {
    let mut out = format!(
        "{} nodes: {} switches, {} CAs, {} routers, {} links (from the {})\n",
        t.nodes.len(),
        t.switches,
        t.cas,
        t.routers,
        t.links,
        t.source
    );
    let mut rows = vec![["NODE_GUID", "TYPE", "LID(S)", "PORTS", "DESCRIPTION"]
        .map(String::from)
        .to_vec()];
    for n in &t.nodes {
        let lids: Vec<String> = n
            .ports
            .iter()
            .filter(|p| p.lid != 0)
            .map(|p| {
                if p.lmc > 0 {
                    format!("{}/lmc{}", p.lid, p.lmc)
                } else {
                    p.lid.to_string()
                }
            })
            .collect();
        let cabled = n.ports.iter().filter(|p| p.remote_node_guid != 0).count();
        // PortState known (from the master) and not Active: a link down or training.
        let not_active = n
            .ports
            .iter()
            .filter(|p| p.remote_node_guid != 0 && p.port_state != 0 && p.port_state != 4)
            .count();
        let ports = if not_active > 0 {
            format!("{cabled}/{} ({not_active} not Active)", n.num_ports)
        } else {
            format!("{cabled}/{}", n.num_ports)
        };
        rows.push(vec![
            fmt_guid(n.node_guid),
            node_type(n.node_type).into(),
            if lids.is_empty() {
                "-".into()
            } else {
                lids.join(",")
            },
            ports,
            n.description.clone(),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// JSON of a LID list.
pub fn lids_json(r: &pb::GetLidsResponse) -> Value {
    json!({
        "source": r.source,
        "lids": r.lids.iter().map(|l| json!({
            "port_guid": fmt_guid(l.port_guid),
            "base_lid": l.base_lid,
            "lmc": l.lmc,
            "description": l.description,
        })).collect::<Vec<_>>(),
    })
}

fn lids_text(r: &pb::GetLidsResponse) -> String {
    let mut rows = vec![["PORT_GUID", "BASE_LID", "LMC", "DESCRIPTION"]
        .map(String::from)
        .to_vec()];
    for l in &r.lids {
        rows.push(vec![
            fmt_guid(l.port_guid),
            l.base_lid.to_string(),
            l.lmc.to_string(),
            l.description.clone(),
        ]);
    }
    format!(
        "{} ports with a LID (from the {})\n{}",
        r.lids.len(),
        r.source,
        table(&rows)
    )
}

fn route_json(r: &pb::RouteResponse) -> Value {
    json!({
        "source": r.source,
        "src_lid": r.src_lid,
        "dst_lid": r.dst_lid,
        "src_port_guid": fmt_guid(r.src_port_guid),
        "dst_port_guid": fmt_guid(r.dst_port_guid),
        "hops": r.hops.iter().map(|h| json!({
            "node_guid": fmt_guid(h.node_guid),
            "description": h.description,
            "in_port": h.in_port,
            "out_port": h.out_port,
        })).collect::<Vec<_>>(),
    })
}

fn route_text(r: &pb::RouteResponse) -> String {
    let mut out = format!(
        "LID {} ({}) -> LID {} ({}): {} switch hops\n",
        r.src_lid,
        fmt_guid(r.src_port_guid),
        r.dst_lid,
        fmt_guid(r.dst_port_guid),
        r.hops.len()
    );
    let mut rows = vec![["HOP", "SWITCH_GUID", "IN", "OUT", "DESCRIPTION"]
        .map(String::from)
        .to_vec()];
    for (i, h) in r.hops.iter().enumerate() {
        rows.push(vec![
            (i + 1).to_string(),
            fmt_guid(h.node_guid),
            if h.in_port == 0 {
                "-".into()
            } else {
                h.in_port.to_string()
            },
            if h.out_port == 0 {
                "self".into()
            } else {
                h.out_port.to_string()
            },
            h.description.clone(),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

fn partitions_json(r: &pb::ListPartitionsResponse) -> Value {
    json!({
        "source": r.source,
        "outcome": r.outcome,
        "partitions": r.partitions.iter().map(|p| json!({
            "name": p.name,
            "p_key": format!("{:#06x}", p.p_key),
            "members": p.members.iter().map(|m| json!({
                "port_guid": fmt_guid(m.port_guid),
                "membership": if m.full { "full" } else { "limited" },
            })).collect::<Vec<_>>(),
            "ipoib": p.ipoib.as_ref().map(|i| json!({
                "rate": i.rate, "mtu": i.mtu, "sl": i.sl, "scope": i.scope,
                "q_key": format!("{:#x}", i.q_key),
            })),
            "groups": p.groups,
            "index0": p.index0,
        })).collect::<Vec<_>>(),
    })
}

fn partitions_text(r: &pb::ListPartitionsResponse) -> String {
    let mut out = String::new();
    if !r.outcome.is_empty() {
        out.push_str(&r.outcome);
        out.push('\n');
    }
    let mut rows = vec![["P_KEY", "NAME", "IPOIB", "MEMBERS"]
        .map(String::from)
        .to_vec()];
    if !r.partitions.iter().any(|p| p.p_key == 0x7fff) {
        rows.push(vec![
            "0x7fff".into(),
            "default".into(),
            "mtu=4 rate=3 sl=0 scope=2 qkey=0xb1b".into(),
            "every port (full)".into(),
        ]);
    }
    for p in &r.partitions {
        let mut m: Vec<String> = p.groups.clone();
        m.extend(p.members.iter().map(|m| {
            format!(
                "{}:{}",
                fmt_guid(m.port_guid),
                if m.full { "full" } else { "limited" }
            )
        }));
        if p.index0 {
            m.push("(indx0)".into());
        }
        rows.push(vec![
            format!("{:#06x}", p.p_key),
            p.name.clone(),
            ipoib_text(p.ipoib.as_ref()),
            m.join(","),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

fn groups_json(r: &pb::ListMulticastGroupsResponse) -> Value {
    json!({
        "source": r.source,
        "groups": r.groups.iter().map(|g| json!({
            "mgid": g.mgid,
            "mlid": format!("{:#06x}", g.mlid),
            "p_key": format!("{:#06x}", g.p_key),
            "q_key": format!("{:#x}", g.q_key),
            "mtu": g.mtu, "rate": g.rate, "sl": g.sl, "scope": g.scope,
            "well_known": g.well_known,
            "members": g.members.iter().map(|m| json!({
                "port_gid": m.port_gid,
                "port_guid": fmt_guid(m.port_guid),
                "join_state": join_state_text(m.join_state),
                "proxy_join": m.proxy_join,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// JoinState bits as words (full, non, send-only; several joined by `+`).
fn join_state_text(bits: u32) -> String {
    let mut v = Vec::new();
    for (bit, name) in [
        (1, "full"),
        (2, "non"),
        (4, "send-only"),
        (8, "send-only-full"),
    ] {
        if bits & bit != 0 {
            v.push(name);
        }
    }
    if v.is_empty() {
        "none".into()
    } else {
        v.join("+")
    }
}

fn groups_text(r: &pb::ListMulticastGroupsResponse) -> String {
    let mut out = format!("source: {}\n", r.source);
    let mut rows = vec![["MLID", "MGID", "P_KEY", "Q_KEY", "MTU", "RATE", "MEMBERS"]
        .map(String::from)
        .to_vec()];
    for g in &r.groups {
        let m: Vec<String> = g
            .members
            .iter()
            .map(|m| {
                format!(
                    "{}:{}",
                    fmt_guid(m.port_guid),
                    join_state_text(m.join_state)
                )
            })
            .collect();
        rows.push(vec![
            format!("{:#06x}", g.mlid),
            g.mgid.clone(),
            format!("{:#06x}", g.p_key),
            format!("{:#x}", g.q_key),
            g.mtu.to_string(),
            g.rate.to_string(),
            if m.is_empty() {
                if g.well_known {
                    "(none; kept: made by the SM)".into()
                } else {
                    "(none)".into()
                }
            } else {
                m.join(",")
            },
        ]);
    }
    out.push_str(&table(&rows));
    out
}

fn members_json(r: &pb::ListMembersResponse) -> Value {
    json!({
        "node_id": r.node_id,
        "leader": r.leader,
        "term": r.term,
        "applied_index": r.applied_index,
        "members": r.members.iter().map(|m| json!({
            "node_id": m.node_id, "addr": m.addr, "voter": m.voter, "leader": m.leader,
        })).collect::<Vec<_>>(),
    })
}

fn members_text(r: &pb::ListMembersResponse) -> String {
    let mut rows = vec![["NODE_ID", "ADDR", "ROLE", "LEADER"]
        .map(String::from)
        .to_vec()];
    for m in &r.members {
        rows.push(vec![
            m.node_id.to_string(),
            m.addr.clone(),
            if m.voter { "voter" } else { "learner" }.into(),
            if m.leader { "*".into() } else { String::new() },
        ]);
    }
    format!(
        "term {}, leader {}, applied {} (this is node {})\n{}",
        r.term,
        r.leader,
        r.applied_index,
        r.node_id,
        table(&rows)
    )
}

fn print(json_out: bool, j: Value, text: String) {
    if json_out {
        println!("{j}");
    } else {
        print!("{text}");
    }
}

/// Run one Fabric/Cluster request.
pub async fn run(target: &Target, req: FabricRequest) -> Result<(), CtlError> {
    let ch = channel(target).await?;
    let mut fabric = FabricClient::new(ch.clone());
    let mut cluster = ClusterClient::new(ch);
    let j = target.json;
    match req {
        FabricRequest::Topology => {
            let r = unary(
                target,
                "GetTopology",
                fabric.get_topology(pb::GetTopologyRequest {}),
            )
            .await?;
            print(j, topology_json(&r), topology_text(&r));
        }
        FabricRequest::Lids { format } => {
            let r = unary(target, "GetLids", fabric.get_lids(pb::GetLidsRequest {})).await?;
            match format {
                LidsFormat::Text => print(false, Value::Null, lids_text(&r)),
                LidsFormat::Json => print(true, lids_json(&r), String::new()),
                LidsFormat::Guid2lid => print(false, Value::Null, lids_guid2lid(&r)),
            }
        }
        FabricRequest::Route { src, dst } => {
            let r = unary(
                target,
                "GetRoute",
                fabric.get_route(pb::GetRouteRequest {
                    src_lid: u32::from(src),
                    dst_lid: u32::from(dst),
                }),
            )
            .await?;
            print(j, route_json(&r), route_text(&r));
        }
        FabricRequest::Groups => {
            let r = unary(
                target,
                "ListMulticastGroups",
                fabric.list_multicast_groups(pb::ListMulticastGroupsRequest {}),
            )
            .await?;
            print(j, groups_json(&r), groups_text(&r));
        }
        FabricRequest::Services => {
            let (json, text) = crate::sa_lists::services(target, &mut fabric).await?;
            print(j, json, text);
        }
        FabricRequest::Subscriptions => {
            let (json, text) = crate::sa_lists::subscriptions(target, &mut fabric).await?;
            print(j, json, text);
        }
        FabricRequest::Partitions => {
            let r = unary(
                target,
                "ListPartitions",
                fabric.list_partitions(pb::ListPartitionsRequest {}),
            )
            .await?;
            print(j, partitions_json(&r), partitions_text(&r));
        }
        FabricRequest::SetPartition(p) => {
            let r = unary(
                target,
                "SetPartition",
                fabric.set_partition(pb::SetPartitionRequest { partition: Some(p) }),
            )
            .await?;
            print(j, partitions_json(&r), partitions_text(&r));
        }
        FabricRequest::DeletePartition(pkey) => {
            let r = unary(
                target,
                "DeletePartition",
                fabric.delete_partition(pb::DeletePartitionRequest {
                    p_key: u32::from(pkey),
                }),
            )
            .await?;
            print(j, partitions_json(&r), partitions_text(&r));
        }
        FabricRequest::ReloadPartitions => {
            let r = unary(
                target,
                "ReloadPartitions",
                fabric.reload_partitions(pb::ReloadPartitionsRequest {}),
            )
            .await?;
            let keys: Vec<String> = r.p_keys.iter().map(|k| format!("{k:#06x}")).collect();
            let json = serde_json::json!({
                "file": r.file,
                "partitions": r.partitions,
                "p_keys": keys,
                "not_applied": r.not_applied,
            });
            let mut text = format!(
                "reloaded {}: {} partitions [{}]\n",
                r.file,
                r.partitions,
                keys.join(", ")
            );
            for n in &r.not_applied {
                text.push_str(&format!("not applied: {n}\n"));
            }
            print(j, json, text);
        }
        FabricRequest::Members => {
            let r = unary(
                target,
                "ListMembers",
                cluster.list_members(pb::ListMembersRequest {}),
            )
            .await?;
            print(j, members_json(&r), members_text(&r));
        }
        FabricRequest::AddMember { id, addr } => {
            let r = unary(
                target,
                "AddMember",
                cluster.add_member(pb::AddMemberRequest { node_id: id, addr }),
            )
            .await?;
            print(j, members_json(&r), members_text(&r));
        }
        FabricRequest::RemoveMember { id } => {
            let r = unary(
                target,
                "RemoveMember",
                cluster.remove_member(pb::RemoveMemberRequest { node_id: id }),
            )
            .await?;
            print(j, members_json(&r), members_text(&r));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pkeys_say_why() {
        assert_eq!(parse_pkey("0x12"), Ok(0x12));
        assert_eq!(parse_pkey("32766"), Ok(0x7ffe));
        assert!(parse_pkey("0").unwrap_err().contains("reserves"));
        assert!(parse_pkey("0x7fff")
            .unwrap_err()
            .contains("default partition"));
        assert!(parse_pkey("0x8012").unwrap_err().contains("15 bits"));
        assert!(parse_pkey("zz").unwrap_err().contains("not a P_Key"));
    }

    #[test]
    fn members_parse() {
        let m = parse_members("0x10:full, 0x11:limited,0x12").expect("members");
        assert_eq!(
            m.iter().map(|m| (m.port_guid, m.full)).collect::<Vec<_>>(),
            vec![(0x10, true), (0x11, false), (0x12, true)]
        );
        assert!(parse_members("0x10:both").unwrap_err().contains("neither"));
        assert!(parse_members("0x10,0x10").unwrap_err().contains("twice"));
        assert!(parse_members("").unwrap_err().contains("at least one"));
        assert!(parse_members("0x0").unwrap_err().contains("GUID 0"));
    }

    #[test]
    fn lids_as_opensms_guid2lid_file() {
        let entry = |port_guid, base_lid, lmc| pb::LidEntry {
            port_guid,
            base_lid,
            lmc,
            description: String::new(),
        };
        let r = pb::GetLidsResponse {
            source: "master".into(),
            lids: vec![
                entry(0x0002_c903_0000_0020, 0x40, 2),
                entry(0x0002_c903_0000_0010, 0x11, 0),
            ],
        };
        assert_eq!(
            lids_guid2lid(&r),
            "0x0002c90300000010 0x0011 0x0011\n\n0x0002c90300000020 0x0040 0x0043\n\n"
        );
        // What ibsmd's own --guid2lid reads back.
        let mut lm = ibsm_fabric::lid::LidManager::default();
        assert_eq!(lm.import_guid2lid(&lids_guid2lid(&r)), Ok(2));
        assert_eq!(lm.lid_range(0x0002_c903_0000_0020), Some((0x40, 0x43)));
    }

    #[test]
    fn lids_parse() {
        assert_eq!(parse_lid("7"), Ok(7));
        assert_eq!(parse_lid("0xbfff"), Ok(0xbfff));
        assert!(parse_lid("0").is_err());
        assert!(parse_lid("0xc000").unwrap_err().contains("unicast"));
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,40}") {
            let _ = parse_pkey(&s);
            let _ = parse_members(&s);
            let _ = parse_lid(&s);
        }

        #[test]
        fn pkey_accepts_exactly_1_to_7ffe(v in 0u32..0x10000) {
            prop_assert_eq!(parse_pkey(&format!("{v:#x}")).is_ok(), (1..0x7fff).contains(&v));
        }
    }
}
