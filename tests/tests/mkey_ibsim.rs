//! `ibsmd --m-key` as the master SM on ibsim, judged by infiniband-diags given the key:
//!
//! * the diags' real flag is `--m_key` (`smpquery --help` says so; `-K` shows keys);
//! * with an M_Key at protection level 2 the fabric comes up as without one: a LID on
//!   every CA port and switch, every port ACTIVE (`smpquery --m_key K portinfo LID`);
//! * `ibnetdiscover --m_key K`, `smpquery --m_key K nodeinfo` and `ibroute --m_key K`
//!   work against the protected fabric (every switch's LFT routes every LID).
//!
//! What ibsim cannot show: it does not check M_Keys (the check is commented out in
//! its `sim_mad.c`) and its PortInfo Set keeps only LID, MasterSMLID, LMC, HOQLife,
//! the states and OperationalVLs, so `smpquery portinfo` always reads M_Key 0 and
//! ibsim's own M_KeyLeasePeriod there. That the key, protection bits and lease are
//! programmed, that a Set without the key fails and that a failover keeps the key is
//! tested against the embedded fabric, which checks M_Keys as IBA 14.2.4 says
//! (`ibsm-sim` tests `m_key.rs`, `ibsm-core` `subnet::tests` M_Key section). This test
//! asserts that ibsim still reads what ibsim stores, so it fails the day an ibsim
//! starts keeping the key and the assertion can become the real one.
//!
//! Fails (never skips) when a tool is missing. Own ibsim, killed on drop.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{Ibsim, IbsimOptions};

const NET_2SW2PATH4HCA: &str = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const SUBNET_UP_TIMEOUT: Duration = Duration::from_secs(120);
const M_KEY: &str = "0x5ec0000000c0ffee";

fn run_ok(cmd: &mut std::process::Command) -> Result<String> {
    ibsm_integration::run_ok(cmd, RUN_TIMEOUT)
}

/// Every number after a word `lid` in ibnetdiscover's output (node and port lines).
fn lids_in(text: &str) -> BTreeSet<u16> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        while let Some(w) = it.next() {
            if w == "lid" {
                if let Some(v) = it.next().and_then(|v| v.parse::<u16>().ok()) {
                    if v != 0 {
                        out.insert(v);
                    }
                }
            }
        }
    }
    out
}

/// `Field:....value` of smpquery's output.
fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        Some(rest.trim_start_matches('.').trim())
    })
}

#[test]
fn diags_with_the_m_key_see_a_protected_fabric_come_up() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let bin = binary("ibsmd")?;

    // The diags' flag, as they spell it.
    let help = ibsm_labkit::run_with_timeout(
        std::process::Command::new(ibsm_labkit::require_tool("smpquery")?).arg("--help"),
        RUN_TIMEOUT,
    )?;
    let help = format!(
        "{}{}",
        String::from_utf8_lossy(&help.stdout),
        String::from_utf8_lossy(&help.stderr)
    );
    assert!(help.contains("--m_key"), "smpquery --help:\n{help}");

    let sim = Ibsim::start(Path::new(NET_2SW2PATH4HCA), IbsimOptions::default())?;
    let log = sim.dir().join("ibsmd.log");
    let file = std::fs::File::create(&log).context("ibsmd log")?;
    let mut cmd = sim.command_on("Hca1", &bin);
    cmd.args([
        "--fabric",
        "umad",
        "--priority",
        "10",
        "--grpc",
        "127.0.0.1:0",
        "--insecure-plaintext",
        "--m-key",
        M_KEY,
        "--m-key-protection-level",
        "2",
        "--m-key-lease-period",
        "60",
    ]);
    cmd.env("NO_COLOR", "1").stdout(Stdio::null()).stderr(file);
    let _sm = sim.spawn(&mut cmd)?;
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + SUBNET_UP_TIMEOUT;
    while !read_log().contains("subnet up") {
        if Instant::now() > deadline {
            bail!("no subnet up within {SUBNET_UP_TIMEOUT:?}:\n{}", read_log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let diag = |program: &str, args: &[&str]| -> Result<String> {
        let mut c = sim.command_on("Hca2", program);
        c.args(args);
        run_ok(&mut c).with_context(|| format!("{program} {args:?}; ibsmd log:\n{}", read_log()))
    };

    // 2 switches + 4 HCAs, each with its own LID, found with the key.
    let topo = diag("ibnetdiscover", &["--m_key", M_KEY])?;
    let lids = lids_in(&topo);
    assert_eq!(lids.len(), 6, "LIDs {lids:?} in:\n{topo}");

    let mut switches = Vec::new();
    for lid in &lids {
        let l = lid.to_string();
        let ni = diag("smpquery", &["--m_key", M_KEY, "nodeinfo", &l])?;
        let is_switch = field(&ni, "NodeType").is_some_and(|t| t.contains("Switch"));
        if is_switch {
            switches.push(*lid);
        }
        let pi = diag("smpquery", &["-K", "--m_key", M_KEY, "portinfo", &l])?;
        assert_eq!(field(&pi, "Lid"), Some(l.as_str()), "{pi}");
        assert_eq!(field(&pi, "LinkState"), Some("Active"), "LID {lid}:\n{pi}");
        // MasterSMLID points at the master (Hca1): the PortInfo Sets carrying the key
        // were taken.
        let sm_lid = field(&pi, "SMLid").context("SMLid")?;
        assert_ne!(sm_lid, "0", "LID {lid}:\n{pi}");
        // ibsim keeps no M_Key (see the module doc): it reads 0 whatever was set.
        assert_eq!(
            field(&pi, "Mkey"),
            Some("0x0000000000000000"),
            "ibsim now stores M_Key: assert the programmed key here instead\n{pi}"
        );
    }
    assert_eq!(switches.len(), 2, "switch LIDs {switches:?}");

    // ibroute with the key: every LID routed by every switch, and LID 0, which
    // holds ibsmd's LFT stamp (an even value below 254 once settled) and which
    // ibroute lists as if it were a route.
    for sw in &switches {
        let lft = diag("ibroute", &["--m_key", M_KEY, &sw.to_string()])?;
        let dumped = lft
            .lines()
            .find(|l| l.contains("valid lids dumped"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok())
            .with_context(|| format!("ibroute {sw}:\n{lft}"))?;
        assert_eq!(dumped, lids.len() + 1, "ibroute {sw}:\n{lft}");
        let stamp = lft
            .lines()
            .find_map(|l| l.strip_prefix("0x0000 "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|p| p.parse::<u8>().ok())
            .with_context(|| format!("ibroute {sw}: no LID 0 entry:\n{lft}"))?;
        assert!(
            stamp < 254 && stamp.is_multiple_of(2),
            "ibroute {sw}: LID 0 (the LFT stamp) {stamp}:\n{lft}"
        );
    }
    assert!(
        !read_log().contains("ERROR"),
        "ibsmd logged errors:\n{}",
        read_log()
    );
    Ok(())
}
