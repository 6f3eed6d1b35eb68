//! The MASTER's subnet options as they come from the command line or the config file:
//! `--lmc`, `--routing`, `--root-guid`, `--sweep-interval-s`, `--partition`,
//! `--smp-window`, `--m-key`, `--m-key-protection-level`, `--m-key-lease-period`,
//! `--trap-sweep-hold-down-ms`, `--max-nodes`, turned into an
//! [`ibsm_core::subnet::SubnetConfig`].
//!
//! A partition is written `NAME=PKEY:MEMBER,MEMBER,...` where a member is
//! `GUID[:full|limited]` (default full), e.g.
//! `storage=0x0010:0x0002c90000000001,0x0002c90000000002:limited`. The P_Key is the
//! 15-bit base (0x0001..=0x7FFE); a value written with the membership bit (0x8010)
//! is accepted and means the same partition. Every error names the partition and the
//! part of the text that is wrong.

use std::time::Duration;

use ibsm_core::subnet::{
    MKeyConfig, Membership, Partition, PartitionMember, RoutingEngine, SubnetConfig,
};

/// Why a subnet option was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubnetOptError {
    /// `--partition` text that does not parse.
    #[error("partition {text:?}: {why}")]
    Partition {
        /// The whole argument.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// `--routing` other than `minhop`/`updown`.
    #[error("routing engine {0:?} is not one of minhop, updown")]
    Routing(String),
    /// A GUID that is not a 64-bit number.
    #[error("GUID {0:?} is not a 64-bit number (decimal or 0x hex)")]
    Guid(String),
    /// `--root-guid` given with min-hop routing.
    #[error("--root-guid only applies to --routing updown")]
    RootsWithoutUpDown,
    /// A protection level or lease period without an M_Key: it would protect nothing.
    #[error("{0} needs an M_Key (--m-key / m_key): a port with M_Key 0 is not protected")]
    MKeyMissing(&'static str),
    /// The combination is refused by the configurator (LMC range, duplicate P_Keys...).
    #[error("subnet configuration: {0}")]
    Config(#[from] ibsm_core::subnet::ConfigError),
}

/// Parse a number written in decimal or `0x` hex.
fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parse a port or node GUID (decimal or 0x hex).
pub fn parse_guid(s: &str) -> Result<u64, SubnetOptError> {
    parse_u64(s).ok_or_else(|| SubnetOptError::Guid(s.to_string()))
}

/// Parse `minhop` / `updown` (also `min-hop`, `up-down`, `ftree`-free on purpose).
pub fn parse_routing(s: &str) -> Result<RoutingEngine, SubnetOptError> {
    match s
        .trim()
        .to_ascii_lowercase()
        .replace(['-', '_'], "")
        .as_str()
    {
        "minhop" => Ok(RoutingEngine::MinHop),
        "updown" => Ok(RoutingEngine::UpDown { roots: Vec::new() }),
        _ => Err(SubnetOptError::Routing(s.to_string())),
    }
}

/// Parse one `NAME=PKEY:GUID[:full|limited],...`.
pub fn parse_partition(text: &str) -> Result<Partition, SubnetOptError> {
    let err = |why: String| SubnetOptError::Partition {
        text: text.to_string(),
        why,
    };
    let (name, rest) = text
        .split_once('=')
        .ok_or_else(|| err("expected NAME=PKEY:GUID[:full|limited],...".into()))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(err("the name is empty".into()));
    }
    let (pkey, members) = rest
        .split_once(':')
        .ok_or_else(|| err("expected PKEY:GUID,... after the name".into()))?;
    let pkey = parse_u64(pkey)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| err(format!("P_Key {pkey:?} is not a 16-bit number")))?
        & 0x7FFF;
    let mut out = Vec::new();
    for m in members.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let (guid, kind) = match m.split_once(':') {
            Some((g, k)) => (g, Some(k)),
            None => (m, None),
        };
        let port_guid =
            parse_u64(guid).ok_or_else(|| err(format!("member GUID {guid:?} is not a number")))?;
        let membership = match kind.map(|k| k.trim().to_ascii_lowercase()) {
            None => Membership::Full,
            Some(k) if k == "full" => Membership::Full,
            Some(k) if k == "limited" => Membership::Limited,
            Some(k) => {
                return Err(err(format!(
                    "membership {k:?} of {guid} is not full or limited"
                )))
            }
        };
        out.push(PartitionMember {
            port_guid,
            membership,
        });
    }
    if out.is_empty() {
        return Err(err("no members".into()));
    }
    Ok(Partition {
        name: name.to_string(),
        p_key: pkey,
        members: out,
    })
}

