//! The MASTER's subnet options as they come from the command line or the config file:
//! `--lmc`, `--routing`, `--root-guid`, `--sweep-interval-s`, `--partition`,
//! `--smp-window`, `--m-key`, `--m-key-protection-level`, `--m-key-lease-period`,
//! `--trap-sweep-hold-down-ms`, `--max-nodes`, turned into an
//! [`ibsm_core::subnet::SubnetConfig`].
//!
//! A partition is written `NAME=PKEY[,FLAG...]:MEMBER,MEMBER,...` where a member is
//! `GUID[:full|limited]` (default full), e.g.
//! `storage=0x0010:0x0002c90000000001,0x0002c90000000002:limited`. The P_Key is the
//! 15-bit base (0x0001..=0x7FFE); a value written with the membership bit (0x8010)
//! is accepted and means the same partition. The flags are OpenSM's partitions.conf
//! IPoIB flags: `ipoib` gives the partition its IPoIB broadcast group
//! (`ff1<scope>:401b:<P_Key>::ffff:ffff`), and `rate=`, `mtu=`, `sl=`, `scope=` and
//! `Q_Key=` (IBA encodings; defaults 3 = 10 Gb/s, 4 = 2048 bytes, 0, 2 = link-local,
//! 0x0B1B) set its parameters, e.g. `ipoib=`ib0=0x0012,ipoib,mtu=5,rate=7:0x0002c90000000001`.
//! Every error names the partition, the column where the wrong part starts and why.

use std::time::Duration;

use ibsm_core::subnet::{
    MKeyConfig, Membership, Partition, PartitionIpoib, PartitionMember, RoutingEngine, SubnetConfig,
};

