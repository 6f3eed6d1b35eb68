//! Configuration of the [`super::SubnetManager`].

use std::collections::HashSet;
use std::time::Duration;

use crate::discovery::DiscoveryConfig;
use crate::transactions::TransactionsConfig;

pub use super::port_group::{EndPort, EndPortKind, GroupMember, Membership, PortGroup};

/// A member of a configured partition, by port GUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionMember {
    /// PortGUID of the CA port.
    pub port_guid: u64,
    /// Full or limited.
    pub membership: Membership,
}

/// The IPoIB broadcast group of a partition (OpenSM's partitions.conf `ipoib` flag
/// with its `rate=`, `mtu=`, `sl=`, `scope=` and `Q_Key=` values): the SA creates the
/// group `ff1<scope>:401b:<P_Key>::ffff:ffff` with these parameters, so IPoIB
/// interfaces of the partition find it when they join. Values are IBA's encodings
/// (MTU 4 = 2048 bytes, rate 3 = 10 Gb/s, scope 2 = link-local).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionIpoib {
    /// PathRecord.Rate code (2..=24, OpenSM's default 3: 10 Gb/s).
    pub rate: u8,
    /// MTU code (1 = 256 .. 5 = 4096; OpenSM's default 4: 2048).
    pub mtu: u8,
    /// Service level (0..=15; default 0).
    pub sl: u8,
    /// MGID scope (0..=15; default 2, link-local).
    pub scope: u8,
    /// Q_Key of the group (default 0x0B1B, IPoIB's).
    pub q_key: u32,
}

impl Default for PartitionIpoib {
    /// OpenSM's defaults: 10 Gb/s, 2048 bytes, SL 0, link-local, Q_Key 0x0B1B.
    fn default() -> Self {
        PartitionIpoib {
            rate: 3,
            mtu: 4,
            sl: 0,
            scope: 2,
            q_key: 0x0B1B,
        }
    }
}

impl PartitionIpoib {
    /// Every value in its IBA range; the field and the range otherwise.
    pub fn check(&self) -> Result<(), (&'static str, u32, &'static str)> {
        if ibsm_fabric::Rate::from_iba(self.rate).is_none() {
            return Err(("rate", self.rate.into(), "a PathRecord rate code, 2..=24"));
        }
        if !(1..=5).contains(&self.mtu) {
            return Err(("mtu", self.mtu.into(), "1..=5 (256..4096 bytes)"));
        }
        if self.sl > 15 {
            return Err(("sl", self.sl.into(), "0..=15"));
        }
        if self.scope > 15 {
            return Err(("scope", self.scope.into(), "0..=15"));
        }
        Ok(())
    }
}

/// A partition from the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Partition {
    /// Name, for logs and the operator.
    pub name: String,
    /// The 15-bit P_Key base (membership bit is added per member); 1..=0x7FFE, or
    /// 0x7FFF to redefine the default partition's membership (partitions.conf
    /// `Default=0x7fff`; without it every port is a full member of it).
    pub p_key: u16,
    /// The member ports named by GUID.
    pub members: Vec<PartitionMember>,
    /// The member ports named by group (partitions.conf `ALL`, `ALL_CAS`,
    /// `ALL_SWITCHES`, `ALL_ROUTERS`, `SELF`), resolved at each sweep.
    pub groups: Vec<GroupMember>,
    /// partitions.conf `indx0`: this P_Key goes in block 0, index 0.
    pub index0: bool,
    /// Its IPoIB broadcast group, if it has one.
    pub ipoib: Option<PartitionIpoib>,
}

impl Partition {
    /// The membership of `port`: the last entry naming it, explicit GUIDs and
    /// groups in the order they were given (see [`GroupMember::after`]).
    pub fn membership_of(&self, port: &EndPort) -> Option<Membership> {
        let explicit = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.port_guid == port.guid)
            .map(|(i, m)| ((2 * i + 1, 0), m.membership));
        let grouped = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.group.contains(port))
            .map(|(i, g)| ((2 * g.after, i), g.membership));
        explicit
            .chain(grouped)
            .max_by_key(|(at, _)| *at)
            .map(|(_, m)| m)
    }
}

/// Tunables of the [`super::SubnetManager`]. Encodings are IBA's (MTU 1=256 .. 5=4096,
/// OperationalVLs 1=VL0, 2=VL0-1, 3=VL0-3, 4=VL0-7, 5=VL0-14).
/// Which routing engine computes the LFTs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RoutingEngine {
    /// [`ibsm_fabric::routing::min_hop`]: shortest paths, balanced over equal-cost
    /// ports. Not deadlock-free on every topology (it is on fat trees).
    #[default]
    MinHop,
    /// [`ibsm_fabric::routing::up_down`]: deadlock-free on any topology.
    UpDown {
        /// Root switch NodeGUIDs; empty: found automatically.
        roots: Vec<u64>,
    },
}

