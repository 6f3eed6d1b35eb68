//! [`SaAgent`]: requests in, answers out. It decodes an SA MAD, drops what IBA says to
//! drop (a wrong SM_Key), answers what it must refuse with a status (bad version, an
//! unsupported method or attribute, a bad template), hands the query to the record
//! module that knows the attribute, and sends the answer: GetResp with exactly one
//! record, GetTableResp as an RMPP transfer (see `transfer`).
//!
//! A standby's SA answers nobody's queries: it redirects the requester to the master
//! (MAD status REDIRECT with a ClassPortInfo naming the master's LID and QP1), which
//! is how IBA lets a client that found the wrong SM find the right one.

use std::collections::VecDeque;
use std::time::Duration;

use ibsm_mad::sa::{
    ClassPortInfo, InformInfo, InformInfoRecord, LinkRecord, McMemberRecord, MultiPathRecord,
    NodeRecord, PathRecord, PortInfoRecord, RmppFlags, RmppType, SaAttributeId, SaError, SaMad,
    SaRecord, SaStatus, ServiceRecord, SmInfoRecord, RMPP_VERSION,
};
use ibsm_mad::sa::{
    GuidInfoRecord, LinearForwardingTableRecord, MulticastForwardingTableRecord, PKeyTableRecord,
    SlToVlMappingTableRecord, SwitchInfoRecord, VlArbitrationTableRecord,
};
use ibsm_mad::{MadAddress, Method, GSI_QKEY, MAD_SIZE};

use super::config::SaConfig;
use super::context::{Requester, SaContext};
use super::fabric::split_gid;
use super::groups::{gid_text, McGroups};
use super::inform::Informs;
use super::ipoib::default_groups;
use super::notices::{group_notice, sa_notice};
use super::path;
use super::records;
use super::services::Services;
use super::tables;
use super::transfer::{Send, Transfers};

/// An SA MAD to send.
#[derive(Clone, PartialEq, Eq)]
pub struct SaTransmit {
    /// Where (a requester's LID and QP, or a subscriber's).
    pub to: MadAddress,
    /// The MAD, all 256 bytes (zero past `len`).
    pub mad: [u8; MAD_SIZE],
    /// How many bytes of `mad` to write ([`SaTransmit::wire`]): 256, or for the last
    /// segment of an RMPP transfer the 56 header bytes and the data it carries.
    pub len: usize,
}

impl SaTransmit {
    /// A whole 256-byte MAD.
    pub fn whole(to: MadAddress, mad: [u8; MAD_SIZE]) -> SaTransmit {
        SaTransmit {
            to,
            mad,
            len: MAD_SIZE,
        }
    }

    /// The bytes to write: the first `len` of `mad`.
    pub fn wire(&self) -> &[u8] {
        self.mad.get(..self.len).unwrap_or(&self.mad)
    }
}