/// The subnet options, each `None` where neither the command line nor the file set it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubnetOptions {
    /// `--lmc` (default 0).
    pub lmc: Option<u8>,
    /// `--routing` (default minhop).
    pub routing: Option<String>,
    /// `--root-guid`, repeatable (up/down roots; default: found automatically).
    pub root_guids: Vec<String>,
    /// `--sweep-interval-s` (light sweep interval, default 2: SwitchInfo of every
    /// switch, cheap even at 1280 switches, and it keeps ActCount moving).
    pub sweep_interval_s: Option<u64>,
    /// `--partition`, repeatable.
    pub partitions: Vec<String>,
    /// `--smp-window` (SMPs in flight, default 64).
    pub smp_window: Option<usize>,
    /// `--m-key` (default 0: no M_Key protection).
    pub m_key: Option<u64>,
    /// `--m-key-protection-level` (0..=3, default 0).
    pub m_key_protection_level: Option<u8>,
    /// `--m-key-lease-period` in seconds (default 0: protection never lapses).
    pub m_key_lease_period: Option<u16>,
    /// `--trap-sweep-hold-down-ms`: a trap-triggered heavy sweep waits this long after
    /// the last heavy sweep ended (default 1000; 0 = none).
    pub trap_sweep_hold_down_ms: Option<u64>,
    /// `--max-nodes`: the topology cap, nodes one discovery records (default 65536).
    pub max_nodes: Option<usize>,
}

/// Default SMPs in flight: ibsim answers 105k MADs/s at 64 against 77k at 16.
pub const DEFAULT_SMP_WINDOW: usize = 64;

