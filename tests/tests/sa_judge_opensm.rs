//! The SA judge against OpenSM alone: every labkit runner (saquery's records,
//! `ibroute -M`, OpenSM with fixed LIDs) on ibsim, each checked against facts that do
//! not come from the SA: the LIDs we gave OpenSM in its guid2lid, GUIDs and cables from
//! the net file (parsed by ibsm-fabric the way ibsim reads it), the ports' own
//! PortInfo read by `smpquery`, and OpenSM's own port. These are what a later test
//! relies on when it puts ibsm's SA beside OpenSM's on the same fabric and LIDs.
//!
//! Fabric: ibsim's `net.2sw2path4hca` (Switch1, Switch2 with two parallel cables,
//! Hca1..Hca4). OpenSM runs on Hca2 with LIDs Switch1 16, Switch2 17, Hca1..4 33..36;
//! saquery runs from Hca1 (and Hca4). The long-table test uses a generated star (one
//! 36-port switch, 24 HCAs). Never skipped: a missing tool fails the test.

use std::collections::BTreeSet;
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ibsm_fabric::{netfile, NodeIdx, NodeType, Topology};
use ibsm_labkit::{
    compare, compare_by_key, example_net, render, require_tool, run_ok, Ibsim, IbsimOptions,
    LabError, OpenSm, OpenSmOptions, PathQuery, SaRecord, SaqueryError,
};

const NET: &str = "net.2sw2path4hca";
const OPENSM_HOST: &str = "Hca2";
const JUDGE: &str = "Hca1";
/// Generous: a loaded 2-core machine runs several ibsims at once.
const STEP: Duration = Duration::from_secs(60);
const BROADCAST_MGID: &str = "ff12:401b:ffff::ffff:ffff";

/// One end port of the fabric: a switch's port 0 or a cabled CA port.
#[derive(Debug, Clone)]
struct EndPort {
    node: NodeIdx,
    port: u8,
    guid: u64,
    lid: u16,
}

/// The net file, parsed, and the LIDs we ask OpenSM to give.
struct Facts {
    topo: Topology,
    ports: Vec<EndPort>,
}

impl Facts {
    /// Switches get 16, 17, ...; cabled CA ports 33, 34, ... in net-file order.
    fn load(net: &std::path::Path) -> Result<Facts> {
        let text = std::fs::read_to_string(net)?;
        let topo = netfile::parse(&text).with_context(|| format!("parsing {}", net.display()))?;
        let (mut sw, mut ca) = (16u16, 33u16);
        let mut ports = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                ports.push(EndPort {
                    node: idx,
                    port: 0,
                    guid: node.node_guid,
                    lid: sw,
                });
                sw += 1;
            } else {
                for (p, port) in node.physical_ports().filter(|(_, p)| p.remote.is_some()) {
                    ports.push(EndPort {
                        node: idx,
                        port: p,
                        guid: port.port_guid,
                        lid: ca,
                    });
                    ca += 1;
                }
            }
        }
        Ok(Facts { topo, ports })
    }

    fn name(&self, idx: NodeIdx) -> &str {
        self.topo.node(idx).map_or("?", |n| n.name.as_str())
    }

    fn by_name(&self, name: &str) -> Result<&EndPort> {
        let idx = self
            .topo
            .find_by_name(name)
            .with_context(|| format!("no node {name}"))?;
        self.ports
            .iter()
            .find(|p| p.node == idx)
            .with_context(|| format!("{name} has no end port"))
    }

    /// The LID of node `idx` (a switch's port 0, a CA's cabled port).
    fn lid_of_node(&self, idx: NodeIdx) -> Option<u16> {
        self.ports.iter().find(|p| p.node == idx).map(|p| p.lid)
    }

    fn guid2lid(&self) -> Vec<(u64, u16)> {
        self.ports.iter().map(|p| (p.guid, p.lid)).collect()
    }
}

/// `fe80::<guid>` as saquery prints a GID (inet_ntop).
fn gid(guid: u64) -> String {
    Ipv6Addr::from((0xfe80u128 << 112) | u128::from(guid)).to_string()
}

fn field<'a>(r: &'a SaRecord, name: &str) -> Result<&'a str> {
    r.get(name)
        .with_context(|| format!("no field {name} in {r:?}"))
}

