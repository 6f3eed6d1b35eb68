//! The LID manager: hands out unicast LIDs (0x0001-0xBFFF) to switch port 0
//! and to every cabled CA/router port, keeps what ports already carry when
//! it is consistent, remembers assignments by port GUID across sweeps, and
//! reads/writes OpenSM's `guid2lid` file.
//!
//! Claim order, highest priority first (each claim needs the whole 2^LMC
//! block to be free, inside 0x0001-0xBFFF and aligned to its size):
//!
//! 1. the range the manager remembers for the port GUID (previous sweeps or
//!    an imported `guid2lid`): the SM's own record is authoritative, as
//!    OpenSM's `honor_guid2lid` makes it;
//! 2. the LID the port carries (`Port::lid`, as discovery read it), so a
//!    new master SM takes over a configured subnet without renumbering;
//! 3. a fresh block. End ports (2^LMC blocks) are placed before switches
//!    (one LID each), which fill the holes, so large aligned blocks do not
//!    fragment. When the LID space runs out, end ports win: a switch without
//!    a LID still forwards (and is reachable by directed route), an HCA
//!    without one cannot talk at all. Ports left without a LID are counted in
//!    [`LidReport::unassigned`] and get LID 0.
//!
//! Two ports with the same port GUID (a duplicate GUID, see
//! `ibsm_core::discovery`) cannot both be remembered under it, and handing
//! the remembered range to the wrong one would move a working port's LID to
//! a newcomer. So before the claims, each group of ports sharing a GUID keeps
//! at most one *holder*: the port carrying the remembered base LID, or, when
//! nothing is remembered for the GUID, the first port carrying a valid LID.
//! The others get no LID (LID 0, counted in [`LidReport::withheld_duplicates`]);
//! when no port of the group holds one, none gets one and a remembered range
//! stays reserved for the GUID until an operator resolves the duplicate.
//!
//! Within a step ports are taken in `NodeIdx` order, so when two ports carry
//! the same LID the one with the lower index keeps it and the other is
//! moved (counted in [`LidReport::duplicates_repaired`]). Remembered ranges
//! of ports that are absent this sweep stay reserved (fresh blocks avoid
//! them) until the space runs out; a present port that carries such a LID
//! takes it over.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::topology::{NodeIdx, NodeType, Topology, TopologyError};

/// Lowest unicast LID.
pub const MIN_UNICAST_LID: u16 = 0x0001;
/// Highest unicast LID (0xC000 and up are multicast, 0xFFFF permissive).
pub const MAX_UNICAST_LID: u16 = 0xBFFF;
/// Highest LMC IBA allows (PortInfo.LMC is 3 bits).
pub const MAX_LMC: u8 = 7;

/// LID manager settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LidConfig {
    /// PortInfo.LMC for CA and router ports (0..=7): each gets `2^lmc`
    /// consecutive LIDs starting at a multiple of `2^lmc`. Switches always
    /// get LMC 0.
    pub lmc: u8,
}

/// What an [`LidManager::assign`] run did, counted in ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LidReport {
    /// Ports that carried no LID and got one.
    pub assigned: usize,
    /// Ports whose carried base LID was kept.
    pub kept: usize,
    /// Ports that carried a LID and got a different one (invalid, misaligned
    /// for the LMC, overridden by the remembered range, or a duplicate).
    pub changed: usize,
    /// Of `changed`: ports moved because another port claimed the same LID.
    pub duplicates_repaired: usize,
    /// Ports left without a LID because the unicast space is exhausted.
    pub unassigned: usize,
    /// Ports left without a LID because another port with the same port GUID
    /// holds it, or because none of the ports sharing a GUID held one (see the
    /// module doc).
    pub withheld_duplicates: usize,
}

/// Why an assignment was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LidError {
    /// LMC above 7.
    #[error("LMC {0} is out of range (0..=7)")]
    BadLmc(u8),
    /// Writing a LID into the topology failed (a bug: the port was listed by
    /// the topology itself).
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// A malformed `guid2lid` file: the 1-based line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guid2lid line {line}: {kind}")]
pub struct Guid2LidError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub kind: Guid2LidErrorKind,
}

