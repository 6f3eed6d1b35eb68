//! ibsmctl: the ibsm command-line tool.
//!
//! Two families of commands:
//! - `discover --fabric <spec>` walks a fabric by directed route itself (embedded
//!   simulator `sim:NETFILE`, `gen:fat-tree:K`, ..., or a umad port, also under
//!   ibsim's umad2sim) and prints what it found. No daemon involved.
//! - `status`, `sms`, `set-priority`, `handover`, `step-down`, `control`, `sweep`, `watch` talk to
//!   an ibsmd over its gRPC control API (`ibsm.v1.Control`) at `--endpoint`
//!   (default `http://127.0.0.1:50051`, or `$IBSM_ENDPOINT`).
//!
//! Credentials: ibsmd serves only with a bearer token or mutual TLS (unless it runs
//! `--insecure-plaintext`): give `--token-file FILE` (or `$IBSM_TOKEN_FILE`), and for
//! an `https://` endpoint `--ca-cert`, plus `--client-cert/--client-key` for mTLS.
//! A refused call (`UNAUTHENTICATED`) exits 1 with a hint.
//!
//! - `topology`, `lids`, `route SRC DST`, `partitions [set ... [--ipoib [rate=..,mtu=..]]|delete PKEY]` use `ibsm.v1.Fabric`
//!   (what the master configured; a standby answers from its replica), `groups`,
//!   `services` and `subscriptions` list the SA's tables the same way ([`sa_lists`]),
//!   `members [add
//!   ID ADDR | remove ID]` uses `ibsm.v1.Cluster` ([`fabric`]).
//! - `sa ...` is a Subnet Administration client of its own on a umad port
//!   (`--fabric umad[:CA[:PORT]]`): every record type as whole tables, joins and
//!   leaves, services, subscriptions, a load mode ([`sa`]). No daemon involved.
//! - `import-opensm [opensm.conf]` converts an OpenSM configuration into ibsmd's
//!   config file, listing what does not map and why ([`import_opensm`]). No daemon.
//! - `drill SCENARIO` repeats a failover against `ibsmd demo`, judged by the demo's
//!   fabric-side SMInfo poller, or a deployed cluster (`--members`), judged by the
//!   members' own fabric view (each SM's last SMInfo answer, dated by its age) and
//!   optionally `ibsmd judge` beside it (`--judge`) ([`drill`]); it exits 5
//!   when an invariant breaks (a LID changed, no new master, two masters).
//!
//! Every command prints a human table by default and JSON with `--json` (GUIDs as
//! `"0x%016x"` strings, SM states by their IBA names; see `render`).
//!
//! Exit codes are a contract for scripts: 0 ok; 2 usage or invalid argument (clap's
//! own code, our local validation such as priority 0-15, a bad `--fabric`, and the
//! server's `INVALID_ARGUMENT`/`OUT_OF_RANGE`); 3 cannot connect or `UNAVAILABLE`;
//! 4 `FAILED_PRECONDITION` (e.g. handover asked of a non-master); 1 anything else.
//! Values are validated locally before any RPC, so a typo never reaches the SM.
//!
//! The gRPC commands run on a current-thread tokio runtime built only for them;
//! `discover` stays synchronous (umad2sim's fake descriptors cannot be polled by
//! epoll anyway).

mod args;
mod control;
mod discover;
mod drill;
mod fabric;
mod import_opensm;
mod render;
mod sa;
mod sa_lists;
mod sa_status;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

use crate::args::UsageError;
use crate::control::{CtlError, Packet, Request, Target};

/// Default gRPC endpoint of ibsmd (the first instance of `ibsmd demo`).
const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:50051";

