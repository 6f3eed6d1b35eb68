//! `ibsmd --fabric umad` as the master SM on ibsim, judged by infiniband-diags:
//!
//! * `ibnetdiscover` (after the subnet is up) shows a LID on every CA port and every
//!   switch, all distinct;
//! * `ibtracert SLID DLID` succeeds between sampled CA pairs (it walks the LFTs we
//!   programmed with LID-routed SMPs, so a missing or wrong entry fails it);
//! * `sminfo -D <path to the master>` reports ibsmd's port GUID in SMINFO_MASTER;
//! * plain `sminfo` (it reads the local PortInfo.MasterSMLID and sends a LID-routed
//!   SubnGet(SMInfo) there, as operators type it) reports the same, and `sminfo LID`
//!   of a second, lower-priority ibsmd reports it in SMINFO_STANDBY;
//! * `smpquery pkeys` shows the `--partition` P_Keys on their members (full member
//!   with bit 15, limited without) and not on other ports;
//! * after `Unlink` of a switch-to-switch cable that a traced path used, the master
//!   notices (trap or light sweep), reroutes, and `ibtracert` paths avoid that cable.
//!
//! On net.2sw2path4hca, a generated 2-level fat tree (radix 8) and a generated k=8
//! 3-level fat tree. Fails (never skips) when a tool is missing. Each test has its own
//! ibsim (unique IBSIM_SOCKNAME and temp dir); every process is killed on drop.
//!
//! The `ibsmd` binary is built through cargo (same profile and target dir as this
//! test) by `ibsm_integration::binary`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{ChildGuard, Ibsim, IbsimOptions};

const NET_2SW2PATH4HCA: &str = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const SUBNET_UP_TIMEOUT: Duration = Duration::from_secs(120);
const REROUTE_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------
// ibnetdiscover's topology output

#[derive(Debug, Clone, Default)]
struct DNode {
    /// ibnetdiscover's id (`S-<guid>` / `H-<guid>`).
    id: String,
    switch: bool,
    /// NodeDescription (ibsim: the net file's node id unless the file sets one).
    desc: String,
    node_guid: u64,
    /// Switch: LID of port 0. CA: LID of its (first) connected port.
    lid: u16,
    /// CA: port GUID of its first connected port.
    port_guid: u64,
    /// CA: number of its first connected port.
    port: u8,
    /// local port -> (remote id, remote port).
    ports: BTreeMap<u8, (String, u8)>,
}

/// The number after `word ` in `text` (e.g. `lid 4`).
fn number_after(text: &str, word: &str) -> Option<u64> {
    let mut it = text.split_whitespace();
    while let Some(w) = it.next() {
        if w == word {
            let v = it.next()?;
            let v = v.trim_end_matches(',');
            return parse_num(v.split('-').next().unwrap_or(v));
        }
    }
    None
}

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// First `"..."` in `s` and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let a = s.find('"')?;
    let rest = s.get(a + 1..)?;
    let b = rest.find('"')?;
    Some((rest.get(..b)?, rest.get(b + 1..)?))
}

/// `[n]` at the start of `s` and what follows it.
fn bracketed(s: &str) -> Option<(u8, &str)> {
    let s = s.trim_start().strip_prefix('[')?;
    let end = s.find(']')?;
    Some((s.get(..end)?.parse().ok()?, s.get(end + 1..)?))
}

fn parse_ibnetdiscover(text: &str) -> Result<Vec<DNode>> {
    let mut nodes: Vec<DNode> = Vec::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first == "Switch" || first == "Ca" {
            let (id, rest) = quoted(line).with_context(|| format!("node line {line:?}"))?;
            let comment = rest.split_once('#').map_or("", |(_, c)| c);
            let desc = quoted(comment).map_or("", |(d, _)| d);
            let guid = id
                .get(2..)
                .and_then(|g| u64::from_str_radix(g, 16).ok())
                .with_context(|| format!("node id {id:?}"))?;
            nodes.push(DNode {
                id: id.to_string(),
                switch: first == "Switch",
                desc: desc.to_string(),
                node_guid: guid,
                lid: if first == "Switch" {
                    number_after(comment, "lid").unwrap_or(0) as u16
                } else {
                    0
                },
                ..DNode::default()
            });
        } else if first.starts_with('[') {
            let node = nodes.last_mut().context("port line before any node")?;
            let (port, rest) = bracketed(line).with_context(|| format!("port line {line:?}"))?;
            let (own_guid, rest) = match rest.trim_start().strip_prefix('(') {
                Some(r) => {
                    let (g, r) = r.split_once(')').context("unclosed (guid)")?;
                    (u64::from_str_radix(g, 16).ok(), r)
                }
                None => (None, rest),
            };
            let (rid, rest) = quoted(rest).with_context(|| format!("remote in {line:?}"))?;
            let (rport, rest) = bracketed(rest).with_context(|| format!("rport in {line:?}"))?;
            node.ports.insert(port, (rid.to_string(), rport));
            if !node.switch && node.port == 0 {
                node.port = port;
                node.port_guid = own_guid.unwrap_or(0);
                let comment = rest.split_once('#').map_or("", |(_, c)| c);
                node.lid = number_after(comment, "lid").unwrap_or(0) as u16;
            }
        }
    }
    if nodes.is_empty() {
        bail!("ibnetdiscover printed no nodes:\n{text}");
    }
    Ok(nodes)
}