/// Why a subnet option was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubnetOptError {
    /// `--partition` text that does not parse.
    #[error("partition {text:?}, column {column}: {why}")]
    Partition {
        /// The whole argument.
        text: String,
        /// Where in it (1-based, in characters) the wrong part starts.
        column: usize,
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

/// The column (1-based, in characters) of byte offset `at` of `text`.
fn column(text: &str, at: usize) -> usize {
    text.get(..at).map_or(0, |t| t.chars().count()) + 1
}

/// Split `s` (which starts at byte `base` of the whole text) at `sep`, with the byte
/// offset of each piece.
fn pieces(s: &str, base: usize, sep: char) -> impl Iterator<Item = (usize, &str)> {
    let mut at = base;
    s.split(sep).map(move |p| {
        let here = at;
        at += p.len() + sep.len_utf8();
        (here, p)
    })
}

/// The trimmed piece with the offset of its first non-blank character.
fn trimmed(at: usize, p: &str) -> (usize, &str) {
    (at + (p.len() - p.trim_start().len()), p.trim())
}

/// Parse the `,ipoib,rate=N,...` flags after the P_Key (OpenSM's partitions.conf
/// flags): `Err((offset, why))`.
fn parse_ipoib_flags<'a>(
    flags: impl Iterator<Item = (usize, &'a str)>,
) -> Result<Option<PartitionIpoib>, (usize, String)> {
    let mut ipoib = false;
    let mut params = PartitionIpoib::default();
    let mut seen: Vec<&'static str> = Vec::new();
    let mut first_param = None;
    for (at, flag) in flags {
        let (at, flag) = trimmed(at, flag);
        if flag.eq_ignore_ascii_case("ipoib") {
            if ipoib {
                return Err((at, "ipoib is given twice".into()));
            }
            ipoib = true;
            continue;
        }
        let Some((key, value)) = flag.split_once('=') else {
            return Err((
                at,
                format!("flag {flag:?} is not ipoib or one of rate=, mtu=, sl=, scope=, Q_Key="),
            ));
        };
        let value_at = at + key.len() + 1;
        let (value_at, value) = trimmed(value_at, value);
        let (field, max): (&'static str, u64) = match key.trim().to_ascii_lowercase().as_str() {
            "rate" => ("rate", u8::MAX.into()),
            "mtu" => ("mtu", u8::MAX.into()),
            "sl" => ("sl", u8::MAX.into()),
            "scope" => ("scope", u8::MAX.into()),
            "q_key" | "qkey" => ("Q_Key", u32::MAX.into()),
            other => {
                return Err((
                    at,
                    format!("flag {other:?} is not one of rate, mtu, sl, scope, Q_Key"),
                ))
            }
        };
        if seen.contains(&field) {
            return Err((at, format!("{field} is given twice")));
        }
        seen.push(field);
        first_param.get_or_insert(at);
        let v = parse_u64(value).filter(|v| *v <= max).ok_or_else(|| {
            (
                value_at,
                format!("{field} {value:?} is not a number up to {max}"),
            )
        })?;
        // Both maxima fit their fields: checked above.
        let small = u8::try_from(v).unwrap_or(u8::MAX);
        match field {
            "rate" => params.rate = small,
            "mtu" => params.mtu = small,
            "sl" => params.sl = small,
            "scope" => params.scope = small,
            _ => params.q_key = u32::try_from(v).unwrap_or(u32::MAX),
        }
        if let Err((f, value, range)) = params.check() {
            if f == field {
                return Err((
                    value_at,
                    format!("{field} {value} is out of range ({range})"),
                ));
            }
        }
    }
    match (ipoib, first_param) {
        (true, _) => Ok(Some(params)),
        (false, Some(at)) => Err((
            at,
            "IPoIB parameters need the ipoib flag before them (NAME=PKEY,ipoib,mtu=4:...)".into(),
        )),
        (false, None) => Ok(None),
    }
}

/// Parse one `NAME=PKEY[,ipoib[,rate=N][,mtu=N][,sl=N][,scope=N][,Q_Key=N]]:GUID[:full|limited],...`.
pub fn parse_partition(text: &str) -> Result<Partition, SubnetOptError> {
    let err = |at: usize, why: String| SubnetOptError::Partition {
        text: text.to_string(),
        column: column(text, at),
        why,
    };
    let Some((name, rest)) = text.split_once('=') else {
        return Err(err(
            0,
            "expected NAME=PKEY[,ipoib,...]:GUID[:full|limited],...".into(),
        ));
    };
    let rest_at = name.len() + 1;
    let name = name.trim();
    if name.is_empty() {
        return Err(err(0, "the name is empty".into()));
    }
    let Some((head, members)) = rest.split_once(':') else {
        return Err(err(rest_at, "expected PKEY:GUID,... after the name".into()));
    };
    let members_at = rest_at + head.len() + 1;
    let mut head = pieces(head, rest_at, ',');
    let (pkey_at, pkey) = head.next().map_or((rest_at, ""), |(a, p)| trimmed(a, p));
    let pkey = parse_u64(pkey)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| err(pkey_at, format!("P_Key {pkey:?} is not a 16-bit number")))?
        & 0x7FFF;
    if pkey == 0x7FFF {
        // The configurator takes 0x7FFF as a redefinition of the default partition
        // (partitions.conf's Default=0x7fff), which would leave every other port out
        // of it: only --partitions-file may do that.
        return Err(err(
            pkey_at,
            "P_Key 0x7fff is the default partition (every port a member); pick 0x0001-0x7ffe, or redefine it in a --partitions-file".into(),
        ));
    }
    let ipoib = parse_ipoib_flags(head).map_err(|(at, why)| err(at, why))?;
    let mut out = Vec::new();
    for (at, m) in pieces(members, members_at, ',') {
        let (at, m) = trimmed(at, m);
        if m.is_empty() {
            continue;
        }
        let (guid, kind) = match m.split_once(':') {
            Some((g, k)) => (g, Some((at + g.len() + 1, k))),
            None => (m, None),
        };
        let port_guid = parse_u64(guid)
            .ok_or_else(|| err(at, format!("member GUID {guid:?} is not a number")))?;
        let membership = match kind.map(|(a, k)| trimmed(a, k)) {
            None => Membership::Full,
            Some((_, k)) if k.eq_ignore_ascii_case("full") => Membership::Full,
            Some((_, k)) if k.eq_ignore_ascii_case("limited") => Membership::Limited,
            Some((a, k)) => {
                return Err(err(
                    a,
                    format!("membership {k:?} of {guid} is not full or limited"),
                ))
            }
        };
        out.push(PartitionMember {
            port_guid,
            membership,
        });
    }
    if out.is_empty() {
        return Err(err(members_at, "no members".into()));
    }
    Ok(Partition {
        groups: Vec::new(),
        index0: false,
        name: name.to_string(),
        p_key: pkey,
        members: out,
        ipoib,
    })
}

