//! `ibsmctl sa` (the project's own SA client, `ibsm-sa-client`) on ibsim, against
//! ibsmd as master and then OpenSM on the same fabric with the same LIDs.
//!
//! Fabric: ibsim's `net.2sw2path4hca` (Switch1, Switch2 joined by two cables, Hca1..4).
//! ibsmd runs on Hca1 (`--fabric umad`), the client on Hca3 (and Hca4 for joins),
//! under umad2sim. First the whole NodeRecord, PortInfoRecord, LinkRecord and
//! all-to-all PathRecord tables from ibsmd are checked against the net file (GUIDs,
//! names, cables), reassembled by the client from ibsmd's RMPP segments (which it
//! ACKs), records over the 24 bytes umad2sim loses of every MAD asked for again.
//! Then ibsmd is stopped and OpenSM, on Hca2, is given ibsmd's LIDs through its
//! guid2lid (`honor_guid2lid_file`). OpenSM leaves RMPP to its kernel, and umad2sim
//! sends only the first MAD of a write, so OpenSM's whole tables never leave it here
//! (the client says so: checked); OpenSM is asked record by record (SubnAdmGet) for
//! every record of ibsmd's tables, and each is compared field by field (the fields
//! that legitimately differ are listed in `NODE_DIFFERS`, `PORTINFO_DIFFERS`,
//! `SELF_PATH_DIFFERS` and `GROUP_DIFFERS` with the reason). A join/leave sequence
//! runs against each SM (a group with an SA-allocated MGID, full, non and send-only
//! members from two HCAs, leaves until the group goes with its last full member),
//! checked with MCMemberRecord queries and `ibroute -M` on both switches, and the two
//! runs are compared. Never skipped: a missing tool fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use ibsm_fabric::{netfile, Topology};
use ibsm_integration::{binary, wait_log};
use ibsm_labkit::{
    example_net, parse_ibroute_mft, run_ok, run_with_timeout, ChildGuard, Ibsim, IbsimOptions,
    OpenSm, OpenSmOptions,
};
use serde_json::Value;

const NET: &str = "net.2sw2path4hca";
const IBSMD_HOST: &str = "Hca1";
const OPENSM_HOST: &str = "Hca2";
const CLIENT: &str = "Hca3";
const OTHER: &str = "Hca4";
const STEP: Duration = Duration::from_secs(60);
/// ibsmd's and OpenSM's default SA_Key: a trusted client sees every member and path.
const SA_KEY: &str = "1";

/// PortInfo fields that differ between the two SMs, and why.
const PORTINFO_DIFFERS: &[(&str, &str)] = &[
    (
        "port_info.master_sm_lid",
        "each SM programs its own port's LID as the master's",
    ),
    (
        "port_info.capability_mask",
        "IsSM is set on the port each SM holds issm open on (Hca1, then Hca2)",
    ),
    (
        "port_info.local_port_num",
        "the port the SM's SMP came in on: each SM reads from its own port",
    ),
    (
        "port_info.link_down_default_state",
        "OpenSM writes LinkDownDefaultState Polling (2); ibsmd leaves the port's value",
    ),
    (
        "port_info.link_speed_enabled",
        "OpenSM writes LinkSpeedEnabled (1); ibsmd leaves the port's value",
    ),
    (
        "port_info.link_width_enabled",
        "OpenSM writes LinkWidthEnabled (2); ibsmd leaves the port's value",
    ),
    (
        "port_info.hoq_life",
        "OpenSM sets HOQLife on switch ports (16, 18 toward CAs); ibsmd leaves it",
    ),
    (
        "port_info.partition_enforcement_inbound",
        "OpenSM turns switch partition enforcement off where no partition needs it",
    ),
    ("port_info.partition_enforcement_outbound", "as inbound"),
    (
        "port_info.m_key_lease_period",
        "SM policy: the M_Key lease period each SM programs",
    ),
    (
        "port_info.subnet_timeout",
        "SM policy: the SubnetTimeout each SM programs",
    ),
    (
        "port_info.client_reregister",
        "a new master asks for re-registration; the bit reads back as set",
    ),
];

