//! MultiPathRecord queries (IBA 15.2.5.20): SubnAdmGetMulti asks for paths between a
//! set of sources and a set of destinations at once, and is answered with PathRecords
//! (attribute PathRecord, method GetMultiResp, over RMPP like a GetTableResp).
//!
//! Answered as OpenSM 3.3 answers it (`osm_sa_multipath_record.c`), so a client sees
//! the same paths under either SM:
//!
//! - The ends are the SGIDCount SGIDs and DGIDCount DGIDs (each count only when its
//!   component is in the mask; together at most 11, what one MAD holds). A GID with a
//!   foreign subnet prefix (not link-local), a multicast SGID or a GID that names no
//!   port is ERR_REQ_INVALID_GID; no source or no destination is ERR_REQ_INVALID.
//! - NumbPath (its low 7 bits, when in the mask; else 127) bounds the paths of the
//!   whole answer. The source-destination pairs are taken in order (each source with
//!   every destination) and each pair gives its paths as a PathRecord query for that
//!   pair would ([`super::Query::port_pair`]: LMC paths in step first, Preference 0,
//!   then the other combinations, Preference 2) until the bound is reached.
//! - Alternate path migration: exactly two sources, two destinations and NumbPath 2
//!   asks for two paths that share as little as possible. Each end pair is sorted by
//!   port GUID, a LID offset is hashed from the two first ports' base LIDs (so the
//!   answer does not depend on the order of the GIDs or the direction), S0-D0 and
//!   S0-D1 take their LMC path at that offset and S1-D0 and S1-D1 at the next one
//!   (another spine on a fat tree with LMC), and the diagonal whose shorter path is
//!   shorter wins: {S0-D0, S1-D1} or {S0-D1, S1-D0}.
//! - The other fields act as in a PathRecord template: P_Key, SL, the MTU, rate and
//!   PacketLifeTime selectors, Reversible, RawTraffic, FlowLabel, TClass and
//!   ServiceID (both of its components or neither). HopLimit, QoSClass and
//!   IndependenceSelector are ignored, as OpenSM ignores them.

use ibsm_mad::sa::{ComponentMask, MultiPathRecord, PathRecord, SaStatus};
use ibsm_mad::Method;

use super::params::Selectors;
use super::Query;
use crate::sa::context::{Requester, SaContext};
use crate::sa::fabric::{split_gid, EndPort, SaFabric, DEFAULT_SUBNET_PREFIX};

/// Paths answered when the query gives no NumbPath (OpenSM's
/// `OSM_SA_MPR_MAX_NUM_PATH`).
pub const MAX_PATHS: usize = 127;

/// The PathRecords a GetMulti(MultiPathRecord) asks for.
pub fn multipath_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    mpr: &MultiPathRecord,
    mask: ComponentMask,
    packet_life_time: u8,
) -> Result<Vec<PathRecord>, SaStatus> {
    let Some(f) = ctx.fabric else {
        return Ok(Vec::new());
    };
    let given = |c: ComponentMask| mask.contains(c);
    let sid = mask & MultiPathRecord::SERVICE_ID;
    if !sid.is_empty() && sid != MultiPathRecord::SERVICE_ID {
        return Err(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
    }
    let nsrc = if given(MultiPathRecord::SGID_COUNT) {
        usize::from(mpr.sgid_count).min(MultiPathRecord::MAX_GIDS)
    } else {
        0
    };
    let ndst = if given(MultiPathRecord::DGID_COUNT) {
        usize::from(mpr.dgid_count).min(MultiPathRecord::MAX_GIDS - nsrc)
    } else {
        0
    };
    let gids = &mpr.gids;
    let srcs = ports(f, gids.get(..nsrc).unwrap_or(&[]), true)?;
    let dsts = ports(f, gids.get(nsrc..nsrc + ndst).unwrap_or(&[]), false)?;
    if srcs.is_empty() || dsts.is_empty() {
        tracing::debug!(
            lid = req.from.lid,
            nsrc,
            ndst,
            "SA: MultiPathRecord without a source or a destination"
        );
        return Err(SaStatus::ERR_REQ_INVALID);
    }
    let (template, pr_mask) = path_template(mpr, mask);
    let sel = Selectors::of(&template, pr_mask).map_err(|_| SaStatus::ERR_REQ_INVALID)?;
    let max = if given(MultiPathRecord::NUMB_PATH) {
        usize::from(mpr.numb_path & 0x7F)
    } else {
        MAX_PATHS
    };
    let query = |per_pair: usize| Query {
        f,
        t: &template,
        mask: pr_mask,
        sel,
        packet_life_time,
        per_pair,
    };
    if srcs.len() == 2 && dsts.len() == 2 && max == 2 {
        return Ok(apm_paths(
            &query(1),
            req,
            [srcs[0], srcs[1]],
            [dsts[0], dsts[1]],
        ));
    }
    let mut out = Vec::new();
    'pairs: for s in &srcs {
        for d in &dsts {
            if out.len() >= max {
                break 'pairs;
            }
            query(max - out.len()).port_pair(req, s, d, &mut out);
        }
    }
    out.truncate(max);
    Ok(out)
}

/// The end ports the GIDs name, or ERR_REQ_INVALID_GID.
fn ports(f: &SaFabric, gids: &[[u8; 16]], sources: bool) -> Result<Vec<EndPort>, SaStatus> {
    gids.iter()
        .map(|g| {
            let (prefix, guid) = split_gid(g);
            let link_local = prefix & 0xFFC0_0000_0000_0000 == DEFAULT_SUBNET_PREFIX;
            let multicast = g[0] == 0xFF;
            if (sources && multicast) || (!link_local && prefix != f.subnet_prefix) {
                return Err(SaStatus::ERR_REQ_INVALID_GID);
            }
            f.end_port_by_guid(guid)
                .ok_or(SaStatus::ERR_REQ_INVALID_GID)
        })
        .collect()
}