fn num(r: &SaRecord, name: &str) -> Result<u64> {
    r.number(name)
        .with_context(|| format!("field {name} of {r:?} is not a number"))
}

struct Lab {
    sim: Ibsim,
    sm: OpenSm,
    facts: Facts,
}

impl Lab {
    fn start(priority: u8) -> Result<Lab> {
        let net = example_net(NET)?;
        let facts = Facts::load(&net)?;
        let sim = Ibsim::start(&net, IbsimOptions::default())?;
        let mut sm = OpenSm::start(
            &sim,
            OPENSM_HOST,
            OpenSmOptions {
                priority,
                sweep_interval_s: Some(0),
                guid2lid: facts.guid2lid(),
                ..Default::default()
            },
        )?;
        sm.wait_subnet_up(STEP)?;
        Ok(Lab { sim, sm, facts })
    }

    fn sm_port(&self) -> Result<&EndPort> {
        self.facts.by_name(OPENSM_HOST)
    }
}

/// `PortGuid:....0x...` (or any `Name:....value`) from smpquery's output.
fn smp_field(text: &str, name: &str) -> Result<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .with_context(|| format!("no {name} in {text}"))?;
    let value = line
        .trim_start_matches(|c| c != '.')
        .trim_start_matches('.');
    ibsm_labkit::parse_number(value).with_context(|| format!("bad {name} in {line:?}"))
}

#[test]
fn opensm_gives_exactly_the_lids_of_its_guid2lid_file() -> Result<()> {
    let lab = Lab::start(5)?;
    for p in &lab.facts.ports {
        let name = lab.facts.name(p.node);
        // LID-routed NodeInfo to the LID answers from the port we gave it to.
        let out = run_ok(
            lab.sim
                .command_on(JUDGE, "smpquery")
                .args(["nodeinfo", &p.lid.to_string()]),
            STEP,
        )?;
        ensure!(
            smp_field(&out, "PortGuid")? == p.guid,
            "LID {} is not {name}:\n{out}",
            p.lid
        );
        // The port's own PortInfo carries it (CAs read their own port, 0 hops).
        if lab.facts.topo.node(p.node).is_some_and(|n| !n.is_switch()) {
            let own = run_ok(
                lab.sim
                    .command_on(name, "smpquery")
                    .args(["-D", "portinfo", "0"]),
                STEP,
            )?;
            ensure!(smp_field(&own, "Lid")? == u64::from(p.lid), "{name}: {own}");
            ensure!(
                smp_field(&own, "SMLid")? == u64::from(lab.sm_port()?.lid),
                "{name}: {own}"
            );
        }
        // And the SA agrees.
        let nr = lab.sim.saquery(JUDGE).node_record(p.lid)?;
        ensure!(num(&nr, "port_guid")? == p.guid, "NR {}: {nr:?}", p.lid);
    }
    // OpenSM's rewritten guid2lid holds the same map.
    let got: BTreeSet<(u64, u16, u16)> = lab
        .sm
        .guid2lid()?
        .iter()
        .map(|e| (e.port_guid, e.min_lid, e.max_lid))
        .collect();
    let want: BTreeSet<(u64, u16, u16)> = lab
        .facts
        .ports
        .iter()
        .map(|p| (p.guid, p.lid, p.lid))
        .collect();
    ensure!(got == want, "OpenSM's guid2lid {got:x?}, asked {want:x?}");
    Ok(())
}

