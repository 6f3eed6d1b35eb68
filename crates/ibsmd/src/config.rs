//! `ibsmd --config FILE`: every command-line option in a TOML file.
//!
//! Keys are the long option names with `_` for `-` (`--poll-interval-ms` is
//! `poll_interval_ms`); the demo's options sit in a `[demo]` table. The command line
//! overrides the file. Values are validated while the file is parsed, so a wrong value
//! is reported with its line and column exactly like a syntax error, and an unknown
//! key is an error too (a typo must not silently fall back to a default).
//! `deploy/ibsmd.toml` documents every key; a test parses it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ibsm_core::election::SmKeyPolicy;
use ibsm_transport::FabricSpec;
use serde::{Deserialize, Deserializer};

/// How the daemon writes its log lines (`--log-format`, key `log_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (the default).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`), for log
    /// pipelines.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<LogFormat, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("log format {other:?}: expected text or json")),
        }
    }
}

/// Why the config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be read.
    #[error("config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// It is not valid TOML or a value is wrong (the message has line and column).
    #[error("config {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message, with the line, a caret under the culprit and why.
        message: String,
        /// 1-based line of the error, when known.
        line: Option<usize>,
    },
}

/// Why a `--guid2lid` file was refused.
#[derive(Debug, thiserror::Error)]
pub enum Guid2LidFileError {
    /// It could not be read.
    #[error("--guid2lid {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not `0x<port guid> <min lid> <max lid>` with a valid LID block.
    #[error("--guid2lid {}: line {}: {}", path.display(), source.line, source.kind)]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line and why.
        source: ibsm_fabric::lid::Guid2LidError,
    },
}

/// Read and check an OpenSM guid2lid file (`--guid2lid`, `guid2lid`): every line
/// `0x<port guid> <min lid> <max lid>` (hex or decimal LIDs, `#` comments), unicast,
/// 2^LMC-aligned, no GUID twice, no overlap. Returns the text for
/// `InstanceConfig::guid2lid_seed` and the number of ports it lists.
pub fn load_guid2lid(path: &Path) -> Result<(String, usize), Guid2LidFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| Guid2LidFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut check = ibsm_fabric::lid::LidManager::default();
    let ports = check
        .import_guid2lid(&text)
        .map_err(|source| Guid2LidFileError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    Ok((text, ports))
}

