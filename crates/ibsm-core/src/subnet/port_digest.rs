//! What a master programmed into each port's P_Key, SLtoVL and VLArbitration
//! tables, as a digest per port, so that a successor writes only what changed.
//!
//! A master remembers what it wrote ([`Programmed`]) and a later sweep of the same
//! mastership sends only differences. A new master starts with no such record, so
//! its first distribution used to re-send every P_Key table, SLtoVL and
//! VLArbitration block of the fabric (~16.7k of the 18k distribution SMPs of a
//! takeover on a k=16 fat tree). Instead, the master publishes with its sweep
//! record ([`SubnetManager::programmed_port_digests`]) a [`PortDigest`] per port:
//! FNV-1a 64 of the P_Key block it holds, and of the SLtoVL table and the
//! VLArbitration blocks written to it (the tables themselves, as encoded on the
//! wire, so a change of the defaults in a later release still counts as a
//! difference). On a **verified takeover** (the known discovery verified,
//! `super::verify`; the cabling as replicated; no LID assigned or moved), the new
//! master computes the same digest of what *it* wants each port to hold, from its
//! own configuration (the replicated partitions included); where it equals the
//! replicated one, the port is taken as programmed (seeded into [`Programmed`]) and
//! the distribution skips its tables. A port whose digest differs, or that the
//! replica does not know, is written as before. The PortInfo Set of every end port
//! stays (it carries the new MasterSMLID, IBA 14.4.4); it is the only PortInfo Set
//! the distribution sends such a port, so there is nothing to merge it with.
//!
//! # Why this is safe, and the edge that remains
//!
//! The digests describe what a *completed* sweep programmed: they are published
//! with its record at sweep end. A master killed while programming a change had a
//! desired state that differs from the digests it last published; a change of the
//! replicated configuration (partitions through the API, which are replicated as
//! they are requested) makes the successor's desired state differ from those
//! digests too, so it writes those ports. A port whose tables a reset cleared
//! (a node rebooted) comes back in Init and becomes Active only once a master
//! programmed its node in full (activation waits for both end nodes' distribution,
//! `super::activation`); the verification requires every end port's PortState as
//! the standby last saw it (all Active) and every switch's PortStateChange clear,
//! so such a port fails it and the takeover discovers and writes everything.
//!
//! The edge: a master whose *local*, unreplicated configuration changed
//! (`--partitions-file` reloaded, another `max_operational_vls`) and that was
//! killed while writing the change. Its published digests still describe the old
//! tables; a successor whose own configuration equals the old one finds them equal
//! and skips ports the dying master had already rewritten. Such a port keeps the
//! new table until the successor's configuration changes or a heavy sweep of a later
//! mastership finds a difference. Local partition files should be the same on every
//! SM (the replicated API partitions are); closing this edge for good needs the
//! master to mark "programming in progress" in the replica before its first Set,
//! one Raft write on the path of every configuration change, which is not taken.

use std::collections::HashMap;

use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{PKey, PKeyTable, SmpAttribute};
use ibsm_mad::modifier::VlArbSection;
use ibsm_mad::PortInfo;

use super::config::SubnetConfig;
use super::inherit::{PortDigest, SeedReport};
use super::manager::SubnetManager;
use super::program;
use super::sweep::{Programmed, Sweep};
use crate::discovery::DiscoveryResult;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Digest of P_Key block 0 (`keys` as raw 16-bit entries).
pub(super) fn p_key_digest(keys: &[u16; 32]) -> u64 {
    fnv(
        FNV_OFFSET,
        &PKeyTable {
            keys: keys.map(PKey),
        }
        .encode(),
    )
}

/// Digest of the QoS tables a link port gets with `op_vls` OperationalVLs: the
/// SLtoVL table when one is written to it (every CA port; switch ports only with
/// [`SubnetConfig::switch_sl2vl`]) and every VLArbitration block its caps give.
pub(super) fn qos_digest(op_vls: u8, caps: Option<&PortInfo>, sl2vl: bool) -> u64 {
    let mut h = fnv(FNV_OFFSET, &[u8::from(sl2vl)]);
    if sl2vl {
        h = fnv(h, &program::sl2vl_table(op_vls).encode());
    }
    if let Some(pi) = caps {
        let (low, high) = (pi.vl_arbitration_low_cap, pi.vl_arbitration_high_cap);
        for section in program::vlarb_sections(low, high) {
            let (cap, tag) = match section {
                VlArbSection::LowLower => (low, 1),
                VlArbSection::LowUpper => (low, 2),
                VlArbSection::HighLower => (high, 3),
                VlArbSection::HighUpper => (high, 4),
            };
            h = fnv(h, &[tag]);
            h = fnv(h, &program::vlarb_table(op_vls, cap, section).encode());
        }
    }
    h
}

