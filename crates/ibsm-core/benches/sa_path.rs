//! All-to-all PathRecords through the SA agent on 3-level fat trees routed min-hop
//! (k = 16 by default: 1,024 HCAs, 320 switches, 1,344 end ports): every HCA sends
//! `saquery -p`'s query (a GetTable PathRecord with an empty template: every path
//! from the requester) and ACKs the RMPP windows as a client does, so the time
//! covers the whole answer (lookups both ways, records, encoding, segments). The
//! first query also builds the snapshot's path table; it is timed apart.
//!
//! `cargo bench -p ibsm-core --bench sa_path`; `SA_PATH_K=16,24` picks the sizes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_core::sa::{SaAgent, SaConfig, SaContext, SaFabric, DEFAULT_SUBNET_PREFIX};
use ibsm_fabric::lid::{LidConfig, LidManager};
use ibsm_fabric::routing::{self, RoutingOptions};
use ibsm_fabric::{gen, Topology};
use ibsm_mad::attr::{NodeInfo, PKey, PortInfo};
use ibsm_mad::sa::{ComponentMask, PathRecord, RmppProgress, RmppReassembler, SaMad};
use ibsm_mad::{MadAddress, Method};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The SA snapshot of `topo` routed min-hop, every port with MTUCap 4096 and the
/// topology's rates, every end port in the default partition.
fn fabric(mut topo: Topology) -> Result<SaFabric, String> {
    LidManager::new(LidConfig { lmc: 0 })
        .assign(&mut topo)
        .map_err(|e| e.to_string())?;
    let ft = routing::min_hop(&topo, &RoutingOptions::default()).map_err(|e| e.to_string())?;
    let mut port_info = Vec::new();
    let mut lfts = Vec::new();
    let mut pkeys = HashMap::new();
    for (idx, node) in topo.iter() {
        let mut v = Vec::new();
        for p in 0..=node.num_ports() {
            v.push(node.port(p).map(|port| PortInfo {
                gid_prefix: DEFAULT_SUBNET_PREFIX,
                lid: port.lid,
                link_width_active: port.link_width.to_iba(),
                link_speed_active: port.link_speed.speed_active(),
                mtu_cap: 5,
                neighbor_mtu: 5,
                ..PortInfo::default()
            }));
            if let Some(port) = node.port(p).filter(|x| x.port_guid != 0) {
                if (p == 0) == node.is_switch() {
                    pkeys.insert(port.port_guid, vec![PKey::DEFAULT_FULL]);
                }
            }
        }
        port_info.push(v);
        lfts.push(ft.lft(idx).map(Arc::from));
    }
    let n = topo.len();
    Ok(SaFabric::new(
        1,
        DEFAULT_SUBNET_PREFIX,
        1,
        0,
        topo,
        vec![NodeInfo::default(); n],
        port_info,
        vec![None; n],
        lfts,
        pkeys,
    ))
}

/// One `saquery -p` from `lid`: records received.
fn query(sa: &mut SaAgent, ctx: &SaContext<'_>, lid: u16, tid: u64) -> usize {
    let from = MadAddress::gsi(lid);
    let Ok(req) = SaMad::query(
        Method::GET_TABLE,
        tid,
        &PathRecord::default(),
        ComponentMask::NONE,
    ) else {
        return 0;
    };
    sa.handle_mad(Duration::ZERO, ctx, &req.encode(), from);
    let mut r = RmppReassembler::new(1 << 24);
    loop {
        let mut last = None;
        while let Some(out) = sa.poll_transmit() {
            let Ok(s) = SaMad::decode(&out.mad) else {
                return 0;
            };
            match r.push(&s) {
                Ok(RmppProgress::Complete(m)) => return m.records().count(),
                Ok(RmppProgress::Incomplete { .. }) => last = Some(s),
                Err(_) => return 0,
            }
        }
        let Some(s) = last else { return 0 };
        let ack = s.rmpp_ack(s.rmpp.seg_num() + 32);
        sa.handle_mad(Duration::ZERO, ctx, &ack.encode(), from);
    }
}

fn main() {
    let ks: Vec<u32> = std::env::var("SA_PATH_K")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16]);
    println!(
        "{:>4} {:>6} {:>6} {:>10} {:>12} {:>10} {:>12}",
        "k", "HCAs", "ends", "records", "first ms", "all ms", "ns/record"
    );
    for k in ks {
        let f = match gen::fat_tree_3level(k)
            .map_err(|e| e.to_string())
            .and_then(fabric)
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let hcas: Vec<u16> = f
            .topology
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .filter_map(|(_, n)| Some(n.port(1)?.lid))
            .collect();
        let ctx = SaContext {
            fabric: Some(&f),
            sms: &[],
            is_master: true,
            master_lid: 1,
            mfts: None,
        };
        let mut sa = SaAgent::new(SaConfig::default());
        let t0 = Instant::now();
        let first = query(&mut sa, &ctx, hcas[0], 1);
        let t_first = t0.elapsed();
        let t0 = Instant::now();
        let mut records = 0usize;
        for (i, &lid) in hcas.iter().enumerate() {
            records += query(&mut sa, &ctx, lid, 2 + i as u64);
        }
        let t_all = t0.elapsed();
        println!(
            "{:>4} {:>6} {:>6} {:>10} {:>12.1} {:>10.1} {:>12.0}",
            k,
            hcas.len(),
            first,
            records,
            ms(t_first),
            ms(t_all),
            t_all.as_secs_f64() * 1e9 / records.max(1) as f64
        );
    }
}
