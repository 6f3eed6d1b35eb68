//! `ibsmd --fabric umad` as master on ibsim, under the faults of issue 9 part 3:
//!
//! * **Duplicate GUID.** A net file where two HCAs answer with the same port GUID
//!   (ibsim refuses two nodes with one NodeGUID, but gives a CA with `caguid=G`
//!   port GUIDs G+p, so `caguid=0x...100` port 1 and `caguid=0x...ff` port 2 share
//!   one). The second HCA's cable is unlinked until the subnet is up, so the first
//!   holds a LID. After `Link` and a heavy sweep, `ibsmctl status` carries the
//!   alarm, the log says it, and `smpquery` (from another HCA, by directed route)
//!   reads the holder's LID unchanged and LID 0 on the newcomer.
//! * **Trap storm.** On net.2sw2path4hca, a bounded loop of `Unlink`/`Link` of one
//!   of the two inter-switch cables plus `Error` packet loss on a port off the
//!   poller's path, while a poller on another HCA runs `sminfo <master LID>` back to
//!   back. Every poll must be answered (counts of answered vs sent, no timing), and
//!   the heavy sweeps counted from `ibsm_sweeps_total` (periodic sweeps off, so each
//!   is a trap's) must not exceed what the 1 s trap hold-down allows over the storm.
//!
//! Fails, never skips, when a lab tool is missing. Each test has its own ibsim.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{ChildGuard, Ibsim, IbsimOptions};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const SUBNET_UP_TIMEOUT: Duration = Duration::from_secs(120);

/// ibsim plus one ibsmd master.
struct Lab {
    sim: Ibsim,
    _sm: ChildGuard,
    log: PathBuf,
}

impl Lab {
    /// ibsim on `netfile` (after `before` ran on its console), then ibsmd (priority
    /// 10) on `host` with `extra` arguments; waits for "subnet up".
    fn start(
        netfile: &Path,
        host: &str,
        extra: &[&str],
        before: impl FnOnce(&Ibsim) -> Result<()>,
    ) -> Result<Lab> {
        ibsm_labkit::require_lab()?;
        let bin = binary("ibsmd")?;
        let sim = Ibsim::start(netfile, IbsimOptions::default())?;
        before(&sim)?;
        let log = sim.dir().join("ibsmd.log");
        let file = std::fs::File::create(&log).context("ibsmd log")?;
        let mut cmd = sim.command_on(host, &bin);
        cmd.args([
            "--fabric",
            "umad",
            "--priority",
            "10",
            "--grpc",
            "127.0.0.1:0",
            "--insecure-plaintext",
        ])
        .args(extra);
        cmd.env("NO_COLOR", "1").stdout(Stdio::null()).stderr(file);
        let sm = sim.spawn(&mut cmd)?;
        let lab = Lab { sim, _sm: sm, log };
        lab.wait_log("subnet up", SUBNET_UP_TIMEOUT)?;
        Ok(lab)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_log(&self, needle: &str, timeout: Duration) -> Result<()> {
        ibsm_integration::wait_log(&self.log, needle, timeout)
    }

    /// `ibsmctl --endpoint <ibsmd> <args> --json`, parsed.
    fn ctl_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        ibsm_integration::ctl_json_via_log(&self.log, args, RUN_TIMEOUT)
    }

