//! deploy/ is part of the product: the systemd unit must be accepted by systemd and
//! hardened, the dashboard must only query metrics ibsmd serves, the example configs
//! (deploy/ibsmd.toml, the Kubernetes ConfigMap) must parse with ibsmd's own parser.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn deploy(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(p)
}

fn read(p: &str) -> String {
    std::fs::read_to_string(deploy(p)).unwrap_or_else(|e| panic!("deploy/{p}: {e}"))
}

/// A systemd unit as section -> key -> values (keys may repeat).
type Unit = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// Minimal unit-file parser: sections, `Key=Value`, comments, no continuation lines
/// (the unit uses none). Errors name the line.
fn parse_unit(text: &str) -> Result<Unit, String> {
    let mut unit = Unit::new();
    let mut section: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.ends_with('\\') {
            return Err(format!(
                "line {}: continuation lines are not expected",
                i + 1
            ));
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_string());
            unit.entry(name.to_string()).or_default();
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!("line {}: not Key=Value: {raw:?}", i + 1));
        };
        let Some(s) = &section else {
            return Err(format!("line {}: key outside a section", i + 1));
        };
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("line {}: bad key {k:?}", i + 1));
        }
        unit.entry(s.clone())
            .or_default()
            .entry(k.to_string())
            .or_default()
            .push(v.trim().to_string());
    }
    Ok(unit)
}

fn one<'a>(u: &'a Unit, sec: &str, key: &str) -> &'a str {
    u.get(sec)
        .and_then(|s| s.get(key))
        .and_then(|v| v.last())
        .map(String::as_str)
        .unwrap_or_else(|| panic!("[{sec}] {key}= missing"))
}

#[test]
fn systemd_unit_is_hardened() {
    let u = parse_unit(&read("systemd/ibsmd.service")).expect("unit parses");
    assert_eq!(
        u.keys().map(String::as_str).collect::<Vec<_>>(),
        ["Install", "Service", "Unit"]
    );
    let svc = "Service";
    assert!(one(&u, svc, "ExecStart").starts_with("/usr/bin/ibsmd --config /etc/ibsm/"));
    for (k, v) in [
        ("User", "ibsm"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("DevicePolicy", "closed"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictNamespaces", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
        ("LockPersonality", "yes"),
        ("SystemCallArchitectures", "native"),
        ("Restart", "on-failure"),
    ] {
        assert_eq!(one(&u, svc, k), v, "{k}");
    }
    let devices = &u[svc]["DeviceAllow"];
    assert_eq!(devices, &vec!["char-infiniband_mad rw".to_string()]);
    assert!(one(&u, svc, "RestrictAddressFamilies").contains("AF_INET6"));
    // The config file the unit names is the documented example's install path.
    assert!(read("ibsmd.toml").contains("ibsmd --config /etc/ibsm/ibsmd.toml"));
    assert_eq!(one(&u, "Install", "WantedBy"), "multi-user.target");
}

#[test]
fn unit_parser_reports_lines() {
    assert!(parse_unit("[A]\nnot a pair\n")
        .expect_err("bad")
        .contains("line 2"));
    assert!(parse_unit("Key=1\n").expect_err("bad").contains("line 1"));
}

/// `systemd-analyze verify` (Debian package `systemd`, which tests/setup.sh installs;
/// missing, the test fails). The binary path is pointed at the freshly built ibsmd,
/// since verify checks that ExecStart exists.
#[test]
fn systemd_analyze_verify_accepts_the_unit() {
    let path = which("systemd-analyze").unwrap_or_else(|()| {
        panic!("systemd-analyze is not installed: apt-get install systemd (tests/setup.sh does)")
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = read("systemd/ibsmd.service").replace("/usr/bin/ibsmd", env!("CARGO_BIN_EXE_ibsmd"));
    let p = dir.path().join("ibsmd.service");
    std::fs::write(&p, unit).expect("write");
    let out = std::process::Command::new(path)
        .args(["verify", "--man=no"])
        .arg(&p)
        .output()
        .expect("run systemd-analyze");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{err}"
    );
    assert!(
        !err.contains("ibsmd.service"),
        "systemd-analyze complained about the unit:\n{err}"
    );
}

fn which(tool: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn grafana_dashboard_queries_only_served_metrics() {
    let d: serde_json::Value =
        serde_json::from_str(&read("grafana/ibsm.json")).expect("dashboard is JSON");
    let served = ibsmd::metrics::metric_names();
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8);
    let mut seen = std::collections::BTreeSet::new();
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("ibsm_") {
                    assert!(served.contains(&word), "{word} in {expr:?} is not served");
                    seen.insert(word.to_string());
                }
            }
        }
    }
    for m in served {
        assert!(seen.contains(m), "no panel shows {m}");
    }
}

