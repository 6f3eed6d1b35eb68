//! PathRecord queries (IBA 15.2.5.16), answered from the forwarding tables the master
//! programmed, the way OpenSM 3.3 answers them (`osm_sa_path_record.c`) so that a
//! client sees the same paths under either SM.
//!
//! ## The ends of a query
//!
//! A source is named by SGID (its prefix the subnet's or link-local, its interface
//! ID a PortGUID) or SLID (any LID of an LMC range), or both if they name one port
//! (else ERR_REQ_INVALID); the same for the destination with DGID/DLID. An end that
//! names nobody (an unknown GUID or LID, another subnet's prefix: there are no
//! routers here) gives no records, as OpenSM answers it. Without a source the
//! requester's own port is the source (IBA: SGID/SLID default to the requester).
//! Without a destination a GetTable asks for paths to every end port (`saquery -p`:
//! every path from the requester, switches and the requester itself included); a Get
//! answers one record, so it needs a destination (ERR_REQ_INSUFFICIENT_COMPONENTS).
//! A multicast DGID is not answered here (no records): the groups live with the
//! MCMemberRecord handler.
//!
//! ## The paths of one port pair
//!
//! The requester must share a partition with both ends and the ends with each other
//! (a trusted requester, one carrying the SA_Key, sees every port), as OpenSM's
//! `osm_port_share_pkey` checks. Then OpenSM's `pr_rcv_get_port_pair_paths`: with
//! LMC > 0 the SLIDs (the source's 2^LMC LIDs, or the template's SLID) and the DLIDs
//! are paired first in step (base with base, base+1 with base+1, ...: the most
//! distinct paths, Preference 0), then every other combination (Preference 2), until
//! NumbPath records (a Get: one; a GetTable without NumbPath: all of them). Each
//! (SLID, DLID) is looked up in O(1) in the snapshot's path table (see
//! [`SaFabric::path_summary`]), both ways: Reversible says the way back works too,
//! and a template asking for a reversible path gets only those.
//!
//! ## The record
//!
//! MTU, rate and PacketLifeTime as `params` computes them, with selector
//! "exactly" (the values are the path's); P_Key as [`PairKey`] says; SL the
//! template's or 0; HopLimit 0 (a local path, no GRH needed: OpenSM sets 255 only
//! through a router); NumbPath 0 (OpenSM returns only the Reversible bit in that
//! byte); QoSClass 0. ServiceID, FlowLabel, TClass and RawTraffic are echoed from
//! the template when their components are in the mask (OpenSM returns 0 for them;
//! echoing keeps the record matching the query) and are 0 otherwise. Preference,
//! HopLimit and QoSClass in a template are ignored, as OpenSM ignores them.
//!
//! Where this differs from OpenSM 3.3.23: OpenSM answers a query without SGID/SLID
//! for every source (and without any end, all pairs of the subnet); here the source
//! defaults to the requester as IBA says, so a table never holds other ports' paths
//! unless asked for. OpenSM answers a Get without destination with the first path it
//! finds; here it is refused. OpenSM without a known requester port answers nothing;
//! here such a requester (one the last sweep did not see) is treated as in the
//! default partition, as elsewhere in the SA.

mod multipath;
mod params;

pub use multipath::{check_get_multi, multipath_records};

use ibsm_mad::sa::{ComponentMask, PathRecord, SaStatus, Selector};
use ibsm_mad::Method;

use super::context::{Requester, SaContext};
use super::fabric::{split_gid, EndPort, SaFabric, DEFAULT_SUBNET_PREFIX};
use params::{pair_key, path_params, ports_share, rate_for_port, PairKey, PathParams, Selectors};

