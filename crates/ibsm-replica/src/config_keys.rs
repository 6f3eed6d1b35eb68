//! The replicated runtime configuration (`FabricState::config`): which keys exist, what
//! their values look like, and the limits every replica enforces when it applies them.
//!
//! Why here and not in the daemon: the limits are checked twice, once by the control
//! API (a clear error to the operator before anything is written) and once
//! deterministically by [`crate::FabricState::apply`] (so a write that slipped past an
//! API, or came from a peer, is refused the same way on every replica and the state
//! never grows past them). Both call [`validate_set`], so they cannot disagree.
//!
//! The keys:
//!
//! - `partition/<pkey>` (4 hex digits, the 15-bit P_Key): a partition set through
//!   `Fabric/SetPartition`, value `name[,ipoib,rate=R,mtu=M,sl=S,scope=C,qkey=Q]|guid:full,guid:limited,...`
//!   ([`encode_partition`], [`decode_partition`]; the IPoIB flags with
//!   [`encode_partition_ipoib`], [`decode_partition_ipoib`]; a value without them
//!   is a partition without an IPoIB broadcast group);
//! - `sm.<guid>.node` (16 hex digits): the Raft node id of the ibsmd whose SM port has
//!   this GUID (each member registers itself; the planned handover uses it).
//!
//! [`forwardable`] says which keys a member may forward to the leader over the Raft
//! service: exactly these two families. The Raft service refuses any other key, so a
//! peer cannot write a config entry the control API would have refused.

use std::collections::BTreeMap;

use crate::partition::{IpoibFlags, Partition, PartitionMember};

/// Config key prefix of partitions set through the API.
pub const PARTITION_KEY: &str = "partition/";
/// Most partitions the replicated config holds.
pub const MAX_PARTITIONS: usize = 1024;
/// Most members one partition may list.
pub const MAX_PARTITION_MEMBERS: usize = 65_536;
/// Longest partition name, in bytes.
pub const MAX_PARTITION_NAME_BYTES: usize = 64;
/// Longest config key, in bytes.
pub const MAX_CONFIG_KEY_BYTES: usize = 128;
/// Largest config value, in bytes (a partition of [`MAX_PARTITION_MEMBERS`] members
/// fits: each is at most `0x<16 hex>:limited,`, 27 bytes).
pub const MAX_CONFIG_VALUE_BYTES: usize = 2 << 20;
/// Most config entries in the replicated state.
pub const MAX_CONFIG_KEYS: usize = 8192;

/// Why a config entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigKeyError {
    #[error("config key {key:?}: {why}")]
    Key { key: String, why: String },
    #[error("config key {key:?}: value: {why}")]
    Value { key: String, why: String },
    #[error("{0}")]
    Limit(String),
}

fn key_err(key: &str, why: impl Into<String>) -> ConfigKeyError {
    ConfigKeyError::Key {
        key: key.chars().take(MAX_CONFIG_KEY_BYTES).collect(),
        why: why.into(),
    }
}

fn value_err(key: &str, why: impl Into<String>) -> ConfigKeyError {
    ConfigKeyError::Value {
        key: key.chars().take(MAX_CONFIG_KEY_BYTES).collect(),
        why: why.into(),
    }
}

/// The config key of the partition with this 15-bit P_Key.
pub fn partition_key(p_key: u16) -> String {
    format!("{PARTITION_KEY}{p_key:04x}")
}

/// The config key mapping an SM port GUID to its Raft node id.
pub fn sm_node_key(guid: u64) -> String {
    format!("sm.{guid:016x}.node")
}

/// The P_Key a `partition/<pkey>` key names (`None`: another kind of key).
pub fn partition_key_pkey(key: &str) -> Option<Result<u16, ConfigKeyError>> {
    let hex = key.strip_prefix(PARTITION_KEY)?;
    Some(
        (hex.len() == 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u16::from_str_radix(hex, 16).ok())
            .flatten()
            // 0x7FFF, the default partition, is the start-up configuration's alone
            // (SetPartition refuses it too): a replicated entry must not redefine it.
            .filter(|p| *p & 0x8000 == 0 && *p != 0 && *p != 0x7fff)
            .ok_or_else(|| {
                key_err(
                    key,
                    "a partition key is partition/ and 4 hex digits of a 15-bit P_Key (0001-7ffe; 7fff is the default partition)",
                )
            }),
    )
}