impl std::fmt::Debug for SaTransmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaTransmit")
            .field("to", &self.to)
            .field("method", &self.mad[3])
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Counters of the SA (status and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaMetrics {
    /// Requests received (every method).
    pub requests: u64,
    /// Answers with a non-zero status.
    pub errors: u64,
    /// Requests dropped (a wrong SM_Key, undecodable).
    pub dropped: u64,
    /// Records sent in answers.
    pub records_sent: u64,
    /// RMPP transfers acknowledged to the end.
    pub transfers_completed: u64,
    /// RMPP transfers stopped, aborted or expired.
    pub transfers_aborted: u64,
    /// Requests redirected to the master (this SM was not master).
    pub redirected: u64,
}

/// The Subnet Administrator (see the module doc).
#[derive(Debug)]
pub struct SaAgent {
    cfg: SaConfig,
    groups: McGroups,
    services: Services,
    informs: Informs,
    /// Traps 66/67 (group created/deleted) a change made, reported after its answer.
    group_notices: Vec<(bool, ibsm_mad::sa::Gid)>,
    /// The time of the request being handled (lease starts; `change` takes no time).
    now: Duration,
    /// Lines for the operator's event stream: joins, leaves, service registrations,
    /// deletions and expiries, subscriptions ([`SaAgent::take_activity`]).
    activity: Vec<String>,
    transfers: Transfers,
    out: VecDeque<SaTransmit>,
    metrics: SaMetrics,
}

/// What a query handler answers: records (encoded) or a status.
type Answer = Result<Vec<Vec<u8>>, SaStatus>;

fn encode_all<R: SaRecord>(recs: Vec<R>) -> Answer {
    let mut v = Vec::with_capacity(recs.len());
    for r in recs {
        let mut b = vec![0u8; R::SIZE];
        r.encode_into(&mut b)
            .map_err(|_| SaStatus::ERR_NO_RESOURCES)?;
        v.push(b);
    }
    Ok(v)
}

fn template<R: SaRecord>(req: &SaMad) -> Result<R, SaStatus> {
    req.record::<R>().map_err(|_| SaStatus::ERR_REQ_INVALID)
}

impl SaAgent {
    /// An SA with these settings.
    pub fn new(cfg: SaConfig) -> SaAgent {
        let mut groups = McGroups::new();
        for g in default_groups() {
            if let Err(e) = groups.insert(g) {
                tracing::error!(error = %e, "SA: cannot create an IPoIB broadcast group");
            }
        }
        SaAgent {
            cfg,
            groups,
            services: Services::new(),
            informs: Informs::new(),
            group_notices: Vec::new(),
            now: Duration::ZERO,
            activity: Vec::new(),
            transfers: Transfers::default(),
            out: VecDeque::new(),
            metrics: SaMetrics::default(),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &SaConfig {
        &self.cfg
    }

    /// Counters.
    pub fn metrics(&self) -> SaMetrics {
        let mut m = self.metrics;
        m.transfers_completed = self.transfers.completed;
        m.transfers_aborted = self.transfers.aborted;
        m
    }

    /// The multicast groups.
    pub fn groups(&self) -> &McGroups {
        &self.groups
    }

    /// The multicast groups, to load a replica's into or take their changes.
    pub fn groups_mut(&mut self) -> &mut McGroups {
        &mut self.groups
    }

    /// The registered services.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The registered services, to load a replica's into or take their changes.
    pub fn services_mut(&mut self) -> &mut Services {
        &mut self.services
    }

    /// The InformInfo subscriptions and Reports in flight.
    pub fn informs(&self) -> &Informs {
        &self.informs
    }

    /// The subscriptions, to load a replica's into or take their changes.
    pub fn informs_mut(&mut self) -> &mut Informs {
        &mut self.informs
    }

    /// A notice for subscribers (a trap the master received, or one it produced: GID
    /// in/out of service): a Report to each matching subscriber, resent until its
    /// ReportResp. Only the master's SA reports.
    pub fn handle_notice(
        &mut self,
        now: Duration,
        ctx: &SaContext<'_>,
        notice: &ibsm_mad::attr::Notice,
    ) {
        if !ctx.is_master {
            return;
        }
        let n = sa_notice(ctx.fabric, notice);
        let mut sends = VecDeque::new();
        self.informs
            .notify(now, ctx.fabric, &n, &self.cfg, &mut sends);
        self.out.extend(
            sends
                .into_iter()
                .map(|(to, mad)| SaTransmit::whole(to, mad)),
        );
    }

    /// What clients changed since the last call, one line each (a port joined or
    /// left a group, a service was registered, deleted or expired, a subscription
    /// was made or dropped): the node shows them on the operator's event stream.
    pub fn take_activity(&mut self) -> Vec<String> {
        std::mem::take(&mut self.activity)
    }

    /// RMPP transfers in flight.
    pub fn transfers_in_flight(&self) -> usize {
        self.transfers.len()
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self) -> Option<SaTransmit> {
        self.out.pop_front()
    }

    /// When [`SaAgent::handle_timeout`] wants to run.
    pub fn poll_timeout(&self) -> Option<Duration> {
        [
            self.transfers.poll_timeout(),
            self.services.poll_timeout(),
            self.informs.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Retransmissions and expiries.
    pub fn handle_timeout(&mut self, now: Duration) {
        let mut sends = Vec::new();
        self.transfers.handle_timeout(
            now,
            self.cfg.rmpp_timeout,
            self.cfg.rmpp_retries,
            &mut sends,
        );
        self.queue(sends);
        for svc in self
            .services
            .iter()
            .filter(|s| s.expires.is_some_and(|e| e <= now))
        {
            self.activity.push(format!(
                "service {:#018x} {} of port {:#018x}: lease expired",
                svc.record.service_id,
                service_name(&svc.record),
                split_gid(&svc.record.service_gid).1
            ));
        }
        self.services.handle_timeout(now);
        let mut reports = VecDeque::new();
        self.informs
            .handle_timeout(now, self.cfg.report_timeout, &mut reports);
        self.out.extend(
            reports
                .into_iter()
                .map(|(to, mad)| SaTransmit::whole(to, mad)),
        );
    }

    fn queue(&mut self, sends: Vec<Send>) {
        for s in sends {
            self.out.push_back(SaTransmit {
                to: s.to,
                mad: s.mad.encode(),
                len: s.len,
            });
        }
    }

    fn reply(&mut self, to: &MadAddress, mad: &SaMad) {
        if mad.header.status != 0 {
            self.metrics.errors += 1;
        }
        self.out
            .push_back(SaTransmit::whole(reply_address(to), mad.encode()));
    }

    /// An SA MAD (management class 0x03) that arrived from `from`.
    pub fn handle_mad(
        &mut self,
        now: Duration,
        ctx: &SaContext<'_>,
        bytes: &[u8; MAD_SIZE],
        from: MadAddress,
    ) {
        self.now = now;
        let req = match SaMad::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.metrics.dropped += 1;
                tracing::debug!(lid = from.lid, error = %e, "SA: undecodable MAD dropped");
                return;
            }
        };
        if req.rmpp.is_active() && req.rmpp.rmpp_type != RmppType::DATA {
            let mut sends = Vec::new();
            self.transfers
                .handle_control(now, self.cfg.rmpp_timeout, &from, &req, &mut sends);
            self.queue(sends);
            return;
        }
        let method = req.method();
        if method.is_response() {
            // A ReportResp ends its Report's resends; answers to requests we never
            // make: nothing to answer.
            if method == Method::REPORT_RESP && !self.informs.handle_report_resp(req.tid()) {
                tracing::debug!(lid = from.lid, "SA: ReportResp for no Report in flight");
            }
            return;
        }
        self.metrics.requests += 1;
        if req.check_version().is_err() {
            self.reply(
                &from,
                &req.response(resp_method(method), SaStatus::BAD_VERSION),
            );
            return;
        }
        // IBA C15-0.1.5: an SM_Key that is neither 0 nor the SA_Key: drop, silently.
        if req.sm_key != 0 && req.sm_key != self.cfg.sa_key {
            self.metrics.dropped += 1;
            tracing::debug!(lid = from.lid, "SA: request with a wrong SM_Key dropped");
            return;
        }
        if !ctx.is_master {
            self.redirect(ctx, &from, &req);
            return;
        }
        let requester = ctx.requester(from, req.sm_key == self.cfg.sa_key && req.sm_key != 0);
        let attr = req.attribute_id();
        if attr == SaAttributeId::CLASS_PORT_INFO {
            if method != Method::GET {
                self.reply(
                    &from,
                    &req.response(resp_method(method), SaStatus::METHOD_ATTR_NOT_SUPPORTED),
                );
                return;
            }
            let mut resp = req.response(Method::GET_RESP, SaStatus::SUCCESS);
            let _ = resp.set_record(&records::class_port_info(self.cfg.resp_time_value));
            self.metrics.records_sent += 1;
            self.reply(&from, &resp);
            return;
        }
        let answer = match method {
            Method::GET | Method::GET_TABLE => self.query(ctx, &requester, &req),
            Method::SET | Method::DELETE => self.change(ctx, &requester, &req),
            Method::GET_MULTI if attr == SaAttributeId::MULTI_PATH_RECORD => {
                self.multipath(ctx, &requester, &req)
            }
            Method::GET_MULTI | Method::GET_TRACE_TABLE => Err(SaStatus::METHOD_ATTR_NOT_SUPPORTED),
            _ => Err(SaStatus::METHOD_NOT_SUPPORTED),
        };
        self.answer(now, &from, &req, answer);
        for (created, mgid) in std::mem::take(&mut self.group_notices) {
            self.handle_notice(now, ctx, &group_notice(ctx.fabric, created, mgid));
        }
    }

    /// Get/GetTable of a record: the fabric's ([`fabric_query`]), or the SA's own
    /// tables and the SMs and MFTs the master knows.
    fn query(&mut self, ctx: &SaContext<'_>, req: &Requester, m: &SaMad) -> Answer {
        if let Some(a) = fabric_query(ctx, req, m, &self.cfg) {
            return a;
        }
        let mask = m.component_mask;
        match m.attribute_id() {
            SaAttributeId::SM_INFO_RECORD => encode_all(records::sm_info_records(
                ctx,
                req,
                &template::<SmInfoRecord>(m)?,
                mask,
            )),
            SaAttributeId::MULTICAST_FORWARDING_TABLE_RECORD => encode_all(tables::mft_records(
                ctx,
                req,
                &template::<MulticastForwardingTableRecord>(m)?,
                mask,
            )),
            SaAttributeId::MC_MEMBER_RECORD => encode_all(self.groups.query(
                ctx.fabric,
                req,
                &template::<McMemberRecord>(m)?,
                mask,
            )),
            SaAttributeId::SERVICE_RECORD => encode_all(self.services.query(
                ctx.fabric,
                req,
                &template::<ServiceRecord>(m)?,
                mask,
            )),
            SaAttributeId::INFORM_INFO_RECORD => encode_all(self.informs.query(
                ctx.fabric,
                req,
                &template::<InformInfoRecord>(m)?,
                mask,
            )),
            _ => Err(SaStatus::METHOD_ATTR_NOT_SUPPORTED),
        }
    }

    /// GetMulti(MultiPathRecord): PathRecords for sets of ends (`path::multipath`).
    fn multipath(&mut self, ctx: &SaContext<'_>, req: &Requester, m: &SaMad) -> Answer {
        path::check_get_multi(m.method(), &m.rmpp)?;
        let mpr = template::<MultiPathRecord>(m)?;
        let recs =
            path::multipath_records(ctx, req, &mpr, m.component_mask, self.cfg.packet_life_time)?;
        // The response's first segment ends the request's one-segment transfer
        // (IBA 13.6.2.4, a double-sided transfer); an explicit ACK of that segment
        // first lets a requester whose RMPP waits for one go on.
        let mut ack = m.response(Method::GET_MULTI_RESP, SaStatus::SUCCESS);
        ack.rmpp.version = RMPP_VERSION;
        ack.rmpp.rmpp_type = RmppType::ACK;
        ack.rmpp.flags = RmppFlags::ACTIVE;
        ack.rmpp.data1 = 1;
        ack.rmpp.data2 = 1;
        self.out
            .push_back(SaTransmit::whole(reply_address(&req.from), ack.encode()));
        encode_all(recs)
    }

    /// Set/Delete: joins and leaves of multicast groups.
    fn change(&mut self, ctx: &SaContext<'_>, req: &Requester, m: &SaMad) -> Answer {
        let mask = m.component_mask;
        match m.attribute_id() {
            SaAttributeId::MC_MEMBER_RECORD => {
                let Some(f) = ctx.fabric else {
                    // No sweep has finished: the ports are not known yet.
                    return Err(SaStatus::ERR_NO_RESOURCES);
                };
                let rec = template::<McMemberRecord>(m)?;
                let existed = rec.mgid != [0; 16] && self.groups.get(&rec.mgid).is_some();
                let r = if m.method() == Method::SET {
                    self.groups
                        .join(f, req, &rec, mask, self.cfg.packet_life_time)
                } else {
                    self.groups.leave(f, req, &rec, mask)
                };
                if let Err(status) = r {
                    tracing::debug!(
                        lid = req.from.lid,
                        mgid = %gid_text(&rec.mgid),
                        status = ?status,
                        "SA: MCMemberRecord {} refused",
                        if m.method() == Method::SET { "join" } else { "leave" }
                    );
                }
                let r = r?;
                let exists = self.groups.get(&r.mgid).is_some();
                // One line per join or leave (the groups log their creation and
                // deletion at debug level only): says whether it made or ended the group.
                self.activity.push(format!(
                    "port {:#018x} {} multicast group {} (MLID {:#06x}) as {}{}",
                    split_gid(&r.port_gid).1,
                    if m.method() == Method::SET {
                        "joined"
                    } else {
                        "left"
                    },
                    gid_text(&r.mgid),
                    r.mlid,
                    join_state_words(r.join_state.0),
                    match (existed, exists) {
                        (false, true) => ", creating it",
                        (true, false) => ", deleting it (its last full member)",
                        _ => "",
                    }
                ));
                if existed != exists {
                    self.group_notices.push((exists, r.mgid));
                }
                encode_all(vec![r])
            }
            SaAttributeId::SERVICE_RECORD => {
                let Some(f) = ctx.fabric else {
                    return Err(SaStatus::ERR_NO_RESOURCES);
                };
                let rec = template::<ServiceRecord>(m)?;
                let r = if m.method() == Method::SET {
                    let now = self.now;
                    self.services
                        .set(now, f, req, &rec, mask, self.cfg.max_services)
                } else {
                    self.services.delete(f, req, &rec, mask)
                };
                let r = r?;
                self.activity.push(format!(
                    "service {:#018x} {} of port {:#018x} {}",
                    r.service_id,
                    service_name(&r),
                    split_gid(&r.service_gid).1,
                    if m.method() != Method::SET {
                        "deleted".to_string()
                    } else if r.service_lease == ServiceRecord::INFINITE_LEASE {
                        "registered (no lease end)".to_string()
                    } else {
                        format!("registered (lease {} s)", r.service_lease)
                    }
                ));
                encode_all(vec![r])
            }
            SaAttributeId::INFORM_INFO if m.method() == Method::SET => {
                let Some(f) = ctx.fabric else {
                    return Err(SaStatus::ERR_NO_RESOURCES);
                };
                let ii = template::<InformInfo>(m)?;
                let r = self.informs.set(f, req, &ii, self.cfg.max_subscriptions)?;
                self.activity.push(format!(
                    "LID {} {} {} trap {} (InformInfo)",
                    req.from.lid,
                    if ii.subscribe == 1 {
                        "subscribed to"
                    } else {
                        "unsubscribed from"
                    },
                    if ii.is_generic != 0 {
                        "generic"
                    } else {
                        "vendor"
                    },
                    if ii.trap_number == 0xFFFF {
                        "all".to_string()
                    } else {
                        ii.trap_number.to_string()
                    }
                ));
                encode_all(vec![r])
            }
            _ => Err(SaStatus::METHOD_ATTR_NOT_SUPPORTED),
        }
    }

    /// Sends what a handler answered: a status, one record (GetResp and the
    /// responses of Set/Delete), or a table (GetTableResp over RMPP).
    fn answer(&mut self, now: Duration, from: &MadAddress, req: &SaMad, answer: Answer) {
        let method = req.method();
        let recs = match answer {
            Ok(r) => r,
            Err(status) => {
                self.reply(from, &req.response(resp_method(method), status));
                return;
            }
        };
        if method == Method::GET_TABLE || method == Method::GET_MULTI {
            let size = recs.first().map_or(0, Vec::len);
            let n = recs.len();
            match table(req, size, recs) {
                Ok((template, payload)) => {
                    if self.transfers.len() >= self.cfg.max_transfers {
                        self.reply(
                            from,
                            &req.response(resp_method(method), SaStatus::ERR_NO_RESOURCES),
                        );
                        return;
                    }
                    let mut sends = Vec::new();
                    let to = reply_address(from);
                    if self
                        .transfers
                        .start(
                            now,
                            self.cfg.rmpp_timeout,
                            to,
                            template,
                            payload,
                            &mut sends,
                        )
                        .is_ok()
                    {
                        self.metrics.records_sent += n as u64;
                        self.queue(sends);
                    } else {
                        self.reply(
                            from,
                            &req.response(resp_method(method), SaStatus::ERR_NO_RESOURCES),
                        );
                    }
                }
                Err(_) => self.reply(
                    from,
                    &req.response(resp_method(method), SaStatus::ERR_NO_RESOURCES),
                ),
            }
            return;
        }
        let (resp, sent) = get_response(req, &recs);
        self.metrics.records_sent += sent;
        self.reply(from, &resp);
    }

    fn redirect(&mut self, ctx: &SaContext<'_>, from: &MadAddress, req: &SaMad) {
        if ctx.master_lid == 0 {
            // No master known: nothing useful to say; the requester retries.
            self.metrics.dropped += 1;
            return;
        }
        self.metrics.redirected += 1;
        let mut cpi: ClassPortInfo = records::class_port_info(self.cfg.resp_time_value);
        cpi.redirect_lid = ctx.master_lid;
        cpi.redirect_qp = 1;
        cpi.redirect_q_key = GSI_QKEY;
        cpi.redirect_p_key = 0xFFFF;
        let mut resp = req.response(resp_method(req.method()), SaStatus::REDIRECT);
        let _ = resp.set_record(&cpi);
        self.out
            .push_back(SaTransmit::whole(reply_address(from), resp.encode()));
    }
}

/// The fabric records (no SA state, no SMs, no MFTs: the heavy sweep's snapshot
/// alone, so an immutable snapshot answers them on any thread, `super::reader`):
/// NodeRecord, PortInfoRecord, LinkRecord, the switch and port tables but the MFTs,
/// and PathRecord. `None` for any other attribute.
pub(super) fn fabric_query(
    ctx: &SaContext<'_>,
    req: &Requester,
    m: &SaMad,
    cfg: &SaConfig,
) -> Option<Answer> {
    let mask = m.component_mask;
    Some(match m.attribute_id() {
        SaAttributeId::NODE_RECORD => template::<NodeRecord>(m)
            .and_then(|t| encode_all(records::node_records(ctx, req, &t, mask))),
        SaAttributeId::PORT_INFO_RECORD => template::<PortInfoRecord>(m)
            .and_then(|t| encode_all(records::port_info_records(ctx, req, &t, mask))),
        SaAttributeId::LINK_RECORD => template::<LinkRecord>(m)
            .and_then(|t| encode_all(records::link_records(ctx, req, &t, mask))),
        // Switch and port tables (`tables`).
        SaAttributeId::SWITCH_INFO_RECORD => template::<SwitchInfoRecord>(m)
            .and_then(|t| encode_all(tables::switch_info_records(ctx, req, &t, mask))),
        SaAttributeId::GUID_INFO_RECORD => template::<GuidInfoRecord>(m)
            .and_then(|t| encode_all(tables::guid_info_records(ctx, req, &t, mask))),
        SaAttributeId::P_KEY_TABLE_RECORD => template::<PKeyTableRecord>(m)
            .and_then(|t| tables::pkey_table_records(ctx, req, &t, mask))
            .and_then(encode_all),
        SaAttributeId::SL_TO_VL_MAPPING_TABLE_RECORD => template::<SlToVlMappingTableRecord>(m)
            .and_then(|t| encode_all(tables::sl2vl_records(ctx, req, &t, mask))),
        SaAttributeId::VL_ARBITRATION_TABLE_RECORD => template::<VlArbitrationTableRecord>(m)
            .and_then(|t| encode_all(tables::vlarb_records(ctx, req, &t, mask))),
        SaAttributeId::LINEAR_FORWARDING_TABLE_RECORD => template::<LinearForwardingTableRecord>(m)
            .and_then(|t| encode_all(tables::lft_records(ctx, req, &t, mask))),
        SaAttributeId::PATH_RECORD => template::<PathRecord>(m)
            .and_then(|t| path::path_records(ctx, req, &t, mask, m.method(), cfg.packet_life_time))
            .and_then(encode_all),
        _ => return None,
    })
}

/// The answer to a SubnAdmGet with these records (C15-0.1.30: exactly one record, else
/// ERR_NO_RECORDS or ERR_TOO_MANY_RECORDS), and how many records it carries.
pub(super) fn get_response(req: &SaMad, recs: &[Vec<u8>]) -> (SaMad, u64) {
    let status = match recs.len() {
        0 => SaStatus::ERR_NO_RECORDS,
        1 => SaStatus::SUCCESS,
        _ => SaStatus::ERR_TOO_MANY_RECORDS,
    };
    let mut resp = req.response(resp_method(req.method()), status);
    let mut sent = 0;
    if let (true, Some(r)) = (status.is_success(), recs.first()) {
        resp.set_data(r);
        resp.attribute_offset = u16::try_from(ibsm_mad::sa::padded(r.len()) / 8).unwrap_or(0);
        sent = 1;
    }
    (resp, sent)
}

/// The response method of a request method (Set is answered with GetResp, IBA
/// 13.4.5).
pub(super) fn resp_method(m: Method) -> Method {
    match m {
        Method::SET | Method::GET => Method::GET_RESP,
        Method::GET_TABLE => Method::GET_TABLE_RESP,
        Method::GET_MULTI => Method::GET_MULTI_RESP,
        Method::DELETE => Method::DELETE_RESP,
        Method::REPORT => Method::REPORT_RESP,
        Method::GET_TRACE_TABLE => Method::GET_TABLE_RESP,
        other => Method(other.0 | Method::RESPONSE_BIT),
    }
}

/// Where an answer to a request from `from` goes: the requester's LID and QP, with the
/// GSI Q_Key, its SL and P_Key index, and a GRH back if it sent one.
pub(super) fn reply_address(from: &MadAddress) -> MadAddress {
    MadAddress {
        qkey: GSI_QKEY,
        ..*from
    }
}

/// The RMPP template and payload for `recs` (each `size` bytes): a GetTableResp, or
/// for a GetMulti(MultiPathRecord) a GetMultiResp of PathRecords (IBA o15-0.2.7).
fn table(req: &SaMad, size: usize, recs: Vec<Vec<u8>>) -> Result<(SaMad, Vec<u8>), SaError> {
    let mut template = req.response(resp_method(req.method()), SaStatus::SUCCESS);
    if req.method() == Method::GET_MULTI {
        template.header.attr_id = SaAttributeId::PATH_RECORD.into();
    }
    template.sm_key = 0;
    let payload = ibsm_mad::sa::table_payload(size, recs.iter().map(Vec::as_slice))?;
    template.attribute_offset = payload.attribute_offset;
    Ok((template, payload.bytes))
}

/// A ServiceName up to its first NUL, quoted (for event lines).
fn service_name(r: &ServiceRecord) -> String {
    let raw = r.service_name.as_bytes();
    let name = raw.split(|b| *b == 0).next().unwrap_or_default();
    format!("{:?}", String::from_utf8_lossy(name))
}

/// JoinState bits as words: `full`, `non`, `send-only` (several joined by `+`).
fn join_state_words(bits: u8) -> String {
    let v: Vec<&str> = [
        (1, "full"),
        (2, "non"),
        (4, "send-only"),
        (8, "send-only-full"),
    ]
    .into_iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, n)| n)
    .collect();
    if v.is_empty() {
        "none".into()
    } else {
        format!("{} member", v.join("+"))
    }
}
