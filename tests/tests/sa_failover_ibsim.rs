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
//! test records, with `ibsmctl sa --json` (trusted, from Hca5, every record checked
//! whole): the MCMemberRecords of each group (one GetTable per MGID, see
//! [`record_state`]), the whole ServiceRecord and InformInfoRecord tables; saquery's `-g`,
//! `MCMR --mgid` of each group and `SR` answers (from Hca6), and every switch's
//! `ibroute -M`. Then the master is SIGKILLed (and its ibsim client reaped, as a
//! kernel would close its files). Checked after the failover:
//!
//! - a standby becomes master and logs that it serves the replica's SA state with no
//!   client re-registration, with the counts of what it took over;
//! - the same tables and saquery answers, field by field, so the same MGIDs and MLIDs.
//!   No field may differ: every field of these records is what a client set or what
//!   the SA decided at the join/registration (MLID, allocated MGID, group parameters)
//!   and replicated; ServiceLease is the lease as registered (3600), not a countdown;
//!   nothing names the answering SM. The one exception is not the SA's: saquery's
//!   [`SR_UNDELIVERED_FIELDS`], the bytes of a ServiceRecord umad2sim does not deliver;
//! - `ibroute -M` unchanged on every switch (and it carries both groups);
//! - the subscriber, never re-subscribed, gets the Report of trap 66 for a group
//!   created after the failover, issued by the new master (IssuerLID its LID), as it
//!   got the first master's for the first group.
//!
//! ibsim quirks handled here: the diags and `ibsmctl sa` under umad2sim now and then
//! die of SIGSEGV in the preload (questions are asked again, three tries; see [`sa`]
//! and [`create_group`] for the joins); saquery never ACKs RMPP and ibsmd resends unacknowledged
//! segments, so saquery runs are spaced by [`IBSM_SA_RESEND_SPAN`] on their node.
//! ibsmd writes the last segment of a table as its headers and records, so saquery
//! prints exactly the SA's records (checked: no zero-filled ones). Never skipped: a
//! missing tool fails the test.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{
    compare, render, run_with_timeout, start_replicated_cluster, ChildGuard, Ibsim, IbsimOptions,
    Ibsmd, SaRecord, SwitchMft, IBSM_SA_RESEND_SPAN, SR_UNDELIVERED_FIELDS,
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
const SERVICE_ID: u64 = 0x1000_0000_0000_5a5a;
const STEP: Duration = Duration::from_secs(60);
/// What a new master logs when it took the SA state from a current replica.
const CURRENT: &str = "no client re-registration";

/// SIGSEGV's number on Linux.
const SIGSEGV: i32 = 11;

/// `ibsmctl --json sa ARGS` on `host`: its last JSON line. umad2sim's receiver
/// thread now and then crashes a client (SIGSEGV), as it does the diags: a crashed run
/// whose JSON line was printed whole did its work; otherwise it is run again (up to
/// three tries) when `args` are safe to repeat. A `join --create` is not (a second try
/// could make a second group): see [`create_group`].
fn sa(sim: &Ibsim, host: &str, args: &[&str]) -> Result<Value> {
    let tries = if args.contains(&"--create") { 1 } else { 3 };
    let mut last = String::new();
    for _ in 0..tries {
        let mut cmd = sim.command_on(host, binary("ibsmctl")?);
        cmd.arg("--json").arg("sa").args(args);
        let out = run_with_timeout(&mut cmd, STEP)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str::<Value>(l).ok());
        let segv = out.status.signal() == Some(SIGSEGV);
        match json {
            Some(v) if out.status.success() || segv => return Ok(v),
            _ => {
                last = format!(
                    "{}\n{stdout}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                if !segv {
                    break;
                }
            }
        }
    }
    bail!("ibsmctl sa {args:?} on {host}: {last}")
}

/// Create a group with an SA-allocated MGID from [`CLIENT`] (its full member); its
/// MGID. `known`: the MGIDs of the groups [`CLIENT`] is already a member of. When the
/// client crashed before printing, the port's memberships say whether the SA created
/// the group (then it is that one) or not (then it is asked again).
fn create_group(sim: &Ibsim, known: &[&str]) -> Result<String> {
    let mut last = None;
    for _ in 0..3 {
        match sa(sim, CLIENT, &["join", "--create"]) {
            Ok(v) => {
                return v["record"]["mgid"]
                    .as_str()
                    .map(str::to_string)
                    .with_context(|| format!("no MGID in {v}"))
            }
            Err(e) => last = Some(e),
        }
        let gid = gid_of(sim, CLIENT)?;
        let mine = table(sim, &["members", "--port-gid", &gid])?;
        if let Some(m) = mine
            .iter()
            .filter_map(|r| r["mgid"].as_str())
            .find(|m| !known.contains(m))
        {
            return Ok(m.to_string());
        }
    }
    Err(last.map_or_else(|| anyhow::anyhow!("no try"), |e| e.context("join --create")))
}

