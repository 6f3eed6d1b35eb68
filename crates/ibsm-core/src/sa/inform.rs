//! InformInfo subscriptions (IBA 13.4.8.3, 15.2.5.12) and the Reports they ask for,
//! with OpenSM's rules:
//!
//! - SubnAdmSet(InformInfo) with Subscribe 1 subscribes the requester's port (its GID
//!   is the SubscriberGID; a requester the SA does not know is refused
//!   ERR_REQ_INVALID) and Subscribe 0 unsubscribes; Subscribe > 1 is ERR_REQ_INVALID.
//!   Like OpenSM, the QPN of a subscription is the requester's own QP (the source of
//!   the Set), whatever the record says; the answer is a GetResp echoing the request's
//!   record unchanged (OpenSM's `infr_rcv_respond` copies the request's payload).
//!   Unsubscribing what is not subscribed: ERR_REQ_INVALID. Subscribing the
//!   security traps 256-259 needs the SA_Key (C15-0.2-1.16).
//! - A notice matches a subscription as in OpenSM's `match_notice_to_inf_rec`: a
//!   non-zero GID must be the IssuerGID, else a LID range (begin 0xFFFF: any) must
//!   hold the IssuerLID; IsGeneric must agree; Type, TrapNumber/DeviceID (0xFFFF: any)
//!   and ProducerType/VendorID (0xFFFFFF: any) must agree; the subscriber must share a
//!   partition with the issuer (o13-17.1.1).
//! - Each matching subscriber gets a Report (method 0x06, attribute Notice) to its LID
//!   and QPN with the GSI Q_Key and a TID of the SA's own; it is sent again every
//!   `report_timeout` until the ReportResp with that TID (low 32 bits: a kernel
//!   rewrites the high half) comes back, at most `report_retries` times.
//! - InformInfoRecord Get/GetTable: a trusted requester sees all; another its own.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use ibsm_mad::sa::{
    ComponentMask, Gid, InformInfo, InformInfoRecord, SaAttributeId, SaMad, SaNotice, SaStatus,
};
use ibsm_mad::{MadAddress, Method, GSI_QKEY, MAD_SIZE};

use super::config::SaConfig;
use super::context::{share_pkey, Requester};
use super::fabric::{split_gid, SaFabric};

/// One subscription: the record as stored and where Reports go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// SubscriberGID, Enum (0) and the InformInfo (QPN: the subscriber's QP).
    pub record: InformInfoRecord,
    /// The subscriber's address (LID, QPN, SL, P_Key index) as the Set came from.
    pub to: MadAddress,
}

/// A Report waiting for its ReportResp.
#[derive(Debug, Clone)]
struct PendingReport {
    to: MadAddress,
    mad: [u8; MAD_SIZE],
    deadline: Duration,
    resends_left: u32,
}

/// Every subscription and the Reports in flight (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Informs {
    subs: Vec<Subscription>,
    pending: BTreeMap<u32, PendingReport>,
    next_tid: u32,
    changed: bool,
    /// Reports acknowledged by a ReportResp.
    pub reports_acked: u64,
    /// Reports given up after their retries.
    pub reports_expired: u64,
}

/// The first TID of Reports (low 32 bits; a range apart from what clients use is not
/// needed, it only makes captures easier to read).
const REPORT_TID_BASE: u32 = 0x5A00_0000;

/// Traps only a trusted requester may subscribe to (bad M_Key, P_Key, Q_Key, switch
/// P_Key).
const SECURITY_TRAPS: std::ops::RangeInclusive<u16> = 256..=259;

/// Two subscriptions are the same one: all but RespTimeValue agree.
fn same(a: &InformInfoRecord, b: &InformInfoRecord) -> bool {
    let (x, y) = (&a.inform_info, &b.inform_info);
    a.subscriber_gid == b.subscriber_gid
        && a.subscriber_enum == b.subscriber_enum
        && x.gid == y.gid
        && x.lid_range_begin == y.lid_range_begin
        && x.lid_range_end == y.lid_range_end
        && x.is_generic == y.is_generic
        && x.notice_type == y.notice_type
        && x.trap_number == y.trap_number
        && x.qpn == y.qpn
        && x.producer_type == y.producer_type
}