/// A partition in the syntax [`parse_partition`] reads (P_Key in hex, every member
/// with its membership, the ipoib flag with all its values): the inverse of the
/// parser, for docs, tests and the fuzz target's round trip.
pub fn format_partition(p: &Partition) -> String {
    let members: Vec<String> = p
        .members
        .iter()
        .map(|m| {
            let kind = match m.membership {
                Membership::Full => "full",
                Membership::Limited => "limited",
            };
            format!("0x{:x}:{kind}", m.port_guid)
        })
        .collect();
    let flags = p.ipoib.map_or(String::new(), |i| {
        format!(
            ",ipoib,rate={},mtu={},sl={},scope={},Q_Key={:#x}",
            i.rate, i.mtu, i.sl, i.scope, i.q_key
        )
    });
    format!("{}=0x{:04x}{flags}:{}", p.name, p.p_key, members.join(","))
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
    #[test]
    fn the_default_partition_is_refused_on_the_command_line() {
        let e = parse_partition("d=0x7fff:0x1").expect_err("0x7fff");
        assert!(e.to_string().contains("--partitions-file"), "{e}");
        assert!(
            matches!(e, SubnetOptError::Partition { column: 3, .. }),
            "{e:?}"
        );
    }

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
    fn partition_errors_say_where_and_why() {
        for (text, column, needle) in [
            ("storage", 1, "NAME=PKEY"),
            ("=1:2", 1, "name is empty"),
            ("a=1", 3, "PKEY:GUID"),
            ("a=0x10000:1", 3, "16-bit"),
            ("a=1:zz", 5, "not a number"),
            ("a=1:2:half", 7, "full or limited"),
            ("a=1:", 5, "no members"),
            ("a=1:5, 6,x7", 10, "not a number"),
            ("a=1,ipob:5", 5, "not ipoib"),
            ("a=1, ipoib, mtu=9:5", 17, "mtu 9 is out of range"),
            ("a=1,ipoib,rate=1:5", 16, "rate 1 is out of range"),
            ("a=1,ipoib,sl=16:5", 14, "sl 16"),
            ("a=1,ipoib,scope=0x1f:5", 17, "scope 31"),
            ("a=1,ipoib,Q_Key=0x100000000:5", 17, "not a number"),
            ("a=1,ipoib,tclass=1:5", 11, "not one of rate"),
            ("a=1,ipoib,mtu=4,mtu=5:5", 17, "mtu is given twice"),
            ("a=1,ipoib,ipoib:5", 11, "twice"),
            ("a=1,mtu=4:5", 5, "need the ipoib flag"),
            ("a=1,ipoib,mtu:5", 11, "not ipoib or one of"),
            ("\u{e9}t\u{e9}=1,x:5", 7, "not ipoib"),
        ] {
            let e = parse_partition(text).expect_err(text);
            let SubnetOptError::Partition { column: c, .. } = &e else {
                panic!("{text}: {e:?}");
            };
            let e = e.to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert_eq!(*c, column, "{text}: {e}");
            assert!(e.contains(&format!("column {column}")), "{e}");
        }
    }

    #[test]
    fn partition_with_ipoib_flags_as_in_opensm() {
        let p =
            parse_partition("ib0 = 0x12 , ipoib, rate=7 ,MTU=5,sl=3,scope=5,Q_Key=0x12345 : 0x1")
                .expect("valid");
        assert_eq!(p.name, "ib0");
        assert_eq!(p.p_key, 0x12);
        assert_eq!(
            p.ipoib,
            Some(PartitionIpoib {
                rate: 7,
                mtu: 5,
                sl: 3,
                scope: 5,
                q_key: 0x12345
            })
        );
        // `ipoib` alone: OpenSM's defaults; no flag: no group.
        let d = parse_partition("ib1=0x13,ipoib:0x1").expect("valid");
        assert_eq!(d.ipoib, Some(PartitionIpoib::default()));
        assert_eq!(parse_partition("ib2=0x14:0x1").expect("valid").ipoib, None);
        let q = parse_partition("q=0x15,ipoib,qkey=7:1").expect("valid");
        assert_eq!(q.ipoib.map(|i| i.q_key), Some(7));
        // Written back, each parses to itself.
        for p in [p, d] {
            assert_eq!(parse_partition(&format_partition(&p)), Ok(p.clone()));
        }
        // Through the options: the configurator takes it.
        let c = SubnetOptions {
            partitions: vec!["ib0=0x12,ipoib,mtu=5:5".into()],
            ..SubnetOptions::default()
        }
        .to_config()
        .expect("valid");
        assert_eq!(c.partitions[0].ipoib.map(|i| i.mtu), Some(5));
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
            match parse_partition(&text) {
                Ok(p) => proptest::prop_assert_eq!(parse_partition(&format_partition(&p)), Ok(p)),
                Err(SubnetOptError::Partition { column, .. }) => {
                    proptest::prop_assert!((1..=text.chars().count() + 1).contains(&column));
                }
                Err(e) => proptest::prop_assert!(false, "{}", e),
            }
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
