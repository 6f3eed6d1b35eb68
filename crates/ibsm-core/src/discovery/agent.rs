//! [`DiscoveryAgent`]: a [`Discovery`] coupled to a MAD agent of its own, the usual
//! way to run a walk (the SM's sweeps multiplex the discovery over their own agent
//! instead). It only uses the state machine's public interface.

use std::collections::VecDeque;
use std::time::Duration;

use ibsm_mad::{Smp, MAD_SIZE};

use crate::transactions::{Counters, Event, Transactions, TransactionsConfig};

use super::limits::DiscoveryConfig;
use super::machine::Discovery;
use super::result::DiscoveryResult;
use super::token::DiscoveryToken;

/// [`Discovery`] driven through its own [`Transactions`] agent: the usual way
/// to run a discovery. Driven like the agent (sans-IO).
#[derive(Debug)]
pub struct DiscoveryAgent {
    tx: Transactions<DiscoveryToken>,
    discovery: Discovery,
    unsolicited: VecDeque<Smp>,
}

impl DiscoveryAgent {
    /// Start a discovery at time `now`.
    pub fn new(now: Duration, tx: TransactionsConfig, cfg: DiscoveryConfig) -> Self {
        let mut agent = DiscoveryAgent {
            tx: Transactions::new(tx),
            discovery: Discovery::new(cfg),
            unsolicited: VecDeque::new(),
        };
        agent.pump(now);
        agent
    }

    /// Feed a MAD received from the device.
    pub fn handle_incoming(&mut self, now: Duration, bytes: &[u8]) {
        self.tx.handle_incoming(now, bytes);
        self.pump(now);
    }

    /// Call when [`DiscoveryAgent::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.tx.handle_timeout(now);
        self.pump(now);
    }

    /// The next MAD to put on the wire.
    pub fn poll_transmit(&mut self) -> Option<[u8; MAD_SIZE]> {
        self.tx.poll_transmit()
    }

    /// When to call [`DiscoveryAgent::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.tx.poll_timeout()
    }

    /// Requests from other SMs or traps that arrived during discovery.
    pub fn poll_unsolicited(&mut self) -> Option<Smp> {
        self.unsolicited.pop_front()
    }

    /// True when the walk is complete and everything was sent.
    pub fn is_done(&self) -> bool {
        self.discovery.is_done() && self.tx.is_idle()
    }

    /// The MAD agent's counters.
    pub fn counters(&self) -> Counters {
        self.tx.counters()
    }

    /// The discovery state.
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// The result (complete once [`DiscoveryAgent::is_done`]).
    pub fn into_result(self) -> DiscoveryResult {
        self.discovery.into_result()
    }

    /// Move requests into the agent (keeping its backlog at one window) and
    /// outcomes into the discovery, until neither has anything to say.
    fn pump(&mut self, now: Duration) {
        loop {
            let mut progressed = false;
            while let Some(event) = self.tx.poll_event() {
                progressed = true;
                match event {
                    Event::Response { token, smp } => self.discovery.handle_response(token, &smp),
                    Event::Failed { token, .. } => self
                        .discovery
                        .handle_failure(token, "no response after retries"),
                    Event::Unsolicited(smp) => self.unsolicited.push_back(smp),
                }
            }
            while self.tx.queued() < self.tx.config().window {
                let Some(token) = self.discovery.poll_request() else {
                    break;
                };
                progressed = true;
                match token.to_smp() {
                    Ok(smp) => self.tx.submit(now, smp, token),
                    Err(err) => self.discovery.handle_failure(token, &err.to_string()),
                }
            }
            if !progressed {
                break;
            }
        }
    }
}
