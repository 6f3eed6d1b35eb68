//! SubnGet(SMInfo) answered off the election: [`SmInfoResponder`] is what an answer
//! needs (our SMInfo as it stands, the SM_Key and M_Key rules, the SM ports a trusted
//! requester is told by), taken from the [`Election`] after each batch of its work
//! (`Election::sminfo_responder`, `Node::sminfo_responder`), and [`SmInfoResponder::answer`] builds from it the very
//! SubnGetResp the node would send for the same request and the same state: the
//! node's own answer goes through [`SmInfoResponder::reply_info`] too, and
//! `node/tests/sminfo_responder.rs` compares the bytes.
//!
//! Why: a driver that reads the port on a thread of its own can answer a standby's
//! poll the moment it arrives, whatever step the node is in (ibsmd's
//! `instance/driver/poll_answer.rs`), and still hand the request to the node
//! ([`crate::node::Input::SmInfoAnswered`]), which notes the poller and sends no second
//! answer. ActCount in the answer is the one of the last batch of the node's work: it
//! moves only when the node works, so a master whose node hangs still looks stalled to
//! a standby's ActCount rule (`ElectionConfig::stall_window`).

use std::collections::BTreeSet;

use ibsm_mad::{AttributeId, Method, Smp, SmpRoute, MAD_SIZE, PERMISSIVE_LID};

use crate::election::machine::requester_port_among;
use crate::election::types::{SmInfo, SmInfoMsg, SmPort, SmRoute};
use crate::election::wire;

/// Who gets our SM_Key in an answer when `trusted_sm_guids` is set: the requester must
/// be a known SM port (told by its SLID or return path) in the set, or our own port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TrustedRequesters {
    own_guid: u64,
    guids: BTreeSet<u64>,
    /// The known SM ports, in GUID order (as the election keeps them).
    known: Vec<SmPort>,
}

/// What a SubnGet(SMInfo) answer needs, taken from the election
/// (`Election::sminfo_responder`); see the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmInfoResponder {
    /// Our SMInfo with SM_Key 0 (`Election::sm_info`).
    info: SmInfo,
    /// Our SM_Key, given to a requester that passes the M_Key rule and is trusted.
    sm_key: u64,
    /// Our M_Key (`ElectionConfig::m_key`); 0: no M_Key rule.
    m_key: u64,
    /// `None`: every requester is trusted (no `trusted_sm_guids`).
    trusted: Option<TrustedRequesters>,
}

/// One answer built by [`SmInfoResponder::answer`]: the SubnGetResp(SMInfo) and, for a
/// LID-routed one, the LID it goes to (`None`: directed route, along the request's
/// return path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmInfoAnswer {
    /// The 256 bytes to send.
    pub mad: [u8; MAD_SIZE],
    /// LRH DLID for a LID-routed answer.
    pub dlid: Option<u16>,
}

/// The M_Key rule for our SMInfo answers (see `ElectionConfig::m_key`): with an M_Key
/// set, only a requester that presents it (in the SMP's M_Key) or our SM_Key (in its
/// payload) may read our SM_Key.
pub(crate) fn m_key_passes(our_m_key: u64, our_sm_key: u64, m_key: u64, info: &SmInfo) -> bool {
    our_m_key == 0 || m_key == our_m_key || info.sm_key == our_sm_key
}

impl SmInfoResponder {
    /// Whether `mad` is a SubnGet(SMInfo) (either SMP class), told from its header
    /// alone: what a reader thread hands [`SmInfoResponder::answer`].
    pub fn is_sminfo_get(mad: &[u8; MAD_SIZE]) -> bool {
        matches!(mad[1], 0x01 | 0x81)
            && mad[3] == Method::GET.0
            && u16::from_be_bytes([mad[16], mad[17]]) == AttributeId::SM_INFO.0
    }

    /// Our SMInfo as answered to a requester with no rights (SM_Key 0).
    pub fn info(&self) -> SmInfo {
        self.info
    }

    /// The SMInfo we answer a SubnGet(SMInfo) that arrived by `from` with SMP M_Key
    /// `m_key` and payload `req`: ours, with our SM_Key only for a requester that passes
    /// the M_Key rule and is trusted (IBA 14.4.1: the SM_Key reads as zero otherwise).
    pub fn reply_info(&self, from: &SmRoute, m_key: u64, req: &SmInfo) -> SmInfo {
        let mut reply = self.info;
        if m_key_passes(self.m_key, self.sm_key, m_key, req) && self.trusts(from) {
            reply.sm_key = self.sm_key;
        }
        reply
    }

    fn trusts(&self, from: &SmRoute) -> bool {
        let Some(t) = &self.trusted else {
            return true;
        };
        requester_port_among(t.known.iter(), from)
            .is_some_and(|g| g == t.own_guid || t.guids.contains(&g))
    }

    /// The SubnGetResp(SMInfo) for `mad`, a SubnGet(SMInfo) that came from LRH SLID
    /// `slid`, as the node answers it; `None` when `mad` is not a SubnGet(SMInfo) or does
    /// not decode (the node then handles it, and drops it too).
    pub fn answer(&self, mad: &[u8; MAD_SIZE], slid: u16) -> Option<SmInfoAnswer> {
        if !Self::is_sminfo_get(mad) {
            return None;
        }
        let smp = Smp::decode(mad).ok()?;
        let Some(SmInfoMsg::Get { tid, m_key, info }) = wire::decode_for_election(&smp) else {
            return None;
        };
        // As the node: a LID-routed request is answered to its SLID, a directed-route one
        // along its return path.
        let hint = match smp.route {
            SmpRoute::Lid if slid != 0 && slid != PERMISSIVE_LID => slid,
            _ => 0,
        };
        let from = wire::arrival_route(&smp, hint);
        let msg = SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 0,
            info: self.reply_info(&from, m_key, &info),
        };
        let resp = wire::encode_response(&smp, &msg).ok()?;
        let dlid = response_dlid(&smp.route, &from, hint);
        Some(SmInfoAnswer {
            mad: resp.encode(),
            dlid,
        })
    }
}

/// Where the answer to a request that arrived by `from` (`route`, LID hint `hint`)
/// goes: its LID for a LID-routed request, `None` along a directed route. The node's
/// election answers use the same rule.
pub(crate) fn response_dlid(route: &SmpRoute, from: &SmRoute, hint: u16) -> Option<u16> {
    match (route, from) {
        (SmpRoute::Lid, SmRoute::Lid(l)) if *l != 0 => Some(*l),
        (SmpRoute::Lid, _) if hint != 0 => Some(hint),
        _ => None,
    }
}

impl SmInfoResponder {
    /// From the election's parts (see `Election::sminfo_responder`): `trusted` is
    /// `(our port GUID, trusted_sm_guids, the known SM ports in GUID order)`.
    pub(crate) fn new(
        info: SmInfo,
        sm_key: u64,
        m_key: u64,
        trusted: Option<(u64, BTreeSet<u64>, Vec<SmPort>)>,
    ) -> SmInfoResponder {
        SmInfoResponder {
            info,
            sm_key,
            m_key,
            trusted: trusted.map(|(own_guid, guids, known)| TrustedRequesters {
                own_guid,
                guids,
                known,
            }),
        }
    }
}