/// M_Key protection of the ports this SM configures (IBA 14.2.4; OpenSM's
/// `m_key`, `m_key_protection_level`, `m_key_lease_period`). Key 0 (the default)
/// protects nothing: any SMP passes the check of a port whose M_Key is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MKeyConfig {
    /// The M_Key programmed in every PortInfo and carried by every SMP.
    pub key: u64,
    /// PortInfo.M_KeyProtectBits, 0..=3: 0 Gets are open, Sets need the key;
    /// 1 also hides the M_Key from Gets without it; 2 (and 3) Gets need the key too.
    pub protect_bits: u8,
    /// PortInfo.M_KeyLeasePeriod in seconds: how long protection survives once
    /// SMPs with the key stop coming after a violation (0: forever).
    pub lease_period: u16,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubnetConfig {
    /// The MAD agent: SMPs in flight (window), timeout, retries.
    pub transactions: TransactionsConfig,
    /// The directed-route walk.
    pub discovery: DiscoveryConfig,
    /// LMC of CA ports (2^LMC LIDs each); switches always get LMC 0.
    pub lmc: u8,
    /// Light sweep period (OpenSM's `sweep_interval`).
    pub sweep_interval: Duration,
    /// PortInfo.SubnetTimeOut to program (OpenSM default 18).
    pub subnet_timeout: u8,
    /// SwitchInfo.LifeTimeValue to program (OpenSM default 18).
    pub life_time_value: u8,
    /// PortInfo.MasterSMSL.
    pub master_sm_sl: u8,
    /// Upper bound on OperationalVLs (the port pair's VLCap also bounds it).
    pub max_operational_vls: u8,
    /// Upper bound on NeighborMTU (the port pair's MTUCap also bounds it).
    pub max_mtu: u8,
    /// Program SLtoVL on switches: one SMP per input/output port pair, ~14M
    /// SMPs on a k=58 fat tree, which alone would take the bring-up past 10 s.
    /// Off by default: switch SLtoVL then keeps its power-on mapping (every SL
    /// on VL0 in the simulator), which is always deadlock-safe for min-hop/
    /// up-down routing; turn it on for QoS. End ports are always programmed.
    pub switch_sl2vl: bool,
    /// Partitions besides the default one (0xFFFF, every port a full member).
    pub partitions: Vec<Partition>,
    /// Enforce partitions at switches too (OpenSM's `no_partition_enforcement
    /// FALSE`, the default): a switch with SwitchInfo.PartitionEnforcementCap > 0
    /// gets, on each external port facing a CA, a copy of that CA port's P_Key
    /// table and PortInfo.PartitionEnforcementInbound/Outbound set. Off: those
    /// bits are cleared and CAs alone filter by P_Key.
    pub partition_enforcement: bool,
    /// Routing engine (min-hop by default).
    pub routing: RoutingEngine,
    /// Hand routing computations to the driver as `RoutingJob`s
    /// (`SubnetManager::poll_routing_job`) instead of computing them inside
    /// `handle_timeout`. A daemon that answers SMInfo on the thread driving this
    /// module must: on a 48k-LID fabric routing takes ~1.6 s, longer than the
    /// standbys' poll budget (3 x 100 ms), and a master silent that long is taken
    /// for dead. Off by default (simulations and tests compute inline).
    pub offload_routing: bool,
    /// Hand the SA snapshot a heavy sweep ends with to the driver as an
    /// `SaSnapshotJob` (`SubnetManager::poll_sa_snapshot_job`) instead of building it
    /// inside the call that ends the sweep; the SA answers from the previous snapshot,
    /// and the sweep's events wait, until `SubnetManager::handle_sa_snapshot_done`.
    /// A daemon that answers SMInfo on the thread driving this module must: at k=32
    /// on a loaded host the build (NodeRecords, PortInfo, P_Key and QoS tables, LFT
    /// copies, the old snapshot freed) kept the master silent 70-190 ms, past the
    /// standbys' 65 ms poll budget. Off by default (simulations and tests build inline).
    pub offload_sa_snapshot: bool,
    /// M_Key protection (none by default). See the module doc of `subnet`.
    pub m_key: MKeyConfig,
    /// Traps acted on per second from one source LID (token bucket; the rest are
    /// still repressed but only counted, see the module doc's "Traps").
    pub trap_rate: u32,
    /// Traps one source LID may send in a burst before `trap_rate` applies.
    pub trap_burst: u32,
    /// A trap-triggered heavy sweep starts no sooner than this after the last
    /// heavy sweep ended (it is deferred, not dropped), so a flapping port
    /// cannot keep the master in back-to-back sweeps. Zero: no hold-down.
    pub trap_sweep_hold_down: Duration,
}

impl Default for SubnetConfig {
    fn default() -> Self {
        SubnetConfig {
            transactions: TransactionsConfig::default(),
            discovery: DiscoveryConfig::default(),
            lmc: 0,
            sweep_interval: Duration::from_secs(10),
            subnet_timeout: 18,
            life_time_value: 18,
            master_sm_sl: 0,
            max_operational_vls: 4,
            max_mtu: 5,
            switch_sl2vl: false,
            partitions: Vec::new(),
            partition_enforcement: true,
            routing: RoutingEngine::MinHop,
            offload_routing: false,
            offload_sa_snapshot: false,
            m_key: MKeyConfig::default(),
            trap_rate: 20,
            trap_burst: 40,
            trap_sweep_hold_down: Duration::from_secs(1),
        }
    }
}