/// Fields compared for a switch port without a link (PortState Down): OpenSM keeps
/// no PortInfo of such a port and answers zeros but for its number and state.
const DOWN_PORT_FIELDS: &[(&str, &str)] = &[
    ("endport_lid", ""),
    ("port_num", ""),
    ("port_info.port_state", ""),
];

/// PathRecord fields that differ on a switch's path to itself (no link crossed).
const SELF_PATH_DIFFERS: &[(&str, &str)] = &[(
    "mtu",
    "a switch's path to itself crosses no link: OpenSM answers its port 0 MTU (1024 on \
     ibsim), ibsmd the smallest MTU it knows for the node (256)",
)];

/// Parameters of a group created without them that the two SMs answer differently.
const GROUP_DIFFERS: &[(&str, &str)] = &[
    (
        "scope",
        "OpenSM answers Scope 0 in the record; ibsmd the scope of the MGID it allocated (2, \
         link-local, as both MGIDs ff12:...)",
    ),
    (
        "packet_life_time",
        "OpenSM leaves PacketLifeTime 0 when the creation does not give it; ibsmd puts its \
         subnet's packet life time (18, as in its PathRecords)",
    ),
];

/// NodeRecord fields that differ between the two SMs, and why.
const NODE_DIFFERS: &[(&str, &str)] = &[(
    "node_info.local_port_num",
    "a switch's NodeInfo.LocalPortNum is the port the SMP came in on: ibsmd keeps what its \
     discovery read (the port toward the SM), OpenSM answers 0 (the switch's port 0)",
)];

/// PathRecord fields that differ between the two SMs, and why.
const PATH_DIFFERS: &[(&str, &str)] = &[];

fn ctl(sim: &Ibsim, host: &str, args: &[&str]) -> Result<Value> {
    let mut cmd = sim.command_on(host, binary("ibsmctl")?);
    cmd.arg("--json").arg("sa").args(args);
    let out = run_ok(&mut cmd, STEP).with_context(|| format!("ibsmctl sa {args:?} on {host}"))?;
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("no JSON from ibsmctl sa {args:?}: {out}"))?;
    serde_json::from_str(line).with_context(|| format!("ibsmctl sa {args:?}: {line}"))
}

/// The records of a table answer, checked to have come whole. A read is asked again
/// (up to twice) when umad2sim crashed the client (SIGSEGV in libc when ibsim's
/// client slots are briefly exhausted): reads are idempotent, the SA is not at fault.
fn table(sim: &Ibsim, host: &str, args: &[&str]) -> Result<Vec<Value>> {
    let mut tries = 0;
    let v = loop {
        tries += 1;
        match ctl(sim, host, args) {
            Ok(v) => break v,
            Err(e) if tries < 3 && format!("{e:#}").contains("SIGSEGV") => {
                eprintln!("ibsmctl sa {args:?} on {host}: asked again after: {e:#}");
            }
            Err(e) => return Err(e),
        }
    };
    ensure!(
        v["damaged"].as_array().is_some_and(Vec::is_empty),
        "records lost on the way: {v}"
    );
    Ok(v["records"].as_array().cloned().unwrap_or_default())
}

fn num(v: &Value, path: &str) -> Result<u64> {
    let mut x = v;
    for k in path.split('.') {
        x = &x[k];
    }
    if let Some(n) = x.as_u64() {
        return Ok(n);
    }
    let s = x
        .as_str()
        .with_context(|| format!("{path} missing in {v}"))?;
    u64::from_str_radix(s.trim_start_matches("0x"), 16).with_context(|| format!("{path}={s}"))
}