#[derive(Parser, Debug)]
#[command(
    name = "ibsmctl",
    version,
    about = "Control and inspect the ibsm InfiniBand subnet manager"
)]
struct Cli {
    /// gRPC endpoint of ibsmd (http://host:port, or host:port).
    #[arg(long, global = true, env = "IBSM_ENDPOINT", default_value = DEFAULT_ENDPOINT)]
    endpoint: String,
    /// Print JSON instead of tables (one object per line for `watch`).
    #[arg(long, global = true)]
    json: bool,
    /// Deadline for each RPC, in milliseconds.
    #[arg(long, global = true, default_value_t = 10_000, value_name = "MS")]
    rpc_timeout_ms: u64,
    /// File holding ibsmd's bearer token (see ibsmd --auth-token-file).
    #[arg(long, global = true, env = "IBSM_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// CA certificate (PEM) of an https:// endpoint.
    #[arg(long, global = true, env = "IBSM_CA_CERT", value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, global = true, value_name = "FILE", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// Client key (PEM) for mutual TLS.
    #[arg(long, global = true, value_name = "FILE", requires = "client_cert")]
    client_key: Option<PathBuf>,
    /// DNS name expected in the server's certificate (default: the endpoint's host).
    #[arg(long, global = true, value_name = "NAME")]
    tls_domain: Option<String>,
    /// Deadline for connecting to the endpoint, in milliseconds.
    #[arg(long, global = true, default_value_t = 3_000, value_name = "MS")]
    connect_timeout_ms: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Discover a fabric by directed route and print its size (no daemon needed).
    Discover {
        /// sim:NETFILE | gen:fat-tree:K | gen:fat-tree2:K | gen:random:SEED | umad[:CA[:PORT]]
        #[arg(long)]
        fabric: String,
        /// Also write the discovered topology as an ibnetdiscover-format net file.
        #[arg(long, value_name = "FILE")]
        write_net: Option<PathBuf>,
        /// MADs kept in flight.
        #[arg(long, default_value_t = 16)]
        window: usize,
        /// Per-MAD timeout in milliseconds.
        #[arg(long, default_value_t = 200)]
        timeout_ms: u64,
        /// Retries per MAD before a node counts as unreachable.
        #[arg(long, default_value_t = 3)]
        retries: u32,
    },
    /// This ibsmd instance: GUID, SM state, priority, ActCount, master, epoch.
    Status,
    /// Every SM the instance has seen on the fabric, with its last SMInfo.
    Sms,
    /// Change the instance's SM priority (0-15) at run time.
    SetPriority {
        /// New priority, 0-15 (SMInfo.Priority is 4 bits).
        #[arg(value_parser = args::parse_priority, allow_hyphen_values = true)]
        priority: u8,
    },
    /// Planned move of mastership (this instance must be MASTER).
    Handover {
        /// Port GUID of the SM to hand over to (0x-hex or decimal); default: the best standby.
        #[arg(long, value_parser = args::parse_guid)]
        to: Option<u64>,
    },
    /// Make the MASTER yield for a while: it advertises priority 0 and hands over to the
    /// best caught-up standby; its priority comes back when the hold ends.
    StepDown {
        /// How long it stays at priority 0, in seconds (up to 3600).
        #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
        hold_s: f64,
    },
    /// Send an SMInfo control packet (DISABLE, STANDBY or DISCOVER) to another SM.
    Control {
        /// The control packet.
        #[arg(value_enum)]
        packet: Packet,
        /// Port GUID of the SM to send it to (0x-hex or decimal).
        #[arg(value_parser = args::parse_nonzero_guid)]
        guid: u64,
    },
    /// Ask the master for a light (PortInfo probe) or heavy (full discovery) sweep.
    Sweep {
        /// Full directed-route discovery instead of a light sweep.
        #[arg(long)]
        heavy: bool,
    },
    /// Stream events (state transitions, sweeps, traps, handovers) until interrupted.
    Watch {
        /// Stop after this many events.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
    },
    /// Nodes, switches, CAs and links, and every node with GUID, type, LID(s), ports (master's last sweep, or the replica).
    Topology,
    /// Port GUID -> base LID and LMC, as the master assigned them (or the replica).
    /// `--format guid2lid` prints OpenSM's guid2lid cache file (for /var/cache/opensm/guid2lid:
    /// an OpenSM with honor_guid2lid_file TRUE then keeps every LID).
    Lids {
        /// text (a table), json (as --json) or guid2lid (OpenSM's cache file).
        #[arg(long, value_enum, default_value_t = fabric::LidsFormat::Text)]
        format: fabric::LidsFormat,
    },
    /// The hops a packet from SRC to DST LID takes through the programmed LFTs.
    Route {
        /// Source LID (decimal or 0x-hex).
        #[arg(value_parser = fabric::parse_lid)]
        src: u16,
        /// Destination LID.
        #[arg(value_parser = fabric::parse_lid)]
        dst: u16,
    },
    /// The SA's multicast groups with their MLIDs and members (a standby answers from
    /// its replica).
    Groups,
    /// The SA's registered ServiceRecords (a standby answers from its replica).
    Services,
    /// The SA's InformInfo subscriptions (a standby answers from its replica).
    Subscriptions,
    /// List partitions, `set NAME PKEY GUID[:full|limited],...`, or `delete PKEY`.
    Partitions {
        #[command(subcommand)]
        action: Option<PartitionCmd>,
    },
    /// Replication cluster members: list, `add ID ADDR`, `remove ID`.
    Members {
        #[command(subcommand)]
        action: Option<MemberCmd>,
    },
    /// Repeat a failover scenario against `ibsmd demo` or a deployed cluster (--members)
    /// and report what the fabric saw (exit 5 when an invariant breaks: a LID changed, no
    /// new master, two masters).
    ///
    /// Judges and LIDs: the demo is judged by its SMInfo poller, LIDs from the SMs'
    /// GetLids. A deployed cluster is judged by the members' own fabric view (GetStatus
    /// and ListSms of every member every 25 ms; a member whose API is silent keeps the
    /// state the others last saw it answer SMInfo, dated by their answered_ms_ago), its
    /// LIDs read on the wire: the master's heavy sweep (Control/Sweep) reads every port's
    /// PortInfo and Fabric/GetTopology's read_lid gives that LID as read. With --judge,
    /// `ibsmd judge` judges beside it (its SMInfo poller, LIDs by its ibnetdiscover -p),
    /// and the report says where the two views disagree.
    Drill {
        /// The scenario.
        #[arg(value_enum)]
        scenario: drill::Scenario,
        /// How many times.
        #[arg(long, default_value_t = 3)]
        cycles: u32,
        /// Start `ibsmd demo --base-port 0` for the drill (else --endpoint names any member of an embedded demo, or the Demo service endpoint of a demo on ibsim).
        #[arg(long)]
        start_demo: bool,
        /// The ibsmd binary for --start-demo (default: next to ibsmctl, else $PATH).
        #[arg(long, value_name = "PATH")]
        ibsmd: Option<PathBuf>,
        /// Where report.txt, report.json and timeline.svg go.
        #[arg(long, value_name = "DIR", default_value = "drill-report")]
        report_dir: PathBuf,
        /// Dual-master time tolerated in one cycle, in ms, before the drill fails.
        #[arg(long, value_name = "MS", default_value_t = 0)]
        dual_master_bound_ms: u64,
        /// With --start-demo: the demo's fabric, e.g. ibsim:NETFILE (three ibsmd processes and an
        /// SMInfo poller process on ibsim; soak runs only there) [default: the demo's embedded fabric].
        #[arg(long, value_name = "FABRIC")]
        fabric: Option<String>,
        /// soak: the RNG seed that draws the actions and their targets (printed in the report; replay a run with it) [default: from the clock].
        #[arg(long)]
        seed: Option<u64>,
        /// Start no new cycle after this many seconds (the report says it stopped early).
        #[arg(long, value_name = "SECONDS")]
        deadline_s: Option<u64>,
        #[command(flatten)]
        cluster: drill::ClusterArgs,
    },
    /// Ask the fabric's Subnet Administrator directly from a umad port: records
    /// (whole tables), joins and leaves, services, subscriptions, load (no daemon).
    Sa(sa::SaArgs),
    /// Convert an OpenSM configuration into an ibsmd config file (TOML, the keys of
    /// deploy/ibsmd.toml) on stdout: every option that maps, then every one that does not,
    /// with why, as comments. The root GUID file's GUIDs, the partitions file and OpenSM's
    /// LID cache ($OSM_CACHE_DIR/guid2lid) are carried over. Bad lines: errors with line
    /// numbers, exit 2. No daemon involved.
    ImportOpensm {
        /// The OpenSM config file.
        #[arg(default_value = import_opensm::DEFAULT_OPENSM_CONF)]
        opensm_conf: PathBuf,
    },
    /// Print a shell completion script (e.g. `ibsmctl completions bash > /etc/bash_completion.d/ibsmctl`).
    Completions {
        /// bash, zsh, fish (also elvish, powershell).
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Packaging: write the man pages generated from these definitions (ibsmctl.1 and one
    /// page per subcommand) into DIR (deploy/debian/build.sh runs it).
    #[command(hide = true)]
    Man {
        /// Output directory (created).
        dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum PartitionCmd {
    /// Add or replace a partition (validated before it is sent).
    Set {
        /// Partition name.
        name: String,
        /// Base P_Key, 0x0001-0x7ffe (15 bits; 0x7fff is the default partition).
        #[arg(value_parser = fabric::parse_pkey)]
        pkey: u16,
        /// Members: GUID[:full|limited],... (default full).
        #[arg(value_parser = fabric::parse_member_list)]
        members: fabric::MemberList,
        /// Give the partition its IPoIB broadcast group (OpenSM's `ipoib` flag), with
        /// optional `rate=R,mtu=M,sl=S,scope=C,qkey=Q` (defaults 3, 4, 0, 2, 0x0b1b).
        #[arg(long, num_args = 0..=1, default_missing_value = "", value_parser = fabric::parse_ipoib)]
        ipoib: Option<ibsm_proto::v1::PartitionIpoib>,
    },
    /// Remove a partition set through the API.
    Delete {
        /// Its base P_Key, 0x0001-0x7ffe.
        #[arg(value_parser = fabric::parse_pkey)]
        pkey: u16,
    },
    /// Read ibsmd's --partitions-file (OpenSM's partitions.conf) again, as SIGHUP does;
    /// a bad file changes nothing and the error names its line and column.
    Reload,
}

#[derive(Subcommand, Debug)]
enum MemberCmd {
    /// Add an instance (its --node-id and the HOST:PORT of its --grpc).
    Add {
        /// Node id (non-zero).
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
        /// HOST:PORT.
        addr: String,
    },
    /// Remove an instance.
    Remove {
        /// Node id.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let json = cli.json;
    let fabric_req = match &cli.command {
        Command::Topology => Some(fabric::FabricRequest::Topology),
        Command::Lids { format } => Some(fabric::FabricRequest::Lids {
            format: if json && *format == fabric::LidsFormat::Text {
                fabric::LidsFormat::Json
            } else {
                *format
            },
        }),
        Command::Route { src, dst } => Some(fabric::FabricRequest::Route {
            src: *src,
            dst: *dst,
        }),
        Command::Groups => Some(fabric::FabricRequest::Groups),
        Command::Services => Some(fabric::FabricRequest::Services),
        Command::Subscriptions => Some(fabric::FabricRequest::Subscriptions),
        Command::Partitions { action: None } => Some(fabric::FabricRequest::Partitions),
        Command::Partitions {
            action:
                Some(PartitionCmd::Set {
                    name,
                    pkey,
                    members,
                    ipoib,
                }),
        } => Some(fabric::FabricRequest::SetPartition(
            ibsm_proto::v1::PartitionEntry {
                groups: Vec::new(),
                index0: false,
                name: name.clone(),
                p_key: u32::from(*pkey),
                members: members.0.clone(),
                ipoib: *ipoib,
            },
        )),
        Command::Partitions {
            action: Some(PartitionCmd::Delete { pkey }),
        } => Some(fabric::FabricRequest::DeletePartition(*pkey)),
        Command::Partitions {
            action: Some(PartitionCmd::Reload),
        } => Some(fabric::FabricRequest::ReloadPartitions),
        Command::Members { action: None } => Some(fabric::FabricRequest::Members),
        Command::Members {
            action: Some(MemberCmd::Add { id, addr }),
        } => Some(fabric::FabricRequest::AddMember {
            id: *id,
            addr: addr.clone(),
        }),
        Command::Members {
            action: Some(MemberCmd::Remove { id }),
        } => Some(fabric::FabricRequest::RemoveMember { id: *id }),
        _ => None,
    };
    let drill_args = match &cli.command {
        Command::Drill {
            scenario,
            cycles,
            start_demo,
            ibsmd,
            report_dir,
            dual_master_bound_ms,
            fabric,
            seed,
            deadline_s,
            cluster,
        } => Some(drill::DrillArgs {
            cluster: cluster.clone(),
            seed: *seed,
            deadline: deadline_s.map(std::time::Duration::from_secs),
            fabric: fabric.clone(),
            scenario: *scenario,
            cycles: *cycles,
            start_demo: *start_demo,
            ibsmd: ibsmd.clone(),
            report_dir: report_dir.clone(),
            dual_master_bound_ms: *dual_master_bound_ms,
        }),
        _ => None,
    };
    if fabric_req.is_some() || drill_args.is_some() {
        let target = match target_of(&cli, json) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("ibsmctl: {e}");
                return ExitCode::from(e.exit_code());
            }
        };
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("ibsmctl: cannot start the async runtime: {e}");
                return ExitCode::from(1);
            }
        };
        let code = match (fabric_req, drill_args) {
            (Some(req), _) => rt
                .block_on(fabric::run(&target, req))
                .map_err(|e| (e.to_string(), e.exit_code())),
            (None, Some(args)) => rt
                .block_on(drill::run(&target, &args))
                .map_err(|e| (e.to_string(), e.exit_code())),
            (None, None) => Ok(()),
        };
        return match code {
            Ok(()) => ExitCode::SUCCESS,
            Err((msg, code)) => {
                eprintln!("ibsmctl: {msg}");
                ExitCode::from(code)
            }
        };
    }
    let request = match cli.command {
        Command::Discover {
            fabric,
            write_net,
            window,
            timeout_ms,
            retries,
        } => {
            let res = discover::discover(discover::DiscoverArgs {
                fabric: &fabric,
                json,
                write_net,
                window,
                timeout_ms,
                retries,
            });
            return match res {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("ibsmctl: {err:#}");
                    if err.downcast_ref::<UsageError>().is_some() {
                        ExitCode::from(2)
                    } else {
                        ExitCode::from(1)
                    }
                }
            };
        }
        Command::Sa(a) => {
            return match sa::run(a, json) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ibsmctl: {}", e.message);
                    ExitCode::from(e.code)
                }
            };
        }
        Command::ImportOpensm { opensm_conf } => {
            return import_opensm_cmd(&opensm_conf);
        }
        Command::Man { dir } => {
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), &dir));
            return match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ibsmctl man: writing man pages into {}: {e}", dir.display());
                    ExitCode::from(1)
                }
            };
        }
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut cmd, "ibsmctl", &mut out);
            let _ = out.flush();
            return ExitCode::SUCCESS;
        }
        Command::Status => Request::Status,
        Command::Sms => Request::Sms,
        Command::SetPriority { priority } => Request::SetPriority(priority),
        Command::Handover { to } => Request::Handover { to },
        Command::StepDown { hold_s } => Request::StepDown {
            hold_ms: if hold_s.is_finite() && hold_s > 0.0 {
                (hold_s * 1000.0).round().min(u64::MAX as f64) as u64
            } else {
                0
            },
        },
        Command::Control { packet, guid } => Request::Control { packet, guid },
        Command::Sweep { heavy } => Request::Sweep { heavy },
        Command::Watch { count } => Request::Watch { count },
        Command::Topology
        | Command::Lids { .. }
        | Command::Route { .. }
        | Command::Partitions { .. }
        | Command::Groups
        | Command::Services
        | Command::Subscriptions
        | Command::Members { .. }
        | Command::Drill { .. } => return ExitCode::from(1),
    };
    let result = args::normalize_endpoint(&cli.endpoint)
        .map_err(|e| CtlError::Usage(e.to_string()))
        .and_then(|endpoint| {
            let target = Target {
                endpoint,
                connect_timeout: Duration::from_millis(cli.connect_timeout_ms.max(1)),
                rpc_timeout: Duration::from_millis(cli.rpc_timeout_ms.max(1)),
                json,
                auth: control::Auth {
                    token_file: cli.token_file,
                    ca_cert: cli.ca_cert,
                    client_cert: cli.client_cert.zip(cli.client_key),
                    tls_domain: cli.tls_domain,
                },
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CtlError::Connect {
                    endpoint: target.endpoint.clone(),
                    detail: format!("cannot start the async runtime: {e}"),
                })?;
            rt.block_on(control::run(&target, request))
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ibsmctl: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

/// `ibsmctl import-opensm`: the config on stdout, a summary on stderr; exit 2 on a
/// file that cannot be read or converted.
fn import_opensm_cmd(path: &std::path::Path) -> ExitCode {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ibsmctl: import-opensm: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    match import_opensm::import(path, &text, &import_opensm::RealHost) {
        Ok(got) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(got.toml.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            eprintln!(
                "ibsmctl: import-opensm: {} OpenSM options mapped, {} with no ibsmd key (listed, with why, at the end)",
                got.mapped,
                got.unmapped.len()
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("ibsmctl: import-opensm: {e}");
            }
            eprintln!(
                "ibsmctl: import-opensm: {} bad line(s); nothing converted",
                errors.len()
            );
            ExitCode::from(2)
        }
    }
}

/// Endpoint, timeouts and credentials from the global options.
fn target_of(cli: &Cli, json: bool) -> Result<Target, CtlError> {
    let endpoint =
        args::normalize_endpoint(&cli.endpoint).map_err(|e| CtlError::Usage(e.to_string()))?;
    Ok(Target {
        endpoint,
        connect_timeout: Duration::from_millis(cli.connect_timeout_ms.max(1)),
        rpc_timeout: Duration::from_millis(cli.rpc_timeout_ms.max(1)),
        json,
        auth: control::Auth {
            token_file: cli.token_file.clone(),
            ca_cert: cli.ca_cert.clone(),
            client_cert: cli.client_cert.clone().zip(cli.client_key.clone()),
            tls_domain: cli.tls_domain.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn priority_is_checked_before_any_rpc() {
        let err = Cli::try_parse_from(["ibsmctl", "set-priority", "16"])
            .err()
            .map(|e| (e.exit_code(), e.to_string()));
        let (code, msg) = err.unwrap_or_default();
        assert_eq!(code, 2);
        assert!(msg.contains("0-15"), "{msg}");
    }

    #[test]
    fn sa_arguments_are_checked_before_any_mad() {
        let code = |args: &[&str]| {
            Cli::try_parse_from(args.iter().copied())
                .err()
                .map(|e| e.exit_code())
        };
        // A join names a group or creates one.
        assert_eq!(code(&["ibsmctl", "sa", "join"]), Some(2));
        assert_eq!(code(&["ibsmctl", "sa", "join", "--create"]), None);
        // GIDs in IPv6 notation, LIDs unicast, memberships by name.
        assert_eq!(
            code(&["ibsmctl", "sa", "leave", "--mgid", "ff12::zz"]),
            Some(2)
        );
        assert_eq!(
            code(&["ibsmctl", "sa", "nodes", "--lid", "0xC000"]),
            Some(2)
        );
        assert_eq!(
            code(&["ibsmctl", "sa", "join", "--create", "--state", "half"]),
            Some(2)
        );
        assert_eq!(
            code(&["ibsmctl", "sa", "paths", "--all", "--slid", "3"]),
            Some(2)
        );
        assert_eq!(
            code(&["ibsmctl", "sa", "--rmpp-window", "0", "nodes"]),
            Some(2)
        );
        match Cli::try_parse_from([
            "ibsmctl",
            "sa",
            "join",
            "--mgid",
            "ff12:401b:ffff::ffff:ffff",
            "--state",
            "non,send-only",
        ])
        .map(|c| c.command)
        {
            Ok(Command::Sa(a)) => match a.cmd {
                sa::SaCmd::Join(j) => {
                    assert_eq!(j.mgid.map(|g| g[15]), Some(0xff));
                    assert_eq!(j.state.len(), 2);
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn guids_parse_in_both_notations() {
        for text in ["0x100004", "1048580"] {
            let cli = Cli::try_parse_from(["ibsmctl", "control", "disable", text]);
            match cli.map(|c| c.command) {
                Ok(Command::Control { packet, guid }) => {
                    assert_eq!((packet, guid), (Packet::Disable, 0x100004));
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(Cli::try_parse_from(["ibsmctl", "control", "handover", "1"]).is_err());
        assert!(Cli::try_parse_from(["ibsmctl", "control", "standby", "0"]).is_err());
    }
}
