//! Every `ibsm.v1.Fabric`/`Cluster` RPC through `ibsmctl` against a real three-instance
//! `ibsmd demo` (`--base-port 0`: the endpoints are read from its stdout), including the
//! bad requests, and a check that the daemon kept running with its state intact after
//! them. Binaries are built through cargo by `ibsm_integration::binary`
//! (see its crate doc).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{run_with_timeout, ChildGuard};
use serde_json::Value;

struct Demo {
    _guard: ChildGuard,
    ctl: PathBuf,
    endpoints: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Demo {
    fn start() -> Result<Demo> {
        let (ibsmd, ctl) = (binary("ibsmd")?, binary("ibsmctl")?);
        let dir = tempfile::tempdir()?;
        let mut child = Command::new(&ibsmd)
            .args(["demo", "--base-port", "0", "--data-dir"])
            .arg(dir.path().join("data"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("demo.log"))?)
            .spawn()
            .context("spawning ibsmd demo")?;
        let stdout = child.stdout.take().context("stdout")?;
        let guard = ChildGuard::new(child, "ibsmd demo");
        let mut endpoints = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            if let Some(at) = line.find("gRPC http://") {
                endpoints.push(line[at + 5..].trim().to_string());
            }
            if line.starts_with("Ctrl-C") {
                break;
            }
        }
        if endpoints.len() != 3 {
            bail!("ibsmd demo printed {endpoints:?}, expected three endpoints");
        }
        let demo = Demo {
            _guard: guard,
            ctl,
            endpoints,
            _dir: dir,
        };
        // Ready when one instance is MASTER and has published its fabric view.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(m) = demo.master() {
                if demo
                    .json(m, &["topology", "--json"])
                    .is_ok_and(|t| t["source"] == "master")
                {
                    return Ok(demo);
                }
            }
            if Instant::now() > deadline {
                bail!("the demo did not come up with a MASTER view in 60 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn ctl(&self, i: usize, args: &[&str]) -> Result<Output> {
        let mut cmd = Command::new(&self.ctl);
        cmd.arg("--endpoint").arg(&self.endpoints[i]).args(args);
        Ok(run_with_timeout(&mut cmd, Duration::from_secs(30))?)
    }

    fn json(&self, i: usize, args: &[&str]) -> Result<Value> {
        let out = self.ctl(i, args)?;
        ibsm_integration::ctl_json_of(&format!("{args:?} on sm{}", i + 1), &out)
    }

    fn master(&self) -> Result<usize> {
        (0..3)
            .find(|i| {
                self.json(*i, &["status", "--json"])
                    .is_ok_and(|s| s["state"] == "MASTER")
            })
            .context("no MASTER")
    }

    /// Exit code and stderr of a call expected to fail.
    fn fails(&self, i: usize, args: &[&str]) -> Result<(Option<i32>, String)> {
        let out = self.ctl(i, args)?;
        if out.status.success() {
            bail!(
                "ibsmctl {args:?} succeeded: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        Ok((
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

fn lid_map(v: &Value) -> Result<BTreeMap<String, u64>> {
    v["lids"]
        .as_array()
        .context("lids array")?
        .iter()
        .map(|l| {
            Ok((
                l["port_guid"].as_str().context("guid")?.to_string(),
                l["base_lid"].as_u64().context("lid")?,
            ))
        })
        .collect()
}

#[test]
fn fabric_rpcs_through_ibsmctl() -> Result<()> {
    let demo = Demo::start()?;
    let m = demo.master()?;
    let s = (0..3).find(|i| *i != m).context("a standby")?;
    let status = demo.json(m, &["status", "--json"])?;

    // Topology: counts agree with the node list; every cable is seen from both ends.
    let topo = demo.json(m, &["topology", "--json"])?;
    assert_eq!(topo["source"], "master");
    let nodes = topo["nodes"].as_array().context("nodes")?;
    let count = |ty: &str| nodes.iter().filter(|n| n["type"] == ty).count() as u64;
    assert_eq!(topo["switches"].as_u64(), Some(count("Switch")), "{topo}");
    assert_eq!(topo["cas"].as_u64(), Some(count("CA")));
    assert!(count("Switch") > 0 && count("CA") >= 3);
    let ends: usize = nodes
        .iter()
        .flat_map(|n| n["ports"].as_array().into_iter().flatten())
        .filter(|p| p["remote_node_guid"] != "0x0000000000000000")
        .count();
    assert_eq!(Some(ends as u64), topo["links"].as_u64().map(|l| l * 2));

    // LIDs: unique, and the master's own port has the LID its status reports.
    let lids = demo.json(m, &["lids", "--json"])?;
    let map = lid_map(&lids)?;
    let unique: BTreeSet<u64> = map.values().copied().collect();
    assert_eq!(unique.len(), map.len(), "duplicate LIDs: {lids}");
    assert_eq!(
        map.get(status["guid"].as_str().context("guid")?).copied(),
        status["lid"].as_u64()
    );
    // A standby answers the same LIDs from its replica. Replication is asynchronous:
    // the master publishes after its sweep and the standby applies a moment later, so
    // wait (bounded) for the replica to catch up, then require the very same map.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let standby_lids = loop {
        let got = demo.json(s, &["lids", "--json"])?;
        if lid_map(&got)? == map || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(standby_lids["source"], "replica");
    assert_eq!(lid_map(&standby_lids)?, map);

    // Route between the two CA ports of the other SMs: every hop follows a cable.
    let sms = demo.json(m, &["sms", "--json"])?;
    let ca_lids: Vec<u64> = sms
        .as_array()
        .context("sms")?
        .iter()
        .filter_map(|e| e["lid"].as_u64())
        .collect();
    let (a, b) = (ca_lids[0], ca_lids[ca_lids.len() - 1]);
    let route = demo.json(m, &["route", &a.to_string(), &b.to_string(), "--json"])?;
    let hops = route["hops"].as_array().context("hops")?;
    assert!(!hops.is_empty(), "{route}");
    let by_guid: BTreeMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| Some((n["node_guid"].as_str()?, n)))
        .collect();
    for w in hops.windows(2) {
        let node = by_guid
            .get(w[0]["node_guid"].as_str().unwrap_or(""))
            .context("hop node")?;
        let out = w[0]["out_port"].as_u64();
        let port = node["ports"]
            .as_array()
            .context("ports")?
            .iter()
            .find(|p| p["num"].as_u64() == out)
            .context("egress port")?;
        assert_eq!(port["remote_node_guid"], w[1]["node_guid"], "{route}");
        assert_eq!(port["remote_port"], w[1]["in_port"], "{route}");
    }
    let text = demo.ctl(m, &["route", &a.to_string(), &b.to_string()])?;
    assert!(String::from_utf8_lossy(&text.stdout).contains("switch hops"));

    // Bad requests, each with a precise reason and exit code.
    let (code, err) = demo.fails(m, &["route", &a.to_string(), "40000"])?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("assigned to no port"), "{err}");
    let (code, err) = demo.fails(m, &["route", "0", "1"])?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unicast"), "{err}");
    let (code, err) = demo.fails(s, &["route", &a.to_string(), &b.to_string()])?;
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("ask the master"), "{err}");
    let (code, err) = demo.fails(m, &["set-priority", "16"])?;
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = demo.fails(m, &["partitions", "set", "p", "0x7fff", "0x1"])?;
    assert_eq!(code, Some(2));
    assert!(err.contains("default partition"), "{err}");
    let (code, err) = demo.fails(m, &["partitions", "set", "p", "0x8012", "0x1"])?;
    assert_eq!(code, Some(2));
    assert!(err.contains("15 bits"), "{err}");
    let (code, err) = demo.fails(m, &["partitions", "set", "p", "0x12", "0x1:both"])?;
    assert_eq!(code, Some(2));
    assert!(err.contains("neither full nor limited"), "{err}");
    let (code, err) = demo.fails(m, &["partitions", "set", "p", "0x12", "0x00ffeeddccbbaa99"])?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not on the fabric"), "{err}");

    // A valid partition goes through the replica: a standby lists it.
    let guids: Vec<&str> = map.keys().map(String::as_str).take(2).collect();
    let members = format!("{}:full,{}:limited", guids[0], guids[1]);
    let set = demo.json(
        m,
        &[
            "partitions",
            "set",
            "storage",
            "0x12",
            &members,
            "--ipoib",
            "mtu=5,rate=7",
            "--json",
        ],
    )?;
    assert!(
        set["outcome"].as_str().unwrap_or("").contains("committed"),
        "{set}"
    );
    let listed = demo.json(s, &["partitions", "--json"])?;
    let p = listed["partitions"]
        .as_array()
        .context("partitions")?
        .iter()
        .find(|p| p["p_key"] == "0x0012")
        .context("partition 0x0012 on the standby")?;
    assert_eq!(p["name"], "storage");
    assert_eq!(p["members"][1]["membership"], "limited");
    assert_eq!(p["ipoib"]["mtu"], 5, "{p}");
    assert_eq!(p["ipoib"]["rate"], 7, "{p}");
    // Its IPoIB broadcast group: created by the master, listed by the standby from its
    // replica with the partition's parameters.
    let deadline = Instant::now() + Duration::from_secs(15);
    let group = loop {
        let g = demo.json(s, &["groups", "--json"])?;
        let found = g["groups"].as_array().and_then(|a| {
            a.iter()
                .find(|x| x["mgid"] == "ff12:401b:8012::ffff:ffff")
                .cloned()
        });
        if let Some(found) = found {
            assert_eq!(g["source"], "replica", "{g}");
            break found;
        }
        if Instant::now() > deadline {
            bail!("the standby never listed the partition's broadcast group: {g}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (group["mtu"].as_u64(), group["rate"].as_u64()),
        (Some(5), Some(7))
    );
    assert_eq!(group["p_key"], "0x8012");
    // The SA's services and subscriptions (none yet) and its status lines.
    for cmd in ["services", "subscriptions"] {
        let v = demo.json(s, &[cmd, "--json"])?;
        assert_eq!(v["source"], "replica", "{v}");
        assert_eq!(v[cmd].as_array().map(Vec::len), Some(0), "{v}");
    }
    let st = demo.json(m, &["status", "--json"])?;
    assert!(st["sa"]["groups"].as_u64() >= Some(2), "{st}");
    assert_eq!(st["sa"]["replica_holds_state"], true, "{st}");
    // Deleted through a standby (forwarded to the Raft leader): gone from its list at
    // once (it waits for its own replica to apply the removal); a second delete is
    // NOT_FOUND (exit 1), a start-up-only or bogus P_Key a usage error.
    let del = demo.json(s, &["partitions", "delete", "0x12", "--json"])?;
    assert!(
        del["outcome"].as_str().unwrap_or("").contains("removed"),
        "{del}"
    );
    assert!(
        del["partitions"]
            .as_array()
            .context("partitions")?
            .iter()
            .all(|p| p["p_key"] != "0x0012"),
        "{del}"
    );
    let (code, err) = demo.fails(s, &["partitions", "delete", "0x12"])?;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no partition with P_Key 0x0012"), "{err}");
    let (code, err) = demo.fails(s, &["partitions", "delete", "0x8012"])?;
    assert_eq!(code, Some(2), "{err}");

    // Members (the replica engineer's Cluster service) through ibsmctl.
    let members = demo.json(m, &["members", "--json"])?;
    assert_eq!(
        members["members"].as_array().map(Vec::len),
        Some(3),
        "{members}"
    );
    let (code, err) = demo.fails(m, &["members", "remove", "99"])?;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not a member"), "{err}");
    let (code, _) = demo.fails(m, &["members", "add", "0", "127.0.0.1:1"])?;
    assert_eq!(code, Some(2));

    // The daemon kept running, same master, same LIDs.
    assert_eq!(demo.master()?, m);
    assert_eq!(lid_map(&demo.json(m, &["lids", "--json"])?)?, map);
    Ok(())
}

/// `Control/StepDown` through `ibsmctl step-down`: the master advertises priority 0
/// and another SM is MASTER during the hold; when the hold ends its priority comes
/// back and (no sticky priority in the demo) it takes the subnet back; a standby and a
/// bad hold are refused without changing anything.
#[test]
fn step_down_yields_for_the_hold_then_the_priority_comes_back() -> Result<()> {
    let demo = Demo::start()?;
    let m = demo.master()?;
    let before = demo.json(m, &["status", "--json"])?;
    let prio = before["priority"].as_u64().context("priority")?;
    assert!(prio > 0, "{before}");
    let standby = (m + 1) % 3;
    let (code, err) = demo.fails(standby, &["step-down", "--hold-s", "1"])?;
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("only the master steps down"), "{err}");
    let (code, err) = demo.fails(m, &["step-down", "--hold-s", "0"])?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("hold_ms 0 is out of range"), "{err}");
    assert_eq!(demo.json(m, &["status", "--json"])?["state"], "MASTER");

    let r = demo.json(m, &["--json", "step-down", "--hold-s", "4"])?;
    assert_eq!(r["restored_priority"].as_u64(), Some(prio), "{r}");
    let during = demo.json(m, &["status", "--json"])?;
    assert_eq!(during["priority"], 0, "{during}");
    assert_ne!(during["state"], "MASTER", "{during}");
    let other = demo.master()?;
    assert_ne!(other, m);
    // After the hold: the priority is back, and with it the mastership.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = demo.json(m, &["status", "--json"])?;
        if s["priority"].as_u64() == Some(prio) && s["state"] == "MASTER" {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "after the hold, sm{} did not get priority {prio} and the subnet back: {s}",
                m + 1
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}