/// The daemon's settings from a file; `None` where the file says nothing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `--fabric`.
    #[serde(default, deserialize_with = "de_fabric")]
    pub fabric: Option<FabricSpec>,
    /// `--priority`.
    #[serde(default, deserialize_with = "de_priority")]
    pub priority: Option<u8>,
    /// `--sm-key`.
    #[serde(default, deserialize_with = "de_sm_key")]
    pub sm_key: Option<u64>,
    /// `--poll-interval-ms`.
    #[serde(default, deserialize_with = "de_poll_interval")]
    pub poll_interval_ms: Option<u64>,
    /// `--repoll-interval-ms`.
    #[serde(default, deserialize_with = "de_repoll_interval")]
    pub repoll_interval_ms: Option<u64>,
    /// `--poll-retries`.
    #[serde(default, deserialize_with = "de_poll_retries")]
    pub poll_retries: Option<u32>,
    /// `--masterless-takeover-ms` (0: never take over from a higher-priority standby).
    #[serde(default, deserialize_with = "de_masterless_takeover")]
    pub masterless_takeover_ms: Option<u64>,
    /// `--grpc`.
    #[serde(default, deserialize_with = "de_addr")]
    pub grpc: Option<SocketAddr>,
    /// `--metrics`.
    #[serde(default, deserialize_with = "de_addr")]
    pub metrics: Option<SocketAddr>,
    /// `--web`: the web console's address.
    #[serde(default, deserialize_with = "de_addr")]
    pub web: Option<SocketAddr>,
    /// `--log-format` (for the daemon and the demo).
    #[serde(default)]
    pub log_format: Option<LogFormat>,
    /// `--data-dir`.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// `--node-id`: this instance's id in the replication cluster.
    #[serde(default, deserialize_with = "de_node_id")]
    pub node_id: Option<u64>,
    /// `--peer ID=ADDR`, repeated: the first replication cluster, this node included.
    #[serde(default, deserialize_with = "de_peers")]
    pub peers: Option<Vec<ibsm_replica::PeerArg>>,
    /// `--auth-token-file`.
    #[serde(default)]
    pub auth_token_file: Option<PathBuf>,
    /// `--read-only-token-file`.
    #[serde(default)]
    pub read_only_token_file: Option<PathBuf>,
    /// `--read-only-client-name`, as an array of strings (certificate names that are read-only).
    #[serde(default)]
    pub read_only_client_name: Option<Vec<String>>,
    /// `--cluster-secret-file`.
    #[serde(default)]
    pub cluster_secret_file: Option<PathBuf>,
    /// `--force-bootstrap`.
    #[serde(default)]
    pub force_bootstrap: Option<bool>,
    /// `--tls-cert`.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key`.
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// `--tls-client-ca`.
    #[serde(default)]
    pub tls_client_ca: Option<PathBuf>,
    /// `--insecure-plaintext`.
    #[serde(default)]
    pub insecure_plaintext: Option<bool>,
    /// `--lmc`.
    #[serde(default)]
    pub lmc: Option<u8>,
    /// `--routing` (`minhop` or `updown`).
    #[serde(default, deserialize_with = "de_routing")]
    pub routing: Option<String>,
    /// `--root-guid`, as an array of strings.
    #[serde(default)]
    pub root_guid: Option<Vec<String>>,
    /// `--sweep-interval-s`.
    #[serde(default)]
    pub sweep_interval_s: Option<u64>,
    /// `--heavy-sweep-interval-s` (0..=86400; 0 = only on change).
    #[serde(default, deserialize_with = "de_heavy_sweep_interval")]
    pub heavy_sweep_interval_s: Option<u64>,
    /// `--partition`, as an array of `NAME=PKEY[,ipoib,...]:GUID[:full|limited],...` strings.
    #[serde(default, deserialize_with = "de_partitions")]
    pub partition: Option<Vec<String>>,
    /// `--partitions-file`: OpenSM's partitions.conf (not with `partition`).
    pub partitions_file: Option<PathBuf>,
    /// `--smp-window`.
    #[serde(default)]
    pub smp_window: Option<u64>,
    /// `--m-key`: M_Key programmed on every port and carried by every SMP (OpenSM's
    /// `m_key`; decimal, or a `"0x..."` string for large keys).
    #[serde(default, deserialize_with = "de_m_key")]
    pub m_key: Option<u64>,
    /// `--m-key-protection-level` (0..=3; OpenSM's `m_key_protection_level`).
    #[serde(default, deserialize_with = "de_m_key_protection_level")]
    pub m_key_protection_level: Option<u8>,
    /// `--m-key-lease-period` in seconds (0..=65535, 0 = never; OpenSM's `m_key_lease_period`).
    #[serde(default, deserialize_with = "de_m_key_lease_period")]
    pub m_key_lease_period: Option<u16>,
    /// `--trap-sweep-hold-down-ms` (0..=600000).
    #[serde(default, deserialize_with = "de_hold_down")]
    pub trap_sweep_hold_down_ms: Option<u64>,
    /// `--max-nodes` (1..=1048576).
    #[serde(default, deserialize_with = "de_max_nodes")]
    pub max_nodes: Option<u64>,
    /// `--trusted-sm-guid`, as an array of port GUIDs (`"0x..."` strings or decimal
    /// strings): when given, only these SMs (and this one) are followed, handed over
    /// to, obeyed and told our SM_Key.
    #[serde(default, deserialize_with = "de_trusted_sm_guids")]
    pub trusted_sm_guids: Option<Vec<u64>>,
    /// `--sticky-priority` (0..=15): the priority advertised while MASTER.
    #[serde(default, deserialize_with = "de_sticky_priority")]
    pub sticky_priority: Option<u8>,
    /// `--hung-master-window-ms` (0..=3600000; 0 = never).
    #[serde(default, deserialize_with = "de_hung_master_window")]
    pub hung_master_window_ms: Option<u64>,
    /// `--leader-heartbeat-grace-ms` (0..=60000; 0 = heartbeats not consulted).
    #[serde(default, deserialize_with = "de_leader_heartbeat_grace")]
    pub leader_heartbeat_grace_ms: Option<u64>,
    /// `--sm-key-policy`: `"strict"`, `"allow-zero"` or `"off"`.
    #[serde(default, deserialize_with = "de_sm_key_policy")]
    pub sm_key_policy: Option<SmKeyPolicy>,
    /// `partition_enforcement = false` is `--no-partition-enforcement`.
    #[serde(default)]
    pub partition_enforcement: Option<bool>,
    /// `sminfo_answer_thread = false` is `--no-sminfo-answer-thread`.
    #[serde(default)]
    pub sminfo_answer_thread: Option<bool>,
    /// `--guid2lid`: an OpenSM guid2lid file a first master assigns LIDs from.
    #[serde(default)]
    pub guid2lid: Option<PathBuf>,
    /// `ibsmd demo` options.
    #[serde(default)]
    pub demo: DemoFileConfig,
}

