//! The Subnet Administrator's tables as the `Fabric` service lists them
//! (`ListMulticastGroups`, `ListServiceRecords`, `ListSubscriptions`): decoded from
//! the replicated form ([`ibsm_core::sa::SaTables`]) that both the MASTER's own SA
//! and a standby's replica hold, so either answers the same way.

use std::time::Duration;

use ibsm_core::sa::{gid_text, split_gid, Informs, SaTables, Services};
use ibsm_proto::v1 as pb;

/// The groups of replicated SA tables as the API lists them.
pub fn group_entries(tables: &ibsm_core::sa::SaTables) -> Vec<pb::McGroupEntry> {
    let Some((groups, _)) = ibsm_core::sa::McGroups::from_tables(tables) else {
        return Vec::new();
    };
    groups
        .iter()
        .map(|g| {
            let p = &g.params;
            pb::McGroupEntry {
                mgid: ibsm_core::sa::gid_text(&p.mgid),
                mlid: u32::from(p.mlid),
                p_key: u32::from(p.p_key),
                q_key: p.q_key,
                mtu: u32::from(p.mtu),
                rate: u32::from(p.rate),
                sl: u32::from(p.sl),
                scope: u32::from(p.scope),
                well_known: g.well_known,
                members: g
                    .members
                    .iter()
                    .map(|(gid, m)| pb::McMemberEntry {
                        port_gid: ibsm_core::sa::gid_text(gid),
                        port_guid: ibsm_core::sa::split_gid(gid).1,
                        join_state: u32::from(m.join_state.0),
                        proxy_join: m.proxy_join,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The registered ServiceRecords, in key order (ServiceID, ServiceGID, P_Key).
pub fn service_entries(tables: &SaTables) -> Vec<pb::ServiceRecordEntry> {
    // The lease start does not matter here: only the records are listed.
    let Some((services, _)) = Services::from_tables(tables, Duration::ZERO) else {
        return Vec::new();
    };
    services
        .iter()
        .map(|s| {
            let r = &s.record;
            let raw = r.service_name.as_bytes();
            let name = raw.split(|b| *b == 0).next().unwrap_or_default();
            pb::ServiceRecordEntry {
                service_id: r.service_id,
                service_gid: gid_text(&r.service_gid),
                port_guid: split_gid(&r.service_gid).1,
                service_p_key: u32::from(r.service_p_key),
                service_lease: r.service_lease,
                service_name: String::from_utf8_lossy(name).into_owned(),
                service_key: r.service_key.to_vec(),
            }
        })
        .collect()
}

/// The InformInfo subscriptions with where their Reports go.
pub fn subscription_entries(tables: &SaTables) -> Vec<pb::SubscriptionEntry> {
    let Some((informs, _)) = Informs::from_tables(tables) else {
        return Vec::new();
    };
    informs
        .iter()
        .map(|s| {
            let i = &s.record.inform_info;
            pb::SubscriptionEntry {
                subscriber_gid: gid_text(&s.record.subscriber_gid),
                subscriber_enum: u32::from(s.record.subscriber_enum),
                lid: u32::from(s.to.lid),
                qpn: s.to.qpn,
                is_generic: i.is_generic != 0,
                trap_number: u32::from(i.trap_number),
                notice_type: u32::from(i.notice_type),
                producer_type: i.producer_type,
                gid: gid_text(&i.gid),
                lid_range_begin: u32::from(i.lid_range_begin),
                lid_range_end: u32::from(i.lid_range_end),
            }
        })
        .collect()
}
