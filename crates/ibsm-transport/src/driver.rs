//! The blocking discovery driver.

use std::time::{Duration, Instant};

use ibsm_core::discovery::{DiscoveryAgent, DiscoveryConfig, DiscoveryResult};
use ibsm_core::transactions::{Counters, TransactionsConfig};

use crate::device::MadDevice;
use crate::error::TransportError;

/// Settings of [`run_discovery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoverConfig {
    /// The MAD agent: window, timeout, retries.
    pub transactions: TransactionsConfig,
    /// The walk itself.
    pub discovery: DiscoveryConfig,
    /// Give up (with [`TransportError::Deadline`]) after this long.
    pub deadline: Duration,
}

impl Default for DiscoverConfig {
    fn default() -> Self {
        DiscoverConfig {
            transactions: TransactionsConfig::default(),
            discovery: DiscoveryConfig::default(),
            deadline: Duration::from_secs(600),
        }
    }
}

/// What [`run_discovery`] returns.
#[derive(Debug, Clone)]
pub struct DiscoveryReport {
    /// The topology, DR paths and problems found.
    pub result: DiscoveryResult,
    /// The MAD agent's counters.
    pub counters: Counters,
    /// Wall-clock time of the walk.
    pub elapsed: Duration,
}

/// Discover the fabric behind `device`, blocking until the walk completes.
///
/// Unsolicited requests that arrive meanwhile (another SM's SMInfo, traps) are
/// logged and dropped: this driver is for one-shot discovery, not for an SM.
pub fn run_discovery<D: MadDevice + ?Sized>(
    device: &mut D,
    config: &DiscoverConfig,
) -> Result<DiscoveryReport, TransportError> {
    let start = Instant::now();
    let mut agent = DiscoveryAgent::new(
        Duration::ZERO,
        config.transactions.clone(),
        config.discovery.clone(),
    );
    loop {
        while let Some(mad) = agent.poll_transmit() {
            device.send(&mad)?;
        }
        while let Some(smp) = agent.poll_unsolicited() {
            tracing::debug!(method = ?smp.method, attr = ?smp.attr_id, "ignoring unsolicited request during discovery");
        }
        if agent.is_done() {
            break;
        }
        let now = start.elapsed();
        if now > config.deadline {
            return Err(TransportError::Deadline {
                what: "discovery",
                limit: config.deadline,
            });
        }
        match agent.poll_timeout() {
            Some(t) if t <= now => {
                agent.handle_timeout(now);
                continue;
            }
            _ => {}
        }
        let wait = agent
            .poll_timeout()
            .map_or(Duration::from_millis(10), |t| t.saturating_sub(now));
        if let Some(r) = device.recv(wait)? {
            agent.handle_incoming(start.elapsed(), &r.mad);
        }
    }
    let counters = agent.counters();
    let elapsed = start.elapsed();
    let result = agent.into_result();
    tracing::info!(
        nodes = result.topology.len(),
        unreachable = result.unreachable.len(),
        issues = result.issues.len(),
        sent = counters.sent,
        retries = counters.retries,
        ?elapsed,
        "discovery complete"
    );
    Ok(DiscoveryReport {
        result,
        counters,
        elapsed,
    })
}