impl SubnetOptions {
    /// Build and validate the configurator's settings.
    pub fn to_config(&self) -> Result<SubnetConfig, SubnetOptError> {
        let mut cfg = SubnetConfig::default();
        if let Some(l) = self.lmc {
            cfg.lmc = l;
        }
        cfg.routing = match &self.routing {
            Some(r) => parse_routing(r)?,
            None => RoutingEngine::MinHop,
        };
        let roots = self
            .root_guids
            .iter()
            .map(|g| parse_guid(g))
            .collect::<Result<Vec<_>, _>>()?;
        match &mut cfg.routing {
            RoutingEngine::UpDown { roots: r } => *r = roots,
            RoutingEngine::MinHop if !roots.is_empty() => {
                return Err(SubnetOptError::RootsWithoutUpDown)
            }
            RoutingEngine::MinHop => {}
        }
        cfg.sweep_interval = Duration::from_secs(self.sweep_interval_s.unwrap_or(2));
        cfg.transactions.window = self.smp_window.unwrap_or(DEFAULT_SMP_WINDOW).max(1);
        if let Some(ms) = self.trap_sweep_hold_down_ms {
            cfg.trap_sweep_hold_down = Duration::from_millis(ms);
        }
        if let Some(n) = self.max_nodes {
            cfg.discovery.max_nodes = n.max(1);
        }
        cfg.partitions = self
            .partitions
            .iter()
            .map(|p| parse_partition(p))
            .collect::<Result<_, _>>()?;
        let key = self.m_key.unwrap_or(0);
        if key == 0 {
            if self.m_key_protection_level.is_some_and(|l| l != 0) {
                return Err(SubnetOptError::MKeyMissing("--m-key-protection-level"));
            }
            if self.m_key_lease_period.is_some_and(|l| l != 0) {
                return Err(SubnetOptError::MKeyMissing("--m-key-lease-period"));
            }
        }
        cfg.m_key = MKeyConfig {
            key,
            protect_bits: self.m_key_protection_level.unwrap_or(0),
            lease_period: self.m_key_lease_period.unwrap_or(0),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_with_memberships() {
        let p = parse_partition("storage=0x8010:0x2c90000000001, 0x2c90000000002:limited,7:FULL")
            .expect("valid");
        assert_eq!(p.name, "storage");
        assert_eq!(p.p_key, 0x0010);
        assert_eq!(
            p.members,
            vec![
                PartitionMember {
                    port_guid: 0x2c90000000001,
                    membership: Membership::Full
                },
                PartitionMember {
                    port_guid: 0x2c90000000002,
                    membership: Membership::Limited
                },
                PartitionMember {
                    port_guid: 7,
                    membership: Membership::Full
                },
            ]
        );
    }

    #[test]
    fn partition_errors_say_why() {
        for (text, needle) in [
            ("storage", "NAME=PKEY"),
            ("=1:2", "name is empty"),
            ("a=1", "PKEY:GUID"),
            ("a=0x10000:1", "16-bit"),
            ("a=1:zz", "not a number"),
            ("a=1:2:half", "full or limited"),
            ("a=1:", "no members"),
        ] {
            let e = parse_partition(text).expect_err(text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn options_build_a_validated_config() {
        let o = SubnetOptions {
            lmc: Some(2),
            routing: Some("up-down".into()),
            root_guids: vec!["0x10".into(), "17".into()],
            sweep_interval_s: Some(3),
            partitions: vec!["a=1:5".into(), "b=2:5:limited".into()],
            smp_window: Some(32),
            m_key: Some(0xABCD),
            m_key_protection_level: Some(2),
            m_key_lease_period: Some(60),
            ..SubnetOptions::default()
        };
        let c = o.to_config().expect("valid");
        assert_eq!(
            c.m_key,
            MKeyConfig {
                key: 0xABCD,
                protect_bits: 2,
                lease_period: 60
            }
        );
        assert_eq!(c.lmc, 2);
        assert_eq!(
            c.routing,
            RoutingEngine::UpDown {
                roots: vec![16, 17]
            }
        );
        assert_eq!(c.sweep_interval, Duration::from_secs(3));
        assert_eq!(c.partitions.len(), 2);
        assert_eq!(c.transactions.window, 32);
        let d = SubnetOptions::default().to_config().expect("defaults");
        assert_eq!(d.routing, RoutingEngine::MinHop);
        assert_eq!(d.transactions.window, DEFAULT_SMP_WINDOW);
    }

    #[test]
    fn bad_combinations_are_refused() {
        let roots = SubnetOptions {
            root_guids: vec!["1".into()],
            ..SubnetOptions::default()
        };
        assert_eq!(roots.to_config(), Err(SubnetOptError::RootsWithoutUpDown));
        let lmc = SubnetOptions {
            lmc: Some(8),
            ..SubnetOptions::default()
        };
        assert!(matches!(lmc.to_config(), Err(SubnetOptError::Config(_))));
        let dup = SubnetOptions {
            partitions: vec!["a=1:5".into(), "b=0x8001:6".into()],
            ..SubnetOptions::default()
        };
        assert!(matches!(dup.to_config(), Err(SubnetOptError::Config(_))));
        for (o, flag) in [
            (
                SubnetOptions {
                    m_key_protection_level: Some(1),
                    ..SubnetOptions::default()
                },
                "--m-key-protection-level",
            ),
            (
                SubnetOptions {
                    m_key: Some(0),
                    m_key_lease_period: Some(5),
                    ..SubnetOptions::default()
                },
                "--m-key-lease-period",
            ),
        ] {
            let e = o.to_config().expect_err(flag).to_string();
            assert!(e.contains(flag) && e.contains("needs an M_Key"), "{e}");
        }
        let level = SubnetOptions {
            m_key: Some(1),
            m_key_protection_level: Some(4),
            ..SubnetOptions::default()
        };
        assert!(matches!(level.to_config(), Err(SubnetOptError::Config(_))));
        let sweep = SubnetOptions {
            sweep_interval_s: Some(0),
            ..SubnetOptions::default()
        };
        assert!(matches!(sweep.to_config(), Err(SubnetOptError::Config(_))));
        assert!(matches!(
            parse_routing("ftree"),
            Err(SubnetOptError::Routing(_))
        ));
    }

    proptest::proptest! {
        #[test]
        fn partition_parser_never_panics(text in "\\PC{0,80}") {
            let _ = parse_partition(&text);
        }
    }

    #[test]
    fn trap_hold_down_and_topology_cap_reach_the_configurator() {
        let d = SubnetOptions::default().to_config().expect("defaults");
        assert_eq!(d.trap_sweep_hold_down, Duration::from_secs(1));
        assert_eq!(
            d.discovery.max_nodes,
            ibsm_core::discovery::DEFAULT_MAX_NODES
        );
        let c = SubnetOptions {
            trap_sweep_hold_down_ms: Some(250),
            max_nodes: Some(5000),
            ..SubnetOptions::default()
        }
        .to_config()
        .expect("valid");
        assert_eq!(c.trap_sweep_hold_down, Duration::from_millis(250));
        assert_eq!(c.discovery.max_nodes, 5000);
    }
}
