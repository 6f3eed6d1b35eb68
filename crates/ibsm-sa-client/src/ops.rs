//! Typed SA operations on [`SaClient`]: Get/GetTable/Set/Delete of any record, and
//! what clients do with them: multicast joins and leaves (MCMemberRecord), service
//! registration (ServiceRecord) and event subscriptions (InformInfo).

use ibsm_mad::sa::{
    ClassPortInfo, ComponentMask, Gid, InformInfo, JoinState, McMemberRecord, PathRecord, SaMad,
    SaRecord, Selector, ServiceRecord,
};
use ibsm_mad::Method;
use ibsm_transport::MadDevice;

use crate::client::{Checked, SaClient};
use crate::error::{method_name, SaClientError};

/// Parameters of a group to create (MCMemberRecord components a creation needs:
/// Q_Key, P_Key, TClass, FlowLabel, SL; MTU and rate when given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupParams {
    /// Q_Key of the group.
    pub q_key: u32,
    /// P_Key of the group (full-membership bit included, 0xFFFF for the default).
    pub p_key: u16,
    /// TClass.
    pub tclass: u8,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// SL.
    pub sl: u8,
    /// MTU (IBA enumeration: 4 = 2048) with its selector.
    pub mtu: Option<(Selector, u8)>,
    /// Rate (IBA enumeration: 3 = 10 Gb/s) with its selector.
    pub rate: Option<(Selector, u8)>,
}

impl Default for GroupParams {
    /// What OpenSM's IPoIB groups use: Q_Key 0x0B1B, the default partition, SL 0.
    fn default() -> Self {
        GroupParams {
            q_key: 0x0B1B,
            p_key: 0xFFFF,
            tclass: 0,
            flow_label: 0,
            sl: 0,
            mtu: None,
            rate: None,
        }
    }
}

/// A join: which group, how, and (to create it) with what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinRequest {
    /// The group's MGID; `None` asks the SA to create a group with an MGID it
    /// allocates (then `create` must be given).
    pub mgid: Option<Gid>,
    /// FullMember, NonMember, SendOnlyNonMember (or several).
    pub join_state: JoinState,
    /// Create the group with these parameters if it does not exist.
    pub create: Option<GroupParams>,
    /// The joining port's GID; `None` is the client's own port (joining for another
    /// port needs the SA_Key).
    pub port_gid: Option<Gid>,
}

impl JoinRequest {
    /// Join the existing group `mgid` as `join_state`.
    pub fn existing(mgid: Gid, join_state: JoinState) -> JoinRequest {
        JoinRequest {
            mgid: Some(mgid),
            join_state,
            create: None,
            port_gid: None,
        }
    }

    /// Create a group with an MGID the SA allocates and join it as a full member.
    pub fn create(params: GroupParams) -> JoinRequest {
        JoinRequest {
            mgid: None,
            join_state: JoinState::FULL_MEMBER,
            create: Some(params),
            port_gid: None,
        }
    }

    /// The record and ComponentMask the Set carries.
    pub fn to_record(&self, own_gid: Gid) -> (McMemberRecord, ComponentMask) {
        let mut rec = McMemberRecord {
            mgid: self.mgid.unwrap_or_default(),
            port_gid: self.port_gid.unwrap_or(own_gid),
            join_state: self.join_state,
            ..McMemberRecord::default()
        };
        let mut mask = McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE;
        if let Some(p) = self.create {
            rec.q_key = p.q_key;
            rec.p_key = p.p_key;
            rec.tclass = p.tclass;
            rec.flow_label = p.flow_label;
            rec.sl = p.sl;
            mask = mask
                | McMemberRecord::Q_KEY
                | McMemberRecord::P_KEY
                | McMemberRecord::TCLASS
                | McMemberRecord::FLOW_LABEL
                | McMemberRecord::SL;
            if let Some((sel, mtu)) = p.mtu {
                rec.mtu_selector = sel;
                rec.mtu = mtu;
                mask = mask | McMemberRecord::MTU_SELECTOR | McMemberRecord::MTU;
            }
            if let Some((sel, rate)) = p.rate {
                rec.rate_selector = sel;
                rec.rate = rate;
                mask = mask | McMemberRecord::RATE_SELECTOR | McMemberRecord::RATE;
            }
        }
        (rec, mask)
    }
}