/// The fabric as ibnetdiscover sees it, with ibsim node ids for `Unlink`.
struct Fabric {
    nodes: Vec<DNode>,
    by_id: HashMap<String, usize>,
    /// NodeGUID -> ibsim node id (from the net file's `switchguid=`/`caguid=` lines).
    sim_ids: HashMap<u64, String>,
}

impl Fabric {
    fn new(nodes: Vec<DNode>, sim_ids: HashMap<u64, String>) -> Fabric {
        let by_id = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i))
            .collect();
        Fabric {
            nodes,
            by_id,
            sim_ids,
        }
    }

    fn cas(&self) -> Vec<&DNode> {
        self.nodes.iter().filter(|n| !n.switch).collect()
    }

    /// The name ibsim knows a node by.
    fn sim_name(&self, n: &DNode) -> String {
        self.sim_ids
            .get(&n.node_guid)
            .cloned()
            .unwrap_or_else(|| n.desc.clone())
    }

    fn by_sim_name(&self, name: &str) -> Option<&DNode> {
        self.nodes.iter().find(|n| self.sim_name(n) == name)
    }

    /// Directed-route path `0,p1,p2,...` from node `from` to node `to` (BFS).
    fn dr_path(&self, from: &DNode, to: &DNode) -> Option<String> {
        let start = *self.by_id.get(&from.id)?;
        let goal = *self.by_id.get(&to.id)?;
        let mut prev: HashMap<usize, (usize, u8)> = HashMap::new();
        let mut q = VecDeque::from([start]);
        let mut seen = HashSet::from([start]);
        while let Some(i) = q.pop_front() {
            if i == goal {
                break;
            }
            let n = self.nodes.get(i)?;
            if i != start && !n.switch {
                continue;
            }
            for (&p, (rid, _)) in &n.ports {
                let Some(&j) = self.by_id.get(rid) else {
                    continue;
                };
                if seen.insert(j) {
                    prev.insert(j, (i, p));
                    q.push_back(j);
                }
            }
        }
        let mut hops = Vec::new();
        let mut cur = goal;
        while cur != start {
            let (p, port) = *prev.get(&cur)?;
            hops.push(port);
            cur = p;
        }
        hops.reverse();
        let mut s = String::from("0");
        for h in hops {
            s.push_str(&format!(",{h}"));
        }
        Some(s)
    }
}

/// NodeGUID -> node id from a net file written with absolute GUIDs.
fn net_file_ids(text: &str) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let mut guid = None;
    for line in text.lines() {
        let l = line.trim();
        if let Some(g) = l
            .strip_prefix("switchguid=")
            .or_else(|| l.strip_prefix("caguid="))
        {
            guid = parse_num(g.split('(').next().unwrap_or(g));
        } else if l.starts_with("Switch") || l.starts_with("Hca") || l.starts_with("Ca") {
            if let (Some(g), Some((id, _))) = (guid.take(), quoted(l)) {
                out.insert(g, id.to_string());
            }
        }
    }
    out
}

/// The first Hca's node id in a net file (where ibsmd runs).
fn first_hca(text: &str) -> Result<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("Hca") || l.starts_with("Ca\t") || l.starts_with("Ca "))
        .find_map(|l| quoted(l).map(|(id, _)| id.to_string()))
        .context("the net file has no Hca")
}

// ---------------------------------------------------------------------------------
// ibtracert

/// One hop of a trace: (from node desc, out port, to node desc, in port).
type Hop = (String, u8, String, u8);

