//! The `ibsmd` binary's start-up checks: a bad config file or missing credentials
//! exit 2 with a precise message before any device or port is opened; a good config
//! file starts the daemon and the command line overrides it.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{free_port, spawn, IBSMD};

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(IBSMD)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ibsmd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    let mut f = std::fs::File::create(&p).expect("create");
    f.write_all(text.as_bytes()).expect("write");
    p.display().to_string()
}

#[test]
fn malformed_config_exits_2_with_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let cfg = write(
        &dir,
        "bad.toml",
        &format!(
            "fabric = \"gen:fat-tree:4\"\ngrpc = \"127.0.0.1:{port}\"\ninsecure_plaintext = true\npriority = 99\n"
        ),
    );
    let (code, err) = run(&["--config", &cfg]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("line 4"), "{err}");
    assert!(err.contains("priority 99 is out of range"), "{err}");
    assert!(err.contains("bad.toml"), "{err}");
    // Nothing started: the gRPC port is still free.
    assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_ok());

    let cfg = write(
        &dir,
        "typo.toml",
        "fabric = \"gen:fat-tree:4\"\npriorty = 3\n",
    );
    let (code, err) = run(&["--config", &cfg]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("line 2") && err.contains("unknown field"),
        "{err}"
    );

    let (code, err) = run(&["--config", "/nonexistent/ibsmd.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/ibsmd.toml"), "{err}");
}