/// The GID of `host`'s port 1: the subnet prefix fe80::/64 and its port GUID.
fn gid_of(sim: &Ibsim, host: &str) -> Result<String> {
    let lid = lid_of(sim, host)?;
    let guid = diag("ibnetdiscover", || sim.port_lids(CLIENT))?
        .iter()
        .find(|p| p.lid == lid)
        .map(|p| p.guid)
        .with_context(|| format!("no port with LID {lid}"))?;
    Ok(std::net::Ipv6Addr::from((0xfe80u128 << 112) | u128::from(guid)).to_string())
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
    /// saquery `-g`, `MCMR --mgid` per group, `SR`: (query, the SA's records).
    saquery: Vec<(String, Vec<SaRecord>)>,
}

/// Groups are asked for one MGID at a time: a whole MCMemberRecord table of more
/// than three records crosses the bytes umad2sim loses of every RMPP segment, and a
/// member whose PortGID lies there cannot be asked for again by its key.
fn record_state(sim: &Ibsim, mgids: &[&str]) -> Result<SaState> {
    let mut saquery = Vec::new();
    // Untrusted, `-g` answers one record per group; trusted (SM_Key 1), MCMR one per
    // member.
    let q = |args: &[&str], trusted: bool| -> Result<(String, Vec<SaRecord>)> {
        let mut sa = sim
            .saquery(OTHER)
            .sa_timeout_ms(2000)
            .spacing(IBSM_SA_RESEND_SPAN);
        if trusted {
            sa = sa.sm_key(1);
        }
        let label = format!("saquery {}", args.join(" "));
        let table = diag(&label, || sa.query(args))?;
        Ok((args.join(" "), real_records(&label, table)?))
    };
    saquery.push(q(&["-g"], false)?);
    for mgid in mgids {
        saquery.push(q(&["MCMR", "--mgid", mgid], true)?);
    }
    saquery.push(q(&["SR"], true)?);
    Ok(SaState {
        members: mgids
            .iter()
            .map(|m| table(sim, &["members", "--mgid", m]))
            .collect::<Result<Vec<_>>>()?
            .concat(),
        services: table(sim, &["services"])?,
        informs: table(sim, &["informs"])?,
        saquery,
    })
}

/// What was recorded is what the clients put in place (so that "the same after the
/// failover" means something): one ServiceRecord of [`OTHER`] with its lease, one
/// subscription of the [`SUBSCRIBER`]'s port to trap 66, and saquery's answers whole.
fn check_recorded(sim: &Ibsim, st: &SaState) -> Result<()> {
    let [service] = st.services.as_slice() else {
        bail!("one ServiceRecord: {:?}", st.services);
    };
    ensure!(
        service["service_id"].as_u64() == Some(SERVICE_ID)
            && service["service_lease"] == 3600
            && service["service_gid"] == gid_of(sim, OTHER)?.as_str(),
        "the ServiceRecord {OTHER} registered: {service}"
    );
    let [inform] = st.informs.as_slice() else {
        bail!("one InformInfoRecord: {:?}", st.informs);
    };
    ensure!(
        inform["inform_info"]["trap_number"] == 66
            && inform["subscriber_gid"] == gid_of(sim, SUBSCRIBER)?.as_str(),
        "the subscription of {SUBSCRIBER}: {inform}"
    );
    let counts: Vec<(&str, usize)> = st
        .saquery
        .iter()
        .map(|(q, r)| (q.as_str(), r.len()))
        .collect();
    ensure!(
        counts.iter().map(|(_, n)| *n).eq([2, 3, 3, 1]),
        "saquery -g: 2 groups, MCMR: 3 members each, SR: 1 service; got {counts:?}: {:#?}",
        st.saquery
    );
    Ok(())
}

/// The records of a saquery answer, which must have come whole: nothing printed from
/// bytes umad2sim did not deliver (`undelivered`; a zero-padded last segment would
/// show records there, or zero-filled ones in `records`, which the counts in
/// [`check_recorded`] catch). But a ServiceRecord always lands in `undelivered` (its
/// last field lies past what umad2sim delivers): it is kept, and
/// [`SR_UNDELIVERED_FIELDS`] are not compared.
fn real_records(what: &str, t: ibsm_labkit::SaTable) -> Result<Vec<SaRecord>> {
    let sr = t.undelivered.iter().all(|r| r.kind == "ServiceRecord dump");
    ensure!(
        sr && t.undelivered.len() <= 1,
        "{what}: records past what umad2sim delivers: {t:?}"
    );
    Ok(t.records.into_iter().chain(t.undelivered).collect())
}

/// Run a diag under umad2sim, up to three times: `ibroute`, `smpquery`,
/// `ibnetdiscover` and `saquery` under the preload now and then die of SIGSEGV in its
/// receiver thread (or, saquery, miss the SA's answer). Only for questions, which are
/// safe to ask again.
fn diag<T>(what: &str, f: impl Fn() -> ibsm_labkit::Result<T>) -> Result<T> {
    let mut errors = Vec::new();
    for _ in 0..3 {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) => errors.push(e.to_string()),
        }
    }
    bail!("{what} failed three times: {}", errors.join("; "))
}