/// Parse `ibtracert` output into hops; requires the `To` line.
fn parse_trace(text: &str) -> Result<Vec<Hop>> {
    let mut hops = Vec::new();
    let mut cur: Option<String> = None;
    let mut reached = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("From ") {
            // The description is the last quoted string on the line.
            cur = last_quoted(l);
        } else if l.starts_with('[') && l.contains("->") {
            let (out, rest) = bracketed(l).context("hop out port")?;
            let (_, after_brace) = rest.split_once('}').context("hop {guid}")?;
            let (inp, _) = bracketed(after_brace).context("hop in port")?;
            let to = last_quoted(l).context("hop description")?;
            let from = cur.clone().context("hop before From")?;
            hops.push((from, out, to.clone(), inp));
            cur = Some(to);
        } else if l.starts_with("To ") {
            reached = true;
        }
    }
    if !reached {
        bail!("ibtracert did not reach its target:\n{text}");
    }
    Ok(hops)
}

fn last_quoted(l: &str) -> Option<String> {
    let (head, _) = l.rsplit_once('"')?;
    let (_, d) = head.rsplit_once('"')?;
    Some(d.to_string())
}

// ---------------------------------------------------------------------------------
// The lab

struct Lab {
    sim: Ibsim,
    _sm: ChildGuard,
    log: PathBuf,
    /// Host ibsmd runs on, and where diags run from.
    sm_host: String,
    diag_host: String,
    sim_ids: HashMap<u64, String>,
}

impl Lab {
    /// ibsim on `netfile`, then ibsmd (master) on its first Hca with `args`.
    fn start(netfile: &Path, partitions: impl Fn(&Fabric) -> Vec<String>) -> Result<(Lab, Fabric)> {
        ibsm_labkit::require_lab()?;
        let bin = binary("ibsmd")?;
        let text = std::fs::read_to_string(netfile)
            .with_context(|| format!("reading {}", netfile.display()))?;
        let sm_host = first_hca(&text)?;
        let sim_ids = net_file_ids(&text);
        let sim = Ibsim::start(netfile, IbsimOptions::default())?;
        // Before any SM: discovery by directed route, to pick partition members.
        let pre = Fabric::new(
            parse_ibnetdiscover(&run_ok(&mut sim.command_on(&sm_host, "ibnetdiscover"))?)?,
            sim_ids.clone(),
        );
        let diag_host = pre.cas().last().map(|n| pre.sim_name(n)).context("no CA")?;
        let log = sim.dir().join("ibsmd.log");
        let file = std::fs::File::create(&log).context("ibsmd log")?;
        let mut cmd = sim.command_on(&sm_host, &bin);
        cmd.args([
            "--fabric",
            "umad",
            "--priority",
            "10",
            "--grpc",
            "127.0.0.1:0",
            "--insecure-plaintext",
        ]);
        for p in partitions(&pre) {
            cmd.arg("--partition").arg(p);
        }
        cmd.env("NO_COLOR", "1").stdout(Stdio::null()).stderr(file);
        let sm = sim.spawn(&mut cmd)?;
        let lab = Lab {
            sim,
            _sm: sm,
            log,
            sm_host,
            diag_host,
            sim_ids,
        };
        lab.wait_log("subnet up", SUBNET_UP_TIMEOUT)?;
        let fabric = lab.discover()?;
        Ok((lab, fabric))
    }

    /// `ibsmctl --endpoint <ibsmd's gRPC address> <args> --json`, parsed.
    fn ctl_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        ibsm_integration::ctl_json_via_log(&self.log, args, RUN_TIMEOUT)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_log(&self, needle: &str, timeout: Duration) -> Result<()> {
        ibsm_integration::wait_log(&self.log, needle, timeout)
    }

    fn diag(&self, program: &str, args: &[&str]) -> Result<String> {
        let mut cmd = self.sim.command_on(&self.diag_host, program);
        cmd.args(args);
        run_ok(&mut cmd).with_context(|| format!("{program} {args:?}; ibsmd log:\n{}", self.log()))
    }

    fn discover(&self) -> Result<Fabric> {
        Ok(Fabric::new(
            parse_ibnetdiscover(&self.diag("ibnetdiscover", &[])?)?,
            self.sim_ids.clone(),
        ))
    }

    fn trace(&self, slid: u16, dlid: u16) -> Result<Vec<Hop>> {
        parse_trace(&self.diag("ibtracert", &[&slid.to_string(), &dlid.to_string()])?)
    }
}