#[test]
fn credentials_are_required_unless_insecure() {
    let (code, err) = run(&["--fabric", "gen:fat-tree:4", "--priority", "5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--insecure-plaintext"), "{err}");
    assert!(err.contains("--auth-token-file"), "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    // No --fabric, no --priority: OpenSM's defaults (umad, 0). A malformed --guid2lid
    // is refused with its path, line and why, exit 2, before the fabric (umad, which
    // does not exist here) is opened.
    let bad = write(
        &dir,
        "guid2lid",
        "0x0002c90300000001 0x0011 0x0011\nbogus 1 1\n",
    );
    let (code, err) = run(&["--insecure-plaintext", "--guid2lid", &bad]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&bad) && err.contains("line 2") && err.contains("bad port GUID"),
        "{err}"
    );
    assert!(
        !err.to_lowercase().contains("umad"),
        "the fabric was opened first: {err}"
    );
    let short = write(&dir, "short", "abc\n");
    let (code, err) = run(&[
        "--fabric",
        "gen:fat-tree:4",
        "--priority",
        "5",
        "--auth-token-file",
        &short,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 16"), "{err}");
}

#[test]
fn m_key_options_are_validated() {
    let base = [
        "--fabric",
        "gen:fat-tree:4",
        "--priority",
        "5",
        "--insecure-plaintext",
    ];
    let with = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        run(&a)
    };
    let (code, err) = with(&["--m-key-protection-level", "4"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--m-key-protection-level"), "{err}");
    let (code, err) = with(&["--m-key", "0xZZ"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("M_Key \"0xZZ\" is not a 64-bit number"),
        "{err}"
    );
    let (code, err) = with(&["--m-key-protection-level", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs an M_Key"), "{err}");
    let (code, err) = with(&["--m-key-lease-period", "70000", "--m-key", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--m-key-lease-period"), "{err}");
}

#[test]
fn config_file_starts_the_daemon_and_the_command_line_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let grpc = free_port();
    let metrics = free_port();
    // The file says priority 3; the command line says 12.
    let cfg = write(
        &dir,
        "ok.toml",
        &format!(
            "fabric = \"gen:fat-tree:4\"\npriority = 3\ngrpc = \"127.0.0.1:{grpc}\"\n\
             metrics = \"127.0.0.1:{metrics}\"\ninsecure_plaintext = true\n"
        ),
    );
    let mut child = spawn(&["--config", &cfg, "--priority", "12"]);
    let addr = SocketAddr::from(([127, 0, 0, 1], metrics));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.0.try_wait().expect("wait") {
            panic!("ibsmd exited early: {st}");
        }
        if let Ok(body) = get_metrics(addr) {
            if body.contains("ibsm_sm_state{sm=\"ibsmd\"} 3") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "ibsmd never became MASTER");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The priority came from the command line (gRPC is plaintext as configured).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let prio = rt.block_on(async {
        let mut c = ibsm_proto::v1::control_client::ControlClient::connect(format!(
            "http://127.0.0.1:{grpc}"
        ))
        .await
        .expect("connect");
        c.get_status(ibsm_proto::v1::GetStatusRequest {})
            .await
            .expect("status")
            .into_inner()
            .priority
    });
    assert_eq!(prio, 12);
    let _ = child.0.kill();
    let out = child.0.wait_with_output_safe();
    assert!(out.contains("INSECURE"), "no loud warning:\n{out}");
}

/// The election settings reach the election from the file and the flags (the flag
/// wins), and `GetStatus` reports them: a sticky master advertises its sticky priority.
#[test]
fn election_settings_from_file_and_flags_reach_the_running_sm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let grpc = free_port();
    let cfg = write(
        &dir,
        "sticky.toml",
        &format!(
            "fabric = \"gen:fat-tree:4\"\npriority = 3\ngrpc = \"127.0.0.1:{grpc}\"\n\
             insecure_plaintext = true\nsticky_priority = 12\nhung_master_window_ms = 0\n\
             sm_key_policy = \"off\"\npartition_enforcement = false\nsmp_window = 16\n"
        ),
    );
    let mut child = spawn(&["--config", &cfg, "--sm-key-policy", "allow-zero"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let status = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "ibsmd never became MASTER");
            if let Ok(Some(st)) = child.0.try_wait() {
                panic!("ibsmd exited early: {st}");
            }
            if let Some(s) = common::status(grpc).await {
                if s.state == ibsm_proto::v1::SmState::Master as i32 {
                    break s;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // Elevated on becoming master: the election has the sticky priority.
    assert_eq!(status.priority, 12, "{status:?}");
    let t = status.settings.expect("settings");
    assert_eq!(t.configured_priority, 3);
    assert!(t.sticky);
    assert_eq!(t.sticky_priority, 12);
    assert_eq!(t.hung_master_window_ms, 0, "0 turns the rule off");
    assert_eq!(t.sm_key_policy, "allow-zero", "the command line wins");
    assert!(!t.partition_enforcement);
    assert_eq!(t.smp_window, 16);
    assert_eq!(t.poll_interval_ms, 25);
    let _ = child.0.kill();
}

trait WaitOutput {
    fn wait_with_output_safe(&mut self) -> String;
}

impl WaitOutput for Child {
    fn wait_with_output_safe(&mut self) -> String {
        use std::io::Read;
        let _ = self.wait();
        let mut s = String::new();
        if let Some(e) = self.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

fn get_metrics(addr: SocketAddr) -> std::io::Result<String> {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut s = String::new();
    c.read_to_string(&mut s)?;
    Ok(s)
}

/// Every key `--config` accepts (serde lists them when it meets an unknown one).
fn config_keys(table: &str) -> Vec<String> {
    let text = format!("{table}zz_not_a_key = 1\n");
    let err = match ibsmd::config::FileConfig::parse(std::path::Path::new("k.toml"), &text) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an unknown key was accepted"),
    };
    let list = err
        .split_once("expected one of")
        .map(|(_, l)| l)
        .unwrap_or_else(|| panic!("no key list in {err}"));
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// deploy/ibsmd.toml must document every key (set or commented out as `#key =`), and
/// every long option of `ibsmd --help` must be settable in the file.
#[test]
fn every_option_is_documented_in_the_example_config() {
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/ibsmd.toml"),
    )
    .expect("deploy/ibsmd.toml");
    let documented = |k: &str| {
        example.lines().any(|l| {
            let l = l.trim_start_matches('#').trim_start();
            l.strip_prefix(k)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
    };
    let top = config_keys("");
    assert!(top.len() >= 13, "{top:?}");
    for k in top.iter().filter(|k| *k != "demo") {
        assert!(documented(k), "deploy/ibsmd.toml does not document `{k}`");
    }
    for k in config_keys("[demo]\n") {
        assert!(
            documented(&k),
            "deploy/ibsmd.toml does not document [demo] `{k}`"
        );
    }
    let (code, help) = {
        let out = Command::new(IBSMD).arg("--help").output().expect("--help");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(code, Some(0));
    // Option lines look like `  -h, --help` or `      --fabric <FABRIC>`.
    let flags = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("--")));
    for flag in flags {
        let flag = flag.trim_end_matches([',', '.']);
        if matches!(flag, "help" | "version" | "config" | "") {
            continue;
        }
        // A test facility stays off the config file on purpose: a deployed config
        // should never be able to turn it on.
        if flag == "fault-injection" {
            continue;
        }
        // Per pod by definition (the StatefulSet passes its own pod name); the file
        // is shared by every pod, and node_id is its key.
        if flag == "node-id-from-ordinal" {
            continue;
        }
        let key = flag.replace('-', "_");
        // Repeatable flags whose key is the plural list.
        let key = match key.as_str() {
            "peer" => "peers".to_string(),
            "trusted_sm_guid" => "trusted_sm_guids".to_string(),
            // A negative flag; the key says it positively.
            "no_partition_enforcement" => "partition_enforcement".to_string(),
            "no_sminfo_answer_thread" => "sminfo_answer_thread".to_string(),
            _ => key,
        };
        assert!(top.contains(&key), "--{flag} has no config key ({top:?})");
    }
}

#[test]
fn replication_without_member_credentials_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data").display().to_string();
    let base = [
        "--fabric",
        "gen:fat-tree:2",
        "--priority",
        "5",
        "--insecure-plaintext",
        "--node-id",
        "1",
        "--data-dir",
        data.as_str(),
    ];
    let (code, err) = run(&base);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--cluster-secret-file"), "{err}");
    assert!(err.contains("ibsm-node-"), "{err}");
    // The cluster secret may not be the control token.
    let token = write(&dir, "token", "the-same-secret-for-both-0123\n");
    let mut args = base.to_vec();
    args.retain(|a| *a != "--insecure-plaintext");
    args.extend(["--auth-token-file", &token, "--cluster-secret-file", &token]);
    let (code, err) = run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("must not be a control API token"), "{err}");
    // The placeholder cluster secret of deploy/k8s is refused.
    let k8s = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s/configmap.yaml"),
    )
    .expect("configmap.yaml");
    let shipped = k8s
        .lines()
        .find_map(|l| l.trim().strip_prefix("cluster-secret: "))
        .expect("the Secret's cluster-secret")
        .trim_matches('"');
    let secret = write(&dir, "cluster-secret", &format!("{shipped}\n"));
    let mut args = base.to_vec();
    args.extend(["--cluster-secret-file", &secret]);
    let (code, err) = run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("placeholder"), "{err}");
    // The placeholder token of deploy/ is refused.
    let placeholder = write(
        &dir,
        "placeholder",
        &format!("{}\n", ibsmd::auth::PLACEHOLDER_TOKEN),
    );
    let (code, err) = run(&[
        "--fabric",
        "gen:fat-tree:2",
        "--priority",
        "5",
        "--auth-token-file",
        &placeholder,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("placeholder"), "{err}");
    assert!(
        !dir.path().join("data").exists(),
        "a refused start created the data dir"
    );
}

#[test]
fn a_busy_grpc_port_fails_before_the_fabric_is_opened() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("addr").to_string();
    // umad: with no device here (no umad2sim), opening the fabric would fail with a
    // device error; the gRPC bind must fail first.
    let (code, err) = run(&[
        "--fabric",
        "umad",
        "--priority",
        "5",
        "--insecure-plaintext",
        "--grpc",
        &addr,
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("cannot listen for gRPC"), "{err}");
    assert!(
        !err.to_lowercase().contains("umad"),
        "the fabric was opened first: {err}"
    );
}
