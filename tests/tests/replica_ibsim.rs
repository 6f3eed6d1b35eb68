//! Replicated fabric state across master failovers, on ibsim (issue "Replicated fabric
//! state", tests):
//!
//! three `ibsmd --fabric umad --node-id N --peer ... --data-dir ...` processes on
//! three HCAs; the master is SIGKILLed 20 times in a row (each victim restarted with
//! the same command line, so it rejoins its Raft cluster from its own data dir).
//! Every time a new master takes over:
//!
//! - no port's LID changes, no LFT entry changes and no CA port's P_Key table changes
//!   (a verified takeover leaves the tables whose replicated digest matches alone), as
//!   read back from the fabric by infiniband-diags (`ibnetdiscover -p`, `ibroute`,
//!   `smpquery pkeys`), not from our own state;
//! - its epoch is higher than every epoch acknowledged before, and every replica's
//!   applied index reaches at least what the cluster had acknowledged (a committed
//!   entry is never lost: the restarted victims catch up to it too).
//!
//! Runs on net.2sw2path4hca and a generated k=4 fat tree (20 switches, 16 HCAs), one
//! test each (in parallel: each has its own IBSIM_SOCKNAME and temp dir). Fails (never
//! skips) when ibsim, umad2sim or infiniband-diags are missing.
//!
//! The binaries are built through cargo by `ibsm_integration::binary` (see its
//! crate doc for why).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{parse_smpquery_pkeys, ChildGuard, Ibsim, IbsimOptions};

const ROUNDS: usize = 20;
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// Raft election timeouts a new master may take to lead Raft (generous: it takes
/// about one lease plus an election when the leader is another member).
const LEADER_TIMEOUTS: u32 = 20;
/// The daemon's Raft election timeout (`RaftTimers::default().election_max`).
const ELECTION_TIMEOUT: Duration = Duration::from_millis(500);

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("bind an ephemeral port")?;
    Ok(l.local_addr()?.port())
}

/// What `ibsmctl --json status` says about one member.
#[derive(Debug, Clone)]
struct Status {
    state: String,
    epoch: u64,
    applied: u64,
    degraded: bool,
    last_sweep: String,
    guid: String,
    raft_role: String,
}

/// Three ibsmd processes forming one replication cluster on one ibsim fabric.
struct Cluster {
    sim: Ibsim,
    ibsmd: PathBuf,
    ibsmctl: PathBuf,
    hosts: Vec<String>,
    ports: Vec<u16>,
    procs: Vec<Option<ChildGuard>>,
    /// Host that runs the diagnostics (not an SM host).
    probe: String,
    /// Mutual TLS: the directory of [`make_pki`]'s files; `None`: plaintext.
    pki: Option<PathBuf>,
}

impl Cluster {
    fn start(netfile: &Path, hosts: &[&str], probe: &str) -> Result<Cluster> {
        Cluster::start_with(netfile, hosts, probe, false)
    }

    /// `tls`: every member serves its control API and Raft with mutual TLS
    /// (`--tls-cert/--tls-key/--tls-client-ca`), and ibsmctl presents a client
    /// certificate.
    fn start_with(netfile: &Path, hosts: &[&str], probe: &str, tls: bool) -> Result<Cluster> {
        ibsm_labkit::require_lab()?;
        for tool in ["ibnetdiscover", "ibroute"] {
            ibsm_labkit::require_tool(tool)?;
        }
        let (ibsmd, ibsmctl) = (binary("ibsmd")?, binary("ibsmctl")?);
        let sim = Ibsim::start(netfile, IbsimOptions::default())?;
        let pki = if tls {
            let dir = sim.dir().join("pki");
            make_pki(&dir, hosts.len())?;
            Some(dir)
        } else {
            None
        };
        let ports = (0..hosts.len())
            .map(|_| free_port())
            .collect::<Result<Vec<_>>>()?;
        let mut c = Cluster {
            sim,
            ibsmd,
            ibsmctl,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ports,
            procs: Vec::new(),
            probe: probe.to_string(),
            pki,
        };
        std::fs::write(
            c.sim.dir().join("cluster-secret"),
            "replica-ibsim-test-cluster-secret\n",
        )?;
        for i in 0..hosts.len() {
            let p = c.spawn(i)?;
            c.procs.push(Some(p));
        }
        Ok(c)
    }