/// A configuration the SM refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// LMC above 7.
    #[error("lmc {0} is out of range (0..=7)")]
    Lmc(u8),
    /// MTU or VL encoding out of range.
    #[error("{field} {value} is out of range ({range})")]
    Range {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u8,
        /// What is allowed.
        range: &'static str,
    },
    /// A partition P_Key that is 0 or wider than 15 bits.
    #[error("partition {name:?}: P_Key {pkey:#06x} must be 0x0001..=0x7FFE (or 0x7FFF, the default partition)")]
    PKey {
        /// Partition name.
        name: String,
        /// The P_Key given.
        pkey: u16,
    },
    /// An IPoIB parameter out of its IBA range.
    #[error("partition {name:?}: ipoib {field}={value} is out of range ({range})")]
    Ipoib {
        /// Partition name.
        name: String,
        /// The parameter.
        field: &'static str,
        /// Its value.
        value: u32,
        /// What is allowed.
        range: &'static str,
    },
    /// Two partitions with one name or one P_Key.
    #[error("partition {name:?}: duplicate {what}")]
    Duplicate {
        /// Partition name.
        name: String,
        /// "name" or "P_Key".
        what: &'static str,
    },
    /// More partitions on one port than a P_Key block holds.
    #[error("port {port_guid:#018x} is in {count} partitions; at most 31 besides the default fit")]
    TooManyPartitions {
        /// The port.
        port_guid: u64,
        /// How many.
        count: usize,
    },
    /// A sweep interval of zero.
    #[error("sweep_interval must be > 0")]
    SweepInterval,
    /// A trap rate or burst of zero would ignore every trap.
    #[error("trap_rate and trap_burst must be > 0 (got {rate}/s, burst {burst})")]
    TrapRate {
        /// trap_rate
        rate: u32,
        /// trap_burst
        burst: u32,
    },
}

impl SubnetConfig {
    /// Check the values the SM would otherwise have to guess about.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lmc > 7 {
            return Err(ConfigError::Lmc(self.lmc));
        }
        if !(1..=5).contains(&self.max_mtu) {
            return Err(ConfigError::Range {
                field: "max_mtu",
                value: self.max_mtu,
                range: "1..=5",
            });
        }
        if !(1..=5).contains(&self.max_operational_vls) {
            return Err(ConfigError::Range {
                field: "max_operational_vls",
                value: self.max_operational_vls,
                range: "1..=5",
            });
        }
        if self.master_sm_sl > 15 {
            return Err(ConfigError::Range {
                field: "master_sm_sl",
                value: self.master_sm_sl,
                range: "0..=15",
            });
        }
        if self.subnet_timeout > 31 || self.life_time_value > 31 {
            return Err(ConfigError::Range {
                field: "subnet_timeout/life_time_value",
                value: self.subnet_timeout.max(self.life_time_value),
                range: "0..=31",
            });
        }
        if self.m_key.protect_bits > 3 {
            return Err(ConfigError::Range {
                field: "m_key_protection_level",
                value: self.m_key.protect_bits,
                range: "0..=3",
            });
        }
        if self.sweep_interval.is_zero() {
            return Err(ConfigError::SweepInterval);
        }
        if self.trap_rate == 0 || self.trap_burst == 0 {
            return Err(ConfigError::TrapRate {
                rate: self.trap_rate,
                burst: self.trap_burst,
            });
        }
        let mut names = HashSet::new();
        let mut keys = HashSet::new();
        let mut per_port: std::collections::HashMap<u64, usize> = Default::default();
        for p in &self.partitions {
            if p.p_key == 0 || p.p_key > 0x7FFF {
                return Err(ConfigError::PKey {
                    name: p.name.clone(),
                    pkey: p.p_key,
                });
            }
            if let Some(Err((field, value, range))) = p.ipoib.as_ref().map(PartitionIpoib::check) {
                return Err(ConfigError::Ipoib {
                    name: p.name.clone(),
                    field,
                    value,
                    range,
                });
            }
            if !names.insert(p.name.as_str()) {
                return Err(ConfigError::Duplicate {
                    name: p.name.clone(),
                    what: "name",
                });
            }
            if !keys.insert(p.p_key) {
                return Err(ConfigError::Duplicate {
                    name: p.name.clone(),
                    what: "P_Key",
                });
            }
            let mut seen = HashSet::new();
            for m in &p.members {
                if seen.insert(m.port_guid) {
                    *per_port.entry(m.port_guid).or_default() += 1;
                }
            }
        }
        if let Some((&port_guid, &count)) = per_port.iter().find(|(_, &c)| c > 31) {
            return Err(ConfigError::TooManyPartitions { port_guid, count });
        }
        Ok(())
    }
}
