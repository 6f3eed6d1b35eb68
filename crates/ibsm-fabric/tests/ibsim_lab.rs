//! Live checks against ibsim and ibnetdiscover: the GUIDs, cables, LIDs and
//! rates we read from a net file must be what ibsim's SMAs report, and the
//! files we write must load in ibsim. Needs ibsim-utils and infiniband-diags;
//! fails loudly (never skips) without them.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ibsm_fabric::{gen, netfile, LinkSpeed, Topology};

const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";
const EXAMPLES: &str = "/usr/share/doc/ibsim-utils/net-examples";

/// One ibsim process with its own socket name and directory; killed on drop.
struct IbSim {
    child: Child,
    sock: String,
    dir: tempfile::TempDir,
}

impl IbSim {
    fn start(net: &str) -> IbSim {
        static N: AtomicU32 = AtomicU32::new(0);
        let sock = format!(
            "ibsmfab{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let net_path = dir.path().join("net");
        std::fs::write(&net_path, net).expect("write net file");
        let out_path = dir.path().join("ibsim.out");
        let out = std::fs::File::create(&out_path).expect("ibsim output file");
        let err = out.try_clone().expect("clone output file");
        assert!(
            std::path::Path::new(UMAD2SIM).exists(),
            "{UMAD2SIM} missing: install ibsim-utils"
        );
        let child = Command::new("ibsim")
            .args(["-n", "-s", "-N", "8192", "-S", "2048", "-P", "80000"])
            .arg(&net_path)
            .env("IBSIM_SOCKNAME", &sock)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start ibsim (install ibsim-utils): {e}"));
        let mut sim = IbSim { child, sock, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = sim.output();
            if text.contains("simulator ready") {
                return sim;
            }
            if let Ok(Some(status)) = sim.child.try_wait() {
                panic!("ibsim exited ({status}) before it was ready:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "ibsim not ready after 30 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn output(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("ibsim.out")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn ibnetdiscover(&self) -> String {
        let out = Command::new("ibnetdiscover")
            .env("IBSIM_SOCKNAME", &self.sock)
            .env("LD_PRELOAD", UMAD2SIM)
            .output()
            .unwrap_or_else(|e| panic!("cannot run ibnetdiscover (install infiniband-diags): {e}"));
        assert!(
            out.status.success(),
            "ibnetdiscover failed: {}\nibsim said:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.output()
        );
        String::from_utf8(out.stdout).expect("utf-8 ibnetdiscover output")
    }
}

impl Drop for IbSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What ibsim reports that a net file determines, keyed by GUID so names
/// (ibnetdiscover renames nodes S-/H-<guid>) do not matter.
#[derive(Debug, PartialEq, Eq)]
struct Facts {
    nodes: BTreeSet<NodeFacts>,
    ports: BTreeSet<(u64, u8, u64, u16, u8)>,
    links: BTreeSet<LinkFacts>,
}

/// GUID, type, NumPorts, description, system image GUID, vendor, device, port-0 LID.
type NodeFacts = (u64, u8, u8, String, u64, u32, u16, u16);
/// Both ends (GUID, port), lanes, speed.
type LinkFacts = ((u64, u8), (u64, u8), u8, &'static str);

fn facts(t: &Topology) -> Facts {
    let mut f = Facts {
        nodes: BTreeSet::new(),
        ports: BTreeSet::new(),
        links: BTreeSet::new(),
    };
    for n in t.nodes() {
        let p0_lid = if n.is_switch() { n.ports[0].lid } else { 0 };
        f.nodes.insert((
            n.node_guid,
            n.node_type.to_iba(),
            n.num_ports(),
            n.description.clone(),
            n.system_image_guid,
            n.vendor_id,
            n.device_id,
            p0_lid,
        ));
        if !n.is_switch() {
            for (p, port) in n.physical_ports().filter(|(_, p)| p.remote.is_some()) {
                f.ports
                    .insert((n.node_guid, p, port.port_guid, port.lid, port.lmc));
            }
        }
    }
    for ((a, pa), (b, pb)) in t.links() {
        let ga = t.node(a).unwrap().node_guid;
        let gb = t.node(b).unwrap().node_guid;
        let port = t.node(a).unwrap().port(pa).unwrap();
        // ibnetdiscover does not read the vendor MAD that carries FDR10.
        let speed = match port.link_speed {
            LinkSpeed::Fdr10 => LinkSpeed::Qdr,
            s => s,
        };
        let (x, y) = if (ga, pa) < (gb, pb) {
            ((ga, pa), (gb, pb))
        } else {
            ((gb, pb), (ga, pa))
        };
        f.links
            .insert((x, y, port.link_width.lanes(), speed.name()));
    }
    f
}

/// Load `net` in ibsim, discover it, and check both readings agree.
fn check_against_ibsim(net: &str) -> Topology {
    let ours = netfile::parse(net).unwrap_or_else(|e| panic!("{e}"));
    let sim = IbSim::start(net);
    let discovered = sim.ibnetdiscover();
    let theirs = netfile::parse(&discovered)
        .unwrap_or_else(|e| panic!("our parser rejects ibnetdiscover output: {e}\n{discovered}"));
    assert_eq!(theirs.counts(), ours.counts());
    let (a, b) = (facts(&ours), facts(&theirs));
    assert_eq!(a.nodes, b.nodes);
    assert_eq!(a.ports, b.ports);
    assert_eq!(a.links, b.links);
    ours
}

#[test]
fn ibsim_examples_read_the_same_as_ibsim() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(EXAMPLES)
        .unwrap_or_else(|e| panic!("{EXAMPLES}: {e} (install ibsim-utils)"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("net"))
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "expected ibsim's net examples in {EXAMPLES}"
    );
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let t = check_against_ibsim(&text);
        assert!(t.counts().links > 0, "{}", f.display());
    }
}

#[test]
fn annotated_file_reads_the_same_as_ibsim() {
    let net = "devid=0x1234
switchguid=0xabc000
Switch 8 \"sw\" # \"my switch\" base port 0 lid 7 lmc 1
[1] \"a\"[1] # lid 3 4xQDR
[2] \"b\"[1] # lid 3 4xFDR
[3] \"c\"[1] # \"x\" lid 3 12xEDR
[4] \"d\"[1] # \"x\" lid 3 4xFDR10
[5] \"e\"[1] w=3 s=7
[6] \"f\"[2]

vendid=0x2c9
sysimgguid=0x77
Hca 1 \"a\"
[1] \"sw\"[1]

caguid=0x5000
Hca 1 \"b\"
[1] \"sw\"[2] # lid 9 lmc 2 \"sw\" lid 7 4xFDR

Hca 1 \"c\"
[1] \"sw\"[3] # lid 10 lmc 0 \"sw\" lid 7 12xEDR

caguid+0x100
Ca 1 \"d\"
[1] \"sw\"[4] # lid 11 lmc 0 \"sw\" lid 7 4xFDR10

Hca 1 \"e\"
[1] \"sw\"[5] # lid 12 lmc 1 \"sw\" lid 7 1xQDR

Hca 2 \"f\" # \"dual port\"
[2] \"sw\"[6]
";
    check_against_ibsim(net);
}

#[test]
fn written_fat_tree_loads_in_ibsim() {
    let t = gen::fat_tree_2level(8).unwrap();
    let written = netfile::write(&t);
    let back = check_against_ibsim(&written);
    assert_eq!(facts(&back), facts(&t));
}

#[test]
fn written_648_hca_fat_tree_loads_in_ibsim() {
    let t = gen::fat_tree_2level(36).unwrap();
    let sim = IbSim::start(&netfile::write(&t));
    let discovered = netfile::parse(&sim.ibnetdiscover()).unwrap();
    assert_eq!(discovered.counts(), t.counts());
    assert_eq!(discovered.counts().nodes, 702);
    assert_eq!(facts(&discovered), facts(&t));
}

#[test]
fn written_random_fabrics_load_in_ibsim() {
    for seed in [1u64, 0xdead_beef] {
        let mut t = gen::random(seed, 16, 40, 8).unwrap();
        // Exercise rates and LIDs too.
        let links: Vec<_> = t.links().collect();
        for (i, ((a, pa), _)) in links.into_iter().enumerate() {
            let (w, s) = [
                (ibsm_fabric::LinkWidth::X4, LinkSpeed::Qdr),
                (ibsm_fabric::LinkWidth::X12, LinkSpeed::Ddr),
                (ibsm_fabric::LinkWidth::X1, LinkSpeed::Edr),
                (ibsm_fabric::LinkWidth::X4, LinkSpeed::Hdr),
            ][i % 4];
            t.set_link_rate(a, pa, w, s).unwrap();
        }
        for i in 0..t.len() as u32 {
            let idx = ibsm_fabric::NodeIdx(i);
            let port = if t.node(idx).unwrap().is_switch() {
                0
            } else {
                1
            };
            t.set_port_lid(idx, port, (i + 1) as u16, 0).unwrap();
        }
        let back = check_against_ibsim(&netfile::write(&t));
        assert_eq!(facts(&back), facts(&t));
    }
}