/// What is wrong with a `guid2lid` line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Guid2LidErrorKind {
    /// Not `<guid> <min_lid> <max_lid>`.
    #[error("expected `0x<guid> <min_lid> <max_lid>`, found {0} field(s)")]
    FieldCount(usize),
    /// The GUID is not a (non-zero) 64-bit number.
    #[error("bad port GUID {0:?}")]
    BadGuid(String),
    /// A LID is not a 16-bit number.
    #[error("bad LID {0:?}")]
    BadLid(String),
    /// The range leaves 0x0001-0xBFFF or has min > max.
    #[error("LID range {min:#06x}-{max:#06x} is not a unicast range")]
    BadRange {
        /// min_lid
        min: u16,
        /// max_lid
        max: u16,
    },
    /// The range is not a 2^LMC block aligned to its size.
    #[error("LID range {min:#06x}-{max:#06x} is not a 2^LMC-aligned block")]
    NotAligned {
        /// min_lid
        min: u16,
        /// max_lid
        max: u16,
    },
    /// The GUID appears twice.
    #[error("port GUID {0:#018x} appears twice")]
    DuplicateGuid(u64),
    /// The range overlaps the one of an earlier line.
    #[error("LID range of {guid:#018x} overlaps the range of {other:#018x}")]
    Overlap {
        /// This line's GUID.
        guid: u64,
        /// The earlier GUID.
        other: u64,
    },
}

/// A remembered block: base LID and LMC (block size `1 << lmc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    base: u16,
    lmc: u8,
}

impl Block {
    fn size(self) -> u32 {
        1u32 << self.lmc
    }
    fn max(self) -> u16 {
        (u32::from(self.base) + self.size() - 1).min(u32::from(u16::MAX)) as u16
    }
}

/// True when `base` starts a valid unicast block of `2^lmc` LIDs.
pub fn is_valid_block(base: u16, lmc: u8) -> bool {
    if lmc > MAX_LMC || base < MIN_UNICAST_LID {
        return false;
    }
    let size = 1u32 << lmc;
    u32::from(base) % size == 0 && u32::from(base) + size - 1 <= u32::from(MAX_UNICAST_LID)
}

/// The LID manager. Keep one per SM for its whole life: it is the memory of
/// which port GUID had which LIDs.
#[derive(Debug, Clone, Default)]
pub struct LidManager {
    config: LidConfig,
    remembered: HashMap<u64, Block>,
}

/// One port that needs LIDs this sweep.
struct Want {
    node: NodeIdx,
    port: u8,
    guid: u64,
    lmc: u8,
    carried: u16,
    result: u16,
    /// Shares its GUID with a port that holds the LID (or none holds one).
    withheld: bool,
}

const FREE: u8 = 0;
const RESERVED: u8 = 1;
const TAKEN: u8 = 2;

/// Occupancy of the LID space, indexed by LID.
struct Space {
    state: Vec<u8>,
}

impl Space {
    fn new() -> Space {
        Space {
            state: vec![FREE; usize::from(MAX_UNICAST_LID) + 1],
        }
    }

    fn range(base: u16, lmc: u8) -> std::ops::Range<usize> {
        let b = usize::from(base);
        b..b + (1usize << lmc)
    }

    /// True when every LID of the block has a state `<= worst`.
    fn fits(&self, base: u16, lmc: u8, worst: u8) -> bool {
        is_valid_block(base, lmc)
            && self
                .state
                .get(Space::range(base, lmc))
                .is_some_and(|s| s.iter().all(|&v| v <= worst))
    }

    fn mark(&mut self, base: u16, lmc: u8, v: u8) {
        if let Some(s) = self.state.get_mut(Space::range(base, lmc)) {
            s.fill(v);
        }
    }
}