/// Every switch's MFT, `ibroute -M` from [`CLIENT`].
fn mfts(sim: &Ibsim, switches: &[u16]) -> Result<BTreeMap<u16, SwitchMft>> {
    switches
        .iter()
        .map(|&lid| {
            Ok((
                lid,
                diag(&format!("ibroute -M {lid}"), || {
                    sim.ibroute_mft(CLIENT, lid)
                })?,
            ))
        })
        .collect()
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
    ensure!(
        rec["notice"]["producer"]["trap_number"] == 66
            && rec["notice"]["issuer_lid"].as_u64() == Some(u64::from(lid)),
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
    ensure!(
        got == want,
        "the Report names {got}, the group is {want}: {rec}"
    );
    Ok(())
}

/// The LID of `host`'s port 1, read from the port itself (`smpquery -D portinfo 0`).
fn lid_of(sim: &Ibsim, host: &str) -> Result<u16> {
    let out = diag(&format!("smpquery portinfo on {host}"), || {
        let mut cmd = sim.command_on(host, "smpquery");
        cmd.args(["-D", "portinfo", "0"]);
        ibsm_labkit::run_ok(&mut cmd, STEP)
    })?;
    out.lines()
        .find(|l| l.starts_with("Lid:"))
        .and_then(|l| {
            ibsm_labkit::parse_number(l.trim_start_matches(|c| c != '.').trim_start_matches('.'))
        })
        .and_then(|l| u16::try_from(l).ok())
        .with_context(|| format!("no LID in the PortInfo of {host}:\n{out}"))
}

/// Field-by-field differences of two JSON tables (same order: the SA answers in its
/// own order, which the replica keeps).
fn json_diffs(what: &str, a: &[Value], b: &[Value]) -> Vec<String> {
    if a.len() != b.len() {
        return vec![format!(
            "{what}: {} records before, {} after",
            a.len(),
            b.len()
        )];
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
    eprintln!("binaries ready at {:?}", t0.elapsed());
    let netdir = tempfile::tempdir()?;
    let net = netdir.path().join("net.2sw7hca");
    std::fs::write(&net, NET)?;
    let sim = Ibsim::start(&net, IbsimOptions::default())?;

    // Three replicated ibsmd; Hca1 first, master.
    let mut sms = start_replicated_cluster(&sim, &SMS, &ibsmd_bin, STEP)?;
    let master = 0;
    eprintln!("master up at {:?}", t0.elapsed());
    let switches: Vec<u16> = diag("ibnetdiscover", || sim.port_lids(CLIENT))?
        .iter()
        .filter(|p| p.is_switch)
        .map(|p| p.lid)
        .collect();
    ensure!(switches.len() == 2, "two switches: {switches:?}");
    let master_lid = lid_of(&sim, SMS[master])?;

    // The subscriber: trap 66 (group created), held for the whole test.
    let sub_out = sim.dir().join("subscriber.out");
    let mut cmd = sim.command_on(SUBSCRIBER, &ibsmctl);
    cmd.args([
        "--json",
        "sa",
        "--issm",
        "inform",
        "subscribe",
        "--trap",
        "66",
        "--wait-s",
        "600",
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
    let mgid = create_group(&sim, &[])?;
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
            &SERVICE_ID.to_string(),
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
    for (i, sm) in sms.iter().enumerate().filter(|(i, _)| *i != master) {
        let addr = sm
            .as_ref()
            .and_then(Ibsmd::grpc_addr)
            .context("a standby's gRPC address in its log")?;
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
    let mgids = [mgid.as_str(), BROADCAST];
    let mut mlids = Vec::new();
    for m in mgids {
        let members = table(&sim, &["members", "--mgid", m])?;
        ensure!(members.len() == 3, "three members of {m}: {members:?}");
        let mlid = members[0]["mlid"]
            .as_u64()
            .and_then(|l| u16::try_from(l).ok())
            .with_context(|| format!("MLID of {m}: {members:?}"))?;
        mlids.push(mlid);
    }
    let before = record_state(&sim, &mgids)?;
    check_recorded(&sim, &before)?;
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
    for want in ["groups=2", "services=1", "subscriptions=1", "members=6"] {
        ensure!(line.contains(want), "{want} in {line:?}");
    }
    eprintln!("{} master at {:?}", SMS[new], t0.elapsed());

    // After: the same records, the same MFTs.
    let after = record_state(&sim, &mgids)?;
    let mut bad = json_diffs("MCMemberRecord", &before.members, &after.members);
    bad.extend(json_diffs(
        "ServiceRecord",
        &before.services,
        &after.services,
    ));
    bad.extend(json_diffs(
        "InformInfoRecord",
        &before.informs,
        &after.informs,
    ));
    for ((q, b), (_, a)) in before.saquery.iter().zip(&after.saquery) {
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
    let new_lid = lid_of(&sim, SMS[new])?;
    let second = create_group(&sim, &[mgid.as_str(), BROADCAST])?;
    let got = wait_reports(&sub_out, 2, &mut sub)?;
    check_report(&got[1], &second, new_lid)?;
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
