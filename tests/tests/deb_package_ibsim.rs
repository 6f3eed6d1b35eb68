//! The Debian package, as an operator gets it (issue 13, item 6):
//!
//! `deploy/debian/build.sh` builds it (cargo-deb, with this test's cargo profile so the
//! binaries are the ones already built); its contents are checked with `dpkg-deb`
//! (both binaries, the systemd unit, the sysusers and udev files, the default config as
//! a conffile, man pages and shell completions generated from the clap definitions,
//! the maintainer scripts); it is unpacked into a scratch root with `dpkg-deb -x`
//! (maintainer scripts are not run: they need a real system); `systemd-analyze verify`
//! checks the INSTALLED unit (a copy with its ExecStart binary re-rooted: verify
//! wants it to exist, and `--root` would want a whole systemd in the root); then the installed ibsmd is started from the
//! installed unit's own `ExecStart=` line and `Environment=` lines on ibsim, with its
//! installed config, and must become MASTER at the config's priority, as the
//! installed ibsmctl and infiniband-diags' `sminfo` see it.
//!
//! What differs from systemd starting it, and why: every absolute path (the ExecStart
//! binary and arguments, and the installed config's paths) is re-rooted into the
//! scratch root, as `RootDirectory=` would; the process runs as this test's user, not
//! `User=ibsm`; the sandboxing directives are not applied (no systemd as PID 1 here);
//! and the fabric is ibsim's Hca1 through umad2sim (LD_PRELOAD, SIM_HOST) instead of a
//! kernel umad device. The operator's own step, a token in /etc/ibsm/token, is done by
//! the test. The gRPC and metrics ports are the installed config's (127.0.0.1:50051 and
//! :9464): the test fails, naming them, when something else holds one.
//!
//! Fails (never skips) when cargo-deb, dpkg-deb, systemd-analyze or the lab tools are
//! missing; tests/setup.sh installs them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ibsm_integration::{profile_dir, run_ok};
use ibsm_labkit::{require_tool, Ibsim, IbsimOptions};

const TIMEOUT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A systemd unit's `[Service]` keys (repeatable) from its text; errors name the line.
fn service_section(text: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let mut keys = BTreeMap::<String, Vec<String>>::new();
    let mut in_service = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            in_service = line == "[Service]";
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .with_context(|| format!("unit line {}: not Key=Value: {raw:?}", i + 1))?;
        ensure!(
            !v.ends_with('\\'),
            "unit line {}: continuation lines are not handled",
            i + 1
        );
        if in_service {
            keys.entry(k.trim().to_string())
                .or_default()
                .push(v.trim().to_string());
        }
    }
    Ok(keys)
}

/// `path` (absolute) under `root`.
fn rerooted(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

fn build_deb(out: &Path) -> Result<PathBuf> {
    require_tool("cargo-deb").context(
        "cargo-deb is needed to build the package: cargo install cargo-deb --locked (tests/setup.sh does)",
    )?;
    let profile = profile_dir()?;
    let target = profile.parent().context("profile dir has no parent")?;
    let cargo_profile = match profile.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => bail!("cannot tell the cargo profile of {}", profile.display()),
    };
    let mut cmd = Command::new(repo().join("deploy/debian/build.sh"));
    cmd.args(["--fast", "--profile", &cargo_profile, "--output"])
        .arg(out)
        .env("CARGO_TARGET_DIR", target)
        .env(
            "CARGO",
            std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
        );
    let stdout = run_ok(&mut cmd, Duration::from_secs(900))?;
    let deb = PathBuf::from(stdout.lines().last().context("build.sh printed nothing")?);
    ensure!(
        deb.is_file(),
        "build.sh named {} which is not a file",
        deb.display()
    );
    Ok(deb)
}

fn dpkg_deb(args: &[&str], deb: &Path) -> Result<String> {
    let mut cmd = Command::new(require_tool("dpkg-deb")?);
    cmd.args(args).arg(deb);
    run_ok(&mut cmd, Duration::from_secs(60))
}

/// Fail plainly when the installed config's address is taken by something else.
fn require_free(addr: &str) -> Result<()> {
    std::net::TcpListener::bind(addr).map(drop).with_context(|| {
        format!("{addr} (from the installed /etc/ibsm/ibsmd.toml) is in use by another process; stop it and rerun")
    })
}