    fn spawn(&self, i: usize) -> Result<ChildGuard> {
        let host = &self.hosts[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.sim.dir().join(format!("ibsmd-{host}.log")))?;
        let mut cmd = self.sim.command_on(host, &self.ibsmd);
        cmd.args(["--fabric", "umad", "--priority", "5"]);
        match &self.pki {
            None => {
                cmd.arg("--insecure-plaintext")
                    .arg("--cluster-secret-file")
                    .arg(self.sim.dir().join("cluster-secret"));
            }
            Some(d) => {
                cmd.arg("--tls-cert")
                    .arg(d.join(format!("member{}.crt", i + 1)))
                    .arg("--tls-key")
                    .arg(d.join(format!("member{}.key", i + 1)))
                    .arg("--tls-client-ca")
                    .arg(d.join("ca.pem"));
            }
        }
        cmd.arg("--grpc")
            .arg(format!("127.0.0.1:{}", self.ports[i]))
            .arg("--node-id")
            .arg((i + 1).to_string())
            .arg("--data-dir")
            .arg(self.sim.dir().join(format!("data-{}", i + 1)));
        for (j, p) in self.ports.iter().enumerate() {
            cmd.arg("--peer").arg(format!("{}=127.0.0.1:{p}", j + 1));
        }
        cmd.env("RUST_LOG", "info,openraft=warn,ibsm_core::election=warn")
            .stdout(Stdio::null())
            .stderr(log);
        Ok(self.sim.spawn(&mut cmd)?)
    }

    /// `ibsmctl status` of member `i`, over TLS with `client` (a certificate name in
    /// the PKI directory, or none) when the cluster runs TLS.
    fn ctl_status(&self, i: usize, client: Option<&str>) -> Result<std::process::Output> {
        let mut cmd = Command::new(&self.ibsmctl);
        cmd.args([
            "--json",
            "--rpc-timeout-ms",
            "2000",
            "--connect-timeout-ms",
            "500",
        ]);
        match &self.pki {
            None => {
                cmd.arg("--endpoint")
                    .arg(format!("http://127.0.0.1:{}", self.ports[i]));
            }
            Some(d) => {
                cmd.arg("--endpoint")
                    .arg(format!("https://127.0.0.1:{}", self.ports[i]))
                    .arg("--ca-cert")
                    .arg(d.join("ca.pem"));
                if let Some(c) = client {
                    cmd.arg("--client-cert")
                        .arg(d.join(format!("{c}.crt")))
                        .arg("--client-key")
                        .arg(d.join(format!("{c}.key")));
                }
            }
        }
        cmd.arg("status");
        Ok(ibsm_labkit::run_with_timeout(
            &mut cmd,
            Duration::from_secs(10),
        )?)
    }

