//! ibsm-umad against ibsim through umad2sim (net.2sw2path4hca). Each test starts its own
//! ibsim, then re-runs *this test binary* for that one test under `LD_PRELOAD=umad2sim`
//! (the child), because the preload must be in the process that opens the device. The
//! child does the umad work and the checks; diags it needs run as its own children and
//! inherit the preload. Fails (never skips) when the lab is missing.

use std::process::Command;
use std::time::{Duration, Instant};

use ibsm_labkit::{example_net, require_tool, run_ok, Ibsim, IbsimOptions};
use ibsm_mad::{AttributeId, Method, NodeInfo, NodeType, PortInfo, SmInfo, SmState, Smp, SmpRoute};
use ibsm_umad::{open_issm, Dest, Received, UmadOptions, UmadPort};

const CHILD_ENV: &str = "IBSM_UMAD_LAB_CHILD";
const T: Duration = Duration::from_secs(5);

fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == name)
}

/// Parent side: start ibsim and run the test `name` again, as a child attached at `host`.
fn run_in_lab(name: &str, host: &str) {
    let sim = Ibsim::start(
        &example_net("net.2sw2path4hca").expect("net"),
        IbsimOptions::default(),
    )
    .expect("ibsim");
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = sim.command_on(host, exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name);
    let out = sim
        .run(&mut cmd, Duration::from_secs(90))
        .expect("child ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Make sure the child really ran the test (a filter typo would run nothing and pass).
    assert!(
        stdout.contains("1 passed"),
        "child did not run {name}:\n{stdout}\n{stderr}"
    );
}

/// Run a diag from inside the child (inherits LD_PRELOAD and IBSIM_SOCKNAME), optionally
/// from another node.
fn diag(host: Option<&str>, program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(require_tool(program).expect("tool"));
    cmd.args(args);
    if let Some(h) = host {
        cmd.env("SIM_HOST", h);
    }
    run_ok(&mut cmd, Duration::from_secs(30)).expect(program)
}

/// A field of smpquery's `Name:.....value` output.
fn field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.trim_start_matches('.').trim().to_string())
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

fn hex(v: &str) -> u64 {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

fn port() -> UmadPort {
    UmadPort::open(0, UmadOptions::default()).expect("open umad0")
}

/// Send `req` and wait for the answer (or kernel/ibsim timeout) with the same TID (low 32
/// bits: the upper half is the agent's).
fn transact(p: &UmadPort, req: &Smp) -> Received {
    p.send(&req.encode(), Dest::Directed).expect("send");
    let deadline = Instant::now() + T;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Some(r) = p.recv(left).expect("recv") {
            if r.tid() & 0xffff_ffff == req.tid & 0xffff_ffff {
                return r;
            }
        }
    }
    panic!("no response to TID {:#x}", req.tid);
}

#[test]
fn zero_hop_dr_nodeinfo_is_the_local_hca() {
    if !is_child("zero_hop_dr_nodeinfo_is_the_local_hca") {
        return run_in_lab("zero_hop_dr_nodeinfo_is_the_local_hca", "Hca3");
    }
    let p = port();
    let ni: NodeInfo = p.get_local_attr(0, 0x10, T).expect("NodeInfo");
    let q = diag(None, "smpquery", &["-D", "nodeinfo", "0"]);
    assert_eq!(ni.node_type, NodeType::Ca);
    assert_eq!(ni.node_guid, hex(&field(&q, "Guid")), "{q}");
    assert_eq!(ni.port_guid, hex(&field(&q, "PortGuid")), "{q}");
    assert_eq!(field(&q, "LocalPort"), ni.local_port_num.to_string());
    assert_eq!(ni.num_ports, 2, "Hca3 has 2 ports in the net file");
    // The node we reached is Hca3, as SIM_HOST asked.
    let desc = diag(None, "smpquery", &["-D", "nodedesc", "0"]);
    assert!(desc.contains("Hca3"), "{desc}");
    // PortInfo of the same port agrees on the port and its state.
    let pi: PortInfo = p.get_local_attr(0, 0x11, T).expect("PortInfo");
    assert_eq!(pi.local_port_num, ni.local_port_num);
    // Nothing pending: recv waits for its timeout and reports nothing (umad2sim's
    // "no packet" reads must not surface as MADs).
    let start = Instant::now();
    let got = p.recv(Duration::from_millis(150)).expect("recv");
    assert!(got.is_none(), "unexpected MAD {got:?}");
    assert!(
        start.elapsed() >= Duration::from_millis(140),
        "returned early: {:?}",
        start.elapsed()
    );
}

