//! The numbers of one PathRecord, for one (SLID, DLID) of a port pair: what OpenSM's
//! `pr_rcv_get_path_parms` computes, in the same order and with the same outcomes.
//!
//! - MTU and rate: the smallest over the path (the [`SaFabric::path_summary`] of the
//!   programmed LFTs) and both end ports' own PortInfo (MTUCap, active rate): a
//!   switch's port 0 counts when its PortInfo reports a valid value.
//! - PacketLifeTime: the configured value (OpenSM: `subnet_timeout`, default 18, the
//!   same default as ours), 0 for a path from a port to itself (IBA 1.2 Table 205).
//! - The selectors (MTUSelector, RateSelector, PacketLifeTimeSelector) count only
//!   when the value's component is in the mask too: greater than (the path's value
//!   must be above), less than (the largest value below the one asked for, if the
//!   path's is not already below), exactly (the path must reach the value; the
//!   record carries it), largest (anything). A path that cannot satisfy them has no
//!   record.
//! - P_Key: see [`PairKey`]. SL: the template's when given (no QoS policy here to
//!   refuse one, and SLtoVL maps every SL to a data VL), else 0 (OpenSM's partition
//!   SL, 0 unless configured, and partitions here carry none).
//!
//! Not done, as OpenSM without QoS does not either: SLtoVL checks per hop, QoS
//! levels, the routing engine's SL. OpenSM's Tavor 1K MTU quirk is off by default
//! there and not done here.

use ibsm_fabric::Rate;
use ibsm_mad::attr::{CapabilityMask, PKey, PortInfo};
use ibsm_mad::sa::{ComponentMask, PathRecord, Selector};

use crate::sa::context::share_pkey;
use crate::sa::fabric::{EndPort, SaFabric};

/// OpenSM's MAX_HOPS: a path through more switches than this has no record.
const MAX_SWITCH_HOPS: u16 = 64;

/// What one direction of a (SLID, DLID) path offers, after the selectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PathParams {
    /// MTU (IBA code).
    pub mtu: u8,
    /// Rate.
    pub rate: Rate,
    /// PacketLifeTime.
    pub packet_life_time: u8,
}

/// The selector parts of a query template: each a (selector, value) only when both
/// the selector's and the value's components are in the mask (OpenSM silently
/// ignores one without the other).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Selectors {
    mtu: Option<(Selector, u8)>,
    rate: Option<(Selector, Rate)>,
    packet_life_time: Option<(Selector, u8)>,
}

/// A selector value the SA cannot compare with (a reserved MTU or rate code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InvalidSelector;

impl Selectors {
    /// The selectors of `t` under `mask`; a reserved MTU or rate code under its
    /// selector is an invalid request (OpenSM: ERR_REQ_INVALID).
    pub fn of(t: &PathRecord, mask: ComponentMask) -> Result<Selectors, InvalidSelector> {
        let both = |sel: ComponentMask, val: ComponentMask| mask.contains(sel.union(val));
        let mtu = if both(PathRecord::MTU_SELECTOR, PathRecord::MTU) {
            if ibsm_fabric::mtu_bytes(t.mtu).is_none() {
                return Err(InvalidSelector);
            }
            Some((t.mtu_selector, t.mtu))
        } else {
            None
        };
        let rate = if both(PathRecord::RATE_SELECTOR, PathRecord::RATE) {
            Some((
                t.rate_selector,
                Rate::from_iba(t.rate).ok_or(InvalidSelector)?,
            ))
        } else {
            None
        };
        let packet_life_time = both(
            PathRecord::PACKET_LIFE_TIME_SELECTOR,
            PathRecord::PACKET_LIFE_TIME,
        )
        .then_some((t.packet_life_time_selector, t.packet_life_time));
        Ok(Selectors {
            mtu,
            rate,
            packet_life_time,
        })
    }

    /// `have` under a selector of a value with codes 1.. in increasing order (MTU,
    /// PacketLifeTime): the value the record carries, or `None`.
    fn pick_code(sel: Option<(Selector, u8)>, have: u8) -> Option<u8> {
        let Some((s, want)) = sel else {
            return Some(have);
        };
        match s {
            Selector::GreaterThan => (have > want).then_some(have),
            Selector::LessThan if have < want => Some(have),
            Selector::LessThan => (want > 1).then(|| want - 1),
            Selector::Exactly => (have >= want).then_some(want),
            Selector::Largest => Some(have),
        }
    }

    fn pick_rate(sel: Option<(Selector, Rate)>, have: Rate) -> Option<Rate> {
        let Some((s, want)) = sel else {
            return Some(have);
        };
        match s {
            Selector::GreaterThan => (have > want).then_some(have),
            Selector::LessThan if have < want => Some(have),
            Selector::LessThan => slower_rate(want),
            Selector::Exactly => (have == want).then_some(want),
            Selector::Largest => Some(have),
        }
    }
}

/// The next rate below `r` in bandwidth (OpenSM's `ib_path_rate_get_prev`).
fn slower_rate(r: Rate) -> Option<Rate> {
    (0..=u8::MAX)
        .filter_map(Rate::from_iba)
        .filter(|&x| x < r)
        .max()
}