/// The SM port GUID registered for Raft node `node` (a `NodeId`; `sm.<guid>.node` =
/// `node`) in a replicated config; `None` when no SM registered it.
pub fn sm_of_node<'a>(
    config: impl IntoIterator<Item = (&'a String, &'a String)>,
    node: u64,
) -> Option<u64> {
    let node = node.to_string();
    config
        .into_iter()
        .filter(|(_, v)| **v == node)
        .find_map(|(k, _)| sm_node_key_guid(k)?.ok())
}

fn sm_node_key_guid(key: &str) -> Option<Result<u64, ConfigKeyError>> {
    let rest = key.strip_prefix("sm.")?;
    let hex = rest.strip_suffix(".node")?;
    Some(
        (hex.len() == 16)
            .then(|| u64::from_str_radix(hex, 16).ok())
            .flatten()
            .ok_or_else(|| key_err(key, "an SM registration key is sm.<16 hex digits>.node")),
    )
}

/// `name|guid:full,guid:limited`: the replicated form of a partition.
pub fn encode_partition(p: &Partition) -> String {
    encode_partition_ipoib(p, None)
}

/// `name[,ipoib,rate=R,mtu=M,sl=S,scope=C,qkey=Q]|guid:full,...`: the replicated form
/// of a partition with its IPoIB flags, if any.
pub fn encode_partition_ipoib(p: &Partition, ipoib: Option<&IpoibFlags>) -> String {
    let members: Vec<String> = p
        .members
        .iter()
        .map(|m| {
            format!(
                "{:#x}:{}",
                m.port_guid,
                if m.full { "full" } else { "limited" }
            )
        })
        .collect();
    let flags = ipoib.map_or(String::new(), |i| {
        format!(
            ",ipoib,rate={},mtu={},sl={},scope={},qkey={:#x}",
            i.rate, i.mtu, i.sl, i.scope, i.q_key
        )
    });
    format!("{}{flags}|{}", p.name, members.join(","))
}

/// The IPoIB flags after a partition's name (`ipoib,rate=R,...`): every value within
/// its IBA range (rate 2..=24, mtu 1..=5, sl and scope 0..=15, a 32-bit Q_Key).
fn decode_ipoib_flags(key: &str, flags: &str) -> Result<IpoibFlags, ConfigKeyError> {
    let mut parts = flags.split(',');
    if parts.next() != Some("ipoib") {
        return Err(value_err(
            key,
            format!(
                "{flags:?} after the name: expected ipoib,rate=..,mtu=..,sl=..,scope=..,qkey=.."
            ),
        ));
    }
    let mut f = IpoibFlags {
        rate: 3,
        mtu: 4,
        sl: 0,
        scope: 2,
        q_key: 0x0B1B,
    };
    for part in parts {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| value_err(key, format!("ipoib flag {part:?} is not name=value")))?;
        let num = match v.strip_prefix("0x") {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        };
        let small = |lo: u8, hi: u8| {
            num.and_then(|n| u8::try_from(n).ok())
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| value_err(key, format!("ipoib {k}={v:?} is not in {lo}..={hi}")))
        };
        match k {
            "rate" => f.rate = small(2, 24)?,
            "mtu" => f.mtu = small(1, 5)?,
            "sl" => f.sl = small(0, 15)?,
            "scope" => f.scope = small(0, 15)?,
            "qkey" => {
                f.q_key = num.ok_or_else(|| {
                    value_err(key, format!("ipoib qkey={v:?} is not a 32-bit number"))
                })?
            }
            other => {
                return Err(value_err(
                    key,
                    format!("ipoib flag {other:?} is not rate, mtu, sl, scope or qkey"),
                ))
            }
        }
    }
    Ok(f)
}

/// Check a partition name: 1..=64 bytes of visible ASCII, none of `|`, `,` or `=`.
pub fn check_partition_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_PARTITION_NAME_BYTES {
        return Err(format!(
            "partition name is {} bytes: 1 to {MAX_PARTITION_NAME_BYTES} are allowed",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '|' | ',' | '='))
    {
        return Err(format!(
            "partition name {name:?} contains {c:?}: only visible ASCII without '|', ',' or '='"
        ));
    }
    Ok(())
}

/// The partition a `partition/<pkey>` entry holds; every part must parse.
pub fn decode_partition(key: &str, value: &str) -> Result<Partition, ConfigKeyError> {
    decode_partition_ipoib(key, value).map(|(p, _)| p)
}