/// PathRecords for a query template under `mask`, for a Get or a GetTable.
pub fn path_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &PathRecord,
    mask: ComponentMask,
    method: Method,
    packet_life_time: u8,
) -> Result<Vec<PathRecord>, SaStatus> {
    if method != Method::GET && method != Method::GET_TABLE {
        return Err(SaStatus::METHOD_ATTR_NOT_SUPPORTED);
    }
    let sel = Selectors::of(template, mask).map_err(|_| {
        tracing::debug!(
            lid = req.from.lid,
            "SA: PathRecord with a reserved MTU or rate"
        );
        SaStatus::ERR_REQ_INVALID
    })?;
    let sid = mask & PathRecord::SERVICE_ID;
    if !sid.is_empty() && sid != PathRecord::SERVICE_ID {
        return Err(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
    }
    let Some(f) = ctx.fabric else {
        return Ok(Vec::new());
    };
    if mask.contains(PathRecord::DGID) && template.dgid[0] == 0xFF {
        tracing::debug!(lid = req.from.lid, "SA: multicast PathRecord not answered");
        return Ok(Vec::new());
    }
    let given = |c: ComponentMask| mask.contains(c);
    let src = match end(
        f,
        given(PathRecord::SGID).then_some(&template.sgid),
        given(PathRecord::SLID).then_some(template.slid),
    )? {
        End::Port(e) => e,
        End::Nobody => return Ok(Vec::new()),
        End::Unspecified => match req.port {
            Some(p) => p,
            None => return Ok(Vec::new()),
        },
    };
    let dsts = match end(
        f,
        given(PathRecord::DGID).then_some(&template.dgid),
        given(PathRecord::DLID).then_some(template.dlid),
    )? {
        End::Port(e) => vec![e],
        End::Nobody => return Ok(Vec::new()),
        End::Unspecified if method == Method::GET => {
            return Err(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS)
        }
        End::Unspecified => f.end_ports(),
    };
    let per_pair = if method == Method::GET {
        1
    } else if given(PathRecord::NUMB_PATH) {
        usize::from(template.numb_path)
    } else {
        usize::MAX
    };
    let q = Query {
        f,
        t: template,
        mask,
        sel,
        packet_life_time,
        per_pair,
    };
    let mut out = Vec::new();
    for dst in &dsts {
        q.port_pair(req, &src, dst, &mut out);
    }
    Ok(out)
}

/// What a template's GID and LID of one end name.
enum End {
    /// Neither is in the mask.
    Unspecified,
    /// No end port of this subnet: no records.
    Nobody,
    /// This port.
    Port(EndPort),
}

/// The end named by `gid` and/or `lid` (each `None` when not in the mask).
fn end(f: &SaFabric, gid: Option<&[u8; 16]>, lid: Option<u16>) -> Result<End, SaStatus> {
    let by_gid = gid.map(|g| {
        let (prefix, guid) = split_gid(g);
        let link_local = prefix & 0xFFC0_0000_0000_0000 == DEFAULT_SUBNET_PREFIX;
        if link_local || prefix == f.subnet_prefix {
            f.end_port_by_guid(guid)
        } else {
            None
        }
    });
    let by_lid = lid.map(|l| f.end_port_by_lid(l));
    Ok(match (by_gid, by_lid) {
        (None, None) => End::Unspecified,
        (Some(None), _) | (_, Some(None)) => End::Nobody,
        (Some(Some(a)), Some(Some(b))) if a.port_guid != b.port_guid => {
            return Err(SaStatus::ERR_REQ_INVALID)
        }
        (Some(Some(a)), _) | (None, Some(Some(a))) => End::Port(a),
    })
}

/// One query, resolved.
struct Query<'a> {
    f: &'a SaFabric,
    t: &'a PathRecord,
    mask: ComponentMask,
    sel: Selectors,
    packet_life_time: u8,
    /// Records per port pair at most (NumbPath; 1 for a Get).
    per_pair: usize,
}

