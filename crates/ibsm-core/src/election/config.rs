//! Configuration of the election state machine and its validation.

use std::time::Duration;

/// MAD status for a rejected SubnSet(SMInfo): IBA 13.4.7 status field, bits 4:2 = 7,
/// "invalid value in one or more fields of the attribute or attribute modifier".
/// OpenSM 3.3 answers such a Set with the raw value 7 instead; both are non-zero,
/// which is all an SM checks.
pub const STATUS_INVALID_VALUE: u16 = 0x001c;

/// Highest SM priority (4 bits).
pub const MAX_PRIORITY: u8 = 15;

/// How incoming SubnSet(SMInfo) control packets are checked against our SM_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SmKeyPolicy {
    /// The payload SM_Key must equal ours. Default. Note: OpenSM puts SM_Key 0 in a
    /// HANDOVER sent to an SM it does not see as MASTER, so a strict standby
    /// rejects OpenSM's HANDOVER; use [`SmKeyPolicy::AllowZero`] next to OpenSM.
    #[default]
    Strict,
    /// Ours or zero (what OpenSM sends when it does not know the receiver is master).
    AllowZero,
    /// No check.
    Off,
}

/// Bugs the model checker's self-test injects to prove it can find them. Never
/// set this outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InjectedFault {
    /// Break ties on equal priority by the HIGHER port GUID.
    TieBreakHigherGuid,
    /// A standby that receives HANDOVER does not become master.
    IgnoreHandover,
}

/// Election settings. `ElectionConfig::new(port_guid)` gives the defaults.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionConfig {
    /// Our port GUID (SMInfo.GUID; OpenSM checks it equals the port GUID it queried).
    pub port_guid: u64,
    /// Configured priority, 0..=15.
    pub priority: u8,
    /// Our SM_Key. Default 1, like OpenSM.
    pub sm_key: u64,
    /// How incoming control packets are checked against `sm_key`.
    pub sm_key_policy: SmKeyPolicy,
    /// Standby: interval between SubnGet(SMInfo) polls of the master. Default 100 ms.
    pub poll_interval: Duration,
    /// Standby: consecutive unanswered polls before the master is declared lost. Default 3.
    pub poll_retries: u32,
    /// Standby: declare the master lost when it answers but its ActCount has not
    /// advanced for this long. `None` disables the rule. Default 30 s.
    pub stall_window: Option<Duration>,
    /// Discovering / master sweeps: timeout of one SubnGet(SMInfo). Default 100 ms.
    pub query_timeout: Duration,
    /// Retries of such a query after the first try. Default 2.
    pub query_retries: u32,
    /// Timeout of one HANDOVER (or other control packet) we send. Default 200 ms.
    pub handover_timeout: Duration,
    /// Retries of HANDOVER after the first try. Default 3.
    pub handover_retries: u32,
    /// Master: interval between SMInfo queries of all known SM ports (how a master
    /// notices a higher SM whose trap 144 was lost, or a second master). Default 1 s.
    pub master_poll_interval: Duration,
    /// Sticky mode: on becoming master, raise our effective priority to this value so a
    /// returning higher SM does not take mastership back. Dropped when we stop being
    /// master. `None` (default) disables it.
    pub sticky_priority: Option<u8>,
    /// First transaction ID used; TIDs then count up (wrapping).
    pub tid_base: u64,
    #[doc(hidden)]
    pub injected_fault: Option<InjectedFault>,
}

impl ElectionConfig {
    /// Defaults for the given port GUID: priority 0, SM_Key 1 (strict), 100 ms x 3 polls.
    pub fn new(port_guid: u64) -> ElectionConfig {
        ElectionConfig {
            port_guid,
            priority: 0,
            sm_key: 1,
            sm_key_policy: SmKeyPolicy::Strict,
            poll_interval: Duration::from_millis(100),
            poll_retries: 3,
            stall_window: Some(Duration::from_secs(30)),
            query_timeout: Duration::from_millis(100),
            query_retries: 2,
            handover_timeout: Duration::from_millis(200),
            handover_retries: 3,
            master_poll_interval: Duration::from_secs(1),
            sticky_priority: None,
            tid_base: 0x5300_0000_0000_0000,
            injected_fault: None,
        }
    }

    /// Checks the values; the state machine refuses a config that fails this.
    pub fn validate(&self) -> Result<(), ElectionConfigError> {
        if self.port_guid == 0 {
            return Err(ElectionConfigError::ZeroGuid);
        }
        if self.priority > MAX_PRIORITY {
            return Err(ElectionConfigError::Priority {
                what: "priority",
                value: self.priority,
            });
        }
        if let Some(p) = self.sticky_priority {
            if p > MAX_PRIORITY {
                return Err(ElectionConfigError::Priority {
                    what: "sticky_priority",
                    value: p,
                });
            }
        }
        for (what, d) in [
            ("poll_interval", self.poll_interval),
            ("query_timeout", self.query_timeout),
            ("handover_timeout", self.handover_timeout),
            ("master_poll_interval", self.master_poll_interval),
        ] {
            if d.is_zero() {
                return Err(ElectionConfigError::ZeroDuration { what });
            }
        }
        if self.poll_retries == 0 {
            return Err(ElectionConfigError::ZeroPollRetries);
        }
        Ok(())
    }
}

/// A rejected [`ElectionConfig`] or priority.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionConfigError {
    /// Port GUID 0 is not a valid GUID.
    #[error("election config: port_guid must not be 0")]
    ZeroGuid,
    /// A priority above 15.
    #[error("election config: {what} {value} is out of range 0..=15 (SMInfo.Priority is 4 bits)")]
    Priority {
        /// Which field.
        what: &'static str,
        /// The value given.
        value: u8,
    },
    /// A zero interval or timeout would spin.
    #[error("election config: {what} must be greater than zero")]
    ZeroDuration {
        /// Which field.
        what: &'static str,
    },
    /// poll_retries 0 would fail over on the first poll.
    #[error("election config: poll_retries must be at least 1")]
    ZeroPollRetries,
}

/// An API call that is not allowed now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// Priority out of range.
    #[error(transparent)]
    Config(#[from] ElectionConfigError),
    /// Control packets other than HANDOVER/ACKNOWLEDGE are sent by the master only.
    #[error("cannot send {packet}: we are {state}, only MASTER sends it")]
    NotMaster {
        /// What was asked.
        packet: super::ControlPacket,
        /// Our state.
        state: super::SmState,
    },
    /// The target is not among the known SM ports.
    #[error("SM port {guid:#018x} is not known (not in the last sweep)")]
    UnknownPeer {
        /// The GUID asked for.
        guid: u64,
    },
    /// HANDOVER and ACKNOWLEDGE are driven by the state machine itself.
    #[error("{packet} is sent by the election itself, not on request")]
    NotOnRequest {
        /// What was asked.
        packet: super::ControlPacket,
    },
}