#[test]
fn deb_package_installs_and_its_unit_starts_a_master_on_ibsim() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let systemd_analyze = require_tool("systemd-analyze").context(
        "systemd-analyze is needed to verify the installed unit: apt-get install systemd",
    )?;
    // The binaries every integration test uses, built once by the same cargo command
    // build.sh runs: its own build is then a no-op.
    ibsm_integration::binary("ibsmd")?;
    let work = tempfile::tempdir()?;
    let t0 = Instant::now();
    let deb = build_deb(&work.path().join("deb"))?;
    eprintln!("built {} in {:?}", deb.display(), t0.elapsed());

    // Contents.
    let listing = dpkg_deb(&["-c"], &deb)?;
    let files: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    let has = |p: &str| files.iter().any(|f| *f == p || *f == format!("{p}.gz"));
    for p in [
        "./usr/bin/ibsmd",
        "./usr/bin/ibsmctl",
        "./usr/lib/systemd/system/ibsmd.service",
        "./usr/lib/sysusers.d/ibsm.conf",
        "./usr/lib/udev/rules.d/90-ibsm.rules",
        "./etc/ibsm/ibsmd.toml",
        "./usr/share/man/man1/ibsmd.1",
        "./usr/share/man/man1/ibsmd-demo.1",
        "./usr/share/man/man1/ibsmctl.1",
        "./usr/share/man/man1/ibsmctl-status.1",
        "./usr/share/man/man1/ibsmctl-drill.1",
        "./usr/share/bash-completion/completions/ibsmd",
        "./usr/share/bash-completion/completions/ibsmctl",
        "./usr/share/zsh/vendor-completions/_ibsmd",
        "./usr/share/zsh/vendor-completions/_ibsmctl",
        "./usr/share/fish/vendor_completions.d/ibsmd.fish",
        "./usr/share/fish/vendor_completions.d/ibsmctl.fish",
    ] {
        ensure!(has(p), "{p} is not in the package:\n{listing}");
    }
    // The hidden packaging subcommand has no page of its own.
    ensure!(!has("./usr/share/man/man1/ibsmd-man.1"), "{listing}");
    let fields = dpkg_deb(&["-f"], &deb)?;
    ensure!(fields.contains("Package: ibsm\n"), "package name: {fields}");
    let version = env!("CARGO_PKG_VERSION");
    ensure!(
        fields.contains(&format!("Version: {version}-")),
        "package version is not the workspace's {version}: {fields}"
    );
    let ctrl = work.path().join("control");
    run_ok(
        Command::new(require_tool("dpkg-deb")?)
            .arg("-e")
            .arg(&deb)
            .arg(&ctrl),
        Duration::from_secs(60),
    )?;
    let conffiles = std::fs::read_to_string(ctrl.join("conffiles")).context("conffiles")?;
    ensure!(
        conffiles.lines().any(|l| l == "/etc/ibsm/ibsmd.toml"),
        "the config is not a conffile: {conffiles:?}"
    );
    let postinst = std::fs::read_to_string(ctrl.join("postinst")).context("postinst")?;
    ensure!(
        postinst.contains("systemd-sysusers ibsm.conf"),
        "{postinst}"
    );

    // Install into a scratch root.
    let root = work.path().join("root");
    run_ok(
        Command::new(require_tool("dpkg-deb")?)
            .arg("-x")
            .arg(&deb)
            .arg(&root),
        Duration::from_secs(60),
    )?;
    let man = root.join("usr/share/man/man1");
    let page = ["ibsmd.1", "ibsmd.1.gz"]
        .iter()
        .map(|p| man.join(p))
        .find(|p| p.is_file())
        .context("ibsmd.1 not installed")?;
    let page_text = if page.extension().is_some_and(|e| e == "gz") {
        run_ok(
            Command::new("gzip").arg("-dc").arg(&page),
            Duration::from_secs(10),
        )?
    } else {
        std::fs::read_to_string(&page)?
    };
    // Generated from the clap definitions: flags and their help are in it.
    for flag in [
        "node\\-id\\-from\\-ordinal",
        "guid2lid",
        "partitions\\-file",
    ] {
        ensure!(page_text.contains(flag), "{flag} not in ibsmd.1");
    }
    let v = run_ok(
        Command::new(rerooted(&root, "/usr/bin/ibsmd")).arg("--version"),
        Duration::from_secs(10),
    )?;
    ensure!(
        v.trim() == format!("ibsmd {version}"),
        "installed ibsmd --version: {v}"
    );
    let bash = std::fs::read_to_string(root.join("usr/share/bash-completion/completions/ibsmctl"))?;
    ensure!(
        bash.contains("import-opensm") && bash.contains("complete "),
        "bash completion"
    );

    // The installed unit, verified by systemd. `verify --root=` would look for
    // sysinit.target inside the scratch root (no systemd there), so the host's systemd
    // verifies a copy whose ExecStart binary is re-rooted (verify checks it exists).
    let unit_path = root.join("usr/lib/systemd/system/ibsmd.service");
    let unit = std::fs::read_to_string(&unit_path)?;
    let verify_dir = work.path().join("verify");
    std::fs::create_dir_all(&verify_dir)?;
    let verify_unit = verify_dir.join("ibsmd.service");
    std::fs::write(
        &verify_unit,
        unit.replace(
            "/usr/bin/ibsmd",
            &rerooted(&root, "/usr/bin/ibsmd").display().to_string(),
        ),
    )?;
    let out = ibsm_labkit::run_with_timeout(
        Command::new(&systemd_analyze)
            .args(["verify", "--man=no"])
            .arg(&verify_unit),
        Duration::from_secs(60),
    )?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success() && !err.contains("ibsmd.service"),
        "systemd-analyze verify of the installed unit failed ({}):\n{err}",
        out.status
    );

    // Its ExecStart line, exactly, re-rooted.
    let service = service_section(&unit)?;
    let exec = service
        .get("ExecStart")
        .and_then(|v| v.last())
        .context("no ExecStart= in the installed unit")?;
    ensure!(
        !exec.contains(['"', '\'', '$', '%']),
        "ExecStart {exec:?} uses quoting or specifiers this test does not expand"
    );
    let argv: Vec<String> = exec
        .split_whitespace()
        .map(|a| {
            if a.starts_with('/') {
                rerooted(&root, a).display().to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    ensure!(
        argv[0].ends_with("/usr/bin/ibsmd"),
        "ExecStart runs {}",
        argv[0]
    );
    // The installed config, re-rooted the same way, plus the operator's token.
    let config_path = rerooted(&root, "/etc/ibsm/ibsmd.toml");
    let config = std::fs::read_to_string(&config_path)?;
    let mut rerooted_config = String::new();
    for line in config.lines() {
        let line = match line.split_once("= \"/") {
            Some((k, v)) if !line.trim_start().starts_with('#') => {
                format!("{k}= \"{}/{v}", root.display())
            }
            _ => line.to_string(),
        };
        rerooted_config.push_str(&line);
        rerooted_config.push('\n');
    }
    std::fs::write(&config_path, rerooted_config)?;
    let token = root.join("etc/ibsm/token");
    std::fs::write(&token, "deb-test-token-0123456789abcdef\n")?;
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    // StateDirectory=ibsm.
    std::fs::create_dir_all(root.join("var/lib/ibsm"))?;
    let grpc = "127.0.0.1:50051";
    require_free(grpc)?;
    require_free("127.0.0.1:9464")?;

    let sim = Ibsim::start(
        &ibsm_labkit::example_net("net.2sw2path4hca")?,
        IbsimOptions::default(),
    )?;
    let log_path = work.path().join("ibsmd.log");
    let mut cmd = sim.command_on("Hca1", &argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log_path)?));
    for env in service.get("Environment").into_iter().flatten() {
        let (k, v) = env
            .split_once('=')
            .with_context(|| format!("Environment={env}"))?;
        cmd.env(k, v);
    }
    eprintln!("starting the installed unit's ExecStart: {argv:?}");
    let mut daemon = sim.spawn(&mut cmd)?;
    ibsm_integration::wait_log(&log_path, "subnet up in", TIMEOUT)
        .context("the installed ibsmd did not bring the subnet up")?;

    // The installed ibsmctl sees a MASTER; the fabric's SMInfo says the same.
    let ctl = rerooted(&root, "/usr/bin/ibsmctl");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        let out = ibsm_labkit::run_with_timeout(
            Command::new(&ctl)
                .args(["--json", "--endpoint", &format!("http://{grpc}")])
                .arg("--token-file")
                .arg(&token)
                .arg("status"),
            Duration::from_secs(10),
        )?;
        let v = ibsm_integration::ctl_json_of("status", &out);
        if let Ok(v) = &v {
            if v["state"] == "MASTER" {
                break v.clone();
            }
        }
        ensure!(Instant::now() < deadline, "not MASTER: {v:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("installed ibsmctl status: {status}");
    let sminfo = run_ok(
        &mut sim.command_on("Hca3", "sminfo"),
        Duration::from_secs(20),
    )?;
    eprintln!("sminfo from Hca3: {sminfo}");
    ensure!(
        sminfo.contains("SMINFO_MASTER") && sminfo.contains("priority 10"),
        "sminfo does not show a master at the installed config's priority 10: {sminfo}"
    );
    ensure!(
        daemon.try_wait()?.is_none(),
        "ibsmd exited:\n{}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    Ok(())
}