/// Type, trap number and producer of a notice, as InformInfo names them.
fn notice_fields(n: &SaNotice) -> (bool, u16, u16, u32) {
    use ibsm_mad::attr::NoticeProducer;
    let ty = u16::from(u8::from(n.notice.notice_type));
    match n.notice.producer {
        NoticeProducer::Generic {
            producer_type,
            trap_number,
        } => (true, ty, trap_number, producer_type.0),
        NoticeProducer::Vendor {
            vendor_id,
            device_id,
        } => (false, ty, device_id, vendor_id),
    }
}

/// `ii` asks for `n` (OpenSM's match, without the partition check).
pub fn matches(ii: &InformInfo, n: &SaNotice) -> bool {
    if ii.gid != [0; 16] {
        if ii.gid != n.issuer_gid {
            return false;
        }
    } else if ii.lid_range_begin != 0xFFFF
        && !(ii.lid_range_begin..=ii.lid_range_end).contains(&n.notice.issuer_lid)
    {
        return false;
    }
    let (generic, ty, trap, producer) = notice_fields(n);
    (ii.is_generic != 0) == generic
        && (ii.notice_type == 0xFFFF || ii.notice_type == ty)
        && (ii.trap_number == 0xFFFF || ii.trap_number == trap)
        && (ii.producer_type & 0xFF_FFFF == 0xFF_FFFF
            || ii.producer_type & 0xFF_FFFF == producer & 0xFF_FFFF)
}

impl Informs {
    /// No subscription.
    pub fn new() -> Informs {
        Informs {
            next_tid: REPORT_TID_BASE,
            ..Informs::default()
        }
    }