/// The `[demo]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoFileConfig {
    /// `demo --fabric`.
    #[serde(default, deserialize_with = "de_fabric")]
    pub fabric: Option<FabricSpec>,
    /// `demo --base-port`.
    #[serde(default)]
    pub base_port: Option<u16>,
    /// `demo --metrics`.
    #[serde(default, deserialize_with = "de_addr")]
    pub metrics: Option<SocketAddr>,
    /// `demo --web`.
    #[serde(default, deserialize_with = "de_addr")]
    pub web: Option<SocketAddr>,
    /// `demo --no-web`.
    #[serde(default)]
    pub no_web: bool,
    /// `demo --auth-token-file`.
    #[serde(default)]
    pub auth_token_file: Option<PathBuf>,
    /// `demo --read-only-token-file`.
    #[serde(default)]
    pub read_only_token_file: Option<PathBuf>,
    /// `demo --data-dir`.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
}

fn de_node_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "node_id", 1, i64::MAX as u64).map(Some)
}

fn de_peers<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<ibsm_replica::PeerArg>>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    v.iter()
        .map(|p| p.parse::<ibsm_replica::PeerArg>())
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn de_trusted_sm_guids<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u64>>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    v.iter()
        .map(|g| parse_sm_guid(g))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Parse an SM's port GUID for `--trusted-sm-guid` / `trusted_sm_guids`: decimal or
/// `0x` hex, not 0.
pub fn parse_sm_guid(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse(),
    };
    match r {
        Ok(0) => Err(format!(
            "trusted SM port GUID {s:?} is 0, which is no port GUID"
        )),
        Ok(g) => Ok(g),
        Err(e) => Err(format!(
            "trusted SM port GUID {s:?} is not a 64-bit number, decimal or 0x hex ({e})"
        )),
    }
}

fn de_fabric<'de, D: Deserializer<'de>>(d: D) -> Result<Option<FabricSpec>, D::Error> {
    let s = String::deserialize(d)?;
    FabricSpec::parse(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn de_range<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    lo: u64,
    hi: u64,
) -> Result<u64, D::Error> {
    let v = i64::deserialize(d)?;
    u64::try_from(v)
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or_else(|| serde::de::Error::custom(format!("{what} {v} is out of range {lo}..={hi}")))
}

fn de_routing<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    crate::subnet_opts::parse_routing(&s).map_err(serde::de::Error::custom)?;
    Ok(Some(s))
}

fn de_partitions<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    for p in &v {
        crate::subnet_opts::parse_partition(p).map_err(serde::de::Error::custom)?;
    }
    Ok(Some(v))
}

fn de_priority<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    let v = de_range(d, "priority", 0, 15)?;
    u8::try_from(v).map(Some).map_err(serde::de::Error::custom)
}

fn de_sticky_priority<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    let v = de_range(d, "sticky_priority", 0, 15)?;
    u8::try_from(v).map(Some).map_err(serde::de::Error::custom)
}

fn de_hung_master_window<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "hung_master_window_ms", 0, 3_600_000).map(Some)
}

