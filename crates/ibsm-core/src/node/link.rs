//! The watch of our own port's link: every [`PORT_WATCH_INTERVAL`] a 0-hop
//! SubnGet(PortInfo) to the local SMA. Down means the link is gone; Init after Active
//! means it retrained (the cable was pulled and plugged back between two reads).
//! Either way the election re-discovers: cut off, another SM may have taken over,
//! and a master that stayed MASTER would answer MASTER beside it when the link is
//! back and reprogram the fabric (LIDs) from its stale view.

use std::time::Duration;

use ibsm_mad::attr::PortState;
use ibsm_mad::{AttributeId, PortInfo, Smp};

use super::config::PORT_WATCH_INTERVAL;
use super::state::{Running, Timer, PORT_WATCH_TIDS};

impl Running {
    /// Send the next read (its answer comes to [`Running::local_port_read`]).
    pub(crate) fn watch_local_port(&mut self, now: Duration) {
        self.set_timer(Timer::PortWatch, now.saturating_add(PORT_WATCH_INTERVAL));
        let w = &mut self.port_watch;
        w.seq = w.seq.wrapping_add(1);
        let tid = u64::from(PORT_WATCH_TIDS.nth(w.seq));
        match Smp::try_get_dr(&[], AttributeId::PORT_INFO, u32::from(w.port), tid) {
            Ok(mut smp) => {
                smp.m_key = self.subnet.m_key().key;
                self.send(smp.encode(), None);
            }
            Err(err) => tracing::warn!(%err, "cannot address our own port"),
        }
    }

    pub(crate) fn local_port_read(&mut self, now: Duration, smp: &Smp) {
        if smp.status != 0 || smp.attr_id != AttributeId::PORT_INFO {
            return;
        }
        let Ok(pi) = smp.attribute::<PortInfo>() else {
            return;
        };
        let state = pi.port_state;
        let was_active =
            std::mem::replace(&mut self.port_watch.was_active, state == PortState::Active);
        let down = state == PortState::Down;
        let retrained = was_active && state == PortState::Init;
        let was_down = std::mem::replace(&mut self.port_watch.down, down);
        if down || retrained {
            if !was_down {
                tracing::info!(?state, retrained, "our port lost its link: re-discovering");
                self.fabric_changes += 1;
                self.topology_changes += 1;
            }
            self.election.handle_local_port(now, false);
        }
        if !down && (was_down || retrained) {
            // The link is back: what we swept while cut off is stale (it saw our node
            // alone). Sweep again; the election concludes only after that sweep.
            tracing::info!(
                ?state,
                "our port has its link again: sweeping before the election concludes"
            );
            self.fabric_changes += 1;
            self.topology_changes += 1;
            if let Some(s) = self.sweep.take() {
                let heavy = s.heavy;
                self.waiting_replies
                    .extend(s.replies.into_iter().map(|r| (heavy, r)));
            }
            self.want_heavy_sweep();
            self.election.handle_local_port(now, true);
        }
    }
}