    /// Every subscription.
    pub fn iter(&self) -> impl Iterator<Item = &Subscription> + '_ {
        self.subs.iter()
    }

    /// Number of subscriptions.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// None at all.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Reports waiting for their ReportResp.
    pub fn reports_in_flight(&self) -> usize {
        self.pending.len()
    }

    /// True once if something changed since the last call (to replicate).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Put a subscription in place (loaded from a replica); one that is the same as
    /// an existing one replaces it.
    pub fn insert(&mut self, s: Subscription) {
        self.subs.retain(|x| !same(&x.record, &s.record));
        self.subs.push(s);
        self.changed = true;
    }

    /// Become `other` (a replica's subscriptions); Reports in flight are kept.
    pub fn replace_with(&mut self, other: Informs) {
        self.subs = other.subs;
        self.changed = true;
    }

    /// SubnAdmSet(InformInfo): subscribe or unsubscribe; the record to echo.
    pub fn set(
        &mut self,
        fabric: &SaFabric,
        req: &Requester,
        ii: &InformInfo,
        max: usize,
    ) -> Result<InformInfo, SaStatus> {
        let Some(port) = req.port else {
            return Err(SaStatus::ERR_REQ_INVALID);
        };
        if ii.subscribe > 1 {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        if ii.is_generic != 0 && SECURITY_TRAPS.contains(&ii.trap_number) && !req.trusted {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let mut stored = *ii;
        stored.subscribe = 0;
        let mut rec = InformInfoRecord {
            subscriber_gid: fabric.gid_of(port.port_guid),
            subscriber_enum: 0,
            inform_info: stored,
        };
        if ii.subscribe == 1 {
            if ii.lid_range_begin != 0xFFFF && ii.lid_range_begin > ii.lid_range_end {
                return Err(SaStatus::ERR_REQ_INVALID);
            }
            rec.inform_info.qpn = req.from.qpn & 0x00FF_FFFF;
            if let Some(i) = self.subs.iter().position(|s| same(&s.record, &rec)) {
                self.subs[i] = Subscription {
                    record: rec,
                    to: req.from,
                };
            } else {
                if self.subs.len() >= max {
                    return Err(SaStatus::ERR_NO_RESOURCES);
                }
                self.subs.push(Subscription {
                    record: rec,
                    to: req.from,
                });
            }
        } else {
            // OpenSM looks for the QPN the request names; a client that names none
            // (0) means the QP it sends from, which is the one we stored.
            if rec.inform_info.qpn == 0 {
                rec.inform_info.qpn = req.from.qpn & 0x00FF_FFFF;
            }
            let Some(i) = self.subs.iter().position(|s| same(&s.record, &rec)) else {
                return Err(SaStatus::ERR_REQ_INVALID);
            };
            self.subs.remove(i);
        }
        self.changed = true;
        Ok(*ii)
    }

    /// InformInfoRecord Get/GetTable.
    pub fn query(
        &self,
        fabric: Option<&SaFabric>,
        req: &Requester,
        t: &InformInfoRecord,
        mask: ComponentMask,
    ) -> Vec<InformInfoRecord> {
        let own: Option<Gid> = match (fabric, req.port) {
            (Some(f), Some(p)) => Some(f.gid_of(p.port_guid)),
            _ => None,
        };
        self.subs
            .iter()
            .map(|s| s.record)
            .filter(|r| req.trusted || own == Some(r.subscriber_gid))
            .filter(|r| r.matches(t, mask))
            .collect()
    }

    /// A notice: a Report to every matching subscriber (see the module doc), queued
    /// on `out`, resent every `cfg.report_timeout` at most `cfg.report_retries`
    /// times. Reports in flight are bounded by `cfg.max_subscriptions`; beyond it a
    /// Report is dropped with a warning (the subscriber sees a gap, the SA's memory
    /// stays bounded).
    pub fn notify(
        &mut self,
        now: Duration,
        fabric: Option<&SaFabric>,
        n: &SaNotice,
        cfg: &SaConfig,
        out: &mut VecDeque<(MadAddress, [u8; MAD_SIZE])>,
    ) {
        let (timeout, retries, max_pending) = (
            cfg.report_timeout,
            cfg.report_retries,
            cfg.max_subscriptions,
        );
        let issuer_guid = fabric.and_then(|f| {
            f.end_port_by_lid(n.notice.issuer_lid)
                .map(|p| p.port_guid)
                .or_else(|| {
                    f.end_port_by_guid(split_gid(&n.issuer_gid).1)
                        .map(|p| p.port_guid)
                })
        });
        for s in &self.subs {
            if !matches(&s.record.inform_info, n) {
                continue;
            }
            if let (Some(f), Some(ig)) = (fabric, issuer_guid) {
                let sub_guid = split_gid(&s.record.subscriber_gid).1;
                if !share_pkey(f.pkeys_of(sub_guid), f.pkeys_of(ig)) {
                    continue;
                }
            }
            if self.pending.len() >= max_pending {
                tracing::warn!(
                    lid = s.to.lid,
                    "SA: too many Reports in flight; one is dropped"
                );
                continue;
            }
            let tid = self.next_tid;
            self.next_tid = self.next_tid.wrapping_add(1).max(1);
            let mut mad = SaMad::new(Method::REPORT, SaAttributeId::NOTICE, u64::from(tid));
            mad.set_data(&n.encode());
            let to = MadAddress {
                qpn: s.record.inform_info.qpn,
                qkey: GSI_QKEY,
                ..s.to
            };
            let bytes = mad.encode();
            tracing::debug!(
                lid = to.lid,
                qpn = to.qpn,
                trap = ?n.notice.trap_number(),
                tid = format_args!("{tid:#x}"),
                "SA: Report to a subscriber"
            );
            out.push_back((to, bytes));
            self.pending.insert(
                tid,
                PendingReport {
                    to,
                    mad: bytes,
                    deadline: now + timeout,
                    resends_left: retries,
                },
            );
        }
    }

    /// A ReportResp arrived with this TID: that Report is done. True if it was ours.
    pub fn handle_report_resp(&mut self, tid: u64) -> bool {
        let low = (tid & 0xFFFF_FFFF) as u32;
        if self.pending.remove(&low).is_some() {
            self.reports_acked += 1;
            true
        } else {
            false
        }
    }

    /// The next Report resend.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Resend what is due; give up on what has no resend left.
    pub fn handle_timeout(
        &mut self,
        now: Duration,
        timeout: Duration,
        out: &mut VecDeque<(MadAddress, [u8; MAD_SIZE])>,
    ) {
        let mut gone = Vec::new();
        for (tid, p) in self.pending.iter_mut() {
            if p.deadline > now {
                continue;
            }
            if p.resends_left == 0 {
                gone.push(*tid);
                continue;
            }
            p.resends_left -= 1;
            p.deadline = now + timeout;
            out.push_back((p.to, p.mad));
        }
        for tid in gone {
            if let Some(p) = self.pending.remove(&tid) {
                self.reports_expired += 1;
                tracing::info!(
                    lid = p.to.lid,
                    tid = format_args!("{tid:#x}"),
                    "SA: Report never acknowledged; given up"
                );
            }
        }
    }
}
