//! The daemon's settings: the command line merged over the config file (`--config`),
//! every value checked and defaulted here, before anything starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ibsm_transport::FabricSpec;
use ibsmd::auth::SecurityOptions;
use ibsmd::config::FileConfig;

use crate::cli::Cli;

/// The daemon's settings after merging the file under the command line.
pub(crate) struct DaemonSettings {
    pub(crate) fabric: FabricSpec,
    pub(crate) priority: u8,
    pub(crate) sm_key: u64,
    pub(crate) poll_interval_ms: u64,
    pub(crate) repoll_interval_ms: u64,
    pub(crate) poll_retries: u32,
    pub(crate) masterless_takeover_ms: u64,
    pub(crate) grpc: SocketAddr,
    pub(crate) metrics: Option<SocketAddr>,
    pub(crate) web: Option<SocketAddr>,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) node_id: Option<u64>,
    pub(crate) peers: Vec<ibsm_replica::PeerArg>,
    pub(crate) security: SecurityOptions,
    pub(crate) cluster_secret_file: Option<PathBuf>,
    pub(crate) force_bootstrap: bool,
    pub(crate) subnet: ibsm_core::subnet::SubnetConfig,
    pub(crate) master_heavy_sweep_interval: Duration,
    pub(crate) trusted_sm_guids: Option<std::collections::BTreeSet<u64>>,
    pub(crate) fault_injection: bool,
    pub(crate) sticky_priority: Option<u8>,
    /// `None`: the default, three light sweeps; `Some(0)`: never.
    pub(crate) hung_master_window_ms: Option<u64>,
    pub(crate) leader_heartbeat_grace_ms: Option<u64>,
    pub(crate) sm_key_policy: ibsm_core::election::SmKeyPolicy,
    /// `--partitions-file`, read again on SIGHUP and `Fabric/ReloadPartitions`.
    pub(crate) partitions_file: Option<PathBuf>,
    pub(crate) guid2lid: Option<Guid2LidSeed>,
    /// `--no-sminfo-answer-thread` / `sminfo_answer_thread` (default true).
    pub(crate) sminfo_answer_thread: bool,
}

/// `--fabric` when neither the command line nor the file names one: the first port
/// whose link is up, as OpenSM picks one without a GUID.
pub(crate) const DEFAULT_FABRIC: &str = "umad";

/// A checked `--guid2lid` file.
pub(crate) struct Guid2LidSeed {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    pub(crate) ports: usize,
}

