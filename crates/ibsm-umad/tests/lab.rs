//! ibsm-umad against ibsim through umad2sim (net.2sw2path4hca). Each test starts its own
//! ibsim, then re-runs *this test binary* for that one test under `LD_PRELOAD=umad2sim`
//! (the child), because the preload must be in the process that opens the device. The
//! child does the umad work and the checks; diags it needs run as its own children and
//! inherit the preload. Fails (never skips) when the lab is missing.

use std::process::Command;
use std::time::{Duration, Instant};

use ibsm_labkit::{example_net, require_tool, run_ok, Ibsim, IbsimOptions};
use ibsm_umad::{open_issm, raw, Dest, UmadOptions, UmadPort};

const CHILD_ENV: &str = "IBSM_UMAD_LAB_CHILD";
const NODE_INFO: u16 = 0x0011;
const PORT_INFO: u16 = 0x0015;
const SM_INFO: u16 = 0x0020;
const IS_SM: u32 = 1 << 1;

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

/// Send `req` and wait for the response with the same TID (low 32 bits).
fn transact(p: &UmadPort, req: &[u8; 256]) -> ibsm_umad::Received {
    p.send(req, Dest::Directed).expect("send");
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Some(r) = p.recv(left).expect("recv") {
            if r.tid() & 0xffff_ffff == raw::tid(req) & 0xffff_ffff {
                return r;
            }
        }
    }
    panic!("no response to TID {:#x}", raw::tid(req));
}

#[test]
fn zero_hop_dr_nodeinfo_is_the_local_hca() {
    if !is_child("zero_hop_dr_nodeinfo_is_the_local_hca") {
        return run_in_lab("zero_hop_dr_nodeinfo_is_the_local_hca", "Hca3");
    }
    let p = port();
    let data = p
        .get_local(NODE_INFO, 0, 0x10, Duration::from_secs(5))
        .expect("NodeInfo");
    let ni = raw::node_info_ids(&data);
    let q = diag(None, "smpquery", &["-D", "nodeinfo", "0"]);
    assert_eq!(ni.node_type, 1, "a CA");
    assert_eq!(ni.node_guid, hex(&field(&q, "Guid")), "{q}");
    assert_eq!(ni.port_guid, hex(&field(&q, "PortGuid")), "{q}");
    assert_eq!(field(&q, "LocalPort"), ni.local_port_num.to_string());
    assert_eq!(ni.num_ports, 2, "Hca3 has 2 ports in the net file");
    // ibsim names nodes; the one we reached must be Hca3, as SIM_HOST asked.
    let desc = diag(None, "smpquery", &["-D", "nodedesc", "0"]);
    assert!(desc.contains("Hca3"), "{desc}");
    // LID-routed agent works too: the port has no LID yet, so only check the send path.
    let ids = raw::node_info_ids(
        &p.get_local(NODE_INFO, 0, 0x11, Duration::from_secs(5))
            .expect("again"),
    );
    assert_eq!(ids, ni, "NodeInfo is stable");
}

#[test]
fn one_hop_dr_get_reaches_the_switch() {
    if !is_child("one_hop_dr_get_reaches_the_switch") {
        return run_in_lab("one_hop_dr_get_reaches_the_switch", "Hca1");
    }
    let p = port();
    let tid = 0xdead_0000_0000_1234;
    let r = transact(&p, &raw::dr_get(tid, NODE_INFO, 0, &[1]));
    assert!(!r.is_timeout(), "timed out");
    assert_eq!(r.method(), raw::METHOD_GET_RESP);
    assert!(raw::direction(&r.mad), "a DR response has D=1");
    assert_eq!(raw::status(&r.mad), 0);
    let ni = raw::node_info_ids(&raw::data(&r.mad));
    let q = diag(None, "smpquery", &["-D", "nodeinfo", "0,1"]);
    assert_eq!(ni.node_type, 2, "a switch");
    assert_eq!(ni.node_guid, hex(&field(&q, "Guid")), "{q}");
    assert_eq!(
        ni.local_port_num, 1,
        "entered Switch1 on port 1 (Hca1's cable)"
    );
    // A path through a port with nothing behind it is answered with a timeout, not a hang.
    let dead = raw::dr_get(0x77, NODE_INFO, 0, &[1, 4]);
    let r = transact(&p, &dead);
    assert!(
        r.is_timeout() || raw::status(&r.mad) != 0,
        "status {} mad status {:#x}",
        r.status,
        raw::status(&r.mad)
    );
}

#[test]
fn opening_issm_sets_is_sm_and_closing_clears_it() {
    if !is_child("opening_issm_sets_is_sm_and_closing_clears_it") {
        return run_in_lab("opening_issm_sets_is_sm_and_closing_clears_it", "Hca1");
    }
    let p = port();
    let cap = |tid| {
        raw::port_info_capability_mask(
            &p.get_local(PORT_INFO, 1, tid, Duration::from_secs(5))
                .expect("PortInfo"),
        )
    };
    // Seen from Hca2 across both switches: Hca2 port 1, Switch2 port 3, Switch1 port 1.
    let remote_cap = || {
        hex(&field(
            &diag(
                Some("Hca2"),
                "smpquery",
                &["-D", "portinfo", "0,1,3,1", "1"],
            ),
            "CapMask",
        )) as u32
    };
    assert_eq!(cap(1) & IS_SM, 0, "IsSM before issm is open");
    assert_eq!(remote_cap() & IS_SM, 0);
    let issm = open_issm(0).expect("open issm0");
    assert_ne!(cap(2) & IS_SM, 0, "IsSM after issm is open (local view)");
    assert_ne!(
        remote_cap() & IS_SM,
        0,
        "IsSM after issm is open (smpquery from Hca2)"
    );
    drop(issm);
    assert_eq!(cap(3) & IS_SM, 0, "IsSM after issm is closed");
    assert_eq!(remote_cap() & IS_SM, 0);
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
    let local = raw::node_info_ids(
        &p.get_local(NODE_INFO, 0, 1, Duration::from_secs(5))
            .expect("NodeInfo"),
    );
    // SMInfo: GUID, SM_Key, ActCount, Priority(7:4)|SMState(3:0).
    let mut sminfo = [0u8; 64];
    sminfo[0..8].copy_from_slice(&local.port_guid.to_be_bytes());
    sminfo[8..16].copy_from_slice(&0u64.to_be_bytes());
    sminfo[16..20].copy_from_slice(&4242u32.to_be_bytes());
    sminfo[20] = (13 << 4) | 3;

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
        if r.method() == raw::METHOD_GET && raw::attr_id(&r.mad) == SM_INFO {
            assert_eq!(r.mgmt_class(), 0x81, "sminfo -D sends a directed-route Get");
            p.send(&raw::response(&r.mad, &sminfo), Dest::Directed)
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
