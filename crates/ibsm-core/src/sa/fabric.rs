//! [`SaFabric`]: the fabric as the Subnet Administrator answers for it, one immutable
//! snapshot per heavy sweep.
//!
//! Why a snapshot and not the configurator's live state: the SA answers between
//! sweeps, while a sweep may be half way through rewriting LIDs and tables. It must
//! answer with what the fabric holds *now* (the last sweep's outcome), never with a
//! sweep's plan. The configurator builds one when a heavy sweep ends (it knows what it
//! programmed: PortInfo as written, P_Key tables, LFTs) and the SA keeps it behind an
//! `Arc` until the next one, so a GetTable of 10k records reads one consistent view.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use ibsm_fabric::path::{Lfts, PathError, PathSummary, PathTable};
use ibsm_fabric::{mtu_bytes, LinkSpeed, LinkWidth, NodeIdx, Rate, Topology};
use ibsm_mad::attr::{
    CapabilityMask, NodeInfo, PKey, PKeyTable, PortInfo, SlToVlMappingTable, SwitchInfo,
    VlArbitrationTable,
};

/// The default GID prefix (IBA 4.1.1: link-local fe80::/64).
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xFE80_0000_0000_0000;

/// One end port (a CA or router port, or a switch's port 0) that holds a LID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndPort {
    /// Its node.
    pub node: NodeIdx,
    /// Its port number (0 for a switch).
    pub port: u8,
    /// PortGUID.
    pub port_guid: u64,
    /// Base LID.
    pub lid: u16,
    /// LMC (the port answers to `lid..lid + 2^lmc`).
    pub lmc: u8,
}

/// The tables the master wrote into one port, what P_KeyTableRecord,
/// SLtoVLMappingTableRecord and VLArbitrationTableRecord are answered from.
///
/// Only what the master wrote and saw acknowledged is here: a table it never wrote
/// (a switch port without partition enforcement, switch SL2VL with
/// `SubnetConfig::switch_sl2vl` off) holds whatever the device or a previous SM left,
/// which this SM never reads, so it is not answered for rather than guessed. Tables
/// many ports share (every CA of a partition, the default VLArbitration blocks) are
/// one `Arc` each, so a 50k-port snapshot stays small.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortTables {
    /// P_Key table block 0 as written (the master writes no other block).
    pub pkey: Option<Arc<PKeyTable>>,
    /// SLtoVLMappingTable as written, and the input ports it was written for (a CA
    /// port: `[0]`, the attribute having no ports there).
    pub sl2vl: Option<(SlToVlMappingTable, Box<[u8]>)>,
    /// VLArbitrationTable blocks as written: (block 1..=4, table).
    pub vlarb: Vec<(u8, Arc<VlArbitrationTable>)>,
}

/// The fabric as the SA sees it (see the module doc).
#[derive(Debug, Clone)]
pub struct SaFabric {
    /// The master's heavy-sweep counter when this was taken.
    pub sweep: u64,
    /// GID prefix of every port (PortInfo.GIDPrefix of the SM's port).
    pub subnet_prefix: u64,
    /// The SM's own LID (where the SA is).
    pub sm_lid: u16,
    /// The SM's own port GUID.
    pub sm_port_guid: u64,
    /// The topology of the last heavy sweep, LIDs as assigned.
    pub topology: Topology,
    /// `node_info[i]`: NodeInfo of `NodeIdx(i)` as it answered discovery.
    pub node_info: Vec<NodeInfo>,
    /// `port_info[i][p]`: PortInfo of port `p` of `NodeIdx(i)` as the master left it
    /// (what it wrote, PortState as activation left it), `None` if never read.
    pub port_info: Vec<Vec<Option<PortInfo>>>,
    /// `switch_info[i]`: SwitchInfo of switch `NodeIdx(i)`.
    pub switch_info: Vec<Option<SwitchInfo>>,
    /// `lfts[i]`: the LinearForwardingTable programmed into switch `NodeIdx(i)`
    /// (`lft[lid]` = egress port, 255 = none), `None` for CAs and failed switches.
    pub lfts: Vec<Option<Arc<[u8]>>>,
    /// PortGUID -> the P_Keys in its P_Key table (membership bit included).
    pub pkeys: HashMap<u64, Vec<PKey>>,
    /// `port_tables[i][p]`: what the master wrote into port `p` of `NodeIdx(i)`
    /// (empty until the sweep that built the snapshot fills it; see [`PortTables`]).
    pub port_tables: Vec<Vec<PortTables>>,
    /// Every LID (each of an LMC range) -> the end port answering to it.
    by_lid: HashMap<u16, EndPort>,
    /// PortGUID -> end port.
    by_guid: HashMap<u64, EndPort>,
    /// The PathRecord numbers of every (switch, DLID), built on the first PathRecord
    /// query (see [`SaFabric::path_summary`]).
    paths: PathCache,
}

/// The lazily built [`SaPaths`] of a snapshot. A clone starts empty: whoever clones a
/// snapshot may change its public fields (LFTs, topology) before sharing it, and a
/// table copied along would then answer for the old ones.
#[derive(Debug, Default)]
struct PathCache(OnceLock<SaPaths>);