fn run_ok(cmd: &mut Command) -> Result<String> {
    ibsm_integration::run_ok(cmd, RUN_TIMEOUT)
}

/// Deterministic CA pairs spread over the fabric.
fn sample_pairs(cas: &[&DNode], n: usize) -> Vec<(u16, u16)> {
    let len = cas.len();
    let mut out = Vec::new();
    for i in 0..n {
        let a = cas.get((i * 7 + 1) % len).map(|c| c.lid);
        let b = cas.get((i * 13 + len / 2) % len).map(|c| c.lid);
        if let (Some(a), Some(b)) = (a, b) {
            if a != b {
                out.push((a, b));
            }
        }
    }
    out
}

fn pkeys(text: &str) -> Vec<u16> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .flat_map(|(_, v)| v.split_whitespace())
        .filter_map(|w| w.strip_prefix("0x"))
        .filter_map(|h| u16::from_str_radix(h, 16).ok())
        .filter(|&k| k != 0)
        .collect()
}

/// Everything the module doc lists, on one net file.
fn master_configures(netfile: &Path) -> Result<()> {
    const PKEY: u16 = 0x0123;
    let (lab, fabric) = Lab::start(netfile, |pre| {
        let cas = pre.cas();
        // Members: two CAs (full, limited); the others stay out.
        let full = cas.get(1).map_or(0, |c| c.port_guid);
        let limited = cas.get(2).map_or(0, |c| c.port_guid);
        vec![format!(
            "storage={PKEY:#06x}:{full:#x},{limited:#x}:limited"
        )]
    })?;

    // 1. A LID on every CA port and switch, all distinct.
    let mut lids = HashSet::new();
    for n in &fabric.nodes {
        assert_ne!(n.lid, 0, "{} ({}) has no LID", n.desc, n.id);
        assert!(lids.insert(n.lid), "LID {} given twice ({})", n.lid, n.desc);
    }
    let cas = fabric.cas();
    assert!(cas.len() >= 4, "expected at least 4 CAs");

    // 2. ibtracert between sampled CA pairs.
    let pairs = sample_pairs(&cas, 6);
    assert!(pairs.len() >= 4, "{pairs:?}");
    for &(a, b) in &pairs {
        let hops = lab.trace(a, b)?;
        assert!(!hops.is_empty(), "no hops from {a} to {b}");
    }

    // 2b. The control API (through ibsmctl) tells what the fabric shows: the LIDs
    // ibnetdiscover read from the ports, the node count, and the same switch hops
    // and egress ports as ibtracert through the programmed LFTs.
    let lids = lab.ctl_json(&["lids"])?;
    let by_guid: HashMap<u64, u64> = lids["lids"]
        .as_array()
        .context("lids array")?
        .iter()
        .filter_map(|l| {
            let g = u64::from_str_radix(l["port_guid"].as_str()?.trim_start_matches("0x"), 16);
            Some((g.ok()?, l["base_lid"].as_u64()?))
        })
        .collect();
    for c in &cas {
        assert_eq!(
            by_guid.get(&c.port_guid).copied(),
            Some(u64::from(c.lid)),
            "ibsmctl lids vs ibnetdiscover for {} ({:#x})",
            c.desc,
            c.port_guid
        );
    }
    let topo = lab.ctl_json(&["topology"])?;
    assert_eq!(topo["source"], "master", "{topo}");
    assert_eq!(
        topo["nodes"].as_array().map(Vec::len),
        Some(fabric.nodes.len()),
        "ibsmctl topology vs ibnetdiscover node count"
    );
    let is_switch_desc = |d: &str| {
        fabric
            .nodes
            .iter()
            .any(|n| n.switch && (n.desc == d || fabric.sim_name(n) == d))
    };
    for &(a, b) in &pairs {
        let traced: Vec<u64> = lab
            .trace(a, b)?
            .iter()
            .filter(|h| is_switch_desc(&h.0))
            .map(|h| u64::from(h.1))
            .collect();
        let route = lab.ctl_json(&["route", &a.to_string(), &b.to_string()])?;
        let ours: Vec<u64> = route["hops"]
            .as_array()
            .context("hops")?
            .iter()
            .filter_map(|h| h["out_port"].as_u64())
            .collect();
        assert_eq!(ours, traced, "ibsmctl route {a} {b} vs ibtracert: {route}");
    }

    // 3. sminfo by directed route from the diag host to the master port.
    let sm_node = fabric
        .by_sim_name(&lab.sm_host)
        .context("the SM's node is not in ibnetdiscover's output")?;
    let diag_node = fabric
        .by_sim_name(&lab.diag_host)
        .context("the diag host is not in ibnetdiscover's output")?;
    let path = fabric
        .dr_path(diag_node, sm_node)
        .context("no DR path to the SM")?;
    let sminfo = lab.diag("sminfo", &["-D", &path])?;
    assert!(sminfo.contains("SMINFO_MASTER"), "{sminfo}");
    let guid = number_after(&sminfo, "guid").context("sminfo has no guid")?;
    assert_eq!(guid, sm_node.port_guid, "{sminfo}");
    // 3b. Plain `sminfo`: LID-routed to the diag host's MasterSMLID and answered
    // LID-routed to the diag host's LID.
    let plain = lab.diag("sminfo", &[])?;
    assert!(plain.contains("SMINFO_MASTER"), "{plain}");
    assert_eq!(
        number_after(&plain, "guid"),
        Some(sm_node.port_guid),
        "{plain}"
    );
    assert_eq!(
        number_after(&plain, "lid"),
        Some(u64::from(sm_node.lid)),
        "{plain}"
    );

    // 4. P_Keys on the members, not elsewhere.
    for (i, c) in cas.iter().enumerate() {
        let keys = pkeys(&lab.diag("smpquery", &["pkeys", &c.lid.to_string()])?);
        assert!(
            keys.contains(&0xFFFF),
            "{}: default partition missing: {keys:x?}",
            c.desc
        );
        let (full, limited) = (keys.contains(&(PKEY | 0x8000)), keys.contains(&PKEY));
        match i {
            1 => assert!(full && !limited, "{}: {keys:x?}", c.desc),
            2 => assert!(limited && !full, "{}: {keys:x?}", c.desc),
            _ => assert!(!full && !limited, "{}: {keys:x?}", c.desc),
        }
    }

    // 5. Pull a switch-to-switch cable a trace used; traces must avoid it.
    let is_switch = |desc: &str| {
        fabric
            .nodes
            .iter()
            .any(|n| n.switch && (n.desc == desc || fabric.sim_name(n) == desc))
    };
    let mut victim = None;
    'find: for &(a, b) in &pairs {
        for hop in lab.trace(a, b)? {
            if is_switch(&hop.0) && is_switch(&hop.2) {
                victim = Some((hop, (a, b)));
                break 'find;
            }
        }
    }
    let ((from, out, to, inp), _) = victim.context("no trace crossed two switches")?;
    let from_node = fabric
        .nodes
        .iter()
        .find(|n| n.switch && n.desc == from)
        .context("victim switch")?;
    let said = lab.sim.unlink(&fabric.sim_name(from_node), Some(out))?;
    let uses_dead = |hops: &[Hop]| {
        hops.iter().any(|(f, o, t, i)| {
            (f == &from && *o == out && t == &to && *i == inp)
                || (f == &to && *o == inp && t == &from && *i == out)
        })
    };
    let deadline = Instant::now() + REROUTE_TIMEOUT;
    loop {
        let mut bad = Vec::new();
        for &(a, b) in &pairs {
            match lab.trace(a, b) {
                Ok(h) if !uses_dead(&h) => {}
                Ok(h) => bad.push(format!("{a}->{b} still uses the cable: {h:?}")),
                Err(e) => bad.push(format!("{a}->{b}: {e:#}")),
            }
        }
        if bad.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "after Unlink {from}[{out}] ({said:?}) traces did not avoid the cable within {REROUTE_TIMEOUT:?}:\n{}\nibsmd log:\n{}",
                bad.join("\n"),
                lab.log()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        lab.log().contains("heavy sweep done"),
        "no rerouting sweep in the log:\n{}",
        lab.log()
    );
    Ok(())
}