/// The PathRecord template (and its mask) that asks for what `mpr` asks of each path.
fn path_template(mpr: &MultiPathRecord, mask: ComponentMask) -> (PathRecord, ComponentMask) {
    type M = MultiPathRecord;
    type P = PathRecord;
    let pairs = [
        (M::RAW_TRAFFIC, P::RAW_TRAFFIC),
        (M::FLOW_LABEL, P::FLOW_LABEL),
        (M::TCLASS, P::TCLASS),
        (M::REVERSIBLE, P::REVERSIBLE),
        (M::P_KEY, P::P_KEY),
        (M::SL, P::SL),
        (M::MTU_SELECTOR, P::MTU_SELECTOR),
        (M::MTU, P::MTU),
        (M::RATE_SELECTOR, P::RATE_SELECTOR),
        (M::RATE, P::RATE),
        (M::PACKET_LIFE_TIME_SELECTOR, P::PACKET_LIFE_TIME_SELECTOR),
        (M::PACKET_LIFE_TIME, P::PACKET_LIFE_TIME),
        (M::SERVICE_ID, P::SERVICE_ID),
    ];
    let mut pr_mask = ComponentMask(0);
    for (m, p) in pairs {
        if mask.contains(m) {
            pr_mask |= p;
        }
    }
    let template = PathRecord {
        service_id: mpr.service_id,
        raw_traffic: mpr.raw_traffic,
        flow_label: mpr.flow_label,
        tclass: mpr.tclass,
        reversible: mpr.reversible,
        p_key: mpr.p_key,
        sl: mpr.sl,
        mtu_selector: mpr.mtu_selector,
        mtu: mpr.mtu,
        rate_selector: mpr.rate_selector,
        rate: mpr.rate,
        packet_life_time_selector: mpr.packet_life_time_selector,
        packet_life_time: mpr.packet_life_time,
        ..PathRecord::default()
    };
    (template, pr_mask)
}

/// OpenSM's LID offset for an APM query: a hash of the two base LIDs (the smaller
/// first), with the LMC bits shifted out.
fn apm_offset(a: u16, b: u16, lmc: u8) -> u16 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    let lmc = lmc.min(7);
    (((lo >> lmc) << 4) | (hi >> lmc)) % 103
}

/// The two paths of an APM query (see the module doc).
fn apm_paths(
    q: &Query<'_>,
    req: &Requester,
    mut srcs: [EndPort; 2],
    mut dsts: [EndPort; 2],
) -> Vec<PathRecord> {
    srcs.sort_by_key(|p| p.port_guid);
    dsts.sort_by_key(|p| p.port_guid);
    let lmc = srcs[0].lmc.max(dsts[0].lmc);
    let base = apm_offset(srcs[0].lid, dsts[0].lid, lmc);
    let one = |s: &EndPort, d: &EndPort, offset: u16| -> Option<(PathRecord, u16)> {
        let (sn, dn) = (1u16 << s.lmc.min(7), 1u16 << d.lmc.min(7));
        (0..sn.min(dn)).find_map(|i| {
            let slid = s.lid + (offset + i) % sn;
            let dlid = d.lid + (offset + i) % dn;
            let mut out = Vec::new();
            q.port_pair_lids(req, (s, slid), (d, dlid), &mut out);
            let r = out.pop()?;
            let hops =
                q.f.path_summary((s.node, s.port), dlid)
                    .map_or(u16::MAX, |p| p.links);
            Some((r, hops))
        })
    };
    let m00 = one(&srcs[0], &dsts[0], base);
    let m01 = one(&srcs[0], &dsts[1], base);
    let m10 = one(&srcs[1], &dsts[0], base + 1);
    let m11 = one(&srcs[1], &dsts[1], base + 1);
    let shortest = |a: &Option<(PathRecord, u16)>, b: &Option<(PathRecord, u16)>| match (a, b) {
        (Some(a), Some(b)) => Some(a.1.min(b.1)),
        _ => None,
    };
    let diagonal_a = match (shortest(&m00, &m11), shortest(&m01, &m10)) {
        (Some(a), Some(b)) => a <= b,
        (Some(_), None) => true,
        (None, Some(_)) => false,
        // Neither diagonal is whole: whatever paths exist, A's first.
        (None, None) => m00.is_some() || m11.is_some(),
    };
    let (x, y) = if diagonal_a { (m00, m11) } else { (m01, m10) };
    x.into_iter().chain(y).map(|(r, _)| r).collect()
}

/// Whether a method and a request's RMPP header make a GetMulti the SA answers: the
/// request must be an RMPP transfer (OpenSM refuses one without the Active flag) of
/// one segment (a MultiPathRecord of at most 11 GIDs fits in one MAD).
pub fn check_get_multi(method: Method, rmpp: &ibsm_mad::sa::RmppHeader) -> Result<(), SaStatus> {
    use ibsm_mad::sa::{RmppFlags, RmppType};
    if method != Method::GET_MULTI {
        return Err(SaStatus::METHOD_ATTR_NOT_SUPPORTED);
    }
    let one_segment = rmpp.flags.contains(RmppFlags::FIRST) && rmpp.flags.contains(RmppFlags::LAST);
    if !rmpp.is_active() || rmpp.rmpp_type != RmppType::DATA || !one_segment {
        return Err(SaStatus::ERR_REQ_INVALID);
    }
    Ok(())
}