/// The partition a `partition/<pkey>` entry holds with its IPoIB flags (`None`: the
/// partition has no IPoIB broadcast group); every part must parse.
pub fn decode_partition_ipoib(
    key: &str,
    value: &str,
) -> Result<(Partition, Option<IpoibFlags>), ConfigKeyError> {
    let p_key = match partition_key_pkey(key) {
        Some(r) => r?,
        None => return Err(key_err(key, "not a partition/ key")),
    };
    if value.len() > MAX_CONFIG_VALUE_BYTES {
        return Err(value_err(
            key,
            format!("{} bytes, more than {MAX_CONFIG_VALUE_BYTES}", value.len()),
        ));
    }
    let (name, members) = value
        .split_once('|')
        .ok_or_else(|| value_err(key, "expected name|guid:full,guid:limited,..."))?;
    let (name, ipoib) = match name.split_once(',') {
        Some((n, flags)) => (n, Some(decode_ipoib_flags(key, flags)?)),
        None => (name, None),
    };
    check_partition_name(name).map_err(|why| value_err(key, why))?;
    let mut out = Vec::new();
    for (i, m) in members.split(',').filter(|m| !m.is_empty()).enumerate() {
        if i >= MAX_PARTITION_MEMBERS {
            return Err(value_err(
                key,
                format!("more than {MAX_PARTITION_MEMBERS} members"),
            ));
        }
        let (g, kind) = m
            .split_once(':')
            .ok_or_else(|| value_err(key, format!("member {i} {m:?} is not guid:full|limited")))?;
        let port_guid = u64::from_str_radix(g.trim_start_matches("0x"), 16)
            .ok()
            .filter(|g| *g != 0)
            .ok_or_else(|| value_err(key, format!("member {i}: {g:?} is not a port GUID")))?;
        let full = match kind {
            "full" => true,
            "limited" => false,
            other => {
                return Err(value_err(
                    key,
                    format!("member {i}: membership {other:?} is neither full nor limited"),
                ))
            }
        };
        out.push(PartitionMember { port_guid, full });
    }
    Ok((
        Partition {
            p_key,
            name: name.to_string(),
            members: out,
        },
        ipoib,
    ))
}

/// Whether a member may forward a write of `key` to the leader: only the families the
/// daemon itself writes (see the module doc).
pub fn forwardable(key: &str) -> bool {
    partition_key_pkey(key).is_some() || sm_node_key_guid(key).is_some()
}