    /// A diag on `host`; its stdout (an error if it fails).
    fn diag(&self, host: &str, program: &str, args: &[&str]) -> Result<String> {
        let mut cmd = self.sim.command_on(host, program);
        cmd.args(args);
        let out = ibsm_labkit::run_with_timeout(&mut cmd, RUN_TIMEOUT)?;
        if !out.status.success() {
            bail!(
                "{program} {args:?} on {host} failed ({}):\n{}{}\nibsmd log:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// PortInfo.LID of `port` of the node at directed route `path` (smpquery -D).
    fn lid_at(&self, host: &str, path: &str, port: u8) -> Result<u16> {
        let text = self.diag(
            host,
            "smpquery",
            &["-D", "portinfo", path, &port.to_string()],
        )?;
        lid_of_portinfo(&text).with_context(|| format!("no Lid in smpquery output:\n{text}"))
    }
}

/// `Lid:.......4` (or `0x0004`) from `smpquery portinfo` output.
fn lid_of_portinfo(text: &str) -> Option<u16> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("Lid:")?;
        let v = rest.trim_start_matches('.');
        match v.strip_prefix("0x") {
            Some(h) => u16::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

/// One Switch, four HCAs; Hca2 (port 1) and Hca3 (port 2) share port GUID
/// 0x0002c90000000101. Hca1 runs the SM, Hca4 the diags.
const DUP_NET: &str = "Switch\t8 \"Switch1\"
[1]\t\"Hca1\"[1]
[2]\t\"Hca2\"[1]
[3]\t\"Hca3\"[2]
[4]\t\"Hca4\"[1]

Hca\t2 \"Hca1\"
[1]\t\"Switch1\"[1]

caguid=0x0002c90000000100
Hca\t2 \"Hca2\"
[1]\t\"Switch1\"[2]

caguid=0x0002c900000000ff
Hca\t2 \"Hca3\"
[2]\t\"Switch1\"[3]

Hca\t2 \"Hca4\"
[1]\t\"Switch1\"[4]
";

const DUP_GUID: &str = "0x0002c90000000101";

#[test]
fn a_duplicate_port_guid_is_an_alarm_and_the_holder_keeps_its_lid() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let net = dir.path().join("dup.net");
    std::fs::write(&net, DUP_NET)?;
    let lab = Lab::start(&net, "Hca1", &[], |sim| {
        sim.unlink("Hca3", Some(2)).map(drop).map_err(Into::into)
    })?;
    // From Hca4: port 1 -> Switch1, then out of Switch1's port 2 (Hca2) or 3 (Hca3).
    let held = lab.lid_at("Hca4", "0,1,2", 1)?;
    assert_ne!(held, 0, "the first holder has no LID after subnet up");
    let st = lab.ctl_json(&["status"])?;
    assert_eq!(st["alarms"], serde_json::json!([]), "{st}");

    lab.sim.link("Hca3", 2, "Switch1", 3)?;
    let sw = lab.ctl_json(&["sweep", "--heavy"])?;
    let st = lab.ctl_json(&["status"])?;
    let alarms = st["alarms"].as_array().context("alarms")?;
    assert!(
        alarms.iter().any(|a| a
            .as_str()
            .is_some_and(|s| s.contains("duplicate port GUID") && s.contains(DUP_GUID))),
        "no duplicate alarm in status {st} (sweep {sw})"
    );
    assert!(
        lab.log().contains("ALARM duplicate port GUID"),
        "no alarm in the log:\n{}",
        lab.log()
    );
    // Read back from the fabric: the holder kept its LID, the newcomer got none.
    assert_eq!(lab.lid_at("Hca4", "0,1,2", 1)?, held);
    assert_eq!(lab.lid_at("Hca4", "0,1,3", 2)?, 0);
    // Another sweep changes nothing: the rule is stable, not a ping-pong.
    lab.ctl_json(&["sweep", "--heavy"])?;
    assert_eq!(lab.lid_at("Hca4", "0,1,2", 1)?, held);
    assert_eq!(lab.lid_at("Hca4", "0,1,3", 2)?, 0);
    Ok(())
}

/// `ibsm_sweeps_total{..,kind="heavy"}` from ibsmd's /metrics.
fn heavy_sweeps(addr: &str) -> Result<u64> {
    let text = http_get(addr, "/metrics")?;
    text.lines()
        .find(|l| l.starts_with("ibsm_sweeps_total{") && l.contains("kind=\"heavy\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no heavy sweep count in /metrics:\n{text}"))
}

fn metric(addr: &str, name: &str) -> Result<u64> {
    let text = http_get(addr, "/metrics")?;
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {name} in /metrics:\n{text}"))
}

fn http_get(addr: &str, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[test]
fn a_trap_storm_leaves_sminfo_answered_and_sweeps_held_down() -> Result<()> {
    let net = ibsm_labkit::example_net("net.2sw2path4hca")?;
    let metrics = format!("127.0.0.1:{}", free_port()?);
    // No periodic sweeps to speak of: every heavy sweep in the storm is a trap's.
    let lab = Lab::start(
        &net,
        "Hca1",
        &[
            "--metrics",
            &metrics,
            "--sweep-interval-s",
            "3600",
            "--heavy-sweep-interval-s",
            "0",
            "--trap-sweep-hold-down-ms",
            "1000",
        ],
        |_| Ok(()),
    )?;
    // The master's LID as the fabric says (Hca4's PortInfo.MasterSMLID).
    let own = lab.diag("Hca4", "smpquery", &["-D", "portinfo", "0", "1"])?;
    let master_lid = own
        .lines()
        .find_map(|l| l.trim().strip_prefix("SMLid:"))
        .map(|v| v.trim_start_matches('.').to_string())
        .context("no SMLid")?;
    let sweeps_before = heavy_sweeps(&metrics)?;

    // The poller: `sminfo <master LID>` back to back from Hca4, counted.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let stop = std::sync::Arc::clone(&stop);
        let mut cmd = lab.sim.command_on("Hca4", "sminfo");
        cmd.arg(&master_lid);
        let program = cmd.get_program().to_owned();
        let envs: Vec<_> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        std::thread::spawn(move || -> (u64, u64, Vec<String>) {
            let (mut sent, mut answered, mut misses) = (0u64, 0u64, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut c = Command::new(&program);
                c.args(&args).envs(envs.iter().map(|(k, v)| (k, v)));
                sent += 1;
                match ibsm_labkit::run_with_timeout(&mut c, RUN_TIMEOUT) {
                    Ok(o)
                        if o.status.success()
                            && String::from_utf8_lossy(&o.stdout).contains("SMINFO_MASTER") =>
                    {
                        answered += 1;
                    }
                    Ok(o) => misses.push(format!(
                        "{}: {}{}",
                        o.status,
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )),
                    Err(e) => misses.push(e.to_string()),
                }
            }
            (sent, answered, misses)
        })
    };

    // The storm: flap the second inter-switch cable (the first keeps the fabric
    // connected), with packet loss towards Hca2 (off the poller's path).
    lab.sim.error_rate("Switch2", 1, 30, None)?;
    let started = Instant::now();
    for _ in 0..40 {
        lab.sim.unlink("Switch1", Some(5))?;
        std::thread::sleep(Duration::from_millis(50));
        lab.sim.link("Switch1", 5, "Switch2", 5)?;
        std::thread::sleep(Duration::from_millis(50));
    }
    lab.sim.error_rate("Switch2", 1, 0, None)?;
    let storm = started.elapsed();
    // Let what the storm requested run, then stop polling.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (sent, answered, misses) = poller.join().expect("poller thread");
    let sweeps = heavy_sweeps(&metrics)? - sweeps_before;
    let traps = metric(&metrics, "ibsm_traps_total")?;
    let deferred = metric(&metrics, "ibsm_trap_sweeps_deferred_total")?;

    eprintln!(
        "storm {storm:?}: {answered}/{sent} polls answered, {sweeps} heavy sweeps, {traps} traps, {deferred} trap sweeps deferred"
    );
    assert!(sent >= 10, "only {sent} polls: the poller did not run");
    assert_eq!(
        answered,
        sent,
        "{} of {sent} SMInfo polls unanswered during the storm: {misses:?}\nibsmd log:\n{}",
        sent - answered,
        lab.log()
    );
    // With a 1 s hold-down, over the storm and the 3 s after it: at most one trap
    // sweep per second, plus the one running when the storm began and one more for
    // the rounding. Without the hold-down 160-odd traps make back-to-back sweeps.
    let allowed = (storm + Duration::from_secs(3)).as_secs() + 2;
    assert!(
        sweeps <= allowed,
        "{sweeps} heavy sweeps over a {storm:?} storm (allowed {allowed}; {traps} traps, {deferred} deferred)\nibsmd log:\n{}",
        lab.log()
    );
    assert!(sweeps >= 1, "the storm caused no heavy sweep at all");
    assert!(traps > 0, "ibsim sent no trap: the storm tested nothing");
    // The traps by port: the flapping switches' LIDs (trap 128 names no port: port 0),
    // adding up to the traps received.
    let text = http_get(&metrics, "/metrics")?;
    let by_port: Vec<(String, u64)> = text
        .lines()
        .filter(|l| l.starts_with("ibsm_port_traps_total{"))
        .filter_map(|l| {
            let (series, v) = l.rsplit_once(' ')?;
            Some((series.to_string(), v.parse().ok()?))
        })
        .collect();
    let total: u64 = by_port.iter().map(|(_, n)| n).sum();
    assert!(
        !by_port.is_empty() && total == traps,
        "{traps} traps, by port {by_port:?}"
    );
    // And the fabric still works: the flapped cable is back, the master is master.
    let out = lab.diag("Hca4", "sminfo", &[&master_lid])?;
    assert!(out.contains("SMINFO_MASTER"), "{out}");
    Ok(())
}

#[test]
fn lid_of_portinfo_reads_smpquery_output() {
    let text = "# Port info: DR path slid 65535; dlid 65535; 0,1,2 port 1\nMkey:............................0x0000000000000000\nLid:.............................4\nSMLid:...........................1\n";
    assert_eq!(lid_of_portinfo(text), Some(4));
    assert_eq!(lid_of_portinfo("Lid:....0x0010\n"), Some(16));
    assert_eq!(lid_of_portinfo("nothing"), None);
}