#[test]
fn node_port_and_link_records_match_the_net_file() -> Result<()> {
    let lab = Lab::start(5)?;
    let sa = lab.sim.saquery(JUDGE);
    let sm_lid = lab.sm_port()?.lid;
    for p in &lab.facts.ports {
        let node = lab.facts.topo.node(p.node).context("node")?;
        let nr = sa.node_record(p.lid)?;
        let kind = if node.is_switch() {
            "Switch"
        } else {
            "Channel Adapter"
        };
        ensure!(field(&nr, "node_type")? == kind, "{nr:?}");
        ensure!(num(&nr, "lid")? == u64::from(p.lid), "{nr:?}");
        ensure!(
            num(&nr, "num_ports")? == u64::from(node.num_ports()),
            "{nr:?}"
        );
        ensure!(num(&nr, "node_guid")? == node.node_guid, "{nr:?}");
        ensure!(num(&nr, "port_num")? == u64::from(p.port), "{nr:?}");
        ensure!(field(&nr, "NodeDescription")? == node.name, "{nr:?}");
        let pir = sa.port_info_record(p.lid, p.port)?;
        ensure!(
            (num(&pir, "EndPortLid")?, num(&pir, "PortNum")?)
                == (u64::from(p.lid), u64::from(p.port)),
            "{pir:?}"
        );
        ensure!(num(&pir, "Lid")? == u64::from(p.lid), "{pir:?}");
        ensure!(num(&pir, "SMLid")? == u64::from(sm_lid), "{pir:?}");
        ensure!(
            field(&pir, "LinkState")? == "Active" && num(&pir, "LMC")? == 0,
            "{pir:?}"
        );
        // One LinkRecord per cabled port, to the node and port the net file says.
        for (port, info) in node.physical_ports() {
            let Some((remote, remote_port)) = info.remote else {
                continue;
            };
            let lr = sa.link_record(p.lid, port)?;
            let to_lid = lab.facts.lid_of_node(remote).context("remote LID")?;
            ensure!(
                (
                    num(&lr, "FromLID")?,
                    num(&lr, "FromPort")?,
                    num(&lr, "ToLID")?,
                    num(&lr, "ToPort")?
                ) == (
                    u64::from(p.lid),
                    u64::from(port),
                    u64::from(to_lid),
                    u64::from(remote_port)
                ),
                "{} port {port} -> {} port {remote_port}: {lr:?}",
                node.name,
                lab.facts.name(remote)
            );
        }
    }
    // The whole LR table fits one MAD here (12 records x 8 bytes): complete, and equal
    // to the per-port answers. And the same SA seen from another HCA says the same.
    let all = sa.link_records()?;
    ensure!(all.is_complete() && all.records.len() == 12, "{all:?}");
    let mut one_by_one = Vec::new();
    for r in &all.records {
        one_by_one.push(sa.link_record(
            u16::try_from(num(r, "FromLID")?)?,
            u8::try_from(num(r, "FromPort")?)?,
        )?);
    }
    let d = compare_by_key(&one_by_one, &all.records, &["FromLID", "FromPort"], &[]);
    ensure!(d.is_empty(), "LR table vs per-port LRs:\n{}", render(&d));
    let other = lab.sim.saquery("Hca4");
    for p in &lab.facts.ports {
        let a = [sa.node_record(p.lid)?, sa.port_info_record(p.lid, p.port)?];
        let b = [
            other.node_record(p.lid)?,
            other.port_info_record(p.lid, p.port)?,
        ];
        let d = compare(&b, &a, &[]);
        ensure!(
            d.is_empty(),
            "LID {} from Hca4 vs Hca1:\n{}",
            p.lid,
            render(&d)
        );
    }
    Ok(())
}