/// The numbers of the path from `src` (sending from `slid`) to `dlid` of `dst`, or
/// `None` when the LFTs do not lead there or the selectors refuse it.
pub(super) fn path_params(
    f: &SaFabric,
    sel: &Selectors,
    packet_life_time: u8,
    (src, slid): (&EndPort, u16),
    (dst, dlid): (&EndPort, u16),
) -> Option<PathParams> {
    let sum = match f.path_summary((src.node, src.port), dlid) {
        Ok(s) => s,
        Err(err) => {
            tracing::trace!(slid, dlid, %err, "SA: no path");
            return None;
        }
    };
    if sum.links.saturating_sub(1) > MAX_SWITCH_HOPS {
        tracing::debug!(slid, dlid, links = sum.links, "SA: path too long");
        return None;
    }
    let (mut mtu, mut rate) = (sum.mtu, sum.rate);
    for (node, port) in [(src.node, src.port), (dst.node, dst.port)] {
        let lim = f.port_limits(node, port);
        if let Some(m) = lim.mtu_cap {
            mtu = mtu.min(m);
        }
        if let Some(r) = lim.rate {
            rate = rate.min(r);
        }
    }
    let life = if src.port_guid == dst.port_guid {
        0
    } else {
        packet_life_time
    };
    Some(PathParams {
        mtu: Selectors::pick_code(sel.mtu, mtu)?,
        rate: Selectors::pick_rate(sel.rate, rate)?,
        packet_life_time: Selectors::pick_code(sel.packet_life_time, life)?,
    })
}

/// OpenSM's 2x/HDR fix-up (`ib_path_rate_2x_hdr_fixups`): a rate only 2x links or
/// HDR/NDR speeds give is lowered to the nearest one a port that does not announce
/// them (CapabilityMask2) understands, so an older client is never told a rate it
/// cannot program.
pub(super) fn rate_for_port(pi: &PortInfo, rate: Rate) -> Rate {
    const CAP2_LINK_WIDTH_2X: u16 = 0x0010;
    const CAP2_LINK_SPEED_HDR: u16 = 0x0020;
    const CAP2_LINK_SPEED_NDR: u16 = 0x0400;
    let has_cap2 = pi
        .capability_mask
        .contains(CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED);
    let cap2 = |bits: u16| has_cap2 && pi.capability_mask2 & bits != 0;
    let extended = pi
        .capability_mask
        .contains(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED);
    let code = match rate.to_iba() {
        // 28 Gb/s (2x FDR).
        19 if !cap2(CAP2_LINK_WIDTH_2X) => {
            if extended {
                15
            } else {
                6
            }
        }
        // 50 Gb/s (2x EDR, 1x HDR).
        20 if !cap2(CAP2_LINK_WIDTH_2X) && !cap2(CAP2_LINK_SPEED_HDR) => 7,
        // 400, 600 Gb/s.
        21 | 22 if !cap2(CAP2_LINK_SPEED_HDR | CAP2_LINK_SPEED_NDR) => 18,
        // 800, 1200 Gb/s.
        23 | 24 if !cap2(CAP2_LINK_SPEED_NDR) => {
            if has_cap2 && !cap2(CAP2_LINK_SPEED_HDR) {
                18
            } else {
                22
            }
        }
        c => c,
    };
    Rate::from_iba(code).unwrap_or(rate)
}

/// The P_Key a port pair's paths carry, as OpenSM chooses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PairKey {
    /// Paths carry this P_Key.
    Key(u16),
    /// The ends share no partition (or not the one asked for): no path.
    NotShared,
}

/// The P_Key for paths from the port with P_Keys `src` to the one with `dst`:
///
/// - RawTraffic asked for: 0 (raw packets carry no P_Key).
/// - A P_Key in the template: the ends must share that partition (the same base,
///   one of them a full member); the record carries the P_Key as asked.
/// - Otherwise the partition with the lowest base the two share, as the source's
///   table holds it (membership bit included): what OpenSM's
///   `osm_physp_find_common_pkey` returns. (OpenSM walks a map keyed by the P_Key in
///   network order, which on a little-endian host is not quite numeric order; bases
///   that differ in both bytes may come out in another order there.)
pub(super) fn pair_key(
    src: &[PKey],
    dst: &[PKey],
    template: &PathRecord,
    mask: ComponentMask,
) -> PairKey {
    if mask.contains(PathRecord::RAW_TRAFFIC) && template.raw_traffic {
        return PairKey::Key(0);
    }
    if mask.contains(PathRecord::P_KEY) {
        let base = template.p_key & 0x7FFF;
        let find = |t: &[PKey]| t.iter().find(|k| k.0 & 0x7FFF == base).map(|k| k.0);
        return match (base, find(src), find(dst)) {
            (1.., Some(a), Some(b)) if (a | b) & 0x8000 != 0 => PairKey::Key(template.p_key),
            _ => PairKey::NotShared,
        };
    }
    let mut best: Option<u16> = None;
    for ka in src {
        let base = ka.0 & 0x7FFF;
        if base == 0 || best.is_some_and(|b| b & 0x7FFF <= base) {
            continue;
        }
        if dst
            .iter()
            .find(|kb| kb.0 & 0x7FFF == base)
            .is_some_and(|kb| (ka.0 | kb.0) & 0x8000 != 0)
        {
            best = Some(ka.0);
        }
    }
    best.map_or(PairKey::NotShared, PairKey::Key)
}

/// True if two ports may be on one path as OpenSM's `osm_physp_share_pkey` sees it:
/// the same port, or a port without a P_Key table (IBA 10.9.2 does not require one),
/// or a partition in common.
pub(super) fn ports_share(f: &SaFabric, a: u64, b: u64) -> bool {
    if a == b {
        return true;
    }
    let (ka, kb) = (f.pkeys_of(a), f.pkeys_of(b));
    ka.is_empty() || kb.is_empty() || share_pkey(ka, kb)
}
