//! [`SaReader`]: the master's SubnAdmGet queries of fabric records (PathRecord,
//! NodeRecord, PortInfoRecord, LinkRecord and the switch and port tables but the
//! MFTs), answered from an immutable [`SaFabric`] snapshot alone, without the
//! [`super::SaAgent`].
//!
//! Why: those answers read nothing the agent holds (no groups, services,
//! subscriptions, RMPP transfers, SMs or MFTs), so a driver answers them the moment it
//! reads them, ahead of the SMPs its node has still to handle (a light sweep's answers,
//! a burst of traps), instead of behind them (ibsmd's `instance/driver.rs`). Everything
//! else (GetTable over RMPP, Set/Delete, MCMemberRecord, ServiceRecord, InformInfo,
//! SMInfoRecord, ClassPortInfo, a standby's redirect, a bad request the agent drops or
//! refuses) goes to the node as before: [`SaReader::answer`] says `None`. The answer is
//! built by the same code the agent answers with (`agent::fabric_query`,
//! `agent::get_response`), so it is the same bytes.

use std::sync::Arc;

use ibsm_mad::sa::{SaAttributeId, SaMad, SA_CLASS};
use ibsm_mad::{MadAddress, Method, MAD_SIZE};

use super::agent::{fabric_query, get_response, reply_address, resp_method, SaTransmit};
use super::config::SaConfig;
use super::context::SaContext;
use super::fabric::SaFabric;

/// A SubnAdmGet answered by an [`SaReader`].
#[derive(Debug, Clone)]
pub struct ReaderAnswer {
    /// The GetResp to send.
    pub transmit: SaTransmit,
    /// Its status is not SUCCESS (no record, too many, a bad template).
    pub error: bool,
    /// Records it carries (0 or 1).
    pub records: u64,
}

/// The master's answers to SubnAdmGet of fabric records, from one snapshot (see the
/// module doc). Build one per snapshot, only while this SM is MASTER with an active
/// subnet ([`crate::node::Node::sa_reader`]); it is cheap (an `Arc` and the settings).
#[derive(Debug, Clone)]
pub struct SaReader {
    cfg: SaConfig,
    fabric: Arc<SaFabric>,
}

/// Attributes a reader answers (with method Get).
const READER_ATTRIBUTES: [SaAttributeId; 10] = [
    SaAttributeId::PATH_RECORD,
    SaAttributeId::NODE_RECORD,
    SaAttributeId::PORT_INFO_RECORD,
    SaAttributeId::LINK_RECORD,
    SaAttributeId::SWITCH_INFO_RECORD,
    SaAttributeId::GUID_INFO_RECORD,
    SaAttributeId::P_KEY_TABLE_RECORD,
    SaAttributeId::SL_TO_VL_MAPPING_TABLE_RECORD,
    SaAttributeId::VL_ARBITRATION_TABLE_RECORD,
    SaAttributeId::LINEAR_FORWARDING_TABLE_RECORD,
];

impl SaReader {
    /// A reader of `fabric` with the SA's settings.
    pub fn new(cfg: SaConfig, fabric: Arc<SaFabric>) -> SaReader {
        SaReader { cfg, fabric }
    }

    /// The snapshot it answers from.
    pub fn fabric(&self) -> &Arc<SaFabric> {
        &self.fabric
    }

    /// True if `mad` looks like a query a reader answers, by its header alone (class
    /// 0x03, method Get, a fabric record's attribute): what a driver checks before
    /// [`SaReader::answer`].
    pub fn is_reader_query(mad: &[u8; MAD_SIZE]) -> bool {
        mad[1] == SA_CLASS.0
            && mad[3] == Method::GET.0
            && READER_ATTRIBUTES.contains(&SaAttributeId(u16::from_be_bytes([mad[16], mad[17]])))
    }

    /// The answer to `mad` from `from`, or `None` when the node's SA must handle it
    /// (not a Get of a fabric record, RMPP, a bad version, a wrong SM_Key: the agent
    /// answers, refuses or drops it and counts it).
    pub fn answer(&self, mad: &[u8; MAD_SIZE], from: MadAddress) -> Option<ReaderAnswer> {
        if !Self::is_reader_query(mad) {
            return None;
        }
        let req = SaMad::decode(mad).ok()?;
        if req.rmpp.is_active() || req.check_version().is_err() {
            return None;
        }
        if req.sm_key != 0 && req.sm_key != self.cfg.sa_key {
            return None;
        }
        let ctx = SaContext {
            fabric: Some(&self.fabric),
            sms: &[],
            is_master: true,
            master_lid: 0,
            mfts: None,
        };
        let requester = ctx.requester(from, req.sm_key == self.cfg.sa_key && req.sm_key != 0);
        let (resp, records) = match fabric_query(&ctx, &requester, &req, &self.cfg)? {
            Ok(recs) => get_response(&req, &recs),
            Err(status) => (req.response(resp_method(req.method()), status), 0),
        };
        Some(ReaderAnswer {
            error: resp.header.status != 0,
            records,
            transmit: SaTransmit::whole(reply_address(&from), resp.encode()),
        })
    }
}