fn caps_of(res: &DiscoveryResult, node: NodeIdx, port: u8) -> Option<&PortInfo> {
    res.port_info
        .get(node.as_usize())?
        .get(usize::from(port))?
        .as_ref()
}

/// The digest of what `prog` says port `port` of `node` holds.
fn recorded(
    res: &DiscoveryResult,
    cfg: &SubnetConfig,
    prog: &Programmed,
    node: NodeIdx,
    port: u8,
) -> Option<PortDigest> {
    let nd = res.topology.node(node)?;
    let key = (nd.node_guid, port);
    let p_key = prog.pkeys.get(&key).map(p_key_digest);
    let qos = prog.qos.get(&key).map(|&vls| {
        qos_digest(
            vls,
            caps_of(res, node, port),
            !nd.is_switch() || cfg.switch_sl2vl,
        )
    });
    (p_key.is_some() || qos.is_some()).then_some(PortDigest { p_key, qos })
}

/// Seed `prog` from `replicated` for every port of the sweep whose desired tables'
/// digest equals the replicated one (see the module doc): the P_Key block and the
/// QoS tables each on their own. Call once the sweep's
/// partitions are final (the programming stage starts).
pub(super) fn seed(
    sw: &Sweep,
    cfg: &SubnetConfig,
    prog: &mut Programmed,
    replicated: &HashMap<(u64, u8), PortDigest>,
) -> SeedReport {
    let mut report = SeedReport::default();
    let res = &sw.res;
    for (idx, nd) in res.topology.iter() {
        let is_switch = nd.is_switch();
        let links = super::activation::link_ports(res, idx);
        let mut ports: Vec<u8> = links.clone();
        if is_switch && !ports.contains(&0) {
            ports.push(0);
        }
        for port in ports {
            let p_key = program::desired_pkeys(sw, cfg, idx, port);
            let vls = links
                .contains(&port)
                .then(|| program::op_vls(sw, cfg, idx, port));
            let want = PortDigest {
                p_key: p_key.as_ref().map(p_key_digest),
                qos: vls.map(|v| {
                    qos_digest(v, caps_of(res, idx, port), !is_switch || cfg.switch_sl2vl)
                }),
            };
            let key = (nd.node_guid, port);
            let had = replicated.get(&key).copied().unwrap_or_default();
            // The P_Key block and the QoS tables each on their own: a partition
            // change rewrites P_Key tables only.
            if let Some(keys) = p_key {
                if had.p_key == want.p_key {
                    prog.pkeys.insert(key, keys);
                    report.seeded += 1;
                } else {
                    report.differ += 1;
                }
            }
            if let Some(v) = vls {
                if had.qos == want.qos {
                    prog.qos.insert(key, v);
                    report.seeded += 1;
                } else {
                    report.differ += 1;
                }
            }
        }
    }
    report
}

impl SubnetManager {
    /// The [`PortDigest`] of every port of the last heavy sweep's fabric that this
    /// mastership programmed (or took as programmed from its predecessor), by
    /// (node GUID, port): what a master replicates for its successor.
    pub fn programmed_port_digests(&self) -> Vec<((u64, u8), PortDigest)> {
        let Some(res) = self.last.as_deref() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (idx, nd) in res.topology.iter() {
            for port in 0..nd.ports.len() {
                let Ok(port) = u8::try_from(port) else {
                    break;
                };
                if let Some(d) = recorded(res, &self.cfg, &self.programmed, idx, port) {
                    out.push(((nd.node_guid, port), d));
                }
            }
        }
        out
    }

    /// What the last takeover's seeding from replicated port digests found (`None`:
    /// no seeding since this SM started; see the `port_digest` module).
    pub fn last_port_seed(&self) -> Option<SeedReport> {
        self.port_seed
    }
}