/// Whole milliseconds of a default interval.
fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn merge(cli: Cli, file: FileConfig) -> Result<DaemonSettings, String> {
    // OpenSM's defaults: the first active local port, priority 0.
    let fabric = match cli.fabric.or(file.fabric) {
        Some(f) => f,
        None => FabricSpec::parse(DEFAULT_FABRIC).map_err(|e| e.to_string())?,
    };
    let priority = cli.priority.or(file.priority).unwrap_or(0);
    // Checked now, before any device or port is opened: a bad line exits 2.
    let guid2lid = match cli.guid2lid.or(file.guid2lid) {
        None => None,
        Some(path) => {
            let (text, ports) = ibsmd::config::load_guid2lid(&path).map_err(|e| e.to_string())?;
            Some(Guid2LidSeed { path, text, ports })
        }
    };
    let partitions_file = cli.partitions_file.or(file.partitions_file);
    let partitions_given =
        !cli.partition.is_empty() || file.partition.as_ref().is_some_and(|p| !p.is_empty());
    if partitions_file.is_some() && partitions_given {
        return Err(
            "--partitions-file (partitions_file) and --partition (partition) both define the start-up partitions: give one of them"
                .into(),
        );
    }
    let subnet = ibsmd::subnet_opts::SubnetOptions {
        lmc: cli.lmc.or(file.lmc),
        routing: cli.routing.or(file.routing),
        root_guids: if cli.root_guid.is_empty() {
            file.root_guid.unwrap_or_default()
        } else {
            cli.root_guid
        },
        sweep_interval_s: cli.sweep_interval_s.or(file.sweep_interval_s),
        partitions: if cli.partition.is_empty() {
            file.partition.unwrap_or_default()
        } else {
            cli.partition
        },
        smp_window: cli
            .smp_window
            .or(file.smp_window)
            .and_then(|w| usize::try_from(w).ok()),
        m_key: cli.m_key.or(file.m_key),
        m_key_protection_level: cli.m_key_protection_level.or(file.m_key_protection_level),
        m_key_lease_period: cli.m_key_lease_period.or(file.m_key_lease_period),
        trap_sweep_hold_down_ms: cli.trap_sweep_hold_down_ms.or(file.trap_sweep_hold_down_ms),
        max_nodes: cli
            .max_nodes
            .or(file.max_nodes)
            .and_then(|n| usize::try_from(n).ok()),
    }
    .to_config()
    .map_err(|e| e.to_string())?;
    let mut subnet = subnet;
    if let Some(path) = &partitions_file {
        let loaded = ibsmd::partitions_file::load(path).map_err(|e| e.to_string())?;
        ibsmd::partitions_file::log_unapplied(path, &loaded);
        subnet.partitions = loaded.partitions;
    }
    if cli.no_partition_enforcement {
        subnet.partition_enforcement = false;
    } else if let Some(on) = file.partition_enforcement {
        subnet.partition_enforcement = on;
    }
    let master_heavy_sweep_interval = cli
        .heavy_sweep_interval_s
        .or(file.heavy_sweep_interval_s)
        .map_or(
            ibsmd::instance::DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL,
            Duration::from_secs,
        );
    let trusted_sm_guids = if cli.trusted_sm_guids.is_empty() {
        file.trusted_sm_guids
    } else {
        Some(cli.trusted_sm_guids)
    };
    Ok(DaemonSettings {
        sminfo_answer_thread: !cli.no_sminfo_answer_thread
            && file.sminfo_answer_thread.unwrap_or(true),
        guid2lid,
        partitions_file,
        sticky_priority: cli.sticky_priority.or(file.sticky_priority),
        hung_master_window_ms: cli.hung_master_window_ms.or(file.hung_master_window_ms),
        leader_heartbeat_grace_ms: cli
            .leader_heartbeat_grace_ms
            .or(file.leader_heartbeat_grace_ms),
        sm_key_policy: cli.sm_key_policy.or(file.sm_key_policy).unwrap_or_default(),
        fault_injection: cli.fault_injection,
        trusted_sm_guids: trusted_sm_guids.map(|v| v.into_iter().collect()),
        subnet,
        master_heavy_sweep_interval,
        fabric,
        priority,
        sm_key: cli.sm_key.or(file.sm_key).unwrap_or(1),
        poll_interval_ms: cli
            .poll_interval_ms
            .or(file.poll_interval_ms)
            .unwrap_or(ms_of(ibsm_core::election::DEFAULT_POLL_INTERVAL)),
        repoll_interval_ms: cli
            .repoll_interval_ms
            .or(file.repoll_interval_ms)
            .unwrap_or(ms_of(ibsm_core::election::DEFAULT_REPOLL_INTERVAL)),
        poll_retries: cli.poll_retries.or(file.poll_retries).unwrap_or(3),
        masterless_takeover_ms: cli
            .masterless_takeover_ms
            .or(file.masterless_takeover_ms)
            .unwrap_or(1000),
        grpc: cli
            .grpc
            .or(file.grpc)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 50051))),
        metrics: cli.metrics.or(file.metrics),
        web: cli.web.or(file.web),
        data_dir: cli.data_dir.or(file.data_dir),
        node_id: cli.node_id.or(cli.node_id_from_ordinal).or(file.node_id),
        peers: if cli.peers.is_empty() {
            file.peers.unwrap_or_default()
        } else {
            cli.peers
        },
        cluster_secret_file: cli.cluster_secret_file.or(file.cluster_secret_file),
        force_bootstrap: cli.force_bootstrap || file.force_bootstrap.unwrap_or(false),
        security: SecurityOptions {
            auth_token_file: cli.auth_token_file.or(file.auth_token_file),
            read_only_token_file: cli.read_only_token_file.or(file.read_only_token_file),
            read_only_client_names: if cli.read_only_client_names.is_empty() {
                file.read_only_client_name.unwrap_or_default()
            } else {
                cli.read_only_client_names
            },
            tls_cert: cli.tls_cert.or(file.tls_cert),
            tls_key: cli.tls_key.or(file.tls_key),
            tls_client_ca: cli.tls_client_ca.or(file.tls_client_ca),
            insecure_plaintext: cli.insecure_plaintext || file.insecure_plaintext.unwrap_or(false),
        },
    })
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    fn settings(args: &[&str], file: &str) -> Result<DaemonSettings, String> {
        let cli = Cli::try_parse_from(std::iter::once("ibsmd").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let file =
            FileConfig::parse(std::path::Path::new("t.toml"), file).map_err(|e| e.to_string())?;
        merge(cli, file)
    }

    #[test]
    fn without_fabric_and_priority_the_defaults_are_opensms() {
        let s = settings(&["--insecure-plaintext"], "").expect("no --fabric, no --priority");
        // `umad`: the first port whose link is up (`ibsm_umad::PortSpec::FirstUp`).
        assert_eq!(format!("{:?}", s.fabric), "Umad(FirstUp)");
        assert_eq!(s.priority, 0);
        assert!(s.guid2lid.is_none());
        // Given ones still win, the command line over the file.
        let s = settings(
            &["--priority", "9"],
            "priority = 3\nfabric = \"gen:fat-tree:4\"\n",
        )
        .expect("valid");
        assert_eq!((s.priority, s.fabric), (9, FabricSpec::FatTree3(4)));
    }

    #[test]
    fn a_guid2lid_file_is_read_and_a_bad_one_refused_with_its_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("guid2lid");
        std::fs::write(&good, "0x0002c90300000001 0x0011 0x0011\n").expect("write");
        let g = good.display().to_string();
        let s = settings(&["--guid2lid", &g], "").expect("valid");
        let seed = s.guid2lid.expect("seed");
        assert_eq!((seed.ports, seed.path), (1, good.clone()));
        let s = settings(&[], &format!("guid2lid = {g:?}\n")).expect("from the file");
        assert_eq!(s.guid2lid.map(|g| g.ports), Some(1));
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "# cache\n0x0002c90300000001 0x0011\n").expect("write");
        let err = settings(&["--guid2lid", &bad.display().to_string()], "")
            .err()
            .expect("refused");
        assert!(
            err.contains(&bad.display().to_string()) && err.contains("line 2"),
            "{err}"
        );
        assert!(err.contains("found 2 field(s)"), "{err}");
    }

    #[test]
    fn every_flag_names_its_opensm_counterpart() {
        let cmd = Cli::command();
        let missing: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
            .filter(|a| {
                let help = a
                    .get_long_help()
                    .or(a.get_help())
                    .map(ToString::to_string)
                    .unwrap_or_default();
                !help.contains("OpenSM")
            })
            .map(|a| a.get_id().to_string())
            .collect();
        assert!(
            missing.is_empty(),
            "flags whose help names no OpenSM option: {missing:?}"
        );
        let help = |id: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_long_help().or(a.get_help()))
                .map(ToString::to_string)
                .unwrap_or_default()
        };
        assert!(help("priority").contains("OpenSM: -p/--priority, sm_priority"));
        assert!(help("guid2lid").contains("honor_guid2lid_file"));
    }
}