/// Write a generated topology as an ibsim net file into a temp dir.
fn generated(name: &str, topo: ibsm_fabric::Topology) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join(name);
    std::fs::write(&path, ibsm_fabric::netfile::write(&topo))?;
    Ok((dir, path))
}

#[test]
fn two_switches_two_paths_four_hcas() -> Result<()> {
    master_configures(Path::new(NET_2SW2PATH4HCA))
}

#[test]
fn fat_tree_2level_radix8() -> Result<()> {
    let (_dir, net) = generated("ft2-8.net", ibsm_fabric::gen::fat_tree_2level(8)?)?;
    master_configures(&net)
}

#[test]
fn fat_tree_3level_k8() -> Result<()> {
    let (_dir, net) = generated("ft3-8.net", ibsm_fabric::gen::fat_tree_3level(8)?)?;
    master_configures(&net)
}

/// A second ibsmd (priority 5) on another CA goes STANDBY; `sminfo <its LID>` from
/// the diag host shows it STANDBY with its GUID, plain `sminfo` still the master.
#[test]
fn sminfo_by_lid_shows_a_standby_ibsmd() -> Result<()> {
    let (lab, fabric) = Lab::start(Path::new(NET_2SW2PATH4HCA), |_| Vec::new())?;
    let standby_node = fabric
        .cas()
        .into_iter()
        .find(|n| {
            let name = fabric.sim_name(n);
            name != lab.sm_host && name != lab.diag_host
        })
        .context("no third CA for the standby")?;
    let host = fabric.sim_name(standby_node);
    let log = lab.sim.dir().join("ibsmd-standby.log");
    let file = std::fs::File::create(&log).context("standby log")?;
    let mut cmd = lab.sim.command_on(&host, binary("ibsmd")?);
    cmd.args([
        "--fabric",
        "umad",
        "--priority",
        "5",
        "--grpc",
        "127.0.0.1:0",
        "--insecure-plaintext",
    ])
    .stdout(Stdio::null())
    .stderr(file);
    let _standby = lab.sim.spawn(&mut cmd)?;
    let standby_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + SUBNET_UP_TIMEOUT;
    while !standby_log().contains("-> STANDBY") {
        if Instant::now() > deadline {
            bail!(
                "the second ibsmd never went STANDBY:
{}",
                standby_log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let lid = standby_node.lid.to_string();
    let out = lab
        .diag("sminfo", &[&lid])
        .with_context(|| format!("standby log:\n{}", standby_log()))?;
    assert!(out.contains("SMINFO_STANDBY"), "{out}");
    assert_eq!(
        number_after(&out, "guid"),
        Some(standby_node.port_guid),
        "{out}"
    );
    assert_eq!(number_after(&out, "priority"), Some(5), "{out}");
    let plain = lab.diag("sminfo", &[])?;
    assert!(plain.contains("SMINFO_MASTER"), "{plain}");
    let master = fabric
        .by_sim_name(&lab.sm_host)
        .context("the master's node")?;
    assert_eq!(
        number_after(&plain, "guid"),
        Some(master.port_guid),
        "{plain}"
    );
    Ok(())
}

#[test]
fn parsers_read_real_diag_output() -> Result<()> {
    let net = "Switch\t8 \"S-0000000000200001\"\t\t# \"Switch2\" base port 0 lid 4 lmc 0\n\
               [1]\t\"H-0000000000100003\"[1](100004) \t\t# \"Hca2\" lid 5 4xSDR\n\
               [3]\t\"S-0000000000200000\"[3]\t\t# \"Switch1\" lid 2 4xSDR\n\n\
               Ca\t2 \"H-0000000000100003\"\t\t# \"Hca2\"\n\
               [1](100004) \t\"S-0000000000200001\"[1]\t\t# lid 5 lmc 0 \"Switch2\" lid 4 4xSDR\n";
    let nodes = parse_ibnetdiscover(net)?;
    assert_eq!(nodes.len(), 2);
    assert_eq!(
        (nodes[0].lid, nodes[0].switch, nodes[0].desc.as_str()),
        (4, true, "Switch2")
    );
    assert_eq!(
        (nodes[1].lid, nodes[1].port_guid, nodes[1].port),
        (5, 0x100004, 1)
    );
    let trace = "From ca {0x0000000000100009} portnum 1 lid 6-6 \"Hca4\"\n\
                 [1] -> switch port {0x0000000000200001}[2] lid 4-4 \"Switch2\"\n\
                 [3] -> switch port {0x0000000000200000}[3] lid 2-2 \"Switch1\"\n\
                 [1] -> ca port {0x0000000000100001}[1] lid 1-1 \"Hca1\"\n\
                 To ca {0x0000000000100000} portnum 1 lid 1-1 \"Hca1\"\n";
    let hops = parse_trace(trace)?;
    assert_eq!(
        hops[1],
        ("Switch2".to_string(), 3, "Switch1".to_string(), 3)
    );
    assert!(parse_trace("From ca {0x1} portnum 1 lid 6-6 \"Hca4\"\n").is_err());
    Ok(())
}