impl Clone for PathCache {
    fn clone(&self) -> Self {
        PathCache::default()
    }
}

/// Above this many (switch, DLID) entries (4 bytes each: 64 MB) the [`PathTable`] is
/// not built and every PathRecord walks the LFTs instead: a k=16 fat tree needs 0.4M
/// entries, k=24 3M, but k=58 200M (0.8 GB per snapshot), where a walk per query (a
/// few hops) is the better trade.
const PATH_TABLE_MAX_ENTRIES: usize = 16 << 20;

/// What PathRecords are answered from: a copy of the topology whose ports carry the
/// MTU their links run at, and the [`PathTable`] built over it and the LFTs.
///
/// Why a copy: discovery leaves every port's `mtu` at its default, while the MTU a
/// link carries is the NeighborMTU the master programmed (both ends of a cable get
/// the smaller MTUCap, bounded by the configured maximum). OpenSM takes the minimum
/// MTUCap over every port a path crosses; here that is the NeighborMTU (never above
/// either end's MTUCap), bounded by the port's own MTUCap; a switch's port 0, which
/// has no link, counts with its MTUCap alone.
#[derive(Debug, Clone)]
struct SaPaths {
    topology: Topology,
    table: PathTable,
}

impl SaPaths {
    fn build(f: &SaFabric) -> SaPaths {
        let mut topology = f.topology.clone();
        for (idx, node) in f.topology.iter() {
            for p in 0..=node.num_ports() {
                let Some(pi) = f.port_info_of(idx, p) else {
                    continue;
                };
                // A switch's port 0 has no link: its NeighborMTU says nothing (ibsim's
                // reads 256), its MTUCap is what it can take (OpenSM uses it).
                let neighbor = if node.is_switch() && p == 0 {
                    0
                } else {
                    pi.neighbor_mtu
                };
                let mtu = [neighbor, pi.mtu_cap]
                    .into_iter()
                    .filter(|&m| mtu_bytes(m).is_some())
                    .min();
                if let Some(m) = mtu {
                    if let Err(err) = topology.set_port_mtu(idx, p, m) {
                        tracing::debug!(%err, "SA: port MTU not recorded");
                    }
                }
            }
        }
        let switches = topology.iter().filter(|(_, n)| n.is_switch()).count();
        let entries = switches.saturating_mul(f.by_lid.len());
        let table = if entries <= PATH_TABLE_MAX_ENTRIES {
            PathTable::new(&topology, f)
        } else {
            tracing::info!(
                switches,
                lids = f.by_lid.len(),
                "SA: fabric too large for a path table; PathRecords walk the LFTs"
            );
            PathTable::for_dlids(&topology, f, std::iter::empty())
        };
        tracing::debug!(
            sweep = f.sweep,
            dlids = table.dlids().len(),
            switches,
            "SA: path table built"
        );
        SaPaths { topology, table }
    }
}

/// What an end port's own PortInfo limits a path to (OpenSM folds both ends' in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PortLimits {
    /// PortInfo.MTUCap, if a valid MTU.
    pub mtu_cap: Option<u8>,
    /// The rate of LinkWidthActive x LinkSpeedActive (LinkSpeedExtActive when the
    /// port has extended speeds), if both are valid.
    pub rate: Option<Rate>,
}

impl Lfts for SaFabric {
    fn lft(&self, switch: NodeIdx) -> Option<&[u8]> {
        self.lfts.get(switch.as_usize())?.as_deref()
    }
}

