//! Failover with SA state (issue 11, item 7), on ibsim: the master is SIGKILLed with
//! multicast groups, a ServiceRecord and an InformInfo subscription in place, and the
//! new master serves them as they were.
//!
//! Fabric: [`NET`], two switches joined by two cables and seven HCAs (written by the
//! test: ibsim's examples have four). Three replicated ibsmd (one Raft cluster) run on
//! Hca1-3; Hca1 (the lowest port GUID) is master. Hca4 holds a long-running
//! `ibsmctl sa --issm inform subscribe --trap 66` (under ibsim a Report to QP1 reaches
//! only a port's IsSM client, hence `--issm`, and hence a node of its own: nothing else
//! there reads QP1). Hca5-7 are the clients that join and register:
//!
//! - a group created with an MGID the SA allocates: Hca5 full, Hca6 non, Hca7
//!   send-only member; the IPoIB broadcast group ff12:401b:ffff::ffff:ffff: Hca5 full,
//!   Hca6 send-only, Hca7 non member (both groups span both switches);
//! - a ServiceRecord of Hca6 with a one-hour lease.
//!
//! Once a standby's replica holds all of it (`ibsmctl status` of each standby), the
//! test records: the whole MCMemberRecord, ServiceRecord and InformInfoRecord tables
//! (`ibsmctl sa --json`, trusted, from Hca5: every record whole), saquery's `-g`,
//! `-m <MLID>` of each group and `SR` answers (from Hca6), and every switch's
//! `ibroute -M`. Then the master is SIGKILLed (and its ibsim client reaped, as a
//! kernel would close its files). Checked after the failover:
//!
//! - a standby becomes master and logs that it serves the replica's SA state with no
//!   client re-registration, with the counts of what it took over;
//! - the same tables and saquery answers, field by field (no field may differ; see
//!   [`SR_UNDELIVERED_FIELDS`] for the bytes umad2sim does not deliver to saquery), so
//!   the same MGIDs and MLIDs;
//! - `ibroute -M` unchanged on every switch (and it carries both groups);
//! - the subscriber, never re-subscribed, gets the Report of trap 66 for a group
//!   created after the failover, issued by the new master (IssuerLID its LID), as it
//!   got the first master's for the first group.
//!
//! ibsim quirks handled here: `ibroute` under umad2sim now and then dies of SIGSEGV in
//! the preload (retried); saquery never ACKs RMPP and ibsmd resends unacknowledged
//! segments, so saquery runs are spaced by [`IBSM_SA_RESEND_SPAN`] on their node, and
//! ibsmd's whole-MAD segments print zero padding records after the real ones. Never
//! skipped: a missing tool fails the test.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{
    compare, render, run_with_timeout, ChildGuard, Ibsim, IbsimOptions, Ibsmd, IbsmdOptions,
    SaRecord, SwitchMft, IBSM_SA_RESEND_SPAN, SR_UNDELIVERED_FIELDS,
};
use serde_json::Value;

/// Two switches, two cables between them, seven HCAs spread over both.
const NET: &str = r#"
Switch	8 "Switch1"
[1]	"Hca1"[1]
[2]	"Hca3"[1]
[3]	"Switch2"[3]
[4]	"Hca5"[1]
[5]	"Switch2"[5]
[6]	"Hca7"[1]

Switch	8 "Switch2"
[1]	"Hca2"[1]
[2]	"Hca4"[1]
[3]	"Switch1"[3]
[4]	"Hca6"[1]
[5]	"Switch1"[5]

Hca	2 "Hca1"
[1]	"Switch1"[1]

Hca	2 "Hca2"
[1]	"Switch2"[1]

Hca	2 "Hca3"
[1]	"Switch1"[2]

Hca	2 "Hca4"
[1]	"Switch2"[2]

Hca	2 "Hca5"
[1]	"Switch1"[4]

Hca	2 "Hca6"
[1]	"Switch2"[4]

Hca	2 "Hca7"
[1]	"Switch1"[6]
"#;

