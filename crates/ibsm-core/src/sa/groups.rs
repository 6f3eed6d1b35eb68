//! Multicast groups as the SA keeps them (IBA 15.2.5.17): creation (with the
//! parameters asked for, and with an MGID the SA allocates), joins as full, non- or
//! send-only member, leaves, and queries by component mask, with OpenSM's rules so a
//! client sees the same answers from either SM:
//!
//! - A join needs MGID, PortGID and JoinState in the mask; a creation also Q_Key,
//!   TClass, P_Key, FlowLabel and SL (else ERR_REQ_INSUFFICIENT_COMPONENTS), and a
//!   full member (only a full member creates).
//! - A join of an existing group must agree with it on every parameter it gives
//!   (Q_Key, P_Key, SL, TClass, FlowLabel, HopLimit, Scope; MTU, rate and packet life
//!   time through their selectors), and the port must hold the group's P_Key.
//! - A port joins for itself; joining another port needs the SA_Key (a trusted
//!   requester, ProxyJoin).
//! - A leave (Delete) removes the JoinState bits it names; a group is deleted when its
//!   last full member leaves, unless the SM created it (the IPoIB broadcast groups).
//! - MLIDs are the lowest free from 0xC000; an allocated MGID is
//!   `ff1S:a01b:<subnet prefix>:<counter>` (S the scope), as OpenSM builds them.
//!
//! Every change is recorded for the caller: [`GroupChange`]s say which MLIDs need
//! their multicast trees recomputed and which groups to replicate.

use std::collections::BTreeMap;

use ibsm_fabric::{mtu_bytes, Rate};
use ibsm_mad::sa::{ComponentMask, Gid, JoinState, McMemberRecord, SaStatus, Selector};

use super::context::Requester;
use super::fabric::{make_gid, split_gid, SaFabric};

/// The first multicast LID (IBA 4.1.1).
pub const MLID_FIRST: u16 = 0xC000;
/// The last multicast LID a group may get (0xFFFF is the permissive LID).
pub const MLID_LAST: u16 = 0xFFFE;

/// One member of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// How it joined (the union of its joins).
    pub join_state: JoinState,
    /// It was joined by another port (a trusted proxy).
    pub proxy_join: bool,
}

/// One multicast group: its parameters (an MCMemberRecord with PortGID zero and
/// JoinState zero) and members by PortGID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McGroup {
    /// MGID, MLID, Q_Key, P_Key, MTU, rate, SL... (PortGID, JoinState, ProxyJoin zero).
    pub params: McMemberRecord,
    /// Members by PortGID.
    pub members: BTreeMap<Gid, Member>,
    /// Created by the SM (an IPoIB broadcast group): kept with no member.
    pub well_known: bool,
}

impl McGroup {
    fn has_full_member(&self) -> bool {
        self.members
            .values()
            .any(|m| m.join_state.contains(JoinState::FULL_MEMBER))
    }

    /// The record the SA answers for `port_gid`'s membership.
    fn record_for(&self, port_gid: Gid, m: Member) -> McMemberRecord {
        McMemberRecord {
            port_gid,
            join_state: m.join_state,
            proxy_join: m.proxy_join,
            ..self.params
        }
    }
}

/// What a change did, for the multicast trees and the replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupChange {
    /// The group's members changed (or it was created): recompute its tree.
    Members {
        /// The group.
        mgid: Gid,
        /// Its MLID.
        mlid: u16,
    },
    /// The group is gone: clear its MLID on every switch.
    Deleted {
        /// The group.
        mgid: Gid,
        /// The MLID it had.
        mlid: u16,
    },
}

/// Every multicast group (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct McGroups {
    groups: BTreeMap<Gid, McGroup>,
    mlids: BTreeMap<u16, Gid>,
    next_mgid: u32,
    changes: Vec<GroupChange>,
}

const JOIN_MASK: ComponentMask = ComponentMask(
    McMemberRecord::MGID.0 | McMemberRecord::PORT_GID.0 | McMemberRecord::JOIN_STATE.0,
);
const CREATE_MASK: ComponentMask = ComponentMask(
    JOIN_MASK.0
        | McMemberRecord::Q_KEY.0
        | McMemberRecord::TCLASS.0
        | McMemberRecord::P_KEY.0
        | McMemberRecord::FLOW_LABEL.0
        | McMemberRecord::SL.0,
);