#[test]
fn sm_switch_path_and_class_records_match_the_fabric() -> Result<()> {
    let lab = Lab::start(5)?;
    let sa = lab.sim.saquery(JUDGE);
    let sm = lab.sm_port()?;
    // SMInfoRecord: OpenSM's own port, MASTER, our priority.
    let smir = sa.sm_info_records()?;
    ensure!(smir.is_complete() && smir.records.len() == 1, "{smir:?}");
    let r = &smir.records[0];
    ensure!(
        num(r, "LID")? == u64::from(sm.lid) && num(r, "GUID")? == sm.guid,
        "{r:?}"
    );
    ensure!((num(r, "SMState")?, num(r, "Priority")?) == (3, 5), "{r:?}");
    let d = compare(&[sa.sm_info_record(sm.lid)?], &smir.records, &["ActCount"]);
    ensure!(d.is_empty(), "{}", render(&d));
    // SwitchInfoRecords: one per switch; LinearFDBTop is the highest LID given.
    let top = lab
        .facts
        .ports
        .iter()
        .map(|p| p.lid)
        .max()
        .context("no LIDs")?;
    let switches: Vec<&_> = lab.facts.ports.iter().filter(|p| p.port == 0).collect();
    let swir = sa.switch_info_records()?;
    ensure!(
        swir.is_complete() && swir.records.len() == switches.len(),
        "{swir:?}"
    );
    for s in &switches {
        let r = sa.switch_info_record(s.lid)?;
        ensure!(
            num(&r, "LID")? == u64::from(s.lid) && num(&r, "LinearFDBTop")? == u64::from(top),
            "{r:?}"
        );
    }
    // PathRecords between every pair of CA ports: LIDs and GIDs of both ends.
    let cas: Vec<&_> = lab.facts.ports.iter().filter(|p| p.port != 0).collect();
    for s in &cas {
        for d in &cas {
            let pr = sa.path_record(s.lid, d.lid)?;
            let got = (
                num(&pr, "slid")?,
                num(&pr, "dlid")?,
                field(&pr, "sgid")?.to_string(),
                field(&pr, "dgid")?.to_string(),
            );
            let want = (u64::from(s.lid), u64::from(d.lid), gid(s.guid), gid(d.guid));
            ensure!(got == want, "{got:?} != {want:?}: {pr:?}");
            ensure!(field(&pr, "pkey")? == "0xFFFF", "{pr:?}");
        }
    }
    // With a selector only: all paths from Hca1, of which umad2sim delivers two.
    let from = sa.path_records(&PathQuery {
        slid: Some(cas[0].lid),
        ..Default::default()
    })?;
    ensure!(from.records.len() == 2 && from.total.is_none(), "{from:?}");
    ensure!(
        from.records
            .iter()
            .all(|r| r.number("slid") == Some(u64::from(cas[0].lid))),
        "{from:?}"
    );
    // ClassPortInfo, and the empty tables of a fabric where nobody registered anything.
    let cpi = sa.class_port_info()?;
    ensure!(
        (num(&cpi, "Base version")?, num(&cpi, "Class version")?) == (1, 2),
        "{cpi:?}"
    );
    for (what, t) in [
        ("SR", sa.service_records()?),
        ("IIR", sa.inform_info_records()?),
    ] {
        ensure!(t.is_complete() && t.records.is_empty(), "{what}: {t:?}");
    }
    Ok(())
}

/// Run OpenSM's `osmtest -f m` (the multicast flow) from `host`: it joins the port to
/// the IPoIB broadcast group and some groups of its own. Its verdict is not ours (the
/// first run on a fabric reports a failure in a later step); what it leaves behind is
/// checked by the caller.
fn osmtest_join(sim: &Ibsim, host: &str) -> Result<()> {
    require_tool("osmtest")?;
    let mut cmd = sim.command_on(host, "osmtest");
    cmd.args(["-f", "m"]);
    let out = sim.run(&mut cmd, STEP)?;
    ensure!(
        out.status.code().is_some(),
        "osmtest on {host} died: {}",
        out.status
    );
    Ok(())
}