fn de_leader_heartbeat_grace<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "leader_heartbeat_grace_ms", 0, 60_000).map(Some)
}

fn de_sm_key_policy<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SmKeyPolicy>, D::Error> {
    let s = String::deserialize(d)?;
    parse_sm_key_policy(&s)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Parse `--sm-key-policy` / `sm_key_policy`: `strict`, `allow-zero` or `off`.
pub fn parse_sm_key_policy(s: &str) -> Result<SmKeyPolicy, String> {
    match s {
        "strict" => Ok(SmKeyPolicy::Strict),
        "allow-zero" => Ok(SmKeyPolicy::AllowZero),
        "off" => Ok(SmKeyPolicy::Off),
        _ => Err(format!(
            "sm_key_policy {s:?} is not one of strict, allow-zero, off"
        )),
    }
}

/// The name [`parse_sm_key_policy`] reads for `p`.
pub fn sm_key_policy_name(p: SmKeyPolicy) -> &'static str {
    match p {
        SmKeyPolicy::Strict => "strict",
        SmKeyPolicy::AllowZero => "allow-zero",
        SmKeyPolicy::Off => "off",
    }
}

fn de_hold_down<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "trap_sweep_hold_down_ms", 0, 600_000).map(Some)
}

fn de_max_nodes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "max_nodes", 1, 1_048_576).map(Some)
}

fn de_heavy_sweep_interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "heavy_sweep_interval_s", 0, 86_400).map(Some)
}

fn de_poll_interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "poll_interval_ms", 1, 60_000).map(Some)
}

fn de_masterless_takeover<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "masterless_takeover_ms", 0, 600_000).map(Some)
}

fn de_repoll_interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_range(d, "repoll_interval_ms", 1, 60_000).map(Some)
}

fn de_poll_retries<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = de_range(d, "poll_retries", 1, 100)?;
    u32::try_from(v).map(Some).map_err(serde::de::Error::custom)
}

fn de_addr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse()
        .map(Some)
        .map_err(|e| serde::de::Error::custom(format!("{s:?} is not an IP:port address ({e})")))
}

/// Parse an SM_Key: decimal or `0x` hex.
pub fn parse_sm_key(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("SM_Key {s:?} is not a 64-bit number ({e})"))
}

fn de_sm_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Key {
        Int(i64),
        Text(String),
    }
    match Key::deserialize(d)? {
        Key::Int(i) => u64::try_from(i).map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "sm_key {i} is negative; write large keys as a \"0x...\" string"
            ))
        }),
        Key::Text(s) => parse_sm_key(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

/// Parse an M_Key: decimal or `0x` hex, 64 bits.
pub fn parse_m_key(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("M_Key {s:?} is not a 64-bit number ({e})"))
}

fn de_m_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Key {
        Int(i64),
        Text(String),
    }
    match Key::deserialize(d)? {
        Key::Int(i) => u64::try_from(i).map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "m_key {i} is negative; write large keys as a \"0x...\" string"
            ))
        }),
        Key::Text(s) => parse_m_key(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

fn de_m_key_protection_level<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    let v = de_range(d, "m_key_protection_level", 0, 3)?;
    u8::try_from(v).map(Some).map_err(serde::de::Error::custom)
}

fn de_m_key_lease_period<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    let v = de_range(d, "m_key_lease_period", 0, u64::from(u16::MAX))?;
    u16::try_from(v).map(Some).map_err(serde::de::Error::custom)
}

