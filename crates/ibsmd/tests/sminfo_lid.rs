//! Plain `sminfo` against ibsmd, on the embedded fabric: another node reads its own
//! PortInfo.MasterSMLID and sends a LID-routed SubnGet(SMInfo) there; the master
//! (and a standby asked by its LID) must answer LID-routed to the requester's SLID.
//!
//! The SMs run on a [`UmadLike`] device: like a umad port, its `send` (the
//! directed-route path, DLID 0xFFFF on umad) cannot deliver a LID-routed MAD to a
//! remote requester. The embedded simulator alone would forgive that (its `send`
//! routes an answer to the request's SLID by itself), a real fabric does not: only
//! `send_lid(slid, ..)` reaches the requester.

use std::time::{Duration, Instant};

use ibsm_fabric::NodeIdx;
use ibsm_mad::{AttributeId, Method, PortInfo, SmInfo, SmState, Smp, SmpRoute, MAD_SIZE};
use ibsm_transport::{MadDevice, ReceivedMad, SharedSim, SimDevice, TransportError};
use ibsmd::embedded::pick_ca_ports;
use ibsmd::{Instance, InstanceConfig};

/// A simulator device that behaves like a umad port for LID-routed MADs.
struct UmadLike(SimDevice);

impl MadDevice for UmadLike {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        if mad[1] == 0x01 {
            // LID-routed SMP sent as if directed: DLID 0xFFFF, never the requester.
            return Ok(());
        }
        self.0.send(mad)
    }
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        self.0.send_lid(dlid, mad)
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        self.0.recv(timeout)
    }
}

/// Detaches the SM's simulator client when its instance ends.
struct Detach(SharedSim, ibsm_sim::ClientId);

impl Drop for Detach {
    fn drop(&mut self) {
        let c = self.1;
        let _ = self.0.with_sim(|s| s.detach(c));
    }
}

fn spawn_sm(sim: &SharedSim, node: NodeIdx, port: u8, cfg: InstanceConfig) -> Instance {
    let dev = sim.attach(node, port).expect("attach SM");
    let client = dev.client();
    sim.with_sim(|s| s.set_is_sm(client, true))
        .expect("sim")
        .expect("IsSM");
    Instance::spawn(
        cfg,
        Box::new(UmadLike(dev)),
        Box::new(Detach(sim.clone(), client)),
    )
    .expect("spawn")
}

fn wait_for<T>(what: &str, timeout: Duration, mut ok: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match ok() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Send `req` (LID-routed to `dlid`, or directed when `dlid` is None) and wait for
/// the answer with its TID.
fn ask(dev: &mut SimDevice, req: &Smp, dlid: Option<u16>) -> Option<(Smp, u16)> {
    match dlid {
        Some(l) => dev.send_lid(l, &req.encode()).expect("send_lid"),
        None => dev.send(&req.encode()).expect("send"),
    }
    let deadline = Instant::now() + Duration::from_millis(500);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Some(r) = dev.recv(left).expect("recv") else {
            break;
        };
        let Ok(smp) = Smp::decode(&r.mad) else {
            continue;
        };
        if smp.method == Method::GET_RESP && smp.tid as u32 == req.tid as u32 {
            return Some((smp, r.slid()));
        }
    }
    None
}

/// `sminfo` [LID]: without a LID, the MasterSMLID from our own PortInfo.
fn sminfo(dev: &mut SimDevice, port: u8, lid: Option<u16>, tid: u64) -> Result<SmInfo, String> {
    let dlid = match lid {
        Some(l) => l,
        None => {
            let get = Smp::try_get_dr(&[], AttributeId::PORT_INFO, u32::from(port), tid)
                .map_err(|e| e.to_string())?;
            let (resp, _) = ask(dev, &get, None).ok_or("local PortInfo unanswered")?;
            let pi: PortInfo = resp.attribute().map_err(|e| e.to_string())?;
            if pi.master_sm_lid == 0 {
                return Err("MasterSMLID is still 0".into());
            }
            pi.master_sm_lid
        }
    };
    let get = Smp::get_lid(AttributeId::SM_INFO, 0, tid + 1);
    let (resp, slid) = ask(dev, &get, Some(dlid))
        .ok_or_else(|| format!("LID-routed SubnGet(SMInfo) to LID {dlid} unanswered"))?;
    if resp.route != SmpRoute::Lid {
        return Err("the answer is not LID-routed".into());
    }
    if slid != dlid {
        return Err(format!("answer came from LID {slid}, asked {dlid}"));
    }
    if resp.status != 0 {
        return Err(format!("status {:#06x}", resp.status));
    }
    resp.attribute::<SmInfo>().map_err(|e| e.to_string())
}

#[test]
fn plain_sminfo_reaches_master_and_standby_by_lid() {
    let topo = ibsm_fabric::gen::fat_tree_3level(4).expect("k=4 fat tree");
    let sim = SharedSim::new(&topo);
    let ports = pick_ca_ports(&topo, 3);
    let [(n1, p1, _), (n2, p2, _), (n3, p3, _)] = ports.as_slice() else {
        panic!("need three CA ports");
    };
    let master = spawn_sm(&sim, *n1, *p1, InstanceConfig::new("sm1", 10));
    let standby = spawn_sm(&sim, *n2, *p2, InstanceConfig::new("sm2", 5));
    let mut client = sim.attach(*n3, *p3).expect("client");

    let mut tid = 0x100u64;
    let info = wait_for(
        "plain sminfo shows the master",
        Duration::from_secs(30),
        || {
            tid += 2;
            let info = sminfo(&mut client, *p3, None, tid)?;
            if info.sm_state != SmState::Master {
                return Err(format!("state {:?}", info.sm_state));
            }
            Ok(info)
        },
    );
    let m = master.status();
    assert_eq!(info.guid, m.guid, "sminfo must show ibsmd's port GUID");
    assert_eq!(info.priority, 10);

    let st = wait_for("standby has a LID", Duration::from_secs(30), || {
        let s = standby.status();
        if s.lid != 0 && s.state == ibsm_core::election::SmState::Standby {
            Ok(s)
        } else {
            Err(format!("{s:?}"))
        }
    });
    let info = wait_for("sminfo LID of the standby", Duration::from_secs(10), || {
        tid += 2;
        sminfo(&mut client, *p3, Some(st.lid), tid)
    });
    assert_eq!(info.guid, st.guid);
    assert_eq!(info.sm_state, SmState::Standby);
    assert_eq!(info.priority, 5);
}