const SMS: [&str; 3] = ["Hca1", "Hca2", "Hca3"];
const SUBSCRIBER: &str = "Hca4";
/// Joins, `ibsmctl sa` tables, `ibroute`.
const CLIENT: &str = "Hca5";
/// Joins, the service, saquery.
const OTHER: &str = "Hca6";
const THIRD: &str = "Hca7";
const BROADCAST: &str = "ff12:401b:ffff::ffff:ffff";
const SERVICE_ID: &str = "0x1000000000005a5a";
const STEP: Duration = Duration::from_secs(60);
/// What a new master logs when it took the SA state from a current replica.
const CURRENT: &str = "no client re-registration";

fn s(v: &str) -> String {
    v.to_string()
}

/// `ibsmctl --json sa ARGS` on `host`: its last JSON line.
fn sa(sim: &Ibsim, host: &str, args: &[&str]) -> Result<Value> {
    let mut cmd = sim.command_on(host, binary("ibsmctl")?);
    cmd.arg("--json").arg("sa").args(args);
    let out = run_with_timeout(&mut cmd, STEP)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "ibsmctl sa {args:?} on {host}: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no JSON from ibsmctl sa {args:?}: {stdout}"))?;
    serde_json::from_str(line).with_context(|| format!("ibsmctl sa {args:?}: {line}"))
}

/// A whole table from the SA, trusted (every member, every subscription), checked to
/// have arrived whole.
fn table(sim: &Ibsim, args: &[&str]) -> Result<Vec<Value>> {
    let mut full = vec!["--sm-key", "1"];
    full.extend_from_slice(args);
    let v = sa(sim, CLIENT, &full)?;
    ensure!(
        v["damaged"].as_array().is_some_and(Vec::is_empty),
        "records lost on the way: {v}"
    );
    v["records"]
        .as_array()
        .cloned()
        .with_context(|| format!("no records in {v}"))
}

/// `ibsmctl --endpoint http://ADDR --json ARGS` (the Fabric/Control service).
fn ctl(addr: &str, args: &[&str]) -> Result<Value> {
    let mut cmd = std::process::Command::new(binary("ibsmctl")?);
    cmd.arg("--endpoint")
        .arg(format!("http://{addr}"))
        .arg("--json")
        .args(args);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(10))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "ibsmctl {args:?} at {addr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).with_context(|| format!("ibsmctl {args:?}: {stdout}"))
}

/// What the SA serves, as the test records it before and after the failover.
#[derive(Debug, Clone, PartialEq)]
struct SaState {
    members: Vec<Value>,
    services: Vec<Value>,
    informs: Vec<Value>,
    /// saquery `-g`, `-m <MLID>` per group, `SR`: (query, the SA's records).
    saquery: Vec<(String, Vec<SaRecord>)>,
}

fn record_state(sim: &Ibsim, mlids: &[u16]) -> Result<SaState> {
    let mut saquery = Vec::new();
    let q = |args: &[&str], pad_key: &str| -> Result<(String, Vec<SaRecord>)> {
        let t = sim
            .saquery(OTHER)
            .sm_key(1)
            .sa_timeout_ms(2000)
            .spacing(IBSM_SA_RESEND_SPAN)
            .query(args)?;
        Ok((args.join(" "), real_records(t, pad_key)))
    };
    saquery.push(q(&["-g"], "Mlid")?);
    for mlid in mlids {
        saquery.push(q(&["-m", &format!("{mlid:#06x}")], "Mlid")?);
    }
    saquery.push(q(&["SR"], "id")?);
    Ok(SaState {
        members: table(sim, &["members"])?,
        services: table(sim, &["services"])?,
        informs: table(sim, &["informs"])?,
        saquery,
    })
}

/// The SA's own records of a saquery answer: ibsmd sends every GetTableResp segment
/// as a whole MAD, so saquery prints its records, then zero-filled padding records
/// (`pad_key` 0). A ServiceRecord lands in `undelivered` (its last field lies past
/// what umad2sim delivers); it is kept, and [`SR_UNDELIVERED_FIELDS`] are not compared.
fn real_records(t: ibsm_labkit::SaTable, pad_key: &str) -> Vec<SaRecord> {
    t.records
        .into_iter()
        .chain(t.undelivered)
        .take_while(|r| r.number(pad_key) != Some(0) && r.get(pad_key) != Some("::"))
        .collect()
}