    fn status(&self, i: usize) -> Option<Status> {
        let out = self.ctl_status(i, Some("operator")).ok()?;
        if !out.status.success() {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        Some(Status {
            state: s("state"),
            epoch: n("epoch"),
            applied: n("applied_index"),
            degraded: v.get("degraded").and_then(|x| x.as_bool()).unwrap_or(true),
            last_sweep: s("last_sweep"),
            guid: s("guid"),
            raft_role: s("raft_role"),
        })
    }

    /// Wait until the MASTER `i`'s member is the Raft leader (Raft leadership follows
    /// the SM master), within `LEADER_TIMEOUTS` election timeouts of the daemon.
    fn wait_raft_leader(&self, i: usize, what: &str) -> Result<()> {
        let limit = ELECTION_TIMEOUT * LEADER_TIMEOUTS;
        let deadline = Instant::now() + limit;
        loop {
            let s = self.status(i);
            if s.as_ref().is_some_and(|s| s.raft_role == "leader") {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{what}: MASTER {} is not the Raft leader within {LEADER_TIMEOUTS} election timeouts: {s:?}\nits log:\n{}",
                    self.hosts[i],
                    self.log(i)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait for a master other than `not` that holds an epoch above `above` and has
    /// finished a heavy sweep as master.
    fn wait_master(&self, not: Option<usize>, above: u64) -> Result<(usize, Status)> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut last = Vec::new();
        while Instant::now() < deadline {
            last.clear();
            for i in 0..self.hosts.len() {
                if Some(i) == not || self.procs[i].is_none() {
                    continue;
                }
                if let Some(s) = self.status(i) {
                    if s.state == "MASTER"
                        && s.epoch > above
                        && !s.degraded
                        && s.last_sweep.starts_with("master heavy sweep")
                    {
                        return Ok((i, s));
                    }
                    last.push((i, s));
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "no new master (epoch > {above}, not {not:?}) within {STEP_TIMEOUT:?}; last: {last:?}"
        )
    }

    /// Wait until every running member applied at least `index`.
    fn wait_applied(&self, index: u64) -> Result<()> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let lagging: Vec<(usize, Option<u64>)> = (0..self.hosts.len())
                .filter(|i| self.procs[*i].is_some())
                .map(|i| (i, self.status(i).map(|s| s.applied)))
                .filter(|(_, a)| !matches!(a, Some(a) if *a >= index))
                .collect();
            if lagging.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("members {lagging:?} did not apply index {index} within {STEP_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn diag(&self, args: &[&str]) -> Result<String> {
        let mut cmd = self.sim.command_on(&self.probe, args[0]);
        cmd.args(&args[1..]);
        let out = ibsm_labkit::run_with_timeout(&mut cmd, Duration::from_secs(30))?;
        if !out.status.success() {
            bail!(
                "{args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// LIDs of every port (`guid/port` -> LID; switches by port 0), every switch's
    /// LFT (`switch guid` -> [(LID, egress port)]) and every CA port's P_Key table
    /// (`guid/port` -> non-empty entries of block 0), as the fabric reports them.
    fn fabric(&self) -> Result<Fabric> {
        let text = self.diag(&["ibnetdiscover", "-p"])?;
        let mut lids = BTreeMap::new();
        let mut switches = BTreeMap::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(kind), Some(lid), Some(port), Some(guid)) =
                (f.first(), f.get(1), f.get(2), f.get(3))
            else {
                continue;
            };
            let lid: u16 = lid
                .parse()
                .with_context(|| format!("LID in ibnetdiscover line {line:?}"))?;
            match *kind {
                "SW" => {
                    lids.insert(format!("{guid}/0"), lid);
                    switches.insert(guid.to_string(), lid);
                }
                "CA" | "RT" => {
                    lids.insert(format!("{guid}/{port}"), lid);
                }
                _ => {}
            }
        }
        if switches.is_empty() {
            bail!("ibnetdiscover -p found no switch:\n{text}");
        }
        let mut pkeys = BTreeMap::new();
        for (port, lid) in &lids {
            if port.ends_with("/0") {
                continue;
            }
            let out = self.diag(&["smpquery", "pkeys", &lid.to_string()])?;
            let keys = parse_smpquery_pkeys(&out);
            if keys.is_empty() {
                bail!("smpquery pkeys {lid} ({port}) listed no P_Key:\n{out}");
            }
            pkeys.insert(port.clone(), keys);
        }
        let mut lfts = BTreeMap::new();
        for (guid, lid) in &switches {
            let out = self.diag(&["ibroute", &lid.to_string()])?;
            let mut entries = Vec::new();
            for line in out.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if let (Some(l), Some(p)) = (f.first(), f.get(1)) {
                    if let (Some(l), Ok(p)) = (l.strip_prefix("0x"), p.parse::<u8>()) {
                        if let Ok(l) = u16::from_str_radix(l, 16) {
                            entries.push((l, p));
                        }
                    }
                }
            }
            if entries.is_empty() {
                bail!("ibroute {lid} ({guid}) listed no LFT entry:\n{out}");
            }
            lfts.insert(guid.clone(), entries);
        }
        Ok(Fabric { lids, lfts, pkeys })
    }

    fn kill(&mut self, i: usize) -> Result<()> {
        if let Some(mut p) = self.procs[i].take() {
            p.kill()?;
        }
        // ibsim does not notice dead clients; a kernel would close their files.
        self.sim.reap_dead_clients()?;
        Ok(())
    }

    fn restart(&mut self, i: usize) -> Result<()> {
        let p = self.spawn(i)?;
        self.procs[i] = Some(p);
        Ok(())
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.sim.dir().join(format!("ibsmd-{}.log", self.hosts[i])))
            .unwrap_or_default()
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Fabric {
    lids: BTreeMap<String, u16>,
    lfts: BTreeMap<String, Vec<(u16, u8)>>,
    pkeys: BTreeMap<String, Vec<u16>>,
}

fn diff(a: &Fabric, b: &Fabric) -> String {
    let mut out = String::new();
    for (k, v) in &a.lids {
        if b.lids.get(k) != Some(v) {
            out.push_str(&format!("LID of {k}: {v} -> {:?}\n", b.lids.get(k)));
        }
    }
    for (k, v) in &a.lfts {
        match b.lfts.get(k) {
            Some(w) if w == v => {}
            Some(w) => {
                let changed: Vec<_> = v.iter().filter(|e| !w.contains(e)).take(8).collect();
                out.push_str(&format!("LFT of {k}: entries {changed:?} changed\n"));
            }
            None => out.push_str(&format!("LFT of {k} gone\n")),
        }
    }
    for (k, v) in &a.pkeys {
        if b.pkeys.get(k) != Some(v) {
            out.push_str(&format!("P_Keys of {k}: {v:x?} -> {:x?}\n", b.pkeys.get(k)));
        }
    }
    out
}

/// Wait until exactly one member is MASTER (epoch >= `epoch`, done with a master
/// heavy sweep, not degraded) and every other running member is STANDBY, twice in a
/// row 300 ms apart: the state a SIGKILL should hit.
fn settle(c: &Cluster, epoch: u64) -> Result<(usize, Status)> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut prev: Option<(usize, u64)> = None;
    let mut last = Vec::new();
    while Instant::now() < deadline {
        last = (0..c.hosts.len())
            .filter(|i| c.procs[*i].is_some())
            .map(|i| (i, c.status(i)))
            .collect::<Vec<_>>();
        let masters: Vec<&(usize, Option<Status>)> = last
            .iter()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| s.state == "MASTER"))
            .collect();
        let standbys = last
            .iter()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| s.state == "STANDBY"))
            .count();
        if let [(i, Some(s))] = masters.as_slice() {
            if standbys + 1 == last.len()
                && s.epoch >= epoch
                && !s.degraded
                && s.last_sweep.starts_with("master heavy sweep")
            {
                if prev == Some((*i, s.epoch)) {
                    return Ok((*i, s.clone()));
                }
                prev = Some((*i, s.epoch));
            } else {
                prev = None;
            }
        } else {
            prev = None;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    bail!(
        "the cluster did not settle (one MASTER, others STANDBY) within {STEP_TIMEOUT:?}: {last:?}"
    )
}

/// The drill: `ROUNDS` SIGKILLs of the master.
fn failover_rounds(netfile: &Path, hosts: &[&str], probe: &str) -> Result<()> {
    let mut c = Cluster::start(netfile, hosts, probe)?;
    let (_, s) = c.wait_master(None, 0)?;
    c.wait_applied(s.applied)?;
    let (mut master, s) = settle(&c, s.epoch)?;
    let mut epoch = s.epoch;
    let baseline = c.fabric()?;
    eprintln!(
        "baseline: {} port LIDs, {} switch LFTs, {} CA P_Key tables; master {} ({}) epoch {epoch}",
        baseline.lids.len(),
        baseline.lfts.len(),
        baseline.pkeys.len(),
        c.hosts[master],
        s.guid
    );
    let mut took = Vec::new();
    for round in 1..=ROUNDS {
        // What the cluster acknowledged before the kill: every survivor has it.
        let acked = c
            .status(master)
            .map(|s| s.applied)
            .context("master status before the kill")?;
        c.wait_applied(acked)?;
        let t0 = Instant::now();
        c.kill(master)?;
        let (next, s) = c.wait_master(Some(master), epoch).with_context(|| {
            format!(
                "round {round}: after SIGKILL of {}; survivor logs:\n{}",
                c.hosts[master],
                (0..c.hosts.len())
                    .filter(|i| *i != master)
                    .map(|i| c
                        .log(i)
                        .lines()
                        .rev()
                        .take(30)
                        .collect::<Vec<_>>()
                        .join("\n"))
                    .collect::<Vec<_>>()
                    .join("\n----\n")
            )
        })?;
        took.push(t0.elapsed());
        if s.epoch <= epoch {
            bail!(
                "round {round}: new master's epoch {} is not above {epoch}",
                s.epoch
            );
        }
        let now = c.fabric()?;
        if now != baseline {
            bail!(
                "round {round}: the fabric changed when {} took over from {}:\n{}\nnew master's log:\n{}",
                c.hosts[next],
                c.hosts[master],
                diff(&baseline, &now),
                c.log(next)
            );
        }
        c.wait_raft_leader(next, &format!("round {round}, after the SIGKILL"))?;
        eprintln!(
            "round {round}: SIGKILL {} -> {} MASTER with the fabric verified in {:.2} s, epoch {} -> {}, fabric unchanged, MASTER leads Raft",
            c.hosts[master],
            c.hosts[next],
            t0.elapsed().as_secs_f64(),
            epoch,
            s.epoch
        );
        // Restart the victim with the same command line: it rejoins from its data
        // dir and must catch up to everything acknowledged (nothing lost).
        c.restart(master)?;
        let head = c.status(next).map_or(acked, |s| s.applied);
        c.wait_applied(head.max(acked))?;
        // The restarted SM may take mastership back (lower GUID): one more new
        // master, which must not move anything either.
        let (m, s2) = settle(&c, s.epoch)?;
        if s2.epoch != s.epoch {
            let now = c.fabric()?;
            if now != baseline {
                bail!(
                    "round {round}: the fabric changed when {} took mastership back:\n{}",
                    c.hosts[m],
                    diff(&baseline, &now)
                );
            }
            eprintln!(
                "round {round}: restarted {} took mastership back, epoch {}, fabric unchanged",
                c.hosts[m], s2.epoch
            );
        }
        c.wait_raft_leader(m, &format!("round {round}, after the restart"))?;
        epoch = s2.epoch;
        master = m;
    }
    let end = c.fabric()?;
    if end != baseline {
        bail!(
            "after the drill the fabric differs:\n{}",
            diff(&baseline, &end)
        );
    }
    // Every replica ends at the master's epoch.
    for i in 0..c.hosts.len() {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let s = c.status(i).context("status at the end")?;
            if s.epoch == epoch {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "{} ends at epoch {} (master holds {epoch})",
                    c.hosts[i],
                    s.epoch
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let log = c.log(master);
    if !log.contains("inherited LFTs read back") || !log.contains("adopted=true") {
        bail!("the last master did not adopt the inherited LFTs:\n{log}");
    }
    took.sort();
    eprintln!(
        "SIGKILL -> new master with the fabric verified: median {:.2} s, max {:.2} s over {ROUNDS} rounds",
        took[took.len() / 2].as_secs_f64(),
        took[took.len() - 1].as_secs_f64()
    );
    Ok(())
}

/// A CA, one certificate per member (`member{N}`, valid for server and client
/// authentication on 127.0.0.1 and localhost: members dial each other for Raft with
/// it), and an `operator` client certificate for ibsmctl.
fn make_pki(dir: &Path, members: usize) -> Result<()> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    std::fs::create_dir_all(dir)?;
    let write = |name: &str, text: String| -> Result<()> {
        std::fs::write(dir.join(name), text).with_context(|| format!("write {name}"))
    };
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::CommonName, "ibsm replica test CA");
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(p, KeyPair::generate()?)?;
    write("ca.pem", ca.pem())?;
    let leaf = |name: String, sans: Vec<String>, ekus: Vec<ExtendedKeyUsagePurpose>| {
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::new(sans)?;
        p.distinguished_name.push(DnType::CommonName, name.as_str());
        p.extended_key_usages = ekus;
        let cert = p.signed_by(&key, &*ca)?;
        write(&format!("{name}.crt"), cert.pem())?;
        write(&format!("{name}.key"), key.serialize_pem())
    };
    for n in 1..=members {
        leaf(
            format!("member{n}"),
            // ibsm-node-<id> binds the certificate to the member's Raft node id.
            vec![
                "127.0.0.1".into(),
                "localhost".into(),
                format!("ibsm-node-{n}"),
            ],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?;
    }
    leaf(
        "operator".into(),
        Vec::new(),
        vec![ExtendedKeyUsagePurpose::ClientAuth],
    )
}

/// Replication with mutual TLS: the three members form their Raft cluster over TLS
/// (nothing else could commit an epoch), a SIGKILLed master is replaced by a new one
/// with a higher epoch whose entries every member applies, and a client without a
/// certificate is refused by the same port that serves Raft.
#[test]
fn replicas_run_raft_over_mutual_tls_and_fail_over() {
    let net = ibsm_labkit::example_net("net.2sw2path4hca").expect("ibsim-utils example net");
    let run = || -> Result<()> {
        let mut c = Cluster::start_with(&net, &["Hca1", "Hca2", "Hca3"], "Hca4", true)?;
        let (_, s) = c.wait_master(None, 0)?;
        c.wait_applied(s.applied)?;
        let (master, s) = settle(&c, s.epoch)?;
        let out = c.ctl_status(master, None)?;
        if out.status.success() {
            bail!(
                "ibsmctl without a client certificate was served: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        c.kill(master)?;
        let (next, s2) = c.wait_master(Some(master), s.epoch)?;
        if s2.epoch <= s.epoch {
            bail!("epoch did not rise: {} then {}", s.epoch, s2.epoch);
        }
        c.restart(master)?;
        let (_, s3) = settle(&c, s2.epoch)?;
        c.wait_applied(s3.applied)
            .with_context(|| format!("new master {next}; log: {}", c.log(master)))?;
        Ok(())
    };
    run().expect("replication over mutual TLS");
}

#[test]
fn sigkill_the_master_20_times_net_2sw2path4hca() {
    let net = ibsm_labkit::example_net("net.2sw2path4hca").expect("ibsim-utils example net");
    failover_rounds(&net, &["Hca1", "Hca2", "Hca3"], "Hca4").expect("failover drill");
}

#[test]
fn sigkill_the_master_20_times_fat_tree_k4() {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let dir = tempfile::tempdir().expect("temp dir");
    let net = dir.path().join("fat-tree-k4.net");
    std::fs::write(&net, ibsm_fabric::netfile::write(&topo)).expect("write net file");
    failover_rounds(&net, &["hca-0", "hca-7", "hca-15"], "hca-3").expect("failover drill");
}