impl<D: MadDevice> SaClient<D> {
    /// One record: `method` with `record` as template or value and `mask`; the answer
    /// must hold exactly one record.
    pub fn one<R: SaRecord>(
        &mut self,
        method: Method,
        record: &R,
        mask: ComponentMask,
    ) -> Result<R, SaClientError> {
        let answer = self.request(SaMad::query(method, 0, record, mask)?)?;
        let mut recs = answer.records::<R>()?;
        if answer.rmpp && recs.len() != 1 {
            return Err(SaClientError::NotOneRecord {
                method: method_name(method),
                attribute: R::ATTRIBUTE_ID,
                got: recs.len(),
            });
        }
        recs.truncate(1);
        recs.pop().ok_or(SaClientError::NotOneRecord {
            method: method_name(method),
            attribute: R::ATTRIBUTE_ID,
            got: 0,
        })
    }

    /// SubnAdmGet: the one record matching `template` on the components of `mask`.
    pub fn get<R: SaRecord>(
        &mut self,
        template: &R,
        mask: ComponentMask,
    ) -> Result<R, SaClientError> {
        self.one(Method::GET, template, mask)
    }

    /// SubnAdmGetTable: every record matching `template` on `mask`, the whole table
    /// reassembled from its RMPP segments. No match is an empty table; a table whose
    /// sender left RMPP to a transport that did not do it is
    /// [`SaClientError::Truncated`] (see [`crate::Answer::truncated`]).
    pub fn get_table<R: SaRecord>(
        &mut self,
        template: &R,
        mask: ComponentMask,
    ) -> Result<Vec<R>, SaClientError> {
        Ok(self
            .get_table_checked(template, mask)?
            .into_iter()
            .map(|c| c.record)
            .collect())
    }

    /// [`SaClient::get_table`], each record with the bytes of it the device did not
    /// deliver (see [`crate::ClientConfig::mad_bytes`]).
    pub fn get_table_checked<R: SaRecord>(
        &mut self,
        template: &R,
        mask: ComponentMask,
    ) -> Result<Vec<Checked<R>>, SaClientError> {
        let answer = self.request(SaMad::query(Method::GET_TABLE, 0, template, mask)?)?;
        if answer.truncated::<R>() {
            return Err(SaClientError::Truncated {
                attribute: R::ATTRIBUTE_ID,
            });
        }
        Ok(answer.records_checked::<R>()?)
    }

    /// SubnAdmSet of `record` with `mask`; the SA's record as answered.
    pub fn set<R: SaRecord>(
        &mut self,
        record: &R,
        mask: ComponentMask,
    ) -> Result<R, SaClientError> {
        self.one(Method::SET, record, mask)
    }

    /// SubnAdmDelete of `record` with `mask`; the SA's record as answered.
    pub fn delete<R: SaRecord>(
        &mut self,
        record: &R,
        mask: ComponentMask,
    ) -> Result<R, SaClientError> {
        self.one(Method::DELETE, record, mask)
    }

    /// The SA's ClassPortInfo.
    pub fn class_port_info(&mut self) -> Result<ClassPortInfo, SaClientError> {
        self.get(&ClassPortInfo::default(), ComponentMask::NONE)
    }

    /// Join (and perhaps create) a multicast group; the SA's MCMemberRecord (MGID,
    /// MLID and the group's parameters).
    pub fn join(&mut self, req: &JoinRequest) -> Result<McMemberRecord, SaClientError> {
        let (rec, mask) = req.to_record(self.local().gid());
        let got = self.set(&rec, mask)?;
        tracing::debug!(mlid = got.mlid, join_state = ?req.join_state, "joined");
        Ok(got)
    }

    /// Leave `mgid`: drop the `join_state` bits of `port_gid` (the client's own port
    /// for `None`). The group goes when its last full member leaves.
    pub fn leave(
        &mut self,
        mgid: Gid,
        join_state: JoinState,
        port_gid: Option<Gid>,
    ) -> Result<McMemberRecord, SaClientError> {
        let rec = McMemberRecord {
            mgid,
            port_gid: port_gid.unwrap_or(self.local().gid()),
            join_state,
            ..McMemberRecord::default()
        };
        let mask = McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE;
        self.delete(&rec, mask)
    }

    /// Register `rec` (ServiceGID zero means the client's own port) with a lease in
    /// seconds (`None`: infinite). Setting a registered service again renews it.
    pub fn register_service(
        &mut self,
        rec: &ServiceRecord,
        lease_s: Option<u32>,
    ) -> Result<ServiceRecord, SaClientError> {
        let (rec, mask) = self.service_rid(rec);
        let mut rec = rec;
        rec.service_lease = lease_s.unwrap_or(ServiceRecord::INFINITE_LEASE);
        let mask = mask | ServiceRecord::SERVICE_LEASE | ServiceRecord::SERVICE_NAME;
        self.set(&rec, mask)
    }