impl LidManager {
    /// A manager with no memory yet.
    pub fn new(config: LidConfig) -> LidManager {
        LidManager {
            config,
            remembered: HashMap::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> LidConfig {
        self.config
    }

    /// The remembered `(min_lid, max_lid)` of a port GUID.
    pub fn lid_range(&self, port_guid: u64) -> Option<(u16, u16)> {
        self.remembered.get(&port_guid).map(|b| (b.base, b.max()))
    }

    /// Number of remembered port GUIDs.
    pub fn remembered_len(&self) -> usize {
        self.remembered.len()
    }

    /// Give every switch (port 0, LMC 0) and every cabled CA/router port
    /// (2^LMC LIDs) a LID, write them into `topo` and remember them. See the
    /// module doc for the order in which claims win.
    pub fn assign(&mut self, topo: &mut Topology) -> Result<LidReport, LidError> {
        let lmc = self.config.lmc;
        if lmc > MAX_LMC {
            return Err(LidError::BadLmc(lmc));
        }
        let mut wants: Vec<Want> = Vec::new();
        for (idx, node) in topo.iter() {
            match node.node_type {
                NodeType::Switch => {
                    if let Some(p0) = node.ports.first() {
                        wants.push(Want {
                            node: idx,
                            port: 0,
                            guid: p0.port_guid,
                            lmc: 0,
                            carried: p0.lid,
                            result: 0,
                            withheld: false,
                        });
                    }
                }
                NodeType::Ca | NodeType::Router => {
                    for (pn, p) in node.physical_ports() {
                        if p.remote.is_some() {
                            wants.push(Want {
                                node: idx,
                                port: pn,
                                guid: p.port_guid,
                                lmc,
                                carried: p.lid,
                                result: 0,
                                withheld: false,
                            });
                        }
                    }
                }
            }
        }

        let withheld = self.withhold_duplicates(&mut wants);
        let mut space = Space::new();
        let present: std::collections::HashSet<u64> = wants
            .iter()
            .filter(|w| w.guid != 0 && !w.withheld)
            .map(|w| w.guid)
            .collect();
        for (guid, b) in &self.remembered {
            if !present.contains(guid) && is_valid_block(b.base, b.lmc) {
                space.mark(b.base, b.lmc, RESERVED);
            }
        }

        // 1. Remembered ranges of present ports.
        for w in &mut wants {
            if w.guid == 0 || w.withheld {
                continue;
            }
            if let Some(b) = self.remembered.get(&w.guid) {
                if space.fits(b.base, w.lmc, RESERVED) {
                    space.mark(b.base, w.lmc, TAKEN);
                    w.result = b.base;
                }
            }
        }
        // 2. Carried LIDs.
        let mut duplicates = 0usize;
        for w in &mut wants {
            if w.withheld || w.result != 0 || !is_valid_block(w.carried, w.lmc) {
                continue;
            }
            if space.fits(w.carried, w.lmc, RESERVED) {
                space.mark(w.carried, w.lmc, TAKEN);
                w.result = w.carried;
            } else {
                duplicates += 1;
                tracing::warn!(
                    node = %w.node, port = w.port, lid = w.carried,
                    "LID claimed by another port; moving this one"
                );
            }
        }
        // 3. Fresh blocks: end ports (larger blocks) first, then switches.
        let mut unassigned = 0usize;
        let mut order: Vec<usize> = (0..wants.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(wants.get(i).map_or(0, |w| w.lmc)));
        let mut cursors = [[0u32; (MAX_LMC + 1) as usize]; 2];
        for i in order {
            let Some(w) = wants.get_mut(i) else { continue };
            if w.withheld || w.result != 0 {
                continue;
            }
            let mut got = None;
            for (pass, worst) in [FREE, RESERVED].into_iter().enumerate() {
                let Some(cur) = cursors
                    .get_mut(pass)
                    .and_then(|c| c.get_mut(usize::from(w.lmc)))
                else {
                    continue;
                };
                if let Some(base) = find_block(&space, w.lmc, worst, cur) {
                    got = Some(base);
                    break;
                }
            }
            match got {
                Some(base) => {
                    space.mark(base, w.lmc, TAKEN);
                    w.result = base;
                }
                None => unassigned += 1,
            }
        }
        if unassigned > 0 {
            tracing::warn!(
                unassigned,
                "unicast LID space exhausted; ports left without a LID"
            );
        }

        // Write back, count, and rebuild the memory.
        let mut report = LidReport {
            duplicates_repaired: duplicates,
            unassigned,
            withheld_duplicates: withheld,
            ..LidReport::default()
        };
        let mut memory: HashMap<u64, Block> = HashMap::with_capacity(wants.len());
        for w in &wants {
            match (w.carried, w.result) {
                (_, 0) => {}
                (0, _) => report.assigned += 1,
                (c, r) if c == r => report.kept += 1,
                _ => report.changed += 1,
            }
            topo.set_port_lid(w.node, w.port, w.result, w.lmc)?;
            if w.guid != 0 && w.result != 0 {
                memory.insert(
                    w.guid,
                    Block {
                        base: w.result,
                        lmc: w.lmc,
                    },
                );
            }
        }
        for (guid, b) in &self.remembered {
            if !present.contains(guid) && space.fits(b.base, b.lmc, RESERVED) {
                memory.insert(*guid, *b);
            }
        }
        self.remembered = memory;
        tracing::debug!(
            assigned = report.assigned,
            kept = report.kept,
            changed = report.changed,
            duplicates = report.duplicates_repaired,
            unassigned = report.unassigned,
            "LIDs assigned"
        );
        Ok(report)
    }

    /// Mark every port that shares its GUID with another and is not the
    /// group's holder (module doc); returns how many were marked.
    fn withhold_duplicates(&self, wants: &mut [Want]) -> usize {
        let mut groups: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, w) in wants.iter().enumerate() {
            if w.guid != 0 {
                groups.entry(w.guid).or_default().push(i);
            }
        }
        let mut marked = 0;
        for (guid, members) in groups {
            if members.len() < 2 {
                continue;
            }
            let remembered = self.remembered.get(&guid).copied();
            let holder = members.iter().copied().find(|&i| {
                wants.get(i).is_some_and(|w| match remembered {
                    Some(b) => w.carried == b.base && w.carried != 0,
                    None => is_valid_block(w.carried, w.lmc),
                })
            });
            for &i in &members {
                if Some(i) == holder {
                    continue;
                }
                if let Some(w) = wants.get_mut(i) {
                    w.withheld = true;
                    marked += 1;
                    tracing::warn!(
                        node = %w.node, port = w.port, guid = format_args!("{guid:#018x}"),
                        carried = w.carried,
                        holder = holder.is_some(),
                        "duplicate port GUID: this port gets no LID"
                    );
                }
            }
        }
        marked
    }

    /// Replace the memory with an OpenSM `guid2lid` file: one
    /// `0x<port_guid> <min_lid> <max_lid>` per line (LIDs in hex with `0x` or
    /// decimal), `#` comments and blank lines ignored. Every range must be a
    /// 2^LMC-aligned unicast block and no two may overlap. On error nothing
    /// changes. Returns the number of entries.
    pub fn import_guid2lid(&mut self, text: &str) -> Result<usize, Guid2LidError> {
        let mut map: HashMap<u64, Block> = HashMap::new();
        // Owner GUID per LID, to find overlaps.
        let mut owner: HashMap<u16, u64> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |kind| Guid2LidError { line, kind };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            let [g, lo, hi] = fields.as_slice() else {
                return Err(err(Guid2LidErrorKind::FieldCount(fields.len())));
            };
            let guid = parse_u64(g)
                .filter(|&v| v != 0)
                .ok_or_else(|| err(Guid2LidErrorKind::BadGuid((*g).to_string())))?;
            let min = parse_u64(lo)
                .and_then(|v| u16::try_from(v).ok())
                .ok_or_else(|| err(Guid2LidErrorKind::BadLid((*lo).to_string())))?;
            let max = parse_u64(hi)
                .and_then(|v| u16::try_from(v).ok())
                .ok_or_else(|| err(Guid2LidErrorKind::BadLid((*hi).to_string())))?;
            if min < MIN_UNICAST_LID || max > MAX_UNICAST_LID || min > max {
                return Err(err(Guid2LidErrorKind::BadRange { min, max }));
            }
            let size = u32::from(max) - u32::from(min) + 1;
            let lmc = size.trailing_zeros() as u8;
            if !size.is_power_of_two() || lmc > MAX_LMC || !is_valid_block(min, lmc) {
                return Err(err(Guid2LidErrorKind::NotAligned { min, max }));
            }
            if map.contains_key(&guid) {
                return Err(err(Guid2LidErrorKind::DuplicateGuid(guid)));
            }
            for lid in min..=max {
                if let Some(&other) = owner.get(&lid) {
                    return Err(err(Guid2LidErrorKind::Overlap { guid, other }));
                }
            }
            for lid in min..=max {
                owner.insert(lid, guid);
            }
            map.insert(guid, Block { base: min, lmc });
        }
        let n = map.len();
        self.remembered = map;
        Ok(n)
    }