/// `have` satisfies `sel want` (for MTU: larger is better; `order` maps a code to
/// something ordered).
fn selected(sel: Selector, want: u8, have: u8, order: fn(u8) -> u32) -> bool {
    let (w, h) = (order(want), order(have));
    match sel {
        Selector::GreaterThan => h > w,
        Selector::LessThan => h < w,
        Selector::Exactly => h == w,
        Selector::Largest => true,
    }
}

/// The MTU and rate a request names are codes IBA defines (MTU 1..=5, a rate with a
/// bandwidth): a selector compares against a real value, so "more than MTU code 6" is
/// an invalid request rather than "any MTU".
fn codes_valid(rec: &McMemberRecord, mask: ComponentMask) -> bool {
    (!mask.contains(McMemberRecord::MTU) || mtu_order(rec.mtu) > 0)
        && (!mask.contains(McMemberRecord::RATE) || rate_order(rec.rate) > 0)
}

fn mtu_order(code: u8) -> u32 {
    mtu_bytes(code).unwrap_or(0)
}

fn rate_order(code: u8) -> u32 {
    Rate::from_iba(code).map_or(0, Rate::mbps)
}

fn plt_order(code: u8) -> u32 {
    u32::from(code)
}

/// The group parameters a request names agree with `g` (every component in `mask`
/// except the port-specific ones).
fn agrees(g: &McMemberRecord, r: &McMemberRecord, mask: ComponentMask) -> bool {
    let eq = |c: ComponentMask, same: bool| !mask.contains(c) || same;
    eq(McMemberRecord::Q_KEY, g.q_key == r.q_key)
        && eq(McMemberRecord::MLID, g.mlid == r.mlid)
        && eq(McMemberRecord::TCLASS, g.tclass == r.tclass)
        && eq(McMemberRecord::P_KEY, g.p_key & 0x7FFF == r.p_key & 0x7FFF)
        && eq(McMemberRecord::SL, g.sl == r.sl)
        && eq(McMemberRecord::FLOW_LABEL, g.flow_label == r.flow_label)
        && eq(McMemberRecord::HOP_LIMIT, g.hop_limit == r.hop_limit)
        && eq(McMemberRecord::SCOPE, g.scope == r.scope)
        && (!mask.contains(McMemberRecord::MTU)
            || selected(
                if mask.contains(McMemberRecord::MTU_SELECTOR) {
                    r.mtu_selector
                } else {
                    Selector::Exactly
                },
                r.mtu,
                g.mtu,
                mtu_order,
            ))
        && (!mask.contains(McMemberRecord::RATE)
            || selected(
                if mask.contains(McMemberRecord::RATE_SELECTOR) {
                    r.rate_selector
                } else {
                    Selector::Exactly
                },
                r.rate,
                g.rate,
                rate_order,
            ))
        && (!mask.contains(McMemberRecord::PACKET_LIFE_TIME)
            || selected(
                if mask.contains(McMemberRecord::PACKET_LIFE_TIME_SELECTOR) {
                    r.packet_life_time_selector
                } else {
                    Selector::Exactly
                },
                r.packet_life_time,
                g.packet_life_time,
                plt_order,
            ))
}

/// The value a creation asks for through a selector, among `codes` (ascending by
/// bandwidth): exactly `v`, the next above or below it, or the largest.
fn pick(sel: Selector, v: u8, codes: &[u8], order: fn(u8) -> u32) -> Option<u8> {
    let mut sorted: Vec<u8> = codes.to_vec();
    sorted.sort_by_key(|c| order(*c));
    match sel {
        Selector::Exactly => sorted.iter().copied().find(|c| order(*c) == order(v)),
        Selector::GreaterThan => sorted.iter().copied().find(|c| order(*c) > order(v)),
        Selector::LessThan => sorted.iter().rev().copied().find(|c| order(*c) < order(v)),
        Selector::Largest => sorted.last().copied(),
    }
}

const MTU_CODES: [u8; 5] = [1, 2, 3, 4, 5];

impl McGroups {
    /// No groups.
    pub fn new() -> McGroups {
        McGroups::default()
    }

