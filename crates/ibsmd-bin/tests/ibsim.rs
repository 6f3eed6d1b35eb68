//! Two `ibsmd --fabric umad` processes on ibsim (under umad2sim): the higher priority
//! is master as `sminfo` sees it from a third node, and after SIGKILL of the master the
//! other one takes over. Fails (never skips) when ibsim/umad2sim/sminfo are missing.

use std::process::Stdio;
use std::time::{Duration, Instant};

use ibsm_labkit::{example_net, run_with_timeout, Ibsim, IbsimOptions};

const NET: &str = "net.2sw2path4hca";
/// From Hca1 (Switch1 port 1): Hca2 is behind Switch1 port 3 -> Switch2 port 1,
/// Hca3 behind Switch1 port 2.
const DR_HCA2: &str = "0,1,3,1";
const DR_HCA3: &str = "0,1,2";

fn sminfo(sim: &Ibsim, dr: &str) -> String {
    let mut cmd = sim.command_on("Hca1", "sminfo");
    cmd.args(["-D", dr]);
    match run_with_timeout(&mut cmd, Duration::from_secs(20)) {
        Ok(out) => format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => format!("sminfo failed: {e}"),
    }
}

fn wait_sminfo(sim: &Ibsim, dr: &str, want: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = String::new();
    while Instant::now() < deadline {
        out = sminfo(sim, dr);
        if want.iter().all(|w| out.contains(w)) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("sminfo -D {dr} never showed {want:?}; last output: {out}");
}

#[test]
fn higher_priority_ibsmd_is_master_and_the_other_takes_over_after_sigkill() {
    ibsm_labkit::require_tool("sminfo").expect("infiniband-diags");
    let net = example_net(NET).expect("net file");
    let sim = Ibsim::start(&net, IbsimOptions::default()).expect("ibsim");
    let ibsmd = env!("CARGO_BIN_EXE_ibsmd");
    let spawn = |host: &str, prio: &str| {
        let log = std::fs::File::create(sim.dir().join(format!("ibsmd-{host}.log"))).expect("log");
        let mut cmd = sim.command_on(host, ibsmd);
        cmd.args([
            "--fabric",
            "umad",
            "--priority",
            prio,
            "--grpc",
            "127.0.0.1:0",
            "--insecure-plaintext",
        ])
        .stdout(Stdio::null())
        .stderr(log);
        sim.spawn(&mut cmd).expect("spawn ibsmd")
    };
    let mut high = spawn("Hca2", "10");
    let low = spawn("Hca3", "5");

    let out = wait_sminfo(&sim, DR_HCA2, &["SMINFO_MASTER", "priority 10"]);
    assert!(out.contains("SMINFO_MASTER"), "{out}");
    wait_sminfo(&sim, DR_HCA3, &["SMINFO_STANDBY", "priority 5"]);

    high.kill().expect("SIGKILL master");
    // ibsim does not notice dead clients; a kernel would close their files.
    sim.reap_dead_clients().expect("reap");
    wait_sminfo(&sim, DR_HCA3, &["SMINFO_MASTER", "priority 5"]);

    let log = std::fs::read_to_string(sim.dir().join("ibsmd-Hca3.log")).unwrap_or_default();
    assert!(
        log.contains("sm state: STANDBY -> DISCOVERING (")
            && log.contains("sm state: DISCOVERING -> MASTER ("),
        "the standby's log must show the failover transitions:\n{log}"
    );
    drop(low);
}
