//! `ibsmctl discover` against ibsim: our directed-route discovery over umad2sim,
//! our discovery in the embedded simulator, and infiniband-diags' ibnetdiscover
//! must agree on node, switch, CA, port and link counts.
//!
//! Fails (never skips) when ibsim, umad2sim or ibnetdiscover is missing.
//!
//! The `ibsmctl` binary comes from `ibsm_integration::binary`, which builds it
//! through cargo with this test's profile and target dir (see its crate doc).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{Ibsim, IbsimOptions};

const NET_2SW2PATH4HCA: &str = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca";
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    nodes: u64,
    switches: u64,
    hcas: u64,
    ports: u64,
    links: u64,
}

fn parse_json_counts(stdout: &[u8]) -> Result<Counts> {
    let v: serde_json::Value = serde_json::from_slice(stdout).with_context(|| {
        format!(
            "ibsmctl printed no JSON: {:?}",
            String::from_utf8_lossy(stdout)
        )
    })?;
    let get = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_u64)
            .with_context(|| format!("no {k} in {v}"))
    };
    Ok(Counts {
        nodes: get("nodes")?,
        switches: get("switches")?,
        hcas: get("hcas")?,
        ports: get("ports")?,
        links: get("links")?,
    })
}

/// Counts from ibnetdiscover's topology output: node header lines
/// (`Switch\t8 "S-..."`, `Ca\t2 "H-..."`) and connected-port lines (`[p] ...`),
/// every cable being listed from both ends.
fn parse_ibnetdiscover(text: &str) -> Result<Counts> {
    let mut c = Counts {
        nodes: 0,
        switches: 0,
        hcas: 0,
        ports: 0,
        links: 0,
    };
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        match first {
            "Switch" => {
                c.nodes += 1;
                c.switches += 1;
            }
            "Ca" => {
                c.nodes += 1;
                c.hcas += 1;
            }
            "Rt" => c.nodes += 1,
            _ if first.starts_with('[') => c.ports += 1,
            _ => {}
        }
    }
    if c.ports & 1 == 1 {
        bail!(
            "ibnetdiscover listed an odd number of port lines ({})",
            c.ports
        );
    }
    c.links = c.ports / 2;
    if c.nodes == 0 {
        bail!("ibnetdiscover output has no nodes:\n{text}");
    }
    Ok(c)
}

fn run_ok(cmd: &mut Command, what: &str) -> Result<Vec<u8>> {
    let out = ibsm_labkit::run_with_timeout(cmd, RUN_TIMEOUT)
        .with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

/// Run the three discoveries on `netfile` and check they agree.
fn three_way(netfile: &Path) -> Result<Counts> {
    ibsm_labkit::require_lab()?;
    let bin = binary("ibsmctl")?;
    let ibsim = Ibsim::start(netfile, IbsimOptions::default())?;

    let theirs = parse_ibnetdiscover(&String::from_utf8_lossy(&run_ok(
        &mut ibsim.command("ibnetdiscover"),
        "ibnetdiscover",
    )?))?;

    let mut over_umad = ibsim.command(&bin);
    over_umad.args(["discover", "--fabric", "umad", "--json"]);
    let ours_umad = parse_json_counts(&run_ok(&mut over_umad, "ibsmctl discover --fabric umad")?)?;

    let spec = format!("sim:{}", netfile.display());
    let ours_sim = parse_json_counts(&run_ok(
        Command::new(&bin).args(["discover", "--fabric", &spec, "--json"]),
        "ibsmctl discover --fabric sim:",
    )?)?;

    assert_eq!(
        ours_umad,
        theirs,
        "ibsmctl over umad2sim vs ibnetdiscover on {}",
        netfile.display()
    );
    assert_eq!(
        ours_sim,
        theirs,
        "ibsmctl in the embedded simulator vs ibnetdiscover on {}",
        netfile.display()
    );
    Ok(theirs)
}

#[test]
fn two_switches_two_paths_four_hcas() -> Result<()> {
    let c = three_way(Path::new(NET_2SW2PATH4HCA))?;
    assert_eq!(
        c,
        Counts {
            nodes: 6,
            switches: 2,
            hcas: 4,
            ports: 12,
            links: 6
        },
        "the example net file changed?"
    );
    Ok(())
}

#[test]
fn three_level_fat_tree_k8() -> Result<()> {
    let topo = ibsm_fabric::gen::fat_tree_3level(8).context("generating the k=8 fat tree")?;
    let dir = tempfile::tempdir()?;
    let net = dir.path().join("fat-tree-k8.net");
    std::fs::write(&net, ibsm_fabric::netfile::write(&topo))?;
    let c = three_way(&net)?;
    let expect = topo.counts();
    assert_eq!(
        (c.nodes, c.switches, c.hcas, c.links),
        (
            expect.nodes as u64,
            expect.switches as u64,
            expect.hcas as u64,
            expect.links as u64
        )
    );
    // k=8: k^3/4 = 128 hosts, 5k^2/4 = 80 switches.
    assert_eq!((c.hcas, c.switches), (128, 80));
    Ok(())
}

#[test]
fn bad_fabric_spec_exits_2() -> Result<()> {
    let bin = binary("ibsmctl")?;
    let out = Command::new(&bin)
        .args(["discover", "--fabric", "gen:mesh:3"])
        .output()?;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&bin)
        .args(["discover", "--fabric", "sim:/nonexistent/x.net"])
        .output()?;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
