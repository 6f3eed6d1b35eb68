//! The settings of one node and the fixed intervals behind its policy.

use crate::sa::SaConfig;
use std::time::Duration;

use crate::election::ElectionConfig;
use crate::subnet::SubnetConfig;

/// Default interval of the MASTER's periodic heavy sweep.
///
/// Why 60 s and not OpenSM's 10 s: OpenSM's 10 s `sweep_interval` is a *light* sweep
/// (heavy only when it sees a change), and so is ours (`SubnetConfig::sweep_interval`,
/// 2 s: SwitchInfo.PortStateChange of every switch, our port and the SM ports), with
/// traps 128/144 on top. The periodic heavy sweep is only a safety net for what those
/// cannot see (a lost trap about a CA-only change, a port reconfigured by someone
/// else, a lower-priority SM that appeared silently). On a k=32 fat tree a discovery
/// alone takes seconds of SMP traffic, so every 10 s would keep the fabric's VL15
/// busy most of the time; once a minute costs a few percent. 0 turns it off.
pub const DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// How old the DISCOVERING/STANDBY discovery may be for a new MASTER to start
/// configuring from it instead of discovering again. At start-up the election
/// decides within a few SMInfo polls of the first sweep.
pub const FRESH_DISCOVERY_MAX_AGE: Duration = Duration::from_secs(5);

/// How old the standby's last discovery may be for a takeover to verify it (see
/// `subnet::verify`) instead of walking the fabric again. Its standby heavy sweeps
/// come every `heavy_sweep_interval` (10 s); the verification itself confirms every
/// node, route and end port, so this only keeps a standby that stopped sweeping
/// from verifying something ancient.
pub const VERIFIABLE_DISCOVERY_MAX_AGE: Duration = Duration::from_secs(30);

/// How old a prepared takeover may be when MASTER comes for the new master to
/// continue it rather than start over. The election normally decides one SMInfo
/// query timeout (~100 ms) after DISCOVERING.
pub const PREPARED_TAKEOVER_MAX_AGE: Duration = Duration::from_secs(2);

/// How often the node reads its own port's PortInfo. The SMP goes to the local SMA
/// only (no fabric traffic) and is sent outside every agent, so it does not move
/// ActCount (the stall rule must still see a master whose sweeper hangs). 100 ms,
/// like the standby poll: a cut-off master leaves MASTER before its cable is back.
pub const PORT_WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// Start-up: how long to wait for the local SMA's answer, and how many tries.
pub const STARTUP_TIMEOUT: Duration = Duration::from_millis(300);
/// See [`STARTUP_TIMEOUT`].
pub const STARTUP_TRIES: u32 = 10;
/// At most this many MADs are kept while starting (a flood is not kept whole).
pub const STARTUP_BACKLOG_MAX: usize = 256;

/// `Watch` records for traps: at most [`TRAP_RECORD_LINES`] per window, then one
/// with the count held back.
pub const TRAP_RECORD_WINDOW: Duration = Duration::from_secs(10);
/// See [`TRAP_RECORD_WINDOW`].
pub const TRAP_RECORD_LINES: u32 = 20;

/// SA client changes (joins, leaves, service registrations, subscriptions) in the log
/// at info level: at most [`SA_ACTIVITY_LOG_LINES`] per window, the rest at debug and
/// counted in one info line. Every change still goes on the `Watch` stream. A line per
/// join cost a formatted write to stderr on the instance thread per join (~10% of
/// its time in a join bench), and an IPoIB re-join storm is one join per port.
pub const SA_ACTIVITY_LOG_WINDOW: Duration = Duration::from_secs(10);
/// See [`SA_ACTIVITY_LOG_WINDOW`].
pub const SA_ACTIVITY_LOG_LINES: u32 = 20;

/// Settings of one node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The election's settings (priority, SM_Key, polling, trusted SMs...). Its
    /// `port_guid`, `m_key` (the configurator's) and `tid_base` are filled in when
    /// the node has read its port.
    pub election: ElectionConfig,
    /// Not MASTER: interval between light sweeps (PortInfo probe of known ports).
    pub light_sweep_interval: Duration,
    /// Not MASTER: interval between heavy sweeps (directed-route discovery that finds
    /// the SM ports).
    pub heavy_sweep_interval: Duration,
    /// MASTER: interval between periodic heavy sweeps; `Duration::ZERO`: only on
    /// change (start, traps, a light sweep that sees a change, a `Sweep` command).
    pub master_heavy_sweep_interval: Duration,
    /// What the MASTER configures (LMC, routing, partitions, M_Key, light-sweep
    /// interval, SMP window...).
    pub subnet: SubnetConfig,
    /// The driver feeds replicated state ([`super::Input::Replicated`]) and handles
    /// the mastership claims: a new MASTER inherits LIDs and LFTs from it, and a
    /// standby whose master goes silent prepares the takeover.
    pub replicated: bool,
    /// The Subnet Administrator's settings (SA_Key, RMPP timing, limits).
    pub sa: SaConfig,
    /// LID assignments to start from (OpenSM's guid2lid text, `--guid2lid`), as
    /// OpenSM's `honor_guid2lid_file`: a new MASTER whose LID manager remembers
    /// nothing yet and whose replica holds no LID assignment seeds it from this, so
    /// every listed port gets exactly its listed LIDs. Once the replica holds LIDs it
    /// is authoritative and this is ignored (logged). `None`: no file.
    pub guid2lid_seed: Option<String>,
}

impl NodeConfig {
    /// Defaults: the election's (100 ms x 3 polling, SM_Key 1), light sweep every 2 s (standby probe
    /// and the master's configurator alike), standby heavy sweep every 10 s, master
    /// heavy sweep every [`DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL`], no replication.
    pub fn new(priority: u8) -> NodeConfig {
        let mut election = ElectionConfig::new(0);
        election.priority = priority;
        let light = Duration::from_secs(2);
        // A hung master (answers SMInfo, initiates nothing) is lost after three of
        // its light sweeps, assumed to run at the same interval as ours.
        election.stall_window = Some(light.saturating_mul(3));
        NodeConfig {
            election,
            light_sweep_interval: Duration::from_secs(2),
            heavy_sweep_interval: Duration::from_secs(10),
            master_heavy_sweep_interval: DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL,
            subnet: SubnetConfig {
                sweep_interval: light,
                ..SubnetConfig::default()
            },
            replicated: false,
            sa: SaConfig::default(),
            guid2lid_seed: None,
        }
    }
}