/// Check that setting `key` to `value` in `config` stays within the limits, and that
/// a key of a known family holds a well-formed value. Keys outside the known families
/// are allowed here (local writes, tests) but only within the size limits; the Raft
/// service refuses to forward them ([`forwardable`]).
pub fn validate_set(
    config: &BTreeMap<String, String>,
    key: &str,
    value: &str,
) -> Result<(), ConfigKeyError> {
    if key.is_empty() || key.len() > MAX_CONFIG_KEY_BYTES {
        return Err(key_err(
            key,
            format!(
                "{} bytes: 1 to {MAX_CONFIG_KEY_BYTES} are allowed",
                key.len()
            ),
        ));
    }
    if value.len() > MAX_CONFIG_VALUE_BYTES {
        return Err(value_err(
            key,
            format!("{} bytes, more than {MAX_CONFIG_VALUE_BYTES}", value.len()),
        ));
    }
    let new_key = !config.contains_key(key);
    if new_key && config.len() >= MAX_CONFIG_KEYS {
        return Err(ConfigKeyError::Limit(format!(
            "the replicated config holds {MAX_CONFIG_KEYS} entries already: remove some first"
        )));
    }
    if partition_key_pkey(key).is_some() {
        decode_partition(key, value)?;
        if new_key {
            let n = config
                .range(PARTITION_KEY.to_string()..)
                .take_while(|(k, _)| k.starts_with(PARTITION_KEY))
                .count();
            if n >= MAX_PARTITIONS {
                return Err(ConfigKeyError::Limit(format!(
                    "{n} partitions are set already, the most allowed is {MAX_PARTITIONS}"
                )));
            }
        }
    } else if let Some(g) = sm_node_key_guid(key) {
        g?;
        value
            .parse::<u64>()
            .ok()
            .filter(|n| *n != 0)
            .ok_or_else(|| value_err(key, format!("{value:?} is not a Raft node id")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(n: usize) -> Partition {
        Partition {
            p_key: 0x10,
            name: "storage".into(),
            members: (1..=n as u64)
                .map(|g| PartitionMember {
                    port_guid: g,
                    full: g % 2 == 0,
                })
                .collect(),
        }
    }

    #[test]
    fn the_sm_of_a_raft_node_is_read_from_its_registration() {
        let mut c = std::collections::BTreeMap::new();
        c.insert(sm_node_key(0x0002_c900_0000_0001), "2".to_string());
        c.insert(sm_node_key(0x0002_c900_0000_0002), "3".to_string());
        c.insert("partition/0002".to_string(), "2".to_string());
        c.insert("sm.zz.node".to_string(), "4".to_string());
        assert_eq!(sm_of_node(&c, 2), Some(0x0002_c900_0000_0001));
        assert_eq!(sm_of_node(&c, 3), Some(0x0002_c900_0000_0002));
        assert_eq!(sm_of_node(&c, 4), None, "a malformed key names no SM");
        assert_eq!(sm_of_node(&c, 9), None);
    }

    #[test]
    fn partitions_with_ipoib_flags_round_trip_and_bad_flags_are_refused() {
        let p = part(3);
        let f = IpoibFlags {
            rate: 7,
            mtu: 5,
            sl: 3,
            scope: 5,
            q_key: 0x1_2345,
        };
        let v = encode_partition_ipoib(&p, Some(&f));
        assert!(v.contains(",ipoib,"), "{v}");
        let key = partition_key(0x10);
        assert_eq!(decode_partition_ipoib(&key, &v), Ok((p.clone(), Some(f))));
        assert_eq!(decode_partition(&key, &v), Ok(p.clone()));
        let plain = encode_partition(&p);
        assert_eq!(decode_partition_ipoib(&key, &plain), Ok((p, None)));
        for (value, needle) in [
            ("a,ipob|0x1:full", "expected ipoib"),
            ("a,ipoib,mtu=6|0x1:full", "mtu"),
            ("a,ipoib,rate=1|0x1:full", "rate"),
            ("a,ipoib,sl|0x1:full", "name=value"),
            ("a,ipoib,tclass=1|0x1:full", "tclass"),
            ("a,ipoib,qkey=0x1ffffffff|0x1:full", "qkey"),
        ] {
            let e = decode_partition(&key, value).expect_err(value).to_string();
            assert!(e.contains(needle), "{value}: {e}");
        }
    }

    #[test]
    fn partitions_round_trip() {
        let p = part(3);
        let v = encode_partition(&p);
        assert_eq!(decode_partition(&partition_key(0x10), &v), Ok(p));
    }

    #[test]
    fn bad_partition_entries_are_refused_with_what_is_wrong() {
        let c = BTreeMap::new();
        for (key, value, needle) in [
            ("partition/8001", "a|", "15-bit"),
            ("partition/0000", "a|", "15-bit"),
            ("partition/7fff", "a|", "default partition"),
            ("partition/12", "a|", "4 hex"),
            ("partition/0010", "no-bar", "expected name|"),
            ("partition/0010", "|", "1 to 64"),
            ("partition/0010", "a,b|", "expected ipoib"),
            (
                "partition/0010",
                "a|0x1:sometimes",
                "neither full nor limited",
            ),
            ("partition/0010", "a|zz:full", "not a port GUID"),
            ("partition/0010", "a|0x0:full", "not a port GUID"),
            ("sm.12.node", "1", "16 hex"),
            ("sm.0000000000000001.node", "x", "not a Raft node id"),
        ] {
            let e = validate_set(&c, key, value).expect_err(key);
            assert!(e.to_string().contains(needle), "{key}={value}: {e}");
        }
        let long = "n".repeat(MAX_PARTITION_NAME_BYTES + 1);
        assert!(validate_set(&c, "partition/0010", &format!("{long}|")).is_err());
        assert!(validate_set(&c, &"k".repeat(MAX_CONFIG_KEY_BYTES + 1), "v").is_err());
        assert!(validate_set(&c, "k", &"v".repeat(MAX_CONFIG_VALUE_BYTES + 1)).is_err());
    }

    #[test]
    fn partition_count_and_entry_count_are_capped() {
        let mut c = BTreeMap::new();
        for i in 1..=MAX_PARTITIONS as u16 {
            c.insert(partition_key(i), "p|".to_string());
        }
        let e = validate_set(&c, &partition_key(0x7000), "q|").expect_err("over the cap");
        assert!(e.to_string().contains("partitions are set already"), "{e}");
        // Replacing an existing one is fine.
        validate_set(&c, &partition_key(1), "p2|").expect("replace");
        for i in 0..(MAX_CONFIG_KEYS - c.len()) {
            c.insert(format!("k{i}"), String::new());
        }
        let e = validate_set(&c, "one-more", "").expect_err("full");
        assert!(e.to_string().contains("entries already"), "{e}");
    }

    #[test]
    fn only_daemon_families_are_forwardable() {
        assert!(forwardable("partition/0010"));
        assert!(
            forwardable("partition/zzzz"),
            "malformed: refused later by validation"
        );
        assert!(forwardable(&sm_node_key(7)));
        assert!(!forwardable("sweep_interval"));
        assert!(!forwardable("partition"));
    }
}