/// Flatten a JSON record to `path -> value` for field-by-field comparison.
fn fields(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                fields(x, &p, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// Field-by-field differences of two records, minus the `allowed` fields.
fn diff(a: &Value, b: &Value, allowed: &[(&str, &str)]) -> Vec<String> {
    let (mut fa, mut fb) = (BTreeMap::new(), BTreeMap::new());
    fields(a, "", &mut fa);
    fields(b, "", &mut fb);
    let keys: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    keys.into_iter()
        .filter(|k| !allowed.iter().any(|(f, _)| f == k))
        .filter(|k| fa.get(*k) != fb.get(*k))
        .map(|k| format!("{k}: {:?} vs {:?}", fa.get(k), fb.get(k)))
        .collect()
}

struct Tables {
    nodes: Vec<Value>,
    ports: Vec<Value>,
    links: Vec<Value>,
    paths: Vec<Value>,
}

fn tables(sim: &Ibsim) -> Result<Tables> {
    Ok(Tables {
        nodes: table(sim, CLIENT, &["nodes"])?,
        ports: table(sim, CLIENT, &["portinfo"])?,
        links: table(sim, CLIENT, &["links"])?,
        paths: table(sim, CLIENT, &["--sm-key", SA_KEY, "paths", "--all"])?,
    })
}

/// The whole tables agree with the net file: every node once with its GUIDs and
/// name, a PortInfoRecord per switch port and cabled CA port, a LinkRecord per cable
/// end, a PathRecord per ordered pair of end ports.
fn check_against_net(t: &Tables, topo: &Topology) -> Result<BTreeMap<u64, u16>> {
    let mut lid_of_guid = BTreeMap::new();
    let mut node_of_lid = BTreeMap::new();
    ensure!(t.nodes.len() == topo.len(), "{} NodeRecords", t.nodes.len());
    for (idx, n) in topo.iter() {
        let r = t
            .nodes
            .iter()
            .find(|r| num(r, "node_info.node_guid").ok() == Some(n.node_guid))
            .with_context(|| format!("no NodeRecord of {}", n.name))?;
        ensure!(r["node_description"] == n.name.as_str(), "{r}");
        ensure!(
            num(r, "node_info.num_ports")? == u64::from(n.num_ports()),
            "{r}"
        );
        let lid = num(r, "lid")? as u16;
        node_of_lid.insert(lid, idx);
        if n.is_switch() {
            ensure!(num(r, "node_info.port_guid")? == n.node_guid, "{r}");
            lid_of_guid.insert(n.node_guid, lid);
        } else {
            let guid = num(r, "node_info.port_guid")?;
            ensure!(
                n.physical_ports().any(|(_, p)| p.port_guid == guid),
                "{r}: port GUID not of {}",
                n.name
            );
            lid_of_guid.insert(guid, lid);
        }
    }
    // PortInfoRecords: switch ports 0..=N, the cabled CA port.
    let want_ports: usize = topo
        .iter()
        .map(|(_, n)| {
            if n.is_switch() {
                usize::from(n.num_ports()) + 1
            } else {
                n.physical_ports()
                    .filter(|(_, p)| p.remote.is_some())
                    .count()
            }
        })
        .sum();
    ensure!(
        t.ports.len() == want_ports,
        "{} PortInfoRecords",
        t.ports.len()
    );
    let keys: BTreeSet<(u64, u64)> = t
        .ports
        .iter()
        .map(|r| Ok((num(r, "endport_lid")?, num(r, "port_num")?)))
        .collect::<Result<_>>()?;
    ensure!(keys.len() == t.ports.len(), "duplicate PortInfoRecords");
    // LinkRecords: both ends of every cable.
    let mut want_links = BTreeSet::new();
    for (idx, n) in topo.iter() {
        for (p, port) in n.physical_ports() {
            let Some((rnode, rport)) = port.remote else {
                continue;
            };
            let lid = |i| node_of_lid.iter().find(|(_, &x)| x == i).map(|(l, _)| *l);
            let (a, b) = (lid(idx).context("lid")?, lid(rnode).context("lid")?);
            want_links.insert((a, p, b, rport));
        }
    }
    let got_links: BTreeSet<(u16, u8, u16, u8)> = t
        .links
        .iter()
        .map(|r| {
            Ok((
                num(r, "from_lid")? as u16,
                num(r, "from_port")? as u8,
                num(r, "to_lid")? as u16,
                num(r, "to_port")? as u8,
            ))
        })
        .collect::<Result<_>>()?;
    ensure!(
        got_links == want_links,
        "links {got_links:?} vs the net file {want_links:?}"
    );
    // PathRecords: one per ordered pair, GIDs of the right ports.
    let n = lid_of_guid.len();
    ensure!(
        t.paths.len() == n * n,
        "{} PathRecords for {n} end ports",
        t.paths.len()
    );
    let guid_of_lid: BTreeMap<u16, u64> = lid_of_guid.iter().map(|(g, l)| (*l, *g)).collect();
    let mut pairs = BTreeSet::new();
    for p in &t.paths {
        let (s, d) = (num(p, "slid")? as u16, num(p, "dlid")? as u16);
        pairs.insert((s, d));
        for (lid, gid) in [(s, "sgid"), (d, "dgid")] {
            let g = guid_of_lid
                .get(&lid)
                .with_context(|| format!("LID {lid} in {p}"))?;
            let text = p[gid].as_str().unwrap_or_default();
            let want = std::net::Ipv6Addr::from((0xfe80u128 << 112) | u128::from(*g)).to_string();
            ensure!(text == want, "{gid} of {p}: want {want}");
        }
    }
    ensure!(pairs.len() == n * n, "duplicate (SLID, DLID) pairs");
    Ok(lid_of_guid)
}

/// Compare the same table from both SMs, keyed by `key`.
fn compare_tables(
    what: &str,
    a: &[Value],
    b: &[Value],
    key: impl Fn(&Value) -> Result<Vec<u64>>,
    allowed: &[(&str, &str)],
) -> Result<()> {
    compare_tables_with(what, a, b, key, allowed, |_| Filter::All)
}

/// Which fields of one record to compare.
enum Filter {
    All,
    Only(&'static [(&'static str, &'static str)]),
    Except(&'static [(&'static str, &'static str)]),
}

/// [`compare_tables`], comparing only the fields `only` names for some records.
fn compare_tables_with(
    what: &str,
    a: &[Value],
    b: &[Value],
    key: impl Fn(&Value) -> Result<Vec<u64>>,
    allowed: &[(&str, &str)],
    only: impl Fn(&Value) -> Filter,
) -> Result<()> {
    let index = |t: &[Value]| -> Result<BTreeMap<Vec<u64>, Value>> {
        t.iter().map(|r| Ok((key(r)?, r.clone()))).collect()
    };
    let (ia, ib) = (index(a)?, index(b)?);
    ensure!(
        ia.keys().eq(ib.keys()),
        "{what}: different records: {:?} vs {:?}",
        ia.keys().collect::<Vec<_>>(),
        ib.keys().collect::<Vec<_>>()
    );
    let mut bad = Vec::new();
    for (k, ra) in &ia {
        let mut d = diff(ra, &ib[k], allowed);
        let named = |x: &String, fields: &[(&str, &str)]| {
            fields.iter().any(|(f, _)| x.starts_with(&format!("{f}:")))
        };
        match only(ra) {
            Filter::All => {}
            Filter::Only(fields) => d.retain(|x| named(x, fields)),
            Filter::Except(fields) => d.retain(|x| !named(x, fields)),
        }
        if !d.is_empty() {
            bad.push(format!("{what} {k:?}: {}", d.join("; ")));
        }
    }
    if !bad.is_empty() {
        bail!("ibsmd and OpenSM differ:\n{}", bad.join("\n"));
    }
    Ok(())
}

/// What one join/leave sequence saw.
#[derive(Debug, PartialEq)]
struct JoinRun {
    /// (PortGID, JoinState) of the members after the joins.
    members: BTreeSet<(String, String)>,
    /// Per switch: ports in the group's MFT entry after the joins.
    mft: BTreeMap<u16, BTreeSet<u8>>,
    /// Group parameters (MGID and MLID left out: allocated; `GROUP_DIFFERS` too).
    params: BTreeMap<String, Value>,
}

fn switch_lids(sim: &Ibsim, topo: &Topology) -> Result<Vec<u16>> {
    let nodes = table(sim, CLIENT, &["nodes"])?;
    let mut out = Vec::new();
    for (_, n) in topo.iter().filter(|(_, n)| n.is_switch()) {
        let r = nodes
            .iter()
            .find(|r| num(r, "node_info.node_guid").ok() == Some(n.node_guid))
            .context("switch NodeRecord")?;
        out.push(num(r, "lid")? as u16);
    }
    Ok(out)
}

fn mft_ports(sim: &Ibsim, switches: &[u16], mlid: u16) -> Result<BTreeMap<u16, BTreeSet<u8>>> {
    let mut out = BTreeMap::new();
    for &lid in switches {
        // ibroute under umad2sim now and then dies of SIGSEGV in the preload's
        // receiver thread: try again.
        let mut text = None;
        for _ in 0..3 {
            let out = run_with_timeout(
                sim.command_on(CLIENT, "ibroute")
                    .args(["-M", &lid.to_string()]),
                STEP,
            )?;
            if out.status.success() {
                text = Some(String::from_utf8_lossy(&out.stdout).into_owned());
                break;
            }
        }
        let text = text.with_context(|| format!("ibroute -M {lid} failed three times"))?;
        let mft = parse_ibroute_mft(&text)?;
        out.insert(lid, mft.entries.get(&mlid).cloned().unwrap_or_default());
    }
    Ok(out)
}

fn members(sim: &Ibsim, mgid: &str) -> Result<BTreeSet<(String, String)>> {
    table(
        sim,
        CLIENT,
        &["--sm-key", SA_KEY, "members", "--mgid", mgid],
    )?
    .iter()
    .map(|r| {
        Ok((
            r["port_gid"].as_str().context("port_gid")?.to_string(),
            r["join_state"].as_str().context("join_state")?.to_string(),
        ))
    })
    .collect()
}

fn join_sequence(sim: &Ibsim, switches: &[u16]) -> Result<JoinRun> {
    let created = ctl(sim, CLIENT, &["join", "--create"])?;
    let rec = &created["record"];
    let mgid = rec["mgid"].as_str().context("mgid")?.to_string();
    let mlid = num(rec, "mlid")? as u16;
    ensure!(
        mgid.starts_with("ff1"),
        "an SA-allocated multicast GID: {mgid}"
    );
    ensure!(mlid >= 0xC000, "MLID {mlid:#x}");
    ctl(sim, OTHER, &["join", "--mgid", &mgid, "--state", "non"])?;
    ctl(
        sim,
        OTHER,
        &["join", "--mgid", &mgid, "--state", "send-only"],
    )?;
    let m = members(sim, &mgid)?;
    ensure!(m.len() == 2, "two member ports: {m:?}");
    let states: BTreeSet<&str> = m.iter().map(|(_, s)| s.as_str()).collect();
    ensure!(
        states == BTreeSet::from(["FullMember", "NonMember|SendOnlyNonMember"]),
        "{m:?}"
    );
    let joined = m.clone();
    // The switches carry the group: give the SM a moment to program the MFTs.
    let mut mft = BTreeMap::new();
    for _ in 0..50 {
        mft = mft_ports(sim, switches, mlid)?;
        if mft.values().filter(|p| !p.is_empty()).count() == switches.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(
        mft.values().all(|p| !p.is_empty()),
        "every switch is on the path between the members: {mft:?}"
    );
    let mut params = BTreeMap::new();
    fields(rec, "", &mut params);
    for k in ["mgid", "mlid", "port_gid", "join_state"] {
        params.remove(k);
    }
    for (k, _) in GROUP_DIFFERS {
        params.remove(*k);
    }
    // Leaves: the non-member bits, then the full member: the group is gone.
    ctl(sim, OTHER, &["leave", "--mgid", &mgid, "--state", "non"])?;
    let m = members(sim, &mgid)?;
    ensure!(
        m.iter().any(|(_, s)| s == "SendOnlyNonMember"),
        "Hca4 still a send-only member: {m:?}"
    );
    ctl(
        sim,
        OTHER,
        &["leave", "--mgid", &mgid, "--state", "send-only"],
    )?;
    ctl(sim, CLIENT, &["leave", "--mgid", &mgid, "--state", "full"])?;
    let gone = ctl(
        sim,
        CLIENT,
        &["--sm-key", SA_KEY, "members", "--mgid", &mgid],
    )?;
    ensure!(
        gone["count"] == 0,
        "deleted with its last full member: {gone}"
    );
    let mut cleared = BTreeMap::new();
    for _ in 0..50 {
        cleared = mft_ports(sim, switches, mlid)?;
        if cleared.values().all(BTreeSet::is_empty) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(
        cleared.values().all(BTreeSet::is_empty),
        "no switch forwards the deleted group: {cleared:?}"
    );
    Ok(JoinRun {
        members: joined,
        mft,
        params,
    })
}

fn start_ibsmd(sim: &Ibsim, host: &str) -> Result<(ChildGuard, std::path::PathBuf)> {
    let t = std::time::Instant::now();
    let bin = binary("ibsmd")?;
    eprintln!("binaries ready in {:?}", t.elapsed());
    let log = sim.dir().join("ibsmd.log");
    let file = std::fs::File::create(&log).context("ibsmd log")?;
    let mut cmd = sim.command_on(host, bin);
    cmd.args([
        "--fabric",
        "umad",
        "--priority",
        "10",
        "--grpc",
        "127.0.0.1:0",
        "--insecure-plaintext",
    ])
    .env("NO_COLOR", "1")
    .stdout(Stdio::null())
    .stderr(file);
    let guard = sim.spawn(&mut cmd)?;
    wait_log(&log, "subnet up", STEP)?;
    Ok((guard, log))
}

/// One SubnAdmGet per record of `ours`, with the arguments `args` makes of it.
fn gets(
    sim: &Ibsim,
    ours: &[Value],
    args: impl Fn(&Value) -> Result<Vec<String>>,
) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for r in ours {
        let a = args(r)?;
        let mut full = vec!["--sm-key", SA_KEY, "--get"];
        full.extend(a.iter().map(String::as_str));
        let v = ctl(sim, CLIENT, &full)?;
        let rec = v["records"]
            .get(0)
            .cloned()
            .with_context(|| format!("OpenSM: no record for {a:?}: {v}"))?;
        out.push(rec);
    }
    Ok(out)
}

fn guid2lid_key(r: &Value) -> Result<Vec<u64>> {
    Ok(vec![num(r, "lid")?])
}

#[test]
fn whole_tables_and_joins_from_ibsmd_and_opensm_agree() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let net = example_net(NET)?;
    let topo = netfile::parse(&std::fs::read_to_string(&net)?)?;
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let t0 = std::time::Instant::now();

    // ibsmd as master: whole tables, checked against the net file.
    let (mut ibsmd, log) = start_ibsmd(&sim, IBSMD_HOST)?;
    eprintln!("ibsmd up at {:?}", t0.elapsed());
    let ours = tables(&sim).with_context(|| {
        format!(
            "ibsmd log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })?;
    let lids = check_against_net(&ours, &topo)?;
    eprintln!("ibsmd's tables checked at {:?}", t0.elapsed());
    let switches = switch_lids(&sim, &topo)?;
    let our_join = join_sequence(&sim, &switches)?;
    eprintln!("ibsmd's tables and joins checked at {:?}", t0.elapsed());
    ibsmd.kill()?;

    // OpenSM with ibsmd's LIDs.
    let mut osm = OpenSm::start(
        &sim,
        OPENSM_HOST,
        OpenSmOptions {
            priority: 10,
            sweep_interval_s: Some(0),
            guid2lid: lids.iter().map(|(g, l)| (*g, *l)).collect(),
            ..Default::default()
        },
    )?;
    osm.wait_subnet_up(STEP)?;
    eprintln!("OpenSM up at {:?}", t0.elapsed());
    // OpenSM leaves RMPP to its kernel; umad2sim sends the first MAD of its
    // GetTableResp and nothing more, so its whole tables cannot be had here: the
    // client says so rather than print a short table.
    let mut cmd = sim.command_on(CLIENT, binary("ibsmctl")?);
    cmd.args(["sa", "nodes"]);
    let out = run_with_timeout(&mut cmd, STEP)?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        !out.status.success() && err.contains("never left the SA"),
        "OpenSM's NodeRecord table through umad2sim: {err}"
    );
    // The PathRecord bench still works against it when given its destinations (its
    // own list would come from a PortInfoRecord table that cannot arrive whole).
    let dlids: Vec<String> = lids.values().map(u16::to_string).collect();
    let bench = ctl(
        &sim,
        CLIENT,
        &[
            "bench",
            "path",
            "--count",
            "40",
            "--window",
            "4",
            "--dlids",
            &dlids.join(","),
        ],
    )?;
    ensure!(
        num(&bench, "ok")? == 40 && bench["errors"].as_object().is_some_and(|e| e.is_empty()),
        "sa bench path --dlids against OpenSM: {bench}"
    );
    // So OpenSM is asked record by record (SubnAdmGet) for every record ibsmd's
    // whole tables hold, and each answer is compared field by field.
    let theirs = Tables {
        nodes: gets(&sim, &ours.nodes, |r| {
            Ok(vec![
                "nodes".into(),
                "--lid".into(),
                num(r, "lid")?.to_string(),
            ])
        })?,
        ports: gets(&sim, &ours.ports, |r| {
            Ok(vec![
                "portinfo".into(),
                "--lid".into(),
                num(r, "endport_lid")?.to_string(),
                "--port".into(),
                num(r, "port_num")?.to_string(),
            ])
        })?,
        links: gets(&sim, &ours.links, |r| {
            Ok(vec![
                "links".into(),
                "--from-lid".into(),
                num(r, "from_lid")?.to_string(),
                "--from-port".into(),
                num(r, "from_port")?.to_string(),
            ])
        })?,
        paths: gets(&sim, &ours.paths, |r| {
            Ok(vec![
                "paths".into(),
                "--slid".into(),
                num(r, "slid")?.to_string(),
                "--dlid".into(),
                num(r, "dlid")?.to_string(),
            ])
        })?,
    };
    eprintln!("OpenSM's records read at {:?}", t0.elapsed());
    let same_lids = check_against_net(&theirs, &topo)?;
    ensure!(same_lids == lids, "OpenSM kept ibsmd's LIDs");
    compare_tables(
        "NodeRecord",
        &ours.nodes,
        &theirs.nodes,
        guid2lid_key,
        NODE_DIFFERS,
    )?;
    compare_tables_with(
        "PortInfoRecord",
        &ours.ports,
        &theirs.ports,
        |r| Ok(vec![num(r, "endport_lid")?, num(r, "port_num")?]),
        PORTINFO_DIFFERS,
        |r| match r["port_info"]["port_state"] == "Down" {
            true => Filter::Only(DOWN_PORT_FIELDS),
            false => Filter::All,
        },
    )?;
    compare_tables(
        "LinkRecord",
        &ours.links,
        &theirs.links,
        |r| Ok(vec![num(r, "from_lid")?, num(r, "from_port")?]),
        &[],
    )?;
    compare_tables_with(
        "PathRecord",
        &ours.paths,
        &theirs.paths,
        |r| Ok(vec![num(r, "slid")?, num(r, "dlid")?]),
        PATH_DIFFERS,
        |r| match r["slid"] == r["dlid"] {
            true => Filter::Except(SELF_PATH_DIFFERS),
            false => Filter::All,
        },
    )?;
    let their_join = join_sequence(&sim, &switches)?;
    ensure!(
        our_join == their_join,
        "the join/leave sequence differs:\nibsmd  {our_join:?}\nOpenSM {their_join:?}"
    );
    Ok(())
}

/// `paths --all` on a k=4 fat tree (16 HCAs, 20 switches): its PortInfoRecord table,
/// where the client finds the sources, is long enough that umad2sim loses the LIDs of
/// some records, and every end port must still be a source. The table holds one
/// PathRecord per ordered pair of the net file's 36 end ports (each CA port and each
/// switch's port 0, each port to itself too, LMC 0: one LID each), as OpenSM answers
/// every such pair; the records that arrived whole name every end port's LID as
/// source, each pair once.
#[test]
fn paths_all_holds_every_ordered_pair_of_end_ports_of_a_fat_tree() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let topo = ibsm_fabric::gen::fat_tree_3level(4).context("k=4 fat tree")?;
    let dir = tempfile::tempdir()?;
    let net = dir.path().join("fat-tree-k4.net");
    std::fs::write(&net, netfile::write(&topo))?;
    let hcas: Vec<&str> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(_, n)| n.name.as_str())
        .collect();
    let (Some(sm_host), Some(client)) = (hcas.first(), hcas.last()) else {
        bail!("no HCAs in the k=4 fat tree");
    };
    let end_ports = topo
        .iter()
        .map(|(_, n)| match n.is_switch() {
            true => 1,
            false => n
                .physical_ports()
                .filter(|(_, p)| p.remote.is_some())
                .count(),
        })
        .sum::<usize>();
    ensure!(end_ports == 36, "20 switches and 16 CA ports: {end_ports}");
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let (_ibsmd, log) = start_ibsmd(&sim, sm_host)?;
    let lids: BTreeSet<u64> = sim
        .port_lids(client)?
        .iter()
        .map(|p| u64::from(p.lid))
        .collect();
    ensure!(lids.len() == end_ports, "LIDs of the fabric: {lids:?}");
    let v = ctl(&sim, client, &["--sm-key", SA_KEY, "paths", "--all"]).with_context(|| {
        format!(
            "ibsmd log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })?;
    let records = v["records"].as_array().cloned().unwrap_or_default();
    ensure!(
        records.len() == end_ports * end_ports,
        "{} PathRecords for {end_ports} end ports",
        records.len()
    );
    // Records over the bytes umad2sim loses are counted but not asked for again
    // (`paths --all` never does): only the whole ones say which pair they are.
    let damaged: BTreeSet<u64> = v["damaged"]
        .as_array()
        .context("damaged")?
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    let mut pairs = BTreeSet::new();
    for (i, r) in records.iter().enumerate() {
        if damaged.contains(&(i as u64)) {
            continue;
        }
        let pair = (num(r, "slid")?, num(r, "dlid")?);
        ensure!(pairs.insert(pair), "the pair {pair:?} twice");
    }
    let sources: BTreeSet<u64> = pairs.iter().map(|p| p.0).collect();
    let destinations: BTreeSet<u64> = pairs.iter().map(|p| p.1).collect();
    ensure!(
        sources == lids,
        "sources {sources:?} vs the fabric's {lids:?}"
    );
    // Every source's table has the same layout, so the same destinations lie over
    // the lost bytes in each: the whole records name a subset of them.
    ensure!(
        destinations.is_subset(&lids) && destinations.len() + 8 > lids.len(),
        "destinations {destinations:?}"
    );
    ensure!(
        pairs.len() + damaged.len() == records.len(),
        "{} whole pairs and {} damaged records",
        pairs.len(),
        damaged.len()
    );
    Ok(())
}