    /// Delete the service named by `rec`'s ServiceID, ServiceGID (zero: our port) and
    /// ServiceP_Key.
    pub fn delete_service(&mut self, rec: &ServiceRecord) -> Result<ServiceRecord, SaClientError> {
        let (rec, mask) = self.service_rid(rec);
        self.delete(&rec, mask)
    }

    fn service_rid(&self, rec: &ServiceRecord) -> (ServiceRecord, ComponentMask) {
        let mut rec = *rec;
        if rec.service_gid == [0u8; 16] {
            rec.service_gid = self.local().gid();
        }
        if rec.service_p_key == 0 {
            rec.service_p_key = 0xFFFF;
        }
        let mask =
            ServiceRecord::SERVICE_ID | ServiceRecord::SERVICE_GID | ServiceRecord::SERVICE_P_KEY;
        (rec, mask)
    }

    /// Subscribe to the traps `info` describes (Subscribe is set to 1; the QPN is the
    /// client's QP, as the SA takes it from the request). Reports then come out of
    /// [`SaClient::next_report`].
    pub fn subscribe(&mut self, info: &InformInfo) -> Result<InformInfo, SaClientError> {
        let mut i = *info;
        i.subscribe = 1;
        self.set(&i, ComponentMask::NONE)
    }

    /// Cancel a subscription made with the same `info`.
    pub fn unsubscribe(&mut self, info: &InformInfo) -> Result<InformInfo, SaClientError> {
        let mut i = *info;
        i.subscribe = 0;
        self.set(&i, ComponentMask::NONE)
    }
}

impl<D: MadDevice> SaClient<D> {
    /// PathRecords from each of `slids` to every end port (an SA answers a GetTable
    /// without a source with the requester's own paths, as OpenSM does, so a whole
    /// table is one GetTable per source), at most `window` GetTables in flight.
    /// Records come source by source, in `slids` order.
    pub fn paths_from(
        &mut self,
        slids: &[u16],
        window: usize,
    ) -> Result<Vec<PathRecord>, SaClientError> {
        Ok(self
            .paths_from_checked(slids, window)?
            .into_iter()
            .map(|c| c.record)
            .collect())
    }

    /// [`SaClient::paths_from`], each record with the bytes of it that did not arrive (see
    /// [`crate::ClientConfig::mad_bytes`]).
    pub fn paths_from_checked(
        &mut self,
        slids: &[u16],
        window: usize,
    ) -> Result<Vec<Checked<PathRecord>>, SaClientError> {
        let window = window.clamp(1, self.config().max_outstanding.max(1));
        let mut tids: Vec<Option<u32>> = vec![None; slids.len()];
        let mut done: Vec<Option<Vec<Checked<PathRecord>>>> = vec![None; slids.len()];
        let mut next = 0;
        let mut finished = 0;
        while finished < slids.len() {
            while next < slids.len() && self.outstanding() < window {
                let t = PathRecord {
                    slid: slids[next],
                    ..PathRecord::default()
                };
                let q = SaMad::query(Method::GET_TABLE, 0, &t, PathRecord::SLID)?;
                tids[next] = Some(self.submit(q)?);
                next += 1;
            }
            let wait = self.config().timeout * (self.config().retries + 2);
            let Some((tid, outcome)) = self.poll(wait)? else {
                continue;
            };
            let Some(i) = tids.iter().position(|t| *t == Some(tid)) else {
                continue;
            };
            let answer = outcome?;
            if answer.truncated::<PathRecord>() {
                return Err(SaClientError::Truncated {
                    attribute: PathRecord::ATTRIBUTE_ID,
                });
            }
            done[i] = Some(answer.records_checked::<PathRecord>()?);
            finished += 1;
        }
        Ok(done.into_iter().flatten().flatten().collect())
    }
}

/// An InformInfo for one generic trap number from any LID (`0xFFFF`: every trap).
pub fn trap_subscription(trap_number: u16) -> InformInfo {
    InformInfo {
        lid_range_begin: 0xFFFF,
        is_generic: 1,
        notice_type: 0xFFFF,
        trap_number,
        producer_type: 0xFF_FFFF,
        ..InformInfo::default()
    }
}