#[test]
fn one_hop_dr_get_reaches_the_switch() {
    if !is_child("one_hop_dr_get_reaches_the_switch") {
        return run_in_lab("one_hop_dr_get_reaches_the_switch", "Hca1");
    }
    let p = port();
    let req = Smp::get_dr(&[1], AttributeId::NODE_INFO, 0, 0xdead_0000_0000_1234);
    let r = transact(&p, &req);
    assert!(!r.is_timeout(), "timed out");
    let smp = r.smp().expect("decode");
    assert_eq!(smp.method, Method::GET_RESP);
    assert_eq!(smp.status, 0);
    let SmpRoute::Directed(dr) = smp.route else {
        panic!("not DR: {smp:?}")
    };
    assert!(dr.direction, "a DR response has D=1");
    assert_eq!(dr.path(), &[1]);
    let ni: NodeInfo = smp.attribute().expect("NodeInfo");
    let q = diag(None, "smpquery", &["-D", "nodeinfo", "0,1"]);
    assert_eq!(ni.node_type, NodeType::Switch);
    assert_eq!(ni.node_guid, hex(&field(&q, "Guid")), "{q}");
    assert_eq!(
        ni.local_port_num, 1,
        "entered Switch1 on port 1 (Hca1's cable)"
    );
    // A path through a port with nothing behind it (Switch1 port 4) comes back as a
    // timeout, not a hang.
    let r = transact(&p, &Smp::get_dr(&[1, 4], AttributeId::NODE_INFO, 0, 0x77));
    assert!(r.is_timeout(), "status {} mad {:?}", r.status, r.smp());
}

#[test]
fn opening_issm_sets_is_sm_and_closing_clears_it() {
    if !is_child("opening_issm_sets_is_sm_and_closing_clears_it") {
        return run_in_lab("opening_issm_sets_is_sm_and_closing_clears_it", "Hca1");
    }
    let p = port();
    let is_sm = |tid| {
        p.get_local_attr::<PortInfo>(1, tid, T)
            .expect("PortInfo")
            .capability_mask
            .is_sm()
    };
    // Seen from Hca2 across both switches: Hca2 port 1, Switch2 port 3, Switch1 port 1.
    let remote_is_sm = || {
        let out = diag(
            Some("Hca2"),
            "smpquery",
            &["-D", "portinfo", "0,1,3,1", "1"],
        );
        hex(&field(&out, "CapMask")) & 0x2 != 0
    };
    assert!(!is_sm(1), "IsSM before issm is open");
    assert!(!remote_is_sm());
    let issm = open_issm(0).expect("open issm0");
    assert!(is_sm(2), "IsSM after issm is open (local view)");
    assert!(
        remote_is_sm(),
        "IsSM after issm is open (smpquery from Hca2)"
    );
    drop(issm);
    assert!(!is_sm(3), "IsSM after issm is closed");
    assert!(!remote_is_sm());
}

#[test]
fn answering_subnget_sminfo_is_seen_by_sminfo_on_another_node() {
    if !is_child("answering_subnget_sminfo_is_seen_by_sminfo_on_another_node") {
        return run_in_lab(
            "answering_subnget_sminfo_is_seen_by_sminfo_on_another_node",
            "Hca1",
        );
    }
    let p = port();
    let _issm = open_issm(0).expect("issm");
    let local: NodeInfo = p.get_local_attr(0, 1, T).expect("NodeInfo");
    let ours = SmInfo {
        guid: local.port_guid,
        sm_key: 0,
        act_count: 4242,
        priority: 13,
        sm_state: SmState::Master,
    };
    // sminfo on Hca2 asks Hca1 (Hca2 port 1, Switch2 port 3, Switch1 port 1) for SMInfo;
    // ibsim has no SMA answer for SMInfo and forwards the Get to us. Answer every Get
    // until sminfo is done.
    let mut cmd = Command::new(require_tool("sminfo").expect("sminfo"));
    cmd.args(["-D", "0,1,3,1"]).env("SIM_HOST", "Hca2");
    let handle = std::thread::spawn(move || run_ok(&mut cmd, Duration::from_secs(20)));
    let deadline = Instant::now() + Duration::from_secs(25);
    let mut answered = 0;
    while !handle.is_finished() && Instant::now() < deadline {
        let Some(r) = p.recv(Duration::from_millis(20)).expect("recv") else {
            continue;
        };
        let Ok(smp) = r.smp() else {
            panic!(
                "not an SMP: status {} len {} agent {} src {:?} mad {:02x?}",
                r.status,
                r.length,
                r.agent_id,
                r.source,
                &r.mad[..64]
            );
        };
        if smp.method == Method::GET && smp.attr_id == AttributeId::SM_INFO {
            assert!(smp.is_directed(), "sminfo -D sends a directed-route Get");
            p.send(
                &smp.response().with_attribute(&ours).encode(),
                Dest::Directed,
            )
            .expect("send GetResp");
            answered += 1;
        }
    }
    assert!(answered >= 1, "no SubnGet(SMInfo) arrived");
    let out = handle.join().expect("thread").expect("sminfo output");
    let want = format!(
        "sm guid {:#x}, activity count 4242 priority 13 state 3",
        local.port_guid
    );
    assert!(
        out.contains(&want),
        "sminfo said {out:?}, expected it to contain {want:?}"
    );
}
