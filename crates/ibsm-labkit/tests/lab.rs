//! Lab tests: real ibsim, infiniband-diags and OpenSM. They fail (never skip) when a
//! tool is missing. Each test starts its own ibsim, so they run in parallel.

use std::time::Duration;

use ibsm_labkit::{example_net, net_file_size, run_ok, Ibsim, IbsimOptions, OpenSm, OpenSmOptions};

const NET: &str = "net.2sw2path4hca";

/// Count node records (`Switch ...`, `Ca ...`) in ibnetdiscover output.
fn ibnetdiscover_nodes(out: &str) -> usize {
    out.lines()
        .filter(|l| l.starts_with("Switch") || l.starts_with("Ca") || l.starts_with("Rt"))
        .count()
}

fn discover(sim: &Ibsim, host: &str) -> String {
    run_ok(
        &mut sim.command_on(host, "ibnetdiscover"),
        Duration::from_secs(30),
    )
    .expect("ibnetdiscover")
}

#[test]
fn ibnetdiscover_sees_every_node_of_the_net_file() {
    let net = example_net(NET).expect("net file");
    let expected = net_file_size(&std::fs::read_to_string(&net).expect("read")).nodes as usize;
    assert_eq!(expected, 6);
    let sim = Ibsim::start(&net, IbsimOptions::default()).expect("ibsim");
    let out = discover(&sim, "Hca2");
    assert_eq!(
        ibnetdiscover_nodes(&out),
        expected,
        "ibnetdiscover output:\n{out}"
    );
    // Same from the default node (first in file is a switch; umad2sim attaches to it).
    assert!(out.contains("\"Hca4\""), "{out}");
}

#[test]
fn console_unlink_and_relink_change_what_ibnetdiscover_sees() {
    let net = example_net(NET).expect("net file");
    let sim = Ibsim::start(&net, IbsimOptions::default()).expect("ibsim");
    sim.unlink("Hca4", Some(1)).expect("unlink");
    let out = discover(&sim, "Hca2");
    assert_eq!(ibnetdiscover_nodes(&out), 5, "after Unlink:\n{out}");
    assert!(!out.contains("\"Hca4\""), "{out}");
    sim.relink("Hca4", Some(1)).expect("relink");
    let out = discover(&sim, "Hca2");
    assert_eq!(ibnetdiscover_nodes(&out), 6, "after ReLink:\n{out}");
    let dump = sim.console("Dump \"Hca4\"").expect("dump");
    assert!(dump.contains("nodeguid"), "Dump answer: {dump:?}");
}

#[test]
fn opensm_brings_the_subnet_up() {
    let net = example_net(NET).expect("net file");
    let sim = Ibsim::start(&net, IbsimOptions::default()).expect("ibsim");
    let mut sm = OpenSm::start(
        &sim,
        "Hca2",
        OpenSmOptions {
            priority: 7,
            ..Default::default()
        },
    )
    .expect("opensm");
    sm.wait_log("SUBNET UP", Duration::from_secs(60))
        .expect("SUBNET UP");
    assert!(sm.is_running());
    // The master's SMInfo, seen from another node, carries our priority and MASTER state.
    let out = run_ok(
        &mut sim.command_on("Hca1", "sminfo"),
        Duration::from_secs(20),
    )
    .expect("sminfo");
    assert!(
        out.contains("priority 7") && out.contains("SMINFO_MASTER"),
        "sminfo: {out}"
    );
}

#[test]
fn reaping_a_killed_opensm_frees_its_port() {
    let net = example_net(NET).expect("net file");
    let sim = Ibsim::start(&net, IbsimOptions::default()).expect("ibsim");
    let mut sm = OpenSm::start(&sim, "Hca3", OpenSmOptions::default()).expect("opensm");
    sm.wait_log("SUBNET UP", Duration::from_secs(60))
        .expect("SUBNET UP");
    let pid = sm.pid();
    let attached = sim.attached().expect("attached");
    assert!(
        attached.iter().any(|c| c.pid == pid && c.node == "Hca3"),
        "{attached:?}"
    );
    assert!(
        sim.reap_dead_clients().expect("reap").is_empty(),
        "live clients must stay"
    );
    sm.kill().expect("kill");
    let reaped = sim.reap_dead_clients().expect("reap");
    assert!(reaped.iter().any(|c| c.pid == pid), "reaped {reaped:?}");
    let attached = sim.attached().expect("attached");
    assert!(
        !attached.iter().any(|c| c.pid == pid),
        "still attached: {attached:?}"
    );
    // A new SM on the same node is accepted again.
    let mut sm2 = OpenSm::start(&sim, "Hca3", OpenSmOptions::default()).expect("opensm 2");
    sm2.wait_log("SUBNET UP", Duration::from_secs(60))
        .expect("second SUBNET UP");
}

#[test]
fn ibsim_dying_at_start_reports_its_stderr() {
    let net = example_net(NET).expect("net file");
    let opts = IbsimOptions {
        extra_args: vec!["-Z".into()],
        ..Default::default()
    };
    let err = Ibsim::start(&net, opts).expect_err("ibsim must reject -Z");
    let msg = err.to_string();
    assert!(
        msg.contains("exited during start") && msg.contains("Usage"),
        "{msg}"
    );
}