#[test]
fn the_broadcast_group_is_memberless_until_ports_join_then_mfts_follow() -> Result<()> {
    let lab = Lab::start(5)?;
    let sa = lab.sim.saquery(JUDGE);
    let groups = sa.mc_groups()?;
    ensure!(
        groups.is_complete() && groups.records.len() == 1,
        "{groups:?}"
    );
    let g = &groups.records[0];
    let want = [
        ("MGID", BROADCAST_MGID),
        ("Mlid", "0xC000"),
        ("Mtu", "0x84"),
        ("pkey", "0xFFFF"),
        ("Rate", "0x83"),
        ("SL", "0x0"),
    ];
    ensure!(
        g.fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .eq(want),
        "{g:?}"
    );
    // Untrusted: the group once, PortGid "::"; trusted: no member records at all.
    let m = sa.mc_members()?;
    ensure!(
        m.records.len() == 1 && field(&m.records[0], "PortGid")? == "::",
        "{m:?}"
    );
    let trusted = lab.sim.saquery(JUDGE).sm_key(1);
    ensure!(
        trusted.mc_members()?.records.is_empty(),
        "members before any join"
    );
    let switches: Vec<EndPort> = lab
        .facts
        .ports
        .iter()
        .filter(|p| p.port == 0)
        .cloned()
        .collect();
    for s in &switches {
        let mft = lab.sim.ibroute_mft(JUDGE, s.lid)?;
        ensure!(
            mft.lid == s.lid && mft.node_guid == s.guid && mft.entries.is_empty(),
            "{mft:?}"
        );
    }
    // Hca3 (Switch1 port 2) and Hca4 (Switch2 port 2) join.
    let joiners = [
        lab.facts.by_name("Hca3")?.clone(),
        lab.facts.by_name("Hca4")?.clone(),
    ];
    for j in &joiners {
        osmtest_join(&lab.sim, lab.facts.name(j.node))?;
    }
    let gids: BTreeSet<String> = trusted.mc_member_gids(0xC000)?.into_iter().collect();
    let want: BTreeSet<String> = joiners.iter().map(|j| gid(j.guid)).collect();
    ensure!(gids == want, "members of 0xC000: {gids:?}, want {want:?}");
    // Each switch forwards 0xC000 to its member HCA and over one inter-switch cable.
    let deadline = Instant::now() + STEP;
    for s in &switches {
        let node = lab.facts.topo.node(s.node).context("switch")?;
        let mut expect_hca = BTreeSet::new();
        let mut isl = BTreeSet::new();
        for (port, info) in node.physical_ports() {
            match info.remote {
                Some((r, _)) if joiners.iter().any(|j| j.node == r) => {
                    expect_hca.insert(port);
                }
                Some((r, _))
                    if lab
                        .facts
                        .topo
                        .node(r)
                        .is_some_and(|n| n.node_type == NodeType::Switch) =>
                {
                    isl.insert(port);
                }
                _ => {}
            }
        }
        let ports = loop {
            let mft = lab.sim.ibroute_mft(JUDGE, s.lid)?;
            if let Some(p) = mft.entries.get(&0xC000) {
                break p.clone();
            }
            if Instant::now() > deadline {
                bail!("switch {} has no MFT entry for 0xC000: {mft:?}", node.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let (to_hca, rest): (BTreeSet<u8>, BTreeSet<u8>) =
            ports.iter().partition(|p| expect_hca.contains(p));
        ensure!(
            to_hca == expect_hca,
            "{}: 0xC000 -> {ports:?}, member ports {expect_hca:?}",
            node.name
        );
        ensure!(
            rest.len() == 1 && rest.is_subset(&isl),
            "{}: 0xC000 -> {ports:?}, cables {isl:?}",
            node.name
        );
    }
    Ok(())
}

#[test]
fn saquery_failures_are_typed() -> Result<()> {
    let net = example_net(NET)?;
    let facts = Facts::load(&net)?;
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    // No SM yet: the port's MasterSMLID is 0.
    let e = sim.saquery(JUDGE).node_record(16);
    ensure!(
        matches!(e, Err(LabError::Saquery(SaqueryError::NoSm { .. }))),
        "{e:?}"
    );
    let mut sm = OpenSm::start(
        &sim,
        OPENSM_HOST,
        OpenSmOptions {
            guid2lid: facts.guid2lid(),
            ..Default::default()
        },
    )?;
    sm.wait_subnet_up(STEP)?;
    let sa = sim.saquery(JUDGE).sa_timeout_ms(300);
    let e = sa.node_record(99);
    ensure!(
        matches!(e, Err(LabError::Saquery(SaqueryError::NoRecords { .. }))),
        "{e:?}"
    );
    let e = sa.run(&["PKTR", "33"]);
    ensure!(
        matches!(
            e,
            Err(LabError::Saquery(SaqueryError::Status {
                status: 0x0200,
                ..
            }))
        ),
        "{e:?}"
    );
    // With OpenSM's key the same query is answered.
    let pktr = sim.saquery(JUDGE).sm_key(1).query(&["PKTR", "33"])?;
    let first = pktr.records.first().context("no PKeyTableRecord")?;
    ensure!(
        first.kind == "PKeyTableRecord dump"
            && first.get("").is_some_and(|row| row.starts_with("0xffff ")),
        "{pktr:?}"
    );
    // A name saquery would have to find in a NodeRecord table umad2sim cuts to one.
    let e = sa.run(&["--src-to-dst", "Hca1:Hca4", "-p"]);
    ensure!(
        matches!(e, Err(LabError::Saquery(SaqueryError::NameNotFound { .. }))),
        "{e:?}"
    );
    // The SM dies: its LID still receives the queries, nobody answers. The lab frees
    // the dead client's slot before the next command (as a kernel closes a dead
    // process's files), so nothing of it is left attached.
    let pid = sm.pid();
    sm.kill()?;
    let e = sa.node_record(16);
    ensure!(
        matches!(e, Err(LabError::Saquery(SaqueryError::Timeout { .. }))),
        "{e:?}"
    );
    let attached = sim.attached()?;
    ensure!(!attached.iter().any(|c| c.pid == pid), "{attached:?}");
    Ok(())
}

fn star_net(hcas: u8) -> String {
    let mut s = String::from("Switch\t36 \"Sw1\"\n");
    for i in 1..=hcas {
        s.push_str(&format!("[{i}]\t\"H{i}\"[1]\n"));
    }
    for i in 1..=hcas {
        s.push_str(&format!("\nHca\t1 \"H{i}\"\n[1]\t\"Sw1\"[{i}]\n"));
    }
    s
}

#[test]
fn long_tables_arrive_cut_to_what_fits_224_bytes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let net = dir.path().join("star.net");
    std::fs::write(&net, star_net(24))?;
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let mut sm = OpenSm::start(
        &sim,
        "H1",
        OpenSmOptions {
            sweep_interval_s: Some(0),
            ..Default::default()
        },
    )?;
    sm.wait_subnet_up(STEP)?;
    let sa = sim.saquery("H2");
    // 48 LinkRecords exist; saquery prints 25, umad2sim delivered 21 of them.
    let lr = sa.link_records()?;
    ensure!(
        (lr.printed(), lr.records.len(), lr.total) == (25, 21, None),
        "{lr:?}"
    );
    let mut real = Vec::new();
    for r in &lr.records {
        real.push(sa.link_record(
            u16::try_from(num(r, "FromLID")?)?,
            u8::try_from(num(r, "FromPort")?)?,
        )?);
    }
    let d = compare(&real, &lr.records, &[]);
    ensure!(
        d.is_empty(),
        "delivered LinkRecords vs per-port queries:\n{}",
        render(&d)
    );
    // 25 NodeRecords exist; one arrives.
    let nr = sa.node_records()?;
    ensure!((nr.records.len(), nr.total) == (1, None), "{nr:?}");
    let pir = sa.port_info_records()?;
    ensure!((pir.records.len(), pir.total) == (2, None), "{pir:?}");
    Ok(())
}

#[test]
fn opensm_reads_the_partitions_file_it_is_given() -> Result<()> {
    let net = example_net(NET)?;
    let facts = Facts::load(&net)?;
    let (hca3, hca4) = (
        facts.by_name("Hca3")?.clone(),
        facts.by_name("Hca4")?.clone(),
    );
    let partitions = format!(
        "Default=0x7fff, ipoib : ALL=full ;\nstorage=0x0001, ipoib : {:#018x}=full, {:#018x}=full ;\n",
        hca3.guid, hca4.guid
    );
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let mut sm = OpenSm::start(
        &sim,
        OPENSM_HOST,
        OpenSmOptions {
            guid2lid: facts.guid2lid(),
            partitions: Some(partitions),
            ..Default::default()
        },
    )?;
    sm.wait_subnet_up(STEP)?;
    // The members' P_Key tables carry 0x8001 (full member of 0x0001), Hca1's does not.
    let trusted = sim.saquery(JUDGE).sm_key(1);
    let block0 = |lid: u16| -> Result<String> {
        let t = trusted.query(&["PKTR", &format!("{lid}/1/0")])?;
        let r = t.records.first().context("no PKeyTableRecord")?;
        Ok(r.get_all("").collect::<Vec<_>>().join(" "))
    };
    for p in [&hca3, &hca4] {
        let row = block0(p.lid)?;
        ensure!(
            row.split_whitespace().any(|k| k == "0x8001"),
            "LID {}: {row}",
            p.lid
        );
    }
    let row = block0(facts.by_name(JUDGE)?.lid)?;
    ensure!(
        !row.split_whitespace().any(|k| k == "0x8001"),
        "Hca1: {row}"
    );
    // And the `ipoib` flag made a broadcast group for the new partition.
    let groups = sim.saquery("Hca3").mc_groups()?;
    let mgids: BTreeSet<&str> = groups
        .records
        .iter()
        .filter_map(|r| r.get("MGID"))
        .collect();
    ensure!(
        mgids.contains(BROADCAST_MGID) && mgids.contains("ff12:401b:8001::ffff:ffff"),
        "{groups:?}"
    );
    Ok(())
}