#[test]
fn kubernetes_configmap_holds_a_valid_config() {
    let yaml = read("k8s/configmap.yaml");
    // The block scalar under `ibsmd.toml: |`, de-indented.
    let mut lines = yaml
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("ibsmd.toml: |"));
    lines.next().expect("ibsmd.toml key");
    let toml: String = lines
        .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
        .map(|l| format!("{}\n", l.get(4..).unwrap_or("")))
        .collect();
    let c = ibsmd::config::FileConfig::parse(Path::new("configmap.yaml"), &toml)
        .expect("ConfigMap's ibsmd.toml parses");
    assert!(c.fabric.is_some() && c.priority.is_some());
    assert_eq!(
        c.auth_token_file.as_deref(),
        Some(Path::new("/etc/ibsm/secret/token"))
    );
    // A replicated cluster: every member named, a cluster secret; the node id is per
    // pod (StatefulSet args), never in the shared file.
    assert_eq!(c.peers.as_ref().map(Vec::len), Some(3));
    assert!(c.cluster_secret_file.is_some());
    assert!(c.node_id.is_none());
    let sts = read("k8s/statefulset.yaml");
    assert!(sts.contains("--node-id-from-ordinal"));
    assert!(sts.contains("mountPath: /etc/ibsm/secret"));
    assert!(sts.contains("path: /dev/infiniband"));
    assert!(sts.contains("nodeSelector:"));
    assert!(sts.contains("serviceName: ibsmd-peers"));
    let svc = read("k8s/service.yaml");
    assert!(svc.contains("clusterIP: None"), "headless peer service");
    // The three members forming a cluster from exactly these manifests:
    // tests/tests/k8s_statefulset_ibsim.rs.
}

/// The Containerfile is only READ here: no container engine runs in CI (and building
/// needs the base images from a registry). What it copies must exist, what it builds
/// must be this workspace's binaries, and its entrypoint must be the one the
/// StatefulSet relies on.
#[test]
fn containerfile_is_consistent_reading_only_the_file() {
    eprintln!(
        "NOTE: deploy/container/Containerfile is checked by reading it, not built (no container engine here)"
    );
    let c = read("container/Containerfile");
    assert!(c.contains("cargo build --release --locked -p ibsmd-bin -p ibsmctl"));
    assert!(c.contains("FROM docker.io/library/debian:bookworm-slim"));
    assert!(c.contains("USER ibsm"));
    let root = deploy("..");
    for line in c.lines().filter(|l| l.starts_with("COPY ")) {
        if line.contains("--from=") {
            for bin in line.split_whitespace().filter(|w| w.starts_with("/out/")) {
                let name = bin.trim_start_matches("/out/");
                assert!(
                    c.contains(&format!("target/release/{name} /out/{name}")),
                    "{bin} is not built by the build stage"
                );
                assert!(["ibsmd", "ibsmctl"].contains(&name), "{name}");
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().skip(1).collect();
        for src in &words[..words.len() - 1] {
            assert!(root.join(src).exists(), "COPY source {src} does not exist");
        }
    }
    assert!(c.contains("ENTRYPOINT [\"/usr/bin/ibsmd\"]"));
    // The workspace really has both binaries under those package names.
    for (pkg, bin) in [("ibsmd-bin", "ibsmd"), ("ibsmctl", "ibsmctl")] {
        let toml = std::fs::read_to_string(root.join("crates").join(pkg).join("Cargo.toml"))
            .expect("crate manifest");
        assert!(toml.contains(&format!("name = \"{pkg}\"")));
        assert!(pkg == bin || toml.contains(&format!("name = \"{bin}\"")));
    }
}
