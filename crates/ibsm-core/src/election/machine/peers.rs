//! The other SMs as we know them: the (Priority, SMState) each known SM port last
//! answered, which of them are trusted (`trusted_sm_guids`) and get our SM_Key in
//! answers, the masters held dead at a stalled ActCount, and ranking: higher priority
//! wins, on equal priority the LOWER port GUID.

use crate::election::answer::{m_key_passes, SmInfoResponder};
#[cfg(feature = "fault-injection")]
use crate::election::config::InjectedFault;
use crate::election::types::{ElectionEvent, SmInfo, SmRoute, SmState};

use super::state::Election;

impl Election {
    /// The last (Priority, SMState) a known SM port answered to our SMInfo queries.
    pub fn peer_state(&self, guid: u64) -> Option<(u8, SmState)> {
        self.peers.get(&guid).copied()
    }

    /// The highest-ranked known SM port last seen in STANDBY: the natural target of
    /// "hand over to the best standby" ([`handover_to`](Self::handover_to)).
    pub fn best_standby(&self) -> Option<u64> {
        self.peers
            .iter()
            .filter(|(g, (_, st))| {
                *st == SmState::Standby && self.known.contains_key(g) && self.is_trusted(**g)
            })
            .map(|(g, (p, _))| (*p, *g))
            .reduce(|best, c| if self.ranks_above(c, best) { c } else { best })
            .map(|(_, g)| g)
    }

    /// Whether `guid` is a trusted SM: always without `trusted_sm_guids`; with it, our
    /// own port and the GUIDs listed.
    pub fn is_trusted(&self, guid: u64) -> bool {
        guid == self.cfg.port_guid
            || !matches!(&self.cfg.trusted_sm_guids, Some(set) if !set.contains(&guid))
    }

    /// The known SM ports outside `trusted_sm_guids` that answered our SMInfo queries,
    /// with the (Priority, SMState) they last answered. Empty without the setting.
    pub fn untrusted_sms(&self) -> impl Iterator<Item = (u64, u8, SmState)> + '_ {
        self.untrusted.iter().map(|(g, (p, st))| (*g, *p, *st))
    }

    /// Does (priority, guid) outrank `other`? Higher priority wins, then the LOWER GUID.
    pub(super) fn ranks_above(&self, a: (u8, u64), b: (u8, u64)) -> bool {
        if a.0 != b.0 {
            return a.0 > b.0;
        }
        #[cfg(feature = "fault-injection")]
        if self.cfg.injected_fault == Some(InjectedFault::TieBreakHigherGuid) {
            return a.1 > b.1;
        }
        a.1 < b.1
    }

    pub(super) fn outranks_us(&self, info: &SmInfo) -> bool {
        self.ranks_above(
            (info.priority, info.guid),
            (self.priority(), self.cfg.port_guid),
        )
    }

    /// The M_Key rule for our SMInfo answers (see `ElectionConfig::m_key`).
    pub(super) fn requester_passes(&self, m_key: u64, info: &SmInfo) -> bool {
        m_key_passes(self.cfg.m_key, self.cfg.sm_key, m_key, info)
    }

    /// What a SubnGet(SMInfo) answer needs now ([`SmInfoResponder`]): our SMInfo,
    /// SM_Key, M_Key and, with `trusted_sm_guids`, the SM ports a trusted requester is
    /// told by. The election answers its own Gets through it too.
    pub fn sminfo_responder(&self) -> SmInfoResponder {
        SmInfoResponder::new(
            self.sm_info(),
            self.cfg.sm_key,
            self.cfg.m_key,
            self.cfg.trusted_sm_guids.as_ref().map(|guids| {
                (
                    self.cfg.port_guid,
                    guids.clone(),
                    self.known.values().cloned().collect(),
                )
            }),
        )
    }

    /// Without `trusted_sm_guids` everyone; with it, a request from a port we can tell
    /// ([`requester_port`](Self::requester_port)) and that is trusted.
    pub(super) fn requester_trusted(&self, from: &SmRoute) -> bool {
        self.cfg.trusted_sm_guids.is_none()
            || self
                .requester_port(from)
                .is_some_and(|g| self.is_trusted(g))
    }

    /// An untrusted known SM port answered `info`: remembered, and reported when new or
    /// changed.
    pub(super) fn note_untrusted(&mut self, info: &SmInfo) {
        if !self.known.contains_key(&info.guid) {
            return;
        }
        let seen = (info.priority, info.sm_state);
        if self.untrusted.insert(info.guid, seen) == Some(seen) {
            return;
        }
        let guid = format_args!("{:#018x}", info.guid);
        if info.sm_state == SmState::Master {
            tracing::warn!(
                %guid,
                priority = info.priority,
                our_state = %self.state,
                "rogue master: an untrusted SM answers MASTER; ignored"
            );
            self.events.push_back(ElectionEvent::RogueMaster {
                guid: info.guid,
                priority: info.priority,
                our_state: self.state,
            });
        } else {
            tracing::warn!(
                %guid,
                priority = info.priority,
                state = %info.sm_state,
                "untrusted SM (not in trusted_sm_guids): not followed, never handed over to"
            );
            self.events.push_back(ElectionEvent::UntrustedSmSeen {
                guid: info.guid,
                priority: info.priority,
                state: info.sm_state,
            });
        }
    }

    /// Remembers a known SM port's answer (priority and state) for handover_to.
    pub(super) fn note_peer(&mut self, info: &SmInfo) {
        if self.known.contains_key(&info.guid) {
            self.peers.insert(info.guid, (info.priority, info.sm_state));
        }
    }

    pub(super) fn is_suspect(&self, info: &SmInfo) -> bool {
        self.suspects.get(&info.guid) == Some(&info.act_count)
    }

    pub(super) fn outranks_master(&self, master: &SmInfo) -> bool {
        self.ranks_above(
            (self.priority(), self.cfg.port_guid),
            (master.priority, master.guid),
        )
    }
}