impl SaFabric {
    /// A snapshot; the LID and GUID indexes are built from `topology`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        sweep: u64,
        subnet_prefix: u64,
        sm_lid: u16,
        sm_port_guid: u64,
        topology: Topology,
        node_info: Vec<NodeInfo>,
        port_info: Vec<Vec<Option<PortInfo>>>,
        switch_info: Vec<Option<SwitchInfo>>,
        lfts: Vec<Option<Arc<[u8]>>>,
        pkeys: HashMap<u64, Vec<PKey>>,
    ) -> SaFabric {
        let mut by_lid = HashMap::new();
        let mut by_guid = HashMap::new();
        for (idx, node) in topology.iter() {
            let ports = end_port_numbers(node);
            for p in ports {
                let Some(port) = node.port(p) else { continue };
                if port.lid == 0 || port.port_guid == 0 {
                    continue;
                }
                let lmc = if node.is_switch() { 0 } else { port.lmc.min(7) };
                let ep = EndPort {
                    node: idx,
                    port: p,
                    port_guid: port.port_guid,
                    lid: port.lid,
                    lmc,
                };
                for off in 0..(1u32 << lmc) {
                    let Ok(off) = u16::try_from(off) else { break };
                    if let Some(l) = port.lid.checked_add(off) {
                        by_lid.entry(l).or_insert(ep);
                    }
                }
                by_guid.entry(port.port_guid).or_insert(ep);
            }
        }
        SaFabric {
            sweep,
            subnet_prefix,
            sm_lid,
            sm_port_guid,
            topology,
            node_info,
            port_info,
            switch_info,
            lfts,
            pkeys,
            port_tables: Vec::new(),
            by_lid,
            by_guid,
            paths: PathCache::default(),
        }
    }

    /// Build the PathRecord table now (what the first PathRecord query would do), so
    /// a driver can pay for it on another thread than the one answering queries.
    pub fn prepare_paths(&self) {
        self.paths.0.get_or_init(|| SaPaths::build(self));
    }

    /// Cables, MTU and rate of the path from the end port `source` to `dlid` (exactly
    /// that LID) through the programmed LFTs, or why there is none.
    ///
    /// O(1) from a [`PathTable`] built on the first call (so an SA that is never
    /// asked for paths never builds one). The snapshot must not change once asked:
    /// the sweep fills it, then hands it out behind an `Arc`; a clone builds its own.
    pub fn path_summary(&self, source: (NodeIdx, u8), dlid: u16) -> Result<PathSummary, PathError> {
        let p = self.paths.0.get_or_init(|| SaPaths::build(self));
        p.table.summary(&p.topology, self, source, dlid)
    }

    /// What `port` of `node`'s PortInfo limits a path to (nothing if never read or
    /// not valid: a switch's port 0 reports no link of its own on some devices).
    pub(crate) fn port_limits(&self, node: NodeIdx, port: u8) -> PortLimits {
        let Some(pi) = self.port_info_of(node, port) else {
            return PortLimits::default();
        };
        let extended = pi
            .capability_mask
            .contains(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED);
        let speed = match (extended, pi.link_speed_ext_active, pi.link_speed_active) {
            (true, 1, _) => Some(LinkSpeed::Fdr),
            (true, 2, _) => Some(LinkSpeed::Edr),
            (true, 4, _) => Some(LinkSpeed::Hdr),
            (true, 8, _) => Some(LinkSpeed::Ndr),
            (_, _, 1) => Some(LinkSpeed::Sdr),
            (_, _, 2) => Some(LinkSpeed::Ddr),
            (_, _, 4) => Some(LinkSpeed::Qdr),
            _ => None,
        };
        PortLimits {
            mtu_cap: mtu_bytes(pi.mtu_cap).map(|_| pi.mtu_cap),
            rate: LinkWidth::from_iba(pi.link_width_active)
                .zip(speed)
                .map(|(w, s)| Rate::of_link(w, s)),
        }
    }

    /// The end port answering to `lid` (any LID of its LMC range).
    pub fn end_port_by_lid(&self, lid: u16) -> Option<EndPort> {
        self.by_lid.get(&lid).copied()
    }

    /// The end port with this PortGUID.
    pub fn end_port_by_guid(&self, port_guid: u64) -> Option<EndPort> {
        self.by_guid.get(&port_guid).copied()
    }

    /// The end port a GID names: its prefix must be the subnet's, its interface ID a
    /// PortGUID of the fabric.
    pub fn end_port_by_gid(&self, gid: &[u8; 16]) -> Option<EndPort> {
        let (prefix, guid) = split_gid(gid);
        if prefix != self.subnet_prefix {
            return None;
        }
        self.end_port_by_guid(guid)
    }

    /// Every end port, in node then port order.
    pub fn end_ports(&self) -> Vec<EndPort> {
        let mut v: Vec<EndPort> = self.by_guid.values().copied().collect();
        v.sort_by_key(|e| (e.lid, e.node.0, e.port));
        v
    }

    /// The GID of an end port.
    pub fn gid_of(&self, port_guid: u64) -> [u8; 16] {
        make_gid(self.subnet_prefix, port_guid)
    }

    /// PortInfo of `(node, port)` as the master left it.
    pub fn port_info_of(&self, node: NodeIdx, port: u8) -> Option<&PortInfo> {
        self.port_info
            .get(node.as_usize())?
            .get(usize::from(port))?
            .as_ref()
    }

    /// What the master wrote into `port` of `node`, if anything.
    pub fn port_tables_of(&self, node: NodeIdx, port: u8) -> Option<&PortTables> {
        self.port_tables
            .get(node.as_usize())?
            .get(usize::from(port))
    }

    /// The P_Keys of a port (empty if the port is unknown).
    pub fn pkeys_of(&self, port_guid: u64) -> &[PKey] {
        self.pkeys.get(&port_guid).map_or(&[], Vec::as_slice)
    }
}

/// The ports of `node` that are end ports (hold a LID and a PortGUID of their own): a
/// switch's port 0, every physical port of a CA or router.
pub fn end_port_numbers(node: &ibsm_fabric::Node) -> Vec<u8> {
    if node.is_switch() {
        vec![0]
    } else {
        node.physical_ports().map(|(p, _)| p).collect()
    }
}

/// A GID from its prefix and interface ID (both big-endian on the wire).
pub fn make_gid(prefix: u64, guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// A GID's prefix and interface ID.
pub fn split_gid(gid: &[u8; 16]) -> (u64, u64) {
    let mut p = [0u8; 8];
    let mut i = [0u8; 8];
    p.copy_from_slice(&gid[..8]);
    i.copy_from_slice(&gid[8..]);
    (u64::from_be_bytes(p), u64::from_be_bytes(i))
}