impl FileConfig {
    /// Parse TOML text (`path` is only for messages).
    pub fn parse(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text.get(..s.start).map_or(0, |t| t.matches('\n').count()) + 1);
            ConfigError::Parse {
                path: path.to_path_buf(),
                message: e.to_string().trim_end().to_string(),
                line,
            }
        })
    }

    /// Read and parse a file.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        FileConfig::parse(path, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<FileConfig, ConfigError> {
        FileConfig::parse(Path::new("t.toml"), t)
    }

    #[test]
    fn election_settings_parse_and_bad_ones_name_the_line() {
        let c = parse(
            "sticky_priority = 15\nhung_master_window_ms = 0\nsm_key_policy = \"allow-zero\"\n\
             partition_enforcement = false\n",
        )
        .expect("valid");
        assert_eq!(c.sticky_priority, Some(15));
        assert_eq!(c.hung_master_window_ms, Some(0));
        assert_eq!(c.sm_key_policy, Some(SmKeyPolicy::AllowZero));
        assert_eq!(c.partition_enforcement, Some(false));
        for (text, why, line) in [
            ("priority = 1\nsticky_priority = 16\n", "sticky_priority", 2),
            ("\nhung_master_window_ms = -1\n", "hung_master_window_ms", 2),
            (
                "sm_key_policy = \"lenient\"\n",
                "not one of strict, allow-zero, off",
                1,
            ),
            (
                "partition_enforcement = \"no\"\n",
                "partition_enforcement",
                1,
            ),
        ] {
            match parse(text) {
                Err(ConfigError::Parse {
                    message, line: l, ..
                }) => {
                    assert!(message.contains(why), "{text:?}: {message}");
                    assert_eq!(l, Some(line), "{text:?}: {message}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        for p in [
            SmKeyPolicy::Strict,
            SmKeyPolicy::AllowZero,
            SmKeyPolicy::Off,
        ] {
            assert_eq!(parse_sm_key_policy(sm_key_policy_name(p)), Ok(p));
        }
    }

    #[test]
    fn full_file() {
        let c = parse(
            "fabric = \"gen:fat-tree:4\"\npriority = 7\nsm_key = \"0x10\"\npoll_interval_ms = 250\n\
             poll_retries = 4\ngrpc = \"0.0.0.0:50051\"\nmetrics = \"127.0.0.1:9464\"\n\
             data_dir = \"/var/lib/ibsm\"\nauth_token_file = \"/etc/ibsm/token\"\n\
             insecure_plaintext = false\n[demo]\nbase_port = 6000\n",
        )
        .expect("valid");
        assert_eq!(c.priority, Some(7));
        assert_eq!(c.sm_key, Some(16));
        assert_eq!(c.poll_interval_ms, Some(250));
        assert_eq!(c.demo.base_port, Some(6000));
        assert!(c.fabric.is_some());
        let c = parse("node_id = 2\npeers = [\"1=10.0.0.1:50051\", \"2=10.0.0.2:50051\"]\n")
            .expect("valid");
        assert_eq!(c.node_id, Some(2));
        let peers = c.peers.expect("peers");
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[1].addr, "10.0.0.2:50051");
    }

    #[test]
    fn trusted_sm_guids_parse_and_bad_ones_name_the_line() {
        let c = parse("trusted_sm_guids = [\"0x0002c90300000010\", \"17\"]\n").expect("valid");
        assert_eq!(c.trusted_sm_guids, Some(vec![0x0002_c903_0000_0010, 17]));
        assert_eq!(parse("").expect("valid").trusted_sm_guids, None);
        for (text, needle) in [
            (
                "priority = 1\ntrusted_sm_guids = [\"0xZZ\"]\n",
                "not a 64-bit number",
            ),
            ("priority = 1\ntrusted_sm_guids = [\"0\"]\n", "is 0"),
        ] {
            match parse(text) {
                Err(ConfigError::Parse { message, line, .. }) => {
                    assert_eq!(line, Some(2), "{message}");
                    assert!(message.contains(needle), "{message}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, needle) in [
            ("priority = 3\npriority = 16\n", 2, "duplicate"),
            (
                "fabric = \"gen:fat-tree:4\"\n\npriority = 16\n",
                3,
                "out of range",
            ),
            ("grpc = \"nowhere\"\n", 1, "IP:port"),
            ("prority = 3\n", 1, "unknown field"),
            ("priority = \n", 1, ""),
            ("[demo]\nbase_port = 70000\n", 2, ""),
            ("sm_key = \"0xZZ\"\n", 1, "SM_Key"),
            ("sm_key = -1\n", 1, "negative"),
            ("fabric = \"bogus:1\"\n", 1, ""),
            ("node_id = 0\n", 1, "out of range"),
            ("peers = [\"1=127.0.0.1:1\", \"x=h:2\"]\n", 1, "node id"),
            ("peers = [\"1\"]\n", 1, "ID=HOST:PORT"),
            ("\nheavy_sweep_interval_s = 86401\n", 2, "out of range"),
            ("heavy_sweep_interval_s = -1\n", 1, "out of range"),
            ("m_key = \"0xZZ\"\n", 1, "M_Key"),
            ("\nm_key = -5\n", 2, "negative"),
            ("m_key_protection_level = 4\n", 1, "out of range 0..=3"),
            ("m_key_lease_period = 65536\n", 1, "out of range"),
            ("trap_sweep_hold_down_ms = 600001\n", 1, "out of range"),
            ("\nmax_nodes = 0\n", 2, "out of range"),
        ] {
            match parse(text) {
                Err(ConfigError::Parse {
                    line: Some(l),
                    message,
                    ..
                }) => {
                    assert_eq!(l, line, "{text:?}: {message}");
                    assert!(message.contains(needle), "{text:?}: {message}");
                    assert!(message.contains(&format!("line {line}")), "{message}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn m_key_keys() {
        let c = parse(
            "m_key = \"0xFFFF000000000001\"\nm_key_protection_level = 2\nm_key_lease_period = 60\n",
        )
        .expect("valid");
        assert_eq!(c.m_key, Some(0xFFFF_0000_0000_0001));
        assert_eq!(c.m_key_protection_level, Some(2));
        assert_eq!(c.m_key_lease_period, Some(60));
        assert_eq!(parse("m_key = 17\n").expect("decimal").m_key, Some(17));
        let none = parse("").expect("empty");
        assert_eq!((none.m_key, none.m_key_protection_level), (None, None));
    }

    #[test]
    fn trap_hold_down_and_topology_cap_are_read() {
        let c = parse("trap_sweep_hold_down_ms = 0\nmax_nodes = 100000\n").expect("valid");
        assert_eq!(c.trap_sweep_hold_down_ms, Some(0));
        assert_eq!(c.max_nodes, Some(100_000));
        let c = parse("").expect("empty");
        assert_eq!((c.trap_sweep_hold_down_ms, c.max_nodes), (None, None));
    }

    #[test]
    fn heavy_sweep_interval_zero_means_only_on_change() {
        let c = parse("heavy_sweep_interval_s = 0\n").expect("valid");
        assert_eq!(c.heavy_sweep_interval_s, Some(0));
        let c = parse("heavy_sweep_interval_s = 600\n").expect("valid");
        assert_eq!(c.heavy_sweep_interval_s, Some(600));
        assert_eq!(parse("").expect("empty").heavy_sweep_interval_s, None);
    }

    #[test]
    fn a_guid2lid_file_is_checked_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("guid2lid");
        std::fs::write(
            &good,
            "0x0002c90300000001 0x0011 0x0011\n# c\n0x0002c90300000002 40 41\n",
        )
        .expect("write");
        let (text, ports) = load_guid2lid(&good).expect("valid");
        assert_eq!(ports, 2);
        assert!(text.contains("0x0011"));
        let bad = dir.path().join("bad");
        std::fs::write(
            &bad,
            "0x0002c90300000001 0x0011 0x0011\n0x0002c90300000002 0xc000 0xc000\n",
        )
        .expect("write");
        let e = load_guid2lid(&bad).expect_err("multicast LID").to_string();
        assert!(
            e.contains("line 2") && e.contains("not a unicast range"),
            "{e}"
        );
        assert!(e.contains(&bad.display().to_string()), "{e}");
        let e = load_guid2lid(&dir.path().join("none"))
            .expect_err("missing")
            .to_string();
        assert!(e.starts_with("--guid2lid "), "{e}");
        let c = parse("guid2lid = \"/var/cache/opensm/guid2lid\"\n").expect("valid");
        assert_eq!(
            c.guid2lid,
            Some(PathBuf::from("/var/cache/opensm/guid2lid"))
        );
    }

    #[test]
    fn shipped_example_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/ibsmd.toml");
        let c = FileConfig::load(&path).expect("deploy/ibsmd.toml parses");
        assert!(c.fabric.is_some() && c.priority.is_some());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }
    }
}
