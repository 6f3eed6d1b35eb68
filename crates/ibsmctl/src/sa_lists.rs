//! `ibsmctl services` and `ibsmctl subscriptions`: the Subnet Administrator's
//! ServiceRecords and InformInfo subscriptions through `ibsm.v1.Fabric`
//! (`ListServiceRecords`, `ListSubscriptions`), answered by the MASTER's SA or by a
//! standby from its replica, as `ibsmctl groups`. Text tables, or `--json` (GUIDs as
//! `"0x%016x"` strings, P_Keys and IDs as hex strings, as the other commands).

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::fabric_client::FabricClient;
use serde_json::{json, Value};

use crate::args::fmt_guid;
use crate::control::{unary, AuthChannel, CtlError, Target};

fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
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

fn lease_text(lease: u32) -> String {
    if lease == u32::MAX {
        "infinite".into()
    } else {
        format!("{lease}s")
    }
}

pub fn services_json(r: &pb::ListServiceRecordsResponse) -> Value {
    json!({
        "source": r.source,
        "services": r.services.iter().map(|s| json!({
            "service_id": format!("{:#018x}", s.service_id),
            "service_gid": s.service_gid,
            "port_guid": fmt_guid(s.port_guid),
            "service_p_key": format!("{:#06x}", s.service_p_key),
            // Seconds; null: never expires.
            "service_lease": (s.service_lease != u32::MAX).then_some(s.service_lease),
            "service_name": s.service_name,
            "service_key": s.service_key.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        })).collect::<Vec<_>>(),
    })
}

pub fn services_text(r: &pb::ListServiceRecordsResponse) -> String {
    let mut out = format!("source: {}\n", r.source);
    if r.services.is_empty() {
        out.push_str("no services registered\n");
        return out;
    }
    let mut rows = vec![["SERVICE_ID", "NAME", "PORT_GUID", "P_KEY", "LEASE"]
        .map(String::from)
        .to_vec()];
    for s in &r.services {
        rows.push(vec![
            format!("{:#018x}", s.service_id),
            if s.service_name.is_empty() {
                "-".into()
            } else {
                s.service_name.clone()
            },
            fmt_guid(s.port_guid),
            format!("{:#06x}", s.service_p_key),
            lease_text(s.service_lease),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// "all" for the InformInfo wildcard values.
fn or_all(v: u32, all: u32, hex_width: usize) -> String {
    if v == all {
        "all".into()
    } else {
        format!("{v:#0hex_width$x}")
    }
}

pub fn subscriptions_json(r: &pb::ListSubscriptionsResponse) -> Value {
    json!({
        "source": r.source,
        "subscriptions": r.subscriptions.iter().map(|s| json!({
            "subscriber_gid": s.subscriber_gid,
            "enum": s.subscriber_enum,
            "lid": s.lid,
            "qpn": s.qpn,
            "is_generic": s.is_generic,
            // Generic: the trap number; vendor: the device id. null: all.
            "trap_number": (s.trap_number != 0xFFFF).then_some(s.trap_number),
            "notice_type": (s.notice_type != 0xFFFF).then_some(s.notice_type),
            "producer_type": (s.producer_type != 0xFF_FFFF).then_some(s.producer_type),
            "gid": s.gid,
            "lid_range_begin": s.lid_range_begin,
            "lid_range_end": s.lid_range_end,
        })).collect::<Vec<_>>(),
    })
}

pub fn subscriptions_text(r: &pb::ListSubscriptionsResponse) -> String {
    let mut out = format!("source: {}\n", r.source);
    if r.subscriptions.is_empty() {
        out.push_str("no subscriptions\n");
        return out;
    }
    let mut rows = vec![[
        "SUBSCRIBER",
        "LID",
        "QPN",
        "KIND",
        "TRAP",
        "TYPE",
        "PRODUCER",
        "PORTS",
    ]
    .map(String::from)
    .to_vec()];
    for s in &r.subscriptions {
        let ports = if s.gid != "::" {
            s.gid.clone()
        } else if s.lid_range_begin == 0xFFFF {
            "all".into()
        } else {
            format!("LID {}-{}", s.lid_range_begin, s.lid_range_end)
        };
        rows.push(vec![
            s.subscriber_gid.clone(),
            s.lid.to_string(),
            s.qpn.to_string(),
            if s.is_generic { "generic" } else { "vendor" }.into(),
            or_all(s.trap_number, 0xFFFF, 0),
            or_all(s.notice_type, 0xFFFF, 0),
            or_all(s.producer_type, 0xFF_FFFF, 0),
            ports,
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// `ibsmctl services`.
pub async fn services(
    target: &Target,
    fabric: &mut FabricClient<AuthChannel>,
) -> Result<(Value, String), CtlError> {
    let r = unary(
        target,
        "ListServiceRecords",
        fabric.list_service_records(pb::ListServiceRecordsRequest {}),
    )
    .await?;
    Ok((services_json(&r), services_text(&r)))
}

/// `ibsmctl subscriptions`.
pub async fn subscriptions(
    target: &Target,
    fabric: &mut FabricClient<AuthChannel>,
) -> Result<(Value, String), CtlError> {
    let r = unary(
        target,
        "ListSubscriptions",
        fabric.list_subscriptions(pb::ListSubscriptionsRequest {}),
    )
    .await?;
    Ok((subscriptions_json(&r), subscriptions_text(&r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_and_subscriptions_render_as_text_and_json() {
        let r = pb::ListServiceRecordsResponse {
            source: "replica".into(),
            services: vec![pb::ServiceRecordEntry {
                service_id: 0x1000_0000_0000_0001,
                service_gid: "fe80::2:c903:0:1".into(),
                port_guid: 0x0002_c903_0000_0001,
                service_p_key: 0xFFFF,
                service_lease: u32::MAX,
                service_name: "ibsm-test".into(),
                service_key: vec![0xAB; 16],
            }],
        };
        let t = services_text(&r);
        assert!(t.contains("source: replica"), "{t}");
        assert!(t.contains("ibsm-test") && t.contains("infinite"), "{t}");
        let j = services_json(&r);
        assert_eq!(j["services"][0]["port_guid"], "0x0002c90300000001");
        assert!(j["services"][0]["service_lease"].is_null());

        let r = pb::ListSubscriptionsResponse {
            source: "master".into(),
            subscriptions: vec![pb::SubscriptionEntry {
                subscriber_gid: "fe80::2:c903:0:2".into(),
                lid: 5,
                qpn: 1,
                is_generic: true,
                trap_number: 64,
                notice_type: 0xFFFF,
                producer_type: 0xFF_FFFF,
                gid: "::".into(),
                lid_range_begin: 0xFFFF,
                lid_range_end: 0,
                ..Default::default()
            }],
        };
        let t = subscriptions_text(&r);
        assert!(t.contains("generic") && t.contains("0x40"), "{t}");
        let j = subscriptions_json(&r);
        assert_eq!(j["subscriptions"][0]["trap_number"], 64);
        assert!(j["subscriptions"][0]["notice_type"].is_null());
    }
}
