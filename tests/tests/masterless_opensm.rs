//! Never masterless because of us (`--masterless-takeover-ms`), judged on ibsim with
//! two Debian OpenSMs as the SMs that outrank ibsmd.
//!
//! OpenSM A (priority 15, Hca2) is master; OpenSM B (priority 14, Hca4) is its standby,
//! polling it every 4 s with 2 retries (slow, as OpenSM's default 10 s x 4 is: it
//! notices a dead master only after several seconds); ibsmd (priority 10, Hca1) is a
//! standby that outranks nobody. SIGKILL A: IBA's rule alone leaves the subnet without
//! a master until B notices. With the rule, ibsmd takes MASTER once the subnet has had
//! no master for the bound (1 s) and B still answers STANDBY, then its master polls
//! find B outranking it and send HANDOVER, which B accepts: B ends master, ibsmd
//! standby, and the judge (`sminfo -D` from Hca3) saw ibsmd master in between, long
//! before B's own polls could have given up on A.
//!
//! Never skipped: a missing ibsim, umad2sim, OpenSM or sminfo fails the test.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{
    example_net, run_with_timeout, Ibsim, IbsimOptions, Ibsmd, IbsmdOptions, OpenSm, OpenSmOptions,
};

const NET: &str = "net.2sw2path4hca";
/// From the judge (Hca3, Switch1 port 2): Hca1 is Switch1 port 1.
const DR_IBSMD: &str = "0,1,1";
/// Switch1 port 3 -> Switch2 port 3, then port 2: Hca4.
const DR_OPENSM_B: &str = "0,1,3,2";
const STEP: Duration = Duration::from_secs(45);
const MASTER: u8 = 3;
const STANDBY: u8 = 2;

/// `(state, priority)` of the SM at `dr`, read by `sminfo -D` from Hca3; `None` when
/// it did not answer.
fn judge(sim: &Ibsim, dr: &str) -> Result<Option<(u8, u8)>> {
    let mut cmd = sim.command_on("Hca3", "sminfo");
    cmd.args(["-D", dr]);
    match run_with_timeout(&mut cmd, Duration::from_secs(8)) {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let words: Vec<&str> = text.split_whitespace().collect();
            let after = |key: &str| {
                words
                    .iter()
                    .position(|w| *w == key)
                    .and_then(|i| words.get(i + 1))
                    .and_then(|v| v.parse::<u8>().ok())
            };
            Ok(after("state").zip(after("priority")))
        }
        Ok(_) => Ok(None),
        Err(_) => {
            sim.reap_dead_clients()?;
            Ok(None)
        }
    }
}

fn wait_judge(sim: &Ibsim, dr: &str, want: (u8, u8)) -> Result<()> {
    let deadline = Instant::now() + STEP;
    let mut last = None;
    while Instant::now() < deadline {
        last = judge(sim, dr)?;
        if last == Some(want) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("sminfo -D {dr}: wanted (state, priority) {want:?}, last {last:?}")
}

fn opensm(sim: &Ibsim, host: &str, priority: u8) -> Result<OpenSm> {
    Ok(OpenSm::start(
        sim,
        host,
        OpenSmOptions {
            priority,
            sminfo_polling_timeout_ms: Some(4000),
            polling_retry_number: Some(2),
            log_flags: Some(0x07),
            ..Default::default()
        },
    )?)
}

#[test]
fn ibsmd_holds_the_subnet_until_a_slow_higher_opensm_standby_takes_it() -> Result<()> {
    ibsm_labkit::require_lab()?;
    ibsm_labkit::require_tool("opensm")?;
    ibsm_labkit::require_tool("sminfo")?;
    let ibsmd_bin = binary("ibsmd")?;
    let sim = Ibsim::start(&example_net(NET)?, IbsimOptions::default())?;

    let mut a = opensm(&sim, "Hca2", 15)?;
    a.wait_log("Entering MASTER state", STEP)?;
    let mut b = opensm(&sim, "Hca4", 14)?;
    b.wait_log("Entering STANDBY state", STEP)?;
    let mut d = Ibsmd::start(
        &sim,
        "Hca1",
        &ibsmd_bin,
        IbsmdOptions {
            priority: 10,
            args: vec![
                "--insecure-plaintext".into(),
                "--masterless-takeover-ms".into(),
                "1000".into(),
            ],
            ..IbsmdOptions::default()
        },
    )?;
    d.wait_log("sm state: DISCOVERING -> STANDBY (", STEP)?;
    wait_judge(&sim, DR_OPENSM_B, (STANDBY, 14))?;

    let (from_d, from_b) = (d.log().len(), b.log_len());
    a.kill()?;
    sim.reap_dead_clients()?;
    let killed = Instant::now();

    // ibsmd takes the masterless subnet, naming B as the idle higher SM...
    d.wait_log_since(from_d, "-> MASTER (no master for", STEP)
        .with_context(|| format!("OpenSM B's log:\n{}", b.log()))?;
    let ibsmd_master_after = killed.elapsed();
    let log = d.log();
    let line = log[from_d..]
        .lines()
        .find(|l| l.contains("-> MASTER (no master for"))
        .unwrap_or_default();
    assert!(
        line.contains("(priority 14) still STANDBY"),
        "the reason names OpenSM B: {line}"
    );
    // ... and hands it to B, which ends master, ibsmd standby behind it.
    b.wait_log_since(from_b, "Entering MASTER state", STEP)
        .with_context(|| format!("ibsmd's log:\n{}", &d.log()[from_d..]))?;
    d.wait_log_since(from_d, "sm state: MASTER -> STANDBY (", STEP)?;
    wait_judge(&sim, DR_OPENSM_B, (MASTER, 14))?;
    wait_judge(&sim, DR_IBSMD, (STANDBY, 10))?;
    let b_log = b.log();
    assert!(
        b_log[from_b..].contains("Entering MASTER state"),
        "OpenSM B became master"
    );
    eprintln!(
        "ibsmd MASTER {ibsmd_master_after:?} after the kill; OpenSM B master {:?} after",
        killed.elapsed()
    );
    Ok(())
}
