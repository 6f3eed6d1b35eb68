//! The API's answers as the console's JSON: the same `ibsm.v1` messages the gRPC
//! handlers return, with every 64-bit GUID as `0x` hex text (a JavaScript number holds
//! only 53 bits) and states by name.

use ibsm_proto::v1 as pb;
use serde_json::{json, Value};

/// `0x` and 16 hex digits, as ibsmctl prints GUIDs.
pub fn guid_hex(g: u64) -> String {
    format!("{g:#018x}")
}

/// An `SmState` number by its IBA name.
pub fn state_name(s: i32) -> &'static str {
    match pb::SmState::try_from(s) {
        Ok(pb::SmState::Discovering) => "DISCOVERING",
        Ok(pb::SmState::Standby) => "STANDBY",
        Ok(pb::SmState::Master) => "MASTER",
        _ => "NOTACTIVE",
    }
}

/// One instance of ours: its `GetStatus`.
pub fn status_json(name: &str, s: &pb::Status) -> Value {
    let sa = s.sa.unwrap_or_default();
    json!({
        "name": name, "running": true, "node_name": s.node_name,
        "guid": guid_hex(s.guid), "lid": s.lid, "state": state_name(s.state),
        "priority": s.priority, "act_count": s.act_count,
        "master_guid": guid_hex(s.master_guid), "master_lid": s.master_lid,
        "epoch": s.epoch, "raft_role": s.raft_role, "raft_term": s.raft_term,
        "raft_leader": s.raft_leader, "applied_index": s.applied_index,
        "leader_applied_index": sa.leader_applied_index,
        "sa_replica_current": sa.replica_current,
        "degraded": s.degraded, "degraded_reason": s.degraded_reason,
        "alarms": s.alarms, "last_sweep": s.last_sweep,
        "last_change_sweep": s.last_change_sweep,
    })
}

/// PortInfo PortState by name ("" when unknown).
pub fn port_state_name(s: u32) -> &'static str {
    match s {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "",
    }
}

/// PortInfo PortPhysicalState by name ("" when unknown).
pub fn phys_state_name(s: u32) -> &'static str {
    match s {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => "",
    }
}

/// One node of `GetTopology` with its ports (and their states, by name). A node listed
/// with no port count is the far end of a pulled cable, no longer reached (the answer
/// keeps it so the cable is drawn): `"unreached": true`.
pub fn node_json(n: &pb::TopoNodeEntry) -> Value {
    let ports: Vec<Value> = n
        .ports
        .iter()
        .map(|p| {
            json!({"num": p.num, "guid": guid_hex(p.port_guid), "lid": p.lid,
                   "peer": if p.remote_node_guid == 0 { Value::Null } else { Value::from(guid_hex(p.remote_node_guid)) },
                   "peer_port": p.remote_port, "state": port_state_name(p.port_state),
                   "phys": phys_state_name(p.phys_state)})
        })
        .collect();
    let mut v = json!({"guid": guid_hex(n.node_guid), "type": n.node_type,
           "desc": n.description, "ports": ports});
    if n.num_ports == 0 {
        v["unreached"] = Value::Bool(true);
    }
    v
}

/// `GetTopology`: nodes with their cabled ports.
pub fn topology_json(t: &pb::TopologyResponse) -> Value {
    let nodes: Vec<Value> = t.nodes.iter().map(node_json).collect();
    json!({"source": t.source, "taken_unix_ms": t.taken_unix_ms, "switches": t.switches,
           "cas": t.cas, "routers": t.routers, "links": t.links, "nodes": nodes})
}

/// `GetLids`.
pub fn lids_json(l: &pb::GetLidsResponse) -> Value {
    let lids: Vec<Value> = l
        .lids
        .iter()
        .map(|e| json!({"guid": guid_hex(e.port_guid), "lid": e.base_lid, "lmc": e.lmc, "desc": e.description}))
        .collect();
    json!({"source": l.source, "lids": lids})
}

/// `GetRoute`.
pub fn route_json(r: &pb::RouteResponse) -> Value {
    let hops: Vec<Value> = r
        .hops
        .iter()
        .map(|h| json!({"guid": guid_hex(h.node_guid), "desc": h.description, "in_port": h.in_port, "out_port": h.out_port}))
        .collect();
    json!({"source": r.source, "src_lid": r.src_lid, "dst_lid": r.dst_lid,
           "src_port": guid_hex(r.src_port_guid), "dst_port": guid_hex(r.dst_port_guid), "hops": hops})
}

/// `ListPartitions`.
pub fn partitions_json(p: &pb::ListPartitionsResponse) -> Value {
    let parts: Vec<Value> = p
        .partitions
        .iter()
        .map(|e| {
            let members: Vec<Value> = e
                .members
                .iter()
                .map(|m| json!({"guid": guid_hex(m.port_guid), "full": m.full}))
                .collect();
            json!({"name": e.name, "p_key": format!("{:#06x}", e.p_key), "members": members,
                   "groups": e.groups, "ipoib": e.ipoib.is_some()})
        })
        .collect();
    json!({"source": p.source, "partitions": parts})
}

/// `ListMulticastGroups`.
pub fn groups_json(g: &pb::ListMulticastGroupsResponse) -> Value {
    let groups: Vec<Value> = g
        .groups
        .iter()
        .map(|e| {
            json!({"mgid": e.mgid, "mlid": e.mlid, "p_key": format!("{:#06x}", e.p_key),
                   "mtu": e.mtu, "rate": e.rate, "sl": e.sl, "well_known": e.well_known,
                   "members": e.members.iter().map(|m| json!({"guid": guid_hex(m.port_guid), "join_state": m.join_state})).collect::<Vec<_>>()})
        })
        .collect();
    json!({"source": g.source, "groups": groups})
}
