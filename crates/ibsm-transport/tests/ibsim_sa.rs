//! A `UmadDevice` with the SA agent (class 0x03 on QP1) answers `saquery -c` on ibsim.
//!
//! saquery sends its SA query to PortInfo.MasterSMLID of its own port (it has no option
//! for another LID), LID-routed, so the fabric needs LIDs, LFTs, Active ports and a
//! MasterSMLID pointing at the node under test. The parent therefore lets OpenSM bring
//! the fabric up from Hca1, kills it (its SA must not answer) and reaps its ibsim
//! client, which leaves the programmed fabric behind with MasterSMLID = Hca1's LID
//! everywhere. Then it re-runs *this test binary* under umad2sim on Hca1 (the child),
//! which opens the device and answers the ClassPortInfo Get from `saquery -c` on Hca2
//! with a hand-built ClassPortInfo that saquery must print. Fails (never skips) when
//! the lab is missing.

use std::process::Command;
use std::time::{Duration, Instant};

use ibsm_labkit::{example_net, require_tool, run_ok, Ibsim, IbsimOptions, OpenSm, OpenSmOptions};
use ibsm_mad::{PortInfo, GSI_QKEY, MAD_SIZE};
use ibsm_transport::{MadDevice, UmadDevice};
use ibsm_umad::{open_issm, PortSpec};

const CHILD_ENV: &str = "IBSM_TRANSPORT_LAB_CHILD";
const T: Duration = Duration::from_secs(5);
/// SA ClassPortInfo fields we put in the answer, to find in saquery's output.
const CAP_MASK: u16 = 0x2A5A;
const RESP_TIME: u8 = 0x13;

fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == name)
}