impl Query<'_> {
    /// The LIDs a path may use at end `e`: the template's one if `component` is in
    /// the mask, else the port's whole LMC range. (first, count).
    fn lids(&self, e: &EndPort, component: ComponentMask, given: u16) -> (u16, u16) {
        if self.mask.contains(component) {
            return (given, 1);
        }
        let n = 1u16 << e.lmc.min(7);
        let room = ibsm_fabric::path::MAX_UNICAST_LID.saturating_sub(e.lid) + 1;
        (e.lid, n.min(room))
    }

    /// The P_Key of paths between `src` and `dst`, if the requester may see them and
    /// the two ends share a partition the template allows.
    fn visible_key(&self, req: &Requester, src: &EndPort, dst: &EndPort) -> Option<u16> {
        let f = self.f;
        let seen = req.trusted
            || req.port.is_none_or(|r| {
                ports_share(f, r.port_guid, src.port_guid)
                    && ports_share(f, r.port_guid, dst.port_guid)
            });
        if !seen || !ports_share(f, src.port_guid, dst.port_guid) {
            return None;
        }
        match pair_key(
            f.pkeys_of(src.port_guid),
            f.pkeys_of(dst.port_guid),
            self.t,
            self.mask,
        ) {
            PairKey::Key(k) => Some(k),
            PairKey::NotShared => None,
        }
    }

    /// The record of one (SLID, DLID) of a port pair (Preference 0), if visible and
    /// satisfying the template: what an APM MultiPathRecord query takes per pair.
    fn port_pair_lids(
        &self,
        req: &Requester,
        (src, slid): (&EndPort, u16),
        (dst, dlid): (&EndPort, u16),
        out: &mut Vec<PathRecord>,
    ) {
        if let Some(p_key) = self.visible_key(req, src, dst) {
            out.extend(self.lid_pair((src, slid), (dst, dlid), p_key, 0));
        }
    }

    /// OpenSM's `pr_rcv_get_port_pair_paths`: see the module doc.
    fn port_pair(&self, req: &Requester, src: &EndPort, dst: &EndPort, out: &mut Vec<PathRecord>) {
        let Some(p_key) = self.visible_key(req, src, dst) else {
            return;
        };
        let (s0, sn) = self.lids(src, PathRecord::SLID, self.t.slid);
        let (d0, dn) = self.lids(dst, PathRecord::DLID, self.t.dlid);
        let mut found = 0usize;
        let mut try_pair = |so: u16, d_o: u16, preference: u8| -> bool {
            if found >= self.per_pair {
                return false;
            }
            let (slid, dlid) = (s0.saturating_add(so), d0.saturating_add(d_o));
            if let Some(r) = self.lid_pair((src, slid), (dst, dlid), p_key, preference) {
                out.push(r);
                found += 1;
            }
            true
        };
        // Preference 0: the LIDs in step, each path as distinct as LMC makes it.
        for i in 0..sn.min(dn) {
            if !try_pair(i, i, 0) {
                return;
            }
        }
        // Preference 2: the other combinations (OpenSM never reports 1).
        for so in 0..sn {
            for d_o in 0..dn {
                if so != d_o && !try_pair(so, d_o, 2) {
                    return;
                }
            }
        }
    }

    /// The record for (SLID, DLID), if the path exists and satisfies the template.
    fn lid_pair(
        &self,
        (src, slid): (&EndPort, u16),
        (dst, dlid): (&EndPort, u16),
        p_key: u16,
        preference: u8,
    ) -> Option<PathRecord> {
        let plt = self.packet_life_time;
        let fwd = path_params(self.f, &self.sel, plt, (src, slid), (dst, dlid))?;
        let reversible = path_params(self.f, &self.sel, plt, (dst, dlid), (src, slid)).is_some();
        // A template's Reversible 0 is "don't care" (IBA 1.2 p. 900), not "one way only".
        if self.mask.contains(PathRecord::REVERSIBLE) && self.t.reversible && !reversible {
            return None;
        }
        Some(self.record((src, slid), (dst, dlid), fwd, reversible, p_key, preference))
    }

    fn record(
        &self,
        (src, slid): (&EndPort, u16),
        (dst, dlid): (&EndPort, u16),
        p: PathParams,
        reversible: bool,
        p_key: u16,
        preference: u8,
    ) -> PathRecord {
        let (f, t) = (self.f, self.t);
        let echo = |c: ComponentMask| self.mask.contains(c);
        let mut rate = p.rate;
        if let Some(pi) = f.port_info_of(src.node, src.port) {
            rate = rate_for_port(pi, rate);
        }
        if reversible {
            if let Some(pi) = f.port_info_of(dst.node, dst.port) {
                rate = rate_for_port(pi, rate);
            }
        }
        PathRecord {
            service_id: if echo(PathRecord::SERVICE_ID) {
                t.service_id
            } else {
                0
            },
            dgid: f.gid_of(dst.port_guid),
            // OpenSM returns the SGID as asked (a link-local prefix stays so).
            sgid: if echo(PathRecord::SGID) {
                t.sgid
            } else {
                f.gid_of(src.port_guid)
            },
            dlid,
            slid,
            raw_traffic: echo(PathRecord::RAW_TRAFFIC) && t.raw_traffic,
            flow_label: if echo(PathRecord::FLOW_LABEL) {
                t.flow_label
            } else {
                0
            },
            hop_limit: 0,
            tclass: if echo(PathRecord::TCLASS) {
                t.tclass
            } else {
                0
            },
            reversible,
            numb_path: 0,
            p_key,
            qos_class: 0,
            sl: if echo(PathRecord::SL) { t.sl & 0x0F } else { 0 },
            mtu_selector: Selector::Exactly,
            mtu: p.mtu,
            rate_selector: Selector::Exactly,
            rate: rate.to_iba(),
            packet_life_time_selector: Selector::Exactly,
            packet_life_time: p.packet_life_time,
            preference,
        }
    }
}

#[cfg(test)]
mod tests;