    /// Every group, by MGID.
    pub fn iter(&self) -> impl Iterator<Item = &McGroup> + '_ {
        self.groups.values()
    }

    /// The group with this MGID.
    pub fn get(&self, mgid: &Gid) -> Option<&McGroup> {
        self.groups.get(mgid)
    }

    /// The group with this MLID.
    pub fn by_mlid(&self, mlid: u16) -> Option<&McGroup> {
        self.mlids.get(&mlid).and_then(|g| self.groups.get(g))
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// No group at all.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Members over all groups.
    pub fn member_count(&self) -> usize {
        self.groups.values().map(|g| g.members.len()).sum()
    }

    /// What changed since the last call.
    pub fn take_changes(&mut self) -> Vec<GroupChange> {
        std::mem::take(&mut self.changes)
    }

    /// The lowest MLID no group holds.
    pub fn free_mlid(&self) -> Option<u16> {
        (MLID_FIRST..=MLID_LAST).find(|m| !self.mlids.contains_key(m))
    }

    /// Put a group in place as it is (an SM-created group at start, or one a new
    /// master inherits from the replica). An existing group with the same MGID is
    /// replaced; a clash of MLIDs is refused.
    pub fn insert(&mut self, group: McGroup) -> Result<(), String> {
        let mgid = group.params.mgid;
        let mlid = group.params.mlid;
        if !(MLID_FIRST..=MLID_LAST).contains(&mlid) {
            return Err(format!("MLID {mlid:#06x} is not a multicast LID"));
        }
        if let Some(other) = self.mlids.get(&mlid).filter(|g| **g != mgid) {
            return Err(format!(
                "MLID {mlid:#06x} is held by group {}",
                gid_text(other)
            ));
        }
        if let Some(old) = self.groups.get(&mgid) {
            self.mlids.remove(&old.params.mlid);
        }
        self.mlids.insert(mlid, mgid);
        self.groups.insert(mgid, group);
        self.changes.push(GroupChange::Members { mgid, mlid });
        Ok(())
    }

    /// Mark a group made by the SM (kept with no member) or not. A group that stops
    /// being well known is deleted at once when it has no full member, as a leave of
    /// its last full member would; else when its last full member leaves.
    pub fn set_well_known(&mut self, mgid: &Gid, well_known: bool) {
        let Some(g) = self.groups.get_mut(mgid) else {
            return;
        };
        if g.well_known == well_known {
            return;
        }
        g.well_known = well_known;
        let mlid = g.params.mlid;
        if !well_known && !g.has_full_member() {
            self.groups.remove(mgid);
            self.mlids.remove(&mlid);
            tracing::info!(mgid = %gid_text(mgid), mlid = format_args!("{mlid:#06x}"), "multicast group deleted: the SM no longer keeps it and it has no full member");
            self.changes
                .push(GroupChange::Deleted { mgid: *mgid, mlid });
        } else {
            self.changes
                .push(GroupChange::Members { mgid: *mgid, mlid });
        }
    }

    /// Become `other` (a replica's groups): a change for every group that went or
    /// differs, none for one that is the same.
    pub fn replace_with(&mut self, other: McGroups) {
        for (mgid, g) in &self.groups {
            match other.groups.get(mgid) {
                None => self.changes.push(GroupChange::Deleted {
                    mgid: *mgid,
                    mlid: g.params.mlid,
                }),
                Some(o) if o != g => {
                    if o.params.mlid != g.params.mlid {
                        self.changes.push(GroupChange::Deleted {
                            mgid: *mgid,
                            mlid: g.params.mlid,
                        });
                    }
                    self.changes.push(GroupChange::Members {
                        mgid: *mgid,
                        mlid: o.params.mlid,
                    });
                }
                Some(_) => {}
            }
        }
        for (mgid, g) in &other.groups {
            if !self.groups.contains_key(mgid) {
                self.changes.push(GroupChange::Members {
                    mgid: *mgid,
                    mlid: g.params.mlid,
                });
            }
        }
        self.groups = other.groups;
        self.mlids = other.mlids;
        self.next_mgid = self.next_mgid.max(other.next_mgid);
    }

    /// Drop every group (a new mastership loads the replica's groups after this).
    pub fn clear(&mut self) {
        for (mgid, g) in std::mem::take(&mut self.groups) {
            self.changes.push(GroupChange::Deleted {
                mgid,
                mlid: g.params.mlid,
            });
        }
        self.mlids.clear();
    }

    /// Join (SubnAdmSet(MCMemberRecord)): the answer record, or the status to refuse
    /// with.
    pub fn join(
        &mut self,
        fabric: &SaFabric,
        req: &Requester,
        rec: &McMemberRecord,
        mask: ComponentMask,
        packet_life_time: u8,
    ) -> Result<McMemberRecord, SaStatus> {
        if !mask.contains(JOIN_MASK) {
            return Err(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
        }
        if !codes_valid(rec, mask) {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let port_gid = self.check_port(fabric, req, rec)?;
        if rec.join_state.is_empty() {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let port_guid = split_gid(&port_gid).1;
        let port_pkeys = fabric.pkeys_of(port_guid);
        let existing = (rec.mgid != [0; 16])
            .then(|| self.groups.get(&rec.mgid))
            .flatten();
        let mgid = match existing {
            Some(g) => {
                if !agrees(&g.params, rec, mask) {
                    return Err(SaStatus::ERR_REQ_INVALID);
                }
                let pkey = g.params.p_key & 0x7FFF;
                if !port_pkeys.iter().any(|k| k.0 & 0x7FFF == pkey) {
                    return Err(SaStatus::ERR_REQ_INVALID);
                }
                g.params.mgid
            }
            None => self.create(fabric, rec, mask, port_guid, packet_life_time)?,
        };
        let Some(g) = self.groups.get_mut(&mgid) else {
            return Err(SaStatus::ERR_NO_RESOURCES);
        };
        let proxy = req.port.is_none_or(|p| p.port_guid != port_guid);
        let m = g.members.entry(port_gid).or_insert(Member {
            join_state: JoinState(0),
            proxy_join: proxy,
        });
        m.join_state = m.join_state.union(rec.join_state);
        let m = *m;
        let mlid = g.params.mlid;
        let answer = g.record_for(port_gid, m);
        self.changes.push(GroupChange::Members { mgid, mlid });
        Ok(answer)
    }

    /// The PortGID a join or leave is for, checked: the subnet's prefix (the default
    /// prefix stands for it), a port of the fabric, and the requester's own port unless
    /// it is trusted.
    fn check_port(
        &self,
        fabric: &SaFabric,
        req: &Requester,
        rec: &McMemberRecord,
    ) -> Result<Gid, SaStatus> {
        let (prefix, guid) = split_gid(&rec.port_gid);
        if prefix != fabric.subnet_prefix && prefix != super::fabric::DEFAULT_SUBNET_PREFIX {
            return Err(SaStatus::ERR_REQ_INVALID_GID);
        }
        if fabric.end_port_by_guid(guid).is_none() {
            return Err(SaStatus::ERR_REQ_INVALID_GID);
        }
        let own = req.port.is_some_and(|p| p.port_guid == guid);
        if !own && !req.trusted {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        Ok(make_gid(fabric.subnet_prefix, guid))
    }

    /// A new group for a join that names none that exists.
    fn create(
        &mut self,
        fabric: &SaFabric,
        rec: &McMemberRecord,
        mask: ComponentMask,
        port_guid: u64,
        packet_life_time: u8,
    ) -> Result<Gid, SaStatus> {
        if !mask.contains(CREATE_MASK) {
            return Err(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
        }
        if !rec.join_state.contains(JoinState::FULL_MEMBER) {
            // Only a full member creates a group (IBA o15-0.2.3).
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let pkey = rec.p_key & 0x7FFF;
        let port_pkeys = fabric.pkeys_of(port_guid);
        let Some(held) = port_pkeys
            .iter()
            .find(|k| k.0 & 0x7FFF == pkey && pkey != 0)
        else {
            return Err(SaStatus::ERR_REQ_INVALID);
        };
        let scope = if mask.contains(McMemberRecord::SCOPE) {
            rec.scope
        } else {
            2
        };
        let mgid = if rec.mgid == [0; 16] {
            self.allocate_mgid(fabric.subnet_prefix, scope)
                .ok_or(SaStatus::ERR_NO_RESOURCES)?
        } else {
            if rec.mgid[0] != 0xFF {
                return Err(SaStatus::ERR_REQ_INVALID);
            }
            rec.mgid
        };
        let mlid = self.free_mlid().ok_or(SaStatus::ERR_NO_RESOURCES)?;
        let port = fabric.end_port_by_guid(port_guid);
        let port_pi = port.and_then(|p| fabric.port_info_of(p.node, p.port));
        let port_mtu = port_pi.map_or(4, |pi| pi.mtu_cap.clamp(1, 5));
        let port_rate = port_pi
            .and_then(|pi| port_rate(pi.link_width_active, pi.link_speed_active))
            .unwrap_or(3);
        let mtu_codes: Vec<u8> = MTU_CODES
            .iter()
            .copied()
            .filter(|c| *c <= port_mtu)
            .collect();
        let mtu = if mask.contains(McMemberRecord::MTU) {
            let sel = if mask.contains(McMemberRecord::MTU_SELECTOR) {
                rec.mtu_selector
            } else {
                Selector::Exactly
            };
            pick(sel, rec.mtu, &mtu_codes, mtu_order).ok_or(SaStatus::ERR_REQ_INVALID)?
        } else {
            port_mtu
        };
        let rate_codes: Vec<u8> = (2u8..=24)
            .filter(|c| rate_order(*c) > 0 && rate_order(*c) <= rate_order(port_rate))
            .collect();
        let rate = if mask.contains(McMemberRecord::RATE) {
            let sel = if mask.contains(McMemberRecord::RATE_SELECTOR) {
                rec.rate_selector
            } else {
                Selector::Exactly
            };
            pick(sel, rec.rate, &rate_codes, rate_order).ok_or(SaStatus::ERR_REQ_INVALID)?
        } else {
            port_rate
        };
        let params = McMemberRecord {
            mgid,
            port_gid: [0; 16],
            q_key: rec.q_key,
            mlid,
            mtu_selector: Selector::Exactly,
            mtu,
            tclass: rec.tclass,
            p_key: held.0 | 0x8000,
            rate_selector: Selector::Exactly,
            rate,
            packet_life_time_selector: Selector::Exactly,
            packet_life_time,
            sl: rec.sl,
            flow_label: rec.flow_label,
            hop_limit: if mask.contains(McMemberRecord::HOP_LIMIT) {
                rec.hop_limit
            } else {
                0
            },
            scope,
            join_state: JoinState(0),
            proxy_join: false,
        };
        self.mlids.insert(mlid, mgid);
        self.groups.insert(
            mgid,
            McGroup {
                params,
                members: BTreeMap::new(),
                well_known: false,
            },
        );
        tracing::debug!(mgid = %gid_text(&mgid), mlid = format_args!("{mlid:#06x}"), "multicast group created");
        Ok(mgid)
    }

    fn allocate_mgid(&mut self, prefix: u64, scope: u8) -> Option<Gid> {
        for _ in 0..1000 {
            let mut g = [0u8; 16];
            g[0] = 0xFF;
            g[1] = 0x10 | (scope & 0x0F);
            g[2] = 0xA0;
            g[3] = 0x1B;
            g[4..10].copy_from_slice(&prefix.to_be_bytes()[..6]);
            g[12..16].copy_from_slice(&self.next_mgid.to_be_bytes());
            self.next_mgid = self.next_mgid.wrapping_add(1);
            if !self.groups.contains_key(&g) {
                return Some(g);
            }
        }
        None
    }

    /// Leave (SubnAdmDelete(MCMemberRecord)): the answer, or the status to refuse
    /// with.
    pub fn leave(
        &mut self,
        fabric: &SaFabric,
        req: &Requester,
        rec: &McMemberRecord,
        mask: ComponentMask,
    ) -> Result<McMemberRecord, SaStatus> {
        if !mask.contains(JOIN_MASK) {
            return Err(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
        }
        let port_gid = self.check_port(fabric, req, rec)?;
        let Some(g) = self.groups.get_mut(&rec.mgid) else {
            return Err(SaStatus::ERR_REQ_INVALID);
        };
        let Some(m) = g.members.get_mut(&port_gid) else {
            return Err(SaStatus::ERR_REQ_INVALID);
        };
        let left = JoinState(m.join_state.0 & rec.join_state.0);
        m.join_state = m.join_state.without(rec.join_state);
        let after = *m;
        if after.join_state.is_empty() {
            g.members.remove(&port_gid);
        }
        let answer = g.record_for(
            port_gid,
            Member {
                join_state: left,
                proxy_join: after.proxy_join,
            },
        );
        let (mgid, mlid) = (g.params.mgid, g.params.mlid);
        if !g.well_known && !g.has_full_member() {
            self.groups.remove(&mgid);
            self.mlids.remove(&mlid);
            tracing::debug!(mgid = %gid_text(&mgid), mlid = format_args!("{mlid:#06x}"), "multicast group deleted: its last full member left");
            self.changes.push(GroupChange::Deleted { mgid, mlid });
        } else {
            self.changes.push(GroupChange::Members { mgid, mlid });
        }
        Ok(answer)
    }

    /// Get/GetTable(MCMemberRecord), as OpenSM answers: a group is seen only by a
    /// requester holding its P_Key; with PortGID in the mask, that port's membership;
    /// without it, a trusted requester gets every member's record and an untrusted
    /// one the group's record (PortGID and JoinState zero).
    pub fn query(
        &self,
        fabric: Option<&SaFabric>,
        req: &Requester,
        t: &McMemberRecord,
        mask: ComponentMask,
    ) -> Vec<McMemberRecord> {
        let req_pkeys = match (fabric, req.port) {
            (Some(f), Some(p)) => Some(f.pkeys_of(p.port_guid)),
            _ => None,
        };
        let scope_mask = if mask.contains(McMemberRecord::SCOPE) {
            0xF0
        } else {
            0
        } | if mask.contains(McMemberRecord::JOIN_STATE) {
            0x0F
        } else {
            0
        };
        let ss = |scope: u8, js: JoinState| (scope << 4) | (js.0 & 0x0F);
        let want = ss(t.scope, t.join_state) & scope_mask;
        let mut out = Vec::new();
        for g in self.groups.values() {
            if mask.contains(McMemberRecord::MGID) && g.params.mgid != t.mgid {
                continue;
            }
            if let Some(keys) = req_pkeys {
                let pk = g.params.p_key & 0x7FFF;
                if !req.trusted && !keys.iter().any(|k| k.0 & 0x7FFF == pk) {
                    continue;
                }
            }
            let group_mask = mask
                .without(McMemberRecord::SCOPE)
                .without(McMemberRecord::MGID);
            if !agrees(&g.params, t, group_mask) {
                continue;
            }
            if mask.contains(McMemberRecord::PROXY_JOIN) && t.proxy_join {
                // Only a port's membership can be a proxy join.
                if !mask.contains(McMemberRecord::PORT_GID) {
                    continue;
                }
            }
            if mask.contains(McMemberRecord::PORT_GID) {
                let Some(m) = g.members.get(&normalize(fabric, &t.port_gid)) else {
                    continue;
                };
                if mask.contains(McMemberRecord::PROXY_JOIN) && m.proxy_join != t.proxy_join {
                    continue;
                }
                if ss(g.params.scope, m.join_state) & scope_mask != want {
                    continue;
                }
                out.push(g.record_for(normalize(fabric, &t.port_gid), *m));
            } else if req.trusted {
                for (gid, m) in &g.members {
                    if ss(g.params.scope, m.join_state) & scope_mask == want {
                        out.push(g.record_for(*gid, *m));
                    }
                }
            } else if ss(g.params.scope, JoinState(0)) & scope_mask == want {
                out.push(g.params);
            }
        }
        out
    }
}

/// A PortGID with the default prefix stands for the subnet's.
fn normalize(fabric: Option<&SaFabric>, gid: &Gid) -> Gid {
    let (prefix, guid) = split_gid(gid);
    match fabric {
        Some(f) if prefix == super::fabric::DEFAULT_SUBNET_PREFIX => {
            make_gid(f.subnet_prefix, guid)
        }
        _ => *gid,
    }
}

/// The PathRecord rate code of a port's active width and speed (None if unknown).
pub(super) fn port_rate(width: u8, speed: u8) -> Option<u8> {
    let w = ibsm_fabric::LinkWidth::from_iba(width)?;
    let s = ibsm_fabric::LinkSpeed::ALL
        .into_iter()
        .find(|s| s.speed_active() == speed)?;
    Some(Rate::of_link(w, s).to_iba())
}

/// A GID as IPv6 text (for logs).
pub fn gid_text(g: &Gid) -> String {
    std::net::Ipv6Addr::from(*g).to_string()
}