/// Parent side: ibsim, a fabric brought up by OpenSM on Hca1 (then killed), and the
/// test `name` run again as a child attached at Hca1.
fn run_in_lab(name: &str) {
    let sim = Ibsim::start(
        &example_net("net.2sw2path4hca").expect("net"),
        IbsimOptions::default(),
    )
    .expect("ibsim");
    let mut osm = OpenSm::start(&sim, "Hca1", OpenSmOptions::default()).expect("OpenSM");
    osm.wait_log("SUBNET UP", Duration::from_secs(60))
        .expect("OpenSM brought the subnet up");
    osm.kill().expect("kill OpenSM");
    // ibsim does not notice a dead client: drop its registration (and its IsSM).
    let deadline = Instant::now() + T;
    while sim
        .attached()
        .expect("Attached")
        .iter()
        .any(|c| c.pid == osm.pid())
    {
        sim.reap_dead_clients().expect("reap");
        assert!(Instant::now() < deadline, "OpenSM's ibsim client stayed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = sim.command_on("Hca1", exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name);
    let out = sim
        .run(&mut cmd, Duration::from_secs(120))
        .expect("child ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "child did not run {name}:\n{stdout}\n{stderr}"
    );
}

/// A field of smpquery's `Name:.....value` output.
fn field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.trim_start_matches('.').trim().to_string())
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

/// `saquery -c` from Hca2 (inherits the child's LD_PRELOAD and IBSIM_SOCKNAME), on a
/// thread, with saquery's own timeout `timeout_ms`.
fn saquery_cpi(timeout_ms: u32) -> std::thread::JoinHandle<Result<String, String>> {
    let mut cmd = Command::new(require_tool("saquery").expect("saquery"));
    cmd.args(["-c", "-t", &timeout_ms.to_string()])
        .env("SIM_HOST", "Hca2");
    std::thread::spawn(move || run_ok(&mut cmd, Duration::from_secs(30)).map_err(|e| e.to_string()))
}

/// The answer to an SA Get(ClassPortInfo): GetResp, status 0, a single MAD (no RMPP),
/// the ClassPortInfo in the SA data field at byte 56.
fn class_port_info_answer(req: &[u8; MAD_SIZE], trap_lid: u16) -> [u8; MAD_SIZE] {
    let mut m = *req;
    m[3] = 0x81;
    m[4..6].fill(0);
    m[24..36].fill(0); // RMPP header: not active
    m[36..56].fill(0); // SA header: SM_Key, AttributeOffset, ComponentMask
    let d = &mut m[56..];
    d.fill(0);
    d[0] = 1; // BaseVersion
    d[1] = 2; // ClassVersion
    d[2..4].copy_from_slice(&CAP_MASK.to_be_bytes());
    // CapabilityMask2 (27 bits) | RespTimeValue (5 bits).
    d[4..8].copy_from_slice(&u32::from(RESP_TIME).to_be_bytes());
    // Where Reports go (IBA 13.4.8.1 layout): TrapLID at 60, TrapP_Key at 62, TrapQP
    // (HL/QP) at 64, TrapQ_Key at 68.
    d[60..62].copy_from_slice(&trap_lid.to_be_bytes());
    d[62..64].copy_from_slice(&0xFFFFu16.to_be_bytes());
    d[64..68].copy_from_slice(&1u32.to_be_bytes());
    d[68..72].copy_from_slice(&GSI_QKEY.to_be_bytes());
    m
}

#[test]
fn umad_device_with_the_sa_agent_answers_saquery() {
    const NAME: &str = "umad_device_with_the_sa_agent_answers_saquery";
    if !is_child(NAME) {
        return run_in_lab(NAME);
    }
    let mut dev =
        UmadDevice::open_with_sa(&PortSpec::Index(0), Duration::from_millis(200)).expect("open");
    let ours: PortInfo = dev.port().get_local_attr(0, 1, T).expect("PortInfo");
    assert_ne!(ours.lid, 0, "OpenSM gave Hca1 a LID");
    let hca2 = run_ok(
        Command::new(require_tool("smpquery").expect("smpquery"))
            .args(["-D", "portinfo", "0"])
            .env("SIM_HOST", "Hca2"),
        Duration::from_secs(20),
    )
    .expect("smpquery on Hca2");
    let host_lid: u16 = field(&hca2, "Lid").parse().expect("Hca2's LID");
    let master: u16 = field(&hca2, "SMLid").parse().expect("Hca2's SMLid");
    assert_eq!(master, ours.lid, "Hca2's MasterSMLID points at us:\n{hca2}");

    // Without issm, ibsim hands a QP1 request to nobody here (`find_client` gives QP 0/1
    // requests only to an IsSM client): saquery fails and nothing arrives.
    let q = saquery_cpi(300);
    let mut stray = 0;
    while !q.is_finished() {
        if let Some(r) = dev.recv(Duration::from_millis(20)).expect("recv") {
            stray += usize::from(!r.is_smp());
        }
    }
    let err = q
        .join()
        .expect("thread")
        .expect_err("saquery got an answer from nobody");
    // ibsim bounces an undeliverable MAD to its sender at once with status 110
    // (ETIMEDOUT), which saquery reports as its exit status.
    assert!(err.contains("110"), "{err}");
    assert_eq!(stray, 0, "a GMP reached a client without IsSM");

    // With issm open the Get comes to us with the requester's full address.
    let _issm = open_issm(0).expect("issm");
    let q = saquery_cpi(2000);
    let deadline = Instant::now() + Duration::from_secs(25);
    let mut answered = 0;
    while !q.is_finished() && Instant::now() < deadline {
        let Some(r) = dev.recv(Duration::from_millis(20)).expect("recv") else {
            continue;
        };
        if r.is_smp() {
            continue;
        }
        assert_eq!(r.mgmt_class(), 0x03, "{r:?}");
        assert_eq!(r.mad[2], 2, "SA class version 2");
        assert_eq!(r.mad[3], 0x01, "SubnAdmGet");
        assert_eq!(
            u16::from_be_bytes([r.mad[16], r.mad[17]]),
            0x0001,
            "ClassPortInfo"
        );
        assert_eq!(r.from.lid, host_lid, "SLID is Hca2's LID");
        assert_eq!(r.from.qpn, 1, "saquery's agent is on QP1");
        assert_eq!(r.from.qkey, GSI_QKEY, "filled in: the header reports none");
        assert_eq!((r.from.sl, r.from.path_bits, r.from.pkey_index), (0, 0, 0));
        assert!(r.from.grh.is_none());
        dev.send_gmp(&r.from, &class_port_info_answer(&r.mad, ours.lid))
            .expect("send GetResp");
        answered += 1;
    }
    let out = q
        .join()
        .expect("thread")
        .unwrap_or_else(|e| panic!("saquery -c failed: {e}"));
    assert_eq!(answered, 1, "one Get, one answer:\n{out}");
    for want in [
        "SA ClassPortInfo:".to_string(),
        "Base version.............1".to_string(),
        "Class version............2".to_string(),
        format!("Capability mask..........0x{CAP_MASK:04X}"),
        format!("Response time value......0x{RESP_TIME:02X}"),
        "Trap PKey................0xFFFF".to_string(),
        "Trap HL/QP...............0x00000001".to_string(),
        format!("Trap QKey................0x{GSI_QKEY:08X}"),
    ] {
        assert!(
            out.contains(&want),
            "saquery printed:\n{out}\nexpected {want:?}"
        );
    }
    // infiniband-diags prints the Trap LID in decimal (44.0) or as 0x%04X (older).
    let lid = ours.lid;
    assert!(
        out.contains(&format!("Trap LID.................{lid}\n"))
            || out.contains(&format!("Trap LID.................0x{lid:04X}")),
        "saquery printed:\n{out}\nexpected Trap LID {lid}"
    );
}