/// Every switch's MFT, `ibroute -M` from [`CLIENT`], retried: ibroute under umad2sim
/// now and then dies of SIGSEGV in the preload's receiver thread.
fn mfts(sim: &Ibsim, switches: &[u16]) -> Result<BTreeMap<u16, SwitchMft>> {
    let mut out = BTreeMap::new();
    for &lid in switches {
        let mut last = None;
        for _ in 0..3 {
            match sim.ibroute_mft(CLIENT, lid) {
                Ok(m) => {
                    last = None;
                    out.insert(lid, m);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            bail!("ibroute -M {lid} failed three times: {e}");
        }
    }
    Ok(out)
}

/// The long-running subscriber's output: its JSON lines so far.
fn subscriber_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The Reports the subscriber printed so far.
fn reports(path: &Path) -> Vec<Value> {
    subscriber_lines(path)
        .into_iter()
        .filter(|v| v["type"] == "report")
        .collect()
}

/// Wait until the subscriber has printed `n` Reports; they.
fn wait_reports(path: &Path, n: usize, sub: &mut ChildGuard) -> Result<Vec<Value>> {
    let deadline = Instant::now() + STEP;
    loop {
        let r = reports(path);
        if r.len() >= n {
            return Ok(r);
        }
        if let Some(status) = sub.try_wait()? {
            bail!(
                "the subscriber exited ({status}) after {} Reports:\n{}",
                r.len(),
                std::fs::read_to_string(path).unwrap_or_default()
            );
        }
        ensure!(
            Instant::now() < deadline,
            "{} Reports, {n} expected:\n{}",
            r.len(),
            std::fs::read_to_string(path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Report of trap 66 (multicast group created) for `mgid`, issued by `lid`.
fn check_report(r: &Value, mgid: &str, lid: u16) -> Result<()> {
    let rec = &r["record"];
    let text = rec.to_string();
    ensure!(
        text.contains("66") && rec["notice"]["issuer_lid"].as_u64() == Some(u64::from(lid)),
        "a trap 66 Report issued by LID {lid}: {rec}"
    );
    // DataDetails of traps 64-67: the GID at bytes 6..22.
    let details: Vec<u8> = rec["notice"]["data_details"]
        .as_array()
        .context("data_details")?
        .iter()
        .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
        .collect::<Option<_>>()
        .with_context(|| format!("data_details of {rec}"))?;
    let gid: [u8; 16] = details
        .get(6..22)
        .and_then(|b| b.try_into().ok())
        .context("a GID in DataDetails")?;
    let got = std::net::Ipv6Addr::from(gid);
    let want: std::net::Ipv6Addr = mgid.parse().context("MGID")?;
    ensure!(got == want, "the Report names {got}, the group is {want}: {rec}");
    Ok(())
}

/// The LID of `host`'s port 1 (from the SA's NodeRecords, by node description).
fn lid_of(nodes: &[Value], host: &str) -> Result<u16> {
    let r = nodes
        .iter()
        .find(|r| r["node_description"] == host)
        .with_context(|| format!("no NodeRecord of {host}"))?;
    let lid = &r["lid"];
    lid.as_u64()
        .or_else(|| {
            lid.as_str()
                .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        })
        .and_then(|l| u16::try_from(l).ok())
        .with_context(|| format!("LID of {r}"))
}

/// Field-by-field differences of two JSON tables (same order: the SA answers in its
/// own order, which the replica keeps).
fn json_diffs(what: &str, a: &[Value], b: &[Value]) -> Vec<String> {
    if a.len() != b.len() {
        return vec![format!("{what}: {} records before, {} after", a.len(), b.len())];
    }
    a.iter()
        .zip(b)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("{what} #{i}:\n  before {x}\n  after  {y}"))
        .collect()
}

#[test]
fn a_new_master_serves_the_groups_services_and_subscriptions_of_the_old() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let t0 = Instant::now();
    let (ibsmd_bin, ibsmctl) = (binary("ibsmd")?, binary("ibsmctl")?);
    let netdir = tempfile::tempdir()?;
    let net = netdir.path().join("net.2sw7hca");
    std::fs::write(&net, NET)?;
    let sim = Ibsim::start(&net, IbsimOptions::default())?;

    // Three replicated ibsmd; Hca1 first, master.
    let ports: Vec<u16> = (0..SMS.len())
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
        })
        .collect::<std::io::Result<_>>()?;
    let secret = sim.dir().join("cluster-secret");
    std::fs::write(&secret, "sa-failover-cluster-secret-0123456789\n")?;
    let mut sms = Vec::new();
    for (i, host) in SMS.iter().enumerate() {
        let mut args = vec![
            s("--insecure-plaintext"),
            s("--cluster-secret-file"),
            secret.display().to_string(),
            s("--node-id"),
            (i + 1).to_string(),
            s("--data-dir"),
            sim.dir().join(format!("data-{i}")).display().to_string(),
        ];
        for (j, p) in ports.iter().enumerate() {
            args.push(s("--peer"));
            args.push(format!("{}=127.0.0.1:{p}", j + 1));
        }
        let opts = IbsmdOptions {
            grpc: format!("127.0.0.1:{}", ports[i]),
            rust_log: s("info,openraft=warn"),
            args,
            ..IbsmdOptions::default()
        };
        let mut sm = Ibsmd::start(&sim, host, &ibsmd_bin, opts)?;
        if i == 0 {
            sm.wait_subnet_up(STEP)?;
        }
        sms.push(Some(sm));
    }
    let master = 0;
    eprintln!("master up at {:?}", t0.elapsed());
    let nodes = table(&sim, &["nodes"])?;
    let switches: Vec<u16> = ["Switch1", "Switch2"]
        .iter()
        .map(|n| lid_of(&nodes, n))
        .collect::<Result<_>>()?;
    let master_lid = lid_of(&nodes, SMS[master])?;

    // The subscriber: trap 66 (group created), held for the whole test.
    let sub_out = sim.dir().join("subscriber.out");
    let mut cmd = sim.command_on(SUBSCRIBER, &ibsmctl);
    cmd.args([
        "--json", "sa", "--issm", "inform", "subscribe", "--trap", "66", "--wait-s", "600",
        "--keep",
    ])
    .stdout(std::fs::File::create(&sub_out)?)
    .stderr(std::fs::File::create(sim.dir().join("subscriber.err"))?)
    .stdin(Stdio::null());
    let mut sub = sim.spawn(&mut cmd)?;
    let deadline = Instant::now() + STEP;
    while !subscriber_lines(&sub_out)
        .iter()
        .any(|v| v["type"] == "subscribed")
    {
        if let Some(status) = sub.try_wait()? {
            bail!(
                "the subscriber exited ({status}): {}",
                std::fs::read_to_string(sim.dir().join("subscriber.err")).unwrap_or_default()
            );
        }
        ensure!(Instant::now() < deadline, "the subscriber never subscribed");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Groups: one with an SA-allocated MGID, the broadcast group; full, non and
    // send-only members on both switches.
    let created = sa(&sim, CLIENT, &["join", "--create"])?;
    let mgid = created["record"]["mgid"]
        .as_str()
        .context("mgid")?
        .to_string();
    for (host, group, state) in [
        (OTHER, mgid.as_str(), "non"),
        (THIRD, mgid.as_str(), "send-only"),
        (CLIENT, BROADCAST, "full"),
        (OTHER, BROADCAST, "send-only"),
        (THIRD, BROADCAST, "non"),
    ] {
        sa(&sim, host, &["join", "--mgid", group, "--state", state])?;
    }
    sa(
        &sim,
        OTHER,
        &[
            "service",
            "register",
            "--id",
            SERVICE_ID,
            "--name",
            "ibsm-sa-failover",
            "--lease-s",
            "3600",
        ],
    )?;
    // The first master reported the created group.
    let first = wait_reports(&sub_out, 1, &mut sub)?;
    check_report(&first[0], &mgid, master_lid)?;
    eprintln!("SA state in place at {:?}", t0.elapsed());

    // Every standby's replica holds it all.
    let deadline = Instant::now() + STEP;
    for (i, port) in ports.iter().enumerate().filter(|(i, _)| *i != master) {
        let addr = format!("127.0.0.1:{port}");
        loop {
            let st = ctl(&addr, &["status"])?;
            let sa = &st["sa"];
            let want = [
                ("groups", 2),
                ("members", 6),
                ("services", 1),
                ("subscriptions", 1),
            ];
            if want.iter().all(|(k, n)| sa[*k].as_u64() == Some(*n)) {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "standby {} never held the SA state: {st}",
                SMS[i]
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    // Before.
    let groups = table(&sim, &["members"])?;
    let mut mlids: Vec<u16> = groups
        .iter()
        .filter_map(|r| r["mlid"].as_str())
        .filter_map(|m| u16::from_str_radix(m.trim_start_matches("0x"), 16).ok())
        .collect();
    mlids.sort_unstable();
    mlids.dedup();
    ensure!(mlids.len() == 2, "two groups' MLIDs: {groups:?}");
    let before = record_state(&sim, &mlids)?;
    let mft_before = mfts(&sim, &switches)?;
    for (lid, m) in &mft_before {
        for mlid in &mlids {
            ensure!(
                m.entries.get(mlid).is_some_and(|p| !p.is_empty()),
                "switch {lid} does not forward MLID {mlid:#x}: {m:?}"
            );
        }
    }
    eprintln!("recorded at {:?}", t0.elapsed());

    // SIGKILL the master; a kernel would close its files: reap its ibsim client.
    if let Some(mut m) = sms[master].take() {
        m.kill()?;
    }
    sim.reap_dead_clients()?;
    let new = wait_for_log(&mut sms, CURRENT)?;
    let new_sm = sms[new].as_mut().context("new master")?;
    new_sm.wait_subnet_up(STEP)?;
    let log = new_sm.log();
    let line = log
        .lines()
        .find(|l| l.contains(CURRENT))
        .context("the line")?;
    for want in [
        "groups=2",
        "services=1",
        "subscriptions=1",
        "members=6",
    ] {
        ensure!(line.contains(want), "{want} in {line:?}");
    }
    eprintln!("{} master at {:?}", SMS[new], t0.elapsed());

    // After: the same records, the same MFTs.
    let after = record_state(&sim, &mlids)?;
    let mut bad = json_diffs("MCMemberRecord", &before.members, &after.members);
    bad.extend(json_diffs("ServiceRecord", &before.services, &after.services));
    bad.extend(json_diffs("InformInfoRecord", &before.informs, &after.informs));
    for ((q, b), (_, a)) in before.saquery.iter().zip(&after.saquery) {
        ensure!(!b.is_empty(), "saquery {q}: no records before the failover");
        let d = compare(b, a, SR_UNDELIVERED_FIELDS);
        if !d.is_empty() {
            bad.push(format!("saquery {q}:\n{}", render(&d)));
        }
    }
    ensure!(
        bad.is_empty(),
        "the new master answers differently:\n{}",
        bad.join("\n")
    );
    let mft_after = mfts(&sim, &switches)?;
    for (lid, b) in &mft_before {
        let a = mft_after.get(lid).context("MFT after")?;
        ensure!(
            a.entries == b.entries,
            "switch {lid}: MFT before {:?}, after {:?}",
            b.entries,
            a.entries
        );
    }
    eprintln!("records and MFTs checked at {:?}", t0.elapsed());

    // The subscriber, never re-subscribed, gets the new master's Report.
    let new_lid = lid_of(&table(&sim, &["nodes"])?, SMS[new])?;
    let created = sa(&sim, CLIENT, &["join", "--create"])?;
    let second = created["record"]["mgid"].as_str().context("mgid")?;
    let got = wait_reports(&sub_out, 2, &mut sub)?;
    check_report(&got[1], second, new_lid)?;
    eprintln!("done at {:?}", t0.elapsed());
    sub.kill()?;
    Ok(())
}

/// Wait until one running ibsmd's log contains `needle`; its index.
fn wait_for_log(sms: &mut [Option<Ibsmd>], needle: &str) -> Result<usize> {
    let deadline = Instant::now() + STEP;
    loop {
        for (i, sm) in sms.iter().enumerate() {
            if sm.as_ref().is_some_and(|sm| sm.log().contains(needle)) {
                return Ok(i);
            }
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = sms.iter().flatten().map(|s| s.log()).collect();
            bail!("no ibsmd logged {needle:?}:\n{}", logs.join("\n----\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