    /// The memory as an OpenSM `guid2lid` file, sorted by GUID:
    /// `0x%016x 0x%04x 0x%04x` per line.
    pub fn export_guid2lid(&self) -> String {
        let mut entries: Vec<(&u64, &Block)> = self.remembered.iter().collect();
        entries.sort_by_key(|(g, _)| **g);
        let mut out = String::with_capacity(entries.len() * 33);
        for (guid, b) in entries {
            let _ = writeln!(out, "0x{guid:016x} 0x{:04x} 0x{:04x}", b.base, b.max());
        }
        out
    }
}

/// Next block of `2^lmc` LIDs at or after `*cursor` whose states are all
/// `<= worst`; advances the cursor (blocks before it were found unusable
/// and only get fuller during one run).
fn find_block(space: &Space, lmc: u8, worst: u8, cursor: &mut u32) -> Option<u16> {
    let size = 1u32 << lmc;
    let mut b = (*cursor).max(size.max(u32::from(MIN_UNICAST_LID)));
    b = b.div_ceil(size) * size;
    while b + size - 1 <= u32::from(MAX_UNICAST_LID) {
        let base = b as u16;
        if space.fits(base, lmc, worst) {
            *cursor = b;
            return Some(base);
        }
        b += size;
    }
    *cursor = b;
    None
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}
