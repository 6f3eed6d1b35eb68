//! The command line: `ibsmd` (one SM), `ibsmd demo` and the internal `sminfo-poll`,
//! as clap parses them. Defaults and checks that need the config file too are in
//! `settings`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use ibsm_transport::FabricSpec;
use ibsmd::config::{parse_m_key, parse_sm_guid, parse_sm_key, LogFormat};

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    s.parse()
}

/// A StatefulSet pod name `NAME-ORDINAL` to the node id `ORDINAL + 1` (node ids start
/// at 1, ordinals at 0).
pub(crate) fn parse_ordinal_node_id(pod: &str) -> Result<u64, String> {
    let ordinal = pod
        .rsplit_once('-')
        .map(|(_, o)| o)
        .filter(|o| !o.is_empty() && o.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            format!("{pod:?} is not a StatefulSet pod name NAME-ORDINAL (e.g. ibsmd-0)")
        })?;
    ordinal
        .parse::<u64>()
        .ok()
        .and_then(|o| o.checked_add(1))
        .filter(|id| *id <= i64::MAX as u64)
        .ok_or_else(|| format!("ordinal {ordinal:?} of {pod:?} is out of range"))
}

#[derive(Debug, Parser)]
#[command(name = "ibsmd", version, args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Option<Cmd>,
    /// TOML file with any of these options (see deploy/ibsmd.toml); the command line wins.
    /// OpenSM: -F/--config (convert an opensm.conf with `ibsmctl import-opensm`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Log lines as `text` (default) or `json` (one object per line, for log pipelines).
    /// OpenSM: none (it writes its own log file, -f).
    #[arg(long, global = true, value_name = "FORMAT", value_parser = parse_log_format)]
    pub(crate) log_format: Option<LogFormat>,
    /// umad[:CA[:PORT]] (kernel or umad2sim) or sim:NETFILE / gen:... (embedded fabric)
    /// [default: umad, the first port whose link is up, as OpenSM picks one]. OpenSM: -g/--guid, guid.
    #[arg(long, value_parser = FabricSpec::parse)]
    pub(crate) fabric: Option<FabricSpec>,
    /// SM priority, 0..=15 (higher wins) [default: 0]. OpenSM: -p/--priority, sm_priority.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=15))]
    pub(crate) priority: Option<u8>,
    /// SM_Key (decimal or 0x hex) [default: 1]. OpenSM: -k/--smkey, sm_key.
    #[arg(long, value_parser = parse_sm_key)]
    pub(crate) sm_key: Option<u64>,
    /// Standby: interval between SMInfo polls of the master [default: 25].
    /// OpenSM: sminfo_polling_timeout (10000 there).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) poll_interval_ms: Option<u64>,
    /// Standby: interval of the quick re-polls after a missed poll [default: 20].
    /// OpenSM: none (it re-polls every sminfo_polling_timeout).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub(crate) repoll_interval_ms: Option<u64>,
    /// Standby: unanswered polls in a row before the master is declared dead [default: 3].
    /// OpenSM: polling_retry_number + 1 (it gives up after 4 retries of the first poll).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) poll_retries: Option<u32>,
    /// Take MASTER when the subnet has had no master this long and the SM that
    /// outranks us still answers STANDBY (an OpenSM polling every 10 s), then hand it
    /// back with HANDOVER once that SM is ready; 0 waits for it however long
    /// (IBA's rule alone) [default: 1000]. OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub(crate) masterless_takeover_ms: Option<u64>,
    /// gRPC control API address [default: 127.0.0.1:50051]. OpenSM: none (its console, console_port).
    #[arg(long)]
    pub(crate) grpc: Option<SocketAddr>,
    /// Serve Prometheus metrics on http://ADDR/metrics (off unless given). OpenSM: none.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics: Option<SocketAddr>,
    /// Serve the web console on http://ADDR/ (off unless given; https:// with the API's
    /// --tls-cert, where a client certificate signed by --tls-client-ca signs the browser
    /// in): the cluster, the fabric and the last hour's timeline, live, under the API's
    /// credentials and roles (read-only ones see no actions). OpenSM: none.
    #[arg(long, value_name = "ADDR")]
    pub(crate) web: Option<SocketAddr>,
    /// State directory (created); with --node-id it holds the replicated fabric state.
    /// OpenSM: its cache dir, OSM_CACHE_DIR (/var/cache/opensm).
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// This instance's id in the replication cluster (Raft on the --grpc port; needs --data-dir). OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) node_id: Option<u64>,
    /// A member of the first replication cluster, ID=HOST:PORT, this node included (repeat).
    /// The lowest id bootstraps it once. Without --peer, --node-id waits for Cluster/AddMember. OpenSM: none.
    #[arg(long = "peer", value_name = "ID=ADDR")]
    pub(crate) peers: Vec<ibsm_replica::PeerArg>,
    /// Take --node-id from a Kubernetes StatefulSet pod name NAME-ORDINAL: node id ORDINAL + 1
    /// (deploy/k8s passes `$(POD_NAME)`, so pod ibsmd-0 is node 1). OpenSM: none.
    #[arg(long, value_name = "POD_NAME", conflicts_with = "node_id", value_parser = parse_ordinal_node_id)]
    pub(crate) node_id_from_ordinal: Option<u64>,
    /// Require `authorization: Bearer <token>` on gRPC calls; FILE holds the token (>= 16 visible ASCII chars). OpenSM: none.
    #[arg(long, value_name = "FILE")]
    pub(crate) auth_token_file: Option<PathBuf>,
    /// A second token (FILE) that may only read: every Get/List/Watch, nothing that changes the fabric or the cluster. OpenSM: none.
    #[arg(long, value_name = "FILE")]
    pub(crate) read_only_token_file: Option<PathBuf>,
    /// Client certificates whose subject CN or a DNS name is NAME are read-only (repeatable; needs mutual TLS). OpenSM: none.
    #[arg(long = "read-only-client-name", value_name = "NAME")]
    pub(crate) read_only_client_names: Vec<String>,
    /// The replication cluster's secret (FILE, >= 16 visible ASCII chars, never the control token): every Raft RPC carries it. With --node-id, this or mutual TLS is required. OpenSM: none.
    #[arg(long, value_name = "FILE")]
    pub(crate) cluster_secret_file: Option<PathBuf>,
    /// Bootstrap a new replication cluster even though --data-dir says it was a member of one (its store was lost). Use once, then drop it. OpenSM: none.
    #[arg(long)]
    pub(crate) force_bootstrap: bool,
    /// TLS certificate chain (PEM) of this server. OpenSM: none.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of this server. OpenSM: none.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// CA (PEM) that client certificates must chain to: mutual TLS. OpenSM: none.
    #[arg(long, value_name = "FILE")]
    pub(crate) tls_client_ca: Option<PathBuf>,
    /// Run the gRPC API with no authentication at all (loud warning at start). OpenSM: none.
    #[arg(long)]
    pub(crate) insecure_plaintext: bool,
    /// Test facility, never for production: let an admin cut and heal this member's Raft
    /// traffic through ibsm.v1.FaultInjection/SetRaftIsolation; needs replication
    /// (--node-id). The demo on ibsim starts its members with it for its Raft drills. OpenSM: none.
    #[arg(long)]
    pub(crate) fault_injection: bool,
    /// Master: LMC, 2^LMC LIDs per end port, 0..=7 [default: 0]. OpenSM: -l/--lmc, lmc.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub(crate) lmc: Option<u8>,
    /// Master: M_Key programmed on every port and carried on every SMP (decimal or 0x hex) [default: 0 = none]. OpenSM: m_key.
    #[arg(long, value_parser = parse_m_key)]
    pub(crate) m_key: Option<u64>,
    /// Master: M_KeyProtectBits 0..=3 (1 hides the key from Gets, 2 refuses Gets without it) [default: 0]. OpenSM: m_key_protection_level.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub(crate) m_key_protection_level: Option<u8>,
    /// Master: M_KeyLeasePeriod in seconds, 0 = protection never lapses [default: 0]. OpenSM: m_key_lease_period.
    #[arg(long, value_parser = clap::value_parser!(u16))]
    pub(crate) m_key_lease_period: Option<u16>,
    /// Master: routing engine, minhop or updown [default: minhop]. OpenSM: -R/--routing_engine, routing_engine (updn is updown).
    #[arg(long)]
    pub(crate) routing: Option<String>,
    /// Master: up/down root switch NodeGUID (repeatable; default: found automatically).
    /// OpenSM: -a/--root_guid_file, root_guid_file (a file of these GUIDs).
    #[arg(long, value_name = "GUID")]
    pub(crate) root_guid: Vec<String>,
    /// Master: seconds between light sweeps [default: 2]. OpenSM: -s/--sweep, sweep_interval.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) sweep_interval_s: Option<u64>,
    /// Master: seconds between periodic heavy sweeps, 0 = only on change (traps, a light sweep that sees one) [default: 60].
    /// OpenSM: none (force_heavy_sweep TRUE makes every sweep heavy).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub(crate) heavy_sweep_interval_s: Option<u64>,
    /// Master: partition NAME=PKEY[,ipoib[,rate=R,mtu=M,sl=S,scope=C,Q_Key=Q]]:GUID[:full|limited],... (repeatable; ipoib: the partition's IPoIB broadcast group, as in OpenSM's partitions.conf).
    /// OpenSM: one partition of -P/--Pconfig, partition_config_file.
    #[arg(long, value_name = "SPEC")]
    pub(crate) partition: Vec<String>,
    /// Master: OpenSM's partitions.conf (the whole grammar of opensm(8)); read again on SIGHUP and by `ibsmctl partitions reload`. Not with --partition. OpenSM: -P/--Pconfig, partition_config_file.
    #[arg(long, value_name = "FILE")]
    pub(crate) partitions_file: Option<std::path::PathBuf>,
    /// Master: SMPs kept in flight, 1..=1024 [default: 64]. OpenSM: -n/--maxsmps, max_wire_smps (4 there).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) smp_window: Option<u64>,
    /// Master: a trap-triggered heavy sweep waits this long after the last one ended, 0 = no hold-down [default: 1000]. OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub(crate) trap_sweep_hold_down_ms: Option<u64>,
    /// Master: topology cap, nodes one discovery records before it stops growing [default: 65536]. OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub(crate) max_nodes: Option<u64>,
    /// Trust only these SMs (port GUID, repeatable; this SM's own port is always trusted):
    /// any other is never followed nor handed over to, and reads SM_Key 0 [default: trust all]. OpenSM: none.
    #[arg(long = "trusted-sm-guid", value_name = "GUID", value_parser = parse_sm_guid)]
    pub(crate) trusted_sm_guids: Vec<u64>,
    /// Sticky mastership: on becoming MASTER, advertise this priority (0..=15) until we stop being
    /// master, so a returning higher-priority SM does not take the subnet back (OPA FM's
    /// elevated priority) [default: off]. OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=15))]
    pub(crate) sticky_priority: Option<u8>,
    /// Standby: declare a master lost when it answers SMInfo but its ActCount has not moved
    /// for this long (a hung master), 0 = never [default: three light sweeps, 6000]. OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub(crate) hung_master_window_ms: Option<u64>,
    /// Standby with replication: after its SMInfo polls of the master went unanswered, keep
    /// re-polling for up to this long while the master is the Raft leader and its heartbeat
    /// reached us within 75 ms (a busy master is alive; a killed one sends no heartbeat), 0 =
    /// polls alone decide [default: 1000]. OpenSM: none.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub(crate) leader_heartbeat_grace_ms: Option<u64>,
    /// How the SM_Key of incoming SMInfo control packets is checked: strict (ours only; zero
    /// only in a HANDOVER from our own master, as OpenSM before 3.3.21 sends), allow-zero, off [default: strict]. OpenSM: none.
    #[arg(long, value_parser = ibsmd::config::parse_sm_key_policy)]
    pub(crate) sm_key_policy: Option<ibsm_core::election::SmKeyPolicy>,
    /// Master: do not make switch ports facing CAs enforce partitions [default: enforce].
    /// OpenSM: -N/--no_part_enforce, no_partition_enforcement TRUE (part_enforce off).
    #[arg(long)]
    pub(crate) no_partition_enforcement: bool,
    /// Answer other SMs' SMInfo polls only in the SM thread's turn, so a poll waits for
    /// the SM's current step (a sweep's end, a routing result) [default: answered as read,
    /// and by a stand-in reader while the SM thread is busy]. For comparison runs
    /// (bench/detection.sh). OpenSM: none.
    #[arg(long)]
    pub(crate) no_sminfo_answer_thread: bool,
    /// Master: LIDs to start from, an OpenSM guid2lid file (`0x<port guid> <min lid> <max lid>`
    /// a line, e.g. /var/cache/opensm/guid2lid): the first master of a cluster gives every
    /// listed port exactly its LIDs, so ibsmd replacing an OpenSM master moves none. Used only
    /// while the replica holds no LID assignment (then ignored: the replica is authoritative).
    /// Checked at start: a bad line exits 2. OpenSM: -x/--honor_guid2lid, honor_guid2lid_file.
    #[arg(long, value_name = "FILE")]
    pub(crate) guid2lid: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Three SM instances on one embedded fabric (or on ibsim: --fabric ibsim:NETFILE), gRPC on base-port..base-port+2 (loopback, plaintext unless --auth-token-file).
    Demo {
        /// TOML file; its [demo] table holds these options.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// gen:fat-tree:K, gen:fat-tree2:K, gen:random:SEED or sim:NETFILE (the embedded fabric, one process) [default: gen:fat-tree:4];
        /// or ibsim:NETFILE: ibsim on NETFILE and, under umad2sim, three `ibsmd --fabric umad` processes
        /// on three HCAs plus an SMInfo poller process on a fourth; the Demo service (drills) then listens
        /// on base-port+3, printed first (needs ibsim-utils; Ctrl-C stops everything).
        #[arg(long, value_parser = parse_demo_fabric)]
        fabric: Option<DemoFabric>,
        /// First gRPC port [default: 50051].
        #[arg(long)]
        base_port: Option<u16>,
        /// Serve Prometheus metrics of all three instances on http://ADDR/metrics.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Web console address [default: 127.0.0.1:8080, or a free port when that one is taken].
        #[arg(long, value_name = "ADDR", conflicts_with = "no_web")]
        web: Option<SocketAddr>,
        /// Do not serve the web console.
        #[arg(long)]
        no_web: bool,
        /// Require a bearer token on the demo's endpoints (and its web console) too.
        #[arg(long, value_name = "FILE")]
        auth_token_file: Option<PathBuf>,
        /// A second token that may only read (Get/List/Watch; no actions in the console).
        #[arg(long, value_name = "FILE", requires = "auth_token_file")]
        read_only_token_file: Option<PathBuf>,
        /// Where the three replicas live (sm1/ sm2/ sm3/ under it) [default: a temp dir removed at exit].
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// The judge of a drill against a deployed cluster: read every SM port's SMInfo by directed
    /// route every 10 ms from this host's HCA port and serve what it sees (and LIDs read with
    /// ibnetdiscover here) to `ibsmctl drill --judge ADDR`. Acts on nothing. OpenSM: none.
    Judge {
        /// umad[:CA[:PORT]]: this host's port.
        #[arg(long, default_value = "umad", value_parser = FabricSpec::parse)]
        fabric: FabricSpec,
        /// Where to serve (gRPC, the read-only part of ibsm.demo.v1.Demo).
        #[arg(long, value_name = "ADDR")]
        listen: SocketAddr,
        /// NAME=P1,P2,...: an SM port's name and directed route from here (egress ports, ours
        /// first, as `sminfo -D`/`smpquery -D` take them). Repeat per SM.
        #[arg(long = "target", value_name = "NAME=PATH", value_parser = ibsm_demo::ibsim::parse_target, required = true)]
        targets: Vec<(String, Vec<u8>)>,
        /// Bearer token callers must present (as for the API).
        #[arg(long, value_name = "FILE")]
        auth_token_file: Option<PathBuf>,
        /// A second token that may only read (every judge method reads).
        #[arg(long, value_name = "FILE")]
        read_only_token_file: Option<PathBuf>,
        /// Serve with no authentication.
        #[arg(long)]
        insecure_plaintext: bool,
    },
    /// Internal (ibsmd demo --fabric ibsim:): read SM ports' SMInfo by directed route every 10 ms
    /// from this umad port and print one JSON line per change on stdout.
    #[command(hide = true)]
    SminfoPoll {
        /// umad[:CA[:PORT]] (run under umad2sim with SIM_HOST for ibsim).
        #[arg(long, default_value = "umad", value_parser = FabricSpec::parse)]
        fabric: FabricSpec,
        /// NAME=P1,P2,...: an SM port's name and directed route (egress ports, ours first). Repeat.
        #[arg(long = "target", value_name = "NAME=PATH", value_parser = ibsm_demo::ibsim::parse_target, required = true)]
        targets: Vec<(String, Vec<u8>)>,
    },
    /// Print a shell completion script (e.g. `ibsmd completions bash > /usr/share/bash-completion/completions/ibsmd`).
    Completions {
        /// bash, zsh, fish (also elvish, powershell).
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Packaging: write the man pages generated from these definitions (ibsmd.1 and one
    /// page per subcommand, ibsmd-demo.1, ...) into DIR (deploy/debian/build.sh runs it).
    #[command(hide = true)]
    Man {
        /// Output directory (created).
        dir: PathBuf,
    },
}

/// What `ibsmd demo --fabric` names.
#[derive(Debug, Clone)]
pub(crate) enum DemoFabric {
    /// The embedded simulator (one process).
    Embedded(FabricSpec),
    /// ibsim on this net file, members as processes under umad2sim.
    Ibsim(PathBuf),
}

fn parse_demo_fabric(s: &str) -> Result<DemoFabric, String> {
    match s.strip_prefix(ibsm_demo::ibsim::IBSIM_PREFIX) {
        Some("") => Err("ibsim:NETFILE needs a net file".into()),
        Some(path) => Ok(DemoFabric::Ibsim(PathBuf::from(path))),
        None => FabricSpec::parse(s)
            .map(DemoFabric::Embedded)
            .map_err(|e| e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statefulset_pod_names_give_ordinal_plus_one() {
        assert_eq!(parse_ordinal_node_id("ibsmd-0"), Ok(1));
        assert_eq!(parse_ordinal_node_id("my-sm-set-12"), Ok(13));
        for bad in ["ibsmd", "ibsmd-", "ibsmd-x", "ibsmd-+1", "-", ""] {
            let e = parse_ordinal_node_id(bad).expect_err(bad);
            assert!(e.contains("NAME-ORDINAL"), "{bad}: {e}");
        }
        let e = parse_ordinal_node_id("s-99999999999999999999").expect_err("overflow");
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn node_id_from_ordinal_reaches_the_settings_and_conflicts_with_node_id() {
        let cli =
            Cli::try_parse_from(["ibsmd", "--node-id-from-ordinal", "ibsmd-2"]).expect("parses");
        assert_eq!(cli.node_id_from_ordinal, Some(3));
        let s = crate::settings::merge(cli, ibsmd::config::FileConfig::default()).expect("merge");
        assert_eq!(s.node_id, Some(3));
        assert!(Cli::try_parse_from([
            "ibsmd",
            "--node-id",
            "1",
            "--node-id-from-ordinal",
            "ibsmd-0"
        ])
        .is_err());
    }
}
