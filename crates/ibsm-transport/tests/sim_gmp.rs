//! GMPs through `MadDevice` on the embedded fabric: an SA request from a host reaches
//! the SM's device with its full source address, and the answer sent to that address
//! comes back to the host.

use std::time::{Duration, Instant};

use ibsm_fabric::{Node, NodeType, Topology};
use ibsm_mad::{MadAddress, GSI_QKEY, MAD_SIZE};
use ibsm_transport::{MadDevice, ReceivedMad, SharedSim, TransportError};

/// hostA - switch - hostB.
fn one_switch() -> Topology {
    let mut t = Topology::new();
    let sw = t
        .add_node(Node::new(NodeType::Switch, 0x50, 4, "sw"))
        .expect("switch");
    let a = t
        .add_node(Node::new(NodeType::Ca, 0xa0, 1, "hostA"))
        .expect("node A");
    let b = t
        .add_node(Node::new(NodeType::Ca, 0xb0, 1, "hostB"))
        .expect("node B");
    t.connect(sw, 1, a, 1).expect("cable A");
    t.connect(sw, 2, b, 1).expect("cable B");
    t
}

fn recv_within(dev: &mut dyn MadDevice, limit: Duration) -> Option<ReceivedMad> {
    let deadline = Instant::now() + limit;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        if let Some(r) = dev.recv(left).expect("recv") {
            return Some(r);
        }
    }
    None
}

fn sa_get(tid: u64) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[..4].copy_from_slice(&[1, 0x03, 2, 0x01]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&1u16.to_be_bytes()); // ClassPortInfo
    m
}

#[test]
fn sa_request_and_answer_travel_with_their_addresses() {
    let topo = one_switch();
    let (a, b) = (
        topo.find_by_guid(0xa0).expect("A"),
        topo.find_by_guid(0xb0).expect("B"),
    );
    let shared = SharedSim::new(&topo);
    let mut host = shared.attach(a, 1).expect("attach A");
    let mut sm = shared.attach(b, 1).expect("attach B");
    sm.register_gsi_class(0x03).expect("SA agent");
    let up = shared
        .with_sim(|s| s.bring_up((b, 1)))
        .expect("sim")
        .expect("bring up");
    let (host_lid, sm_lid) = (up.lid(a, 1).expect("A LID"), up.lid(b, 1).expect("B LID"));

    let req = sa_get(0x42);
    host.send_gmp(&MadAddress::gsi(up.sm_lid), &req)
        .expect("send");
    let got = recv_within(&mut sm, Duration::from_secs(2)).expect("the SA got the Get");
    assert_eq!(got.mad, req);
    assert!(!got.is_smp());
    assert_eq!(got.slid(), host_lid);
    assert_eq!(
        got.from,
        MadAddress::gsi(host_lid),
        "QPN 1, GSI Q_Key, SL 0, index 0"
    );

    let mut resp = req;
    resp[3] = 0x81;
    sm.send_gmp(&got.from, &resp).expect("answer");
    let back = recv_within(&mut host, Duration::from_secs(2)).expect("the answer came back");
    assert_eq!(back.mad, resp);
    assert_eq!(back.from.lid, sm_lid);
    assert_eq!((back.from.qpn, back.from.qkey), (1, GSI_QKEY));

    // A short GMP (an RMPP sender's last segment: headers and its data) reaches the
    // other side as a whole MAD padded with zeros, as a kernel sends it; shorter than
    // the MAD and RMPP headers or longer than a MAD is refused.
    let short = &resp[..100];
    sm.send_gmp(&got.from, short).expect("a short answer");
    let back = recv_within(&mut host, Duration::from_secs(2)).expect("the short answer came");
    assert_eq!(back.mad[..100], short[..]);
    assert!(back.mad[100..].iter().all(|b| *b == 0));
    for len in [35, 257] {
        let v = vec![0x03u8; len];
        assert!(matches!(
            sm.send_gmp(&got.from, &v),
            Err(TransportError::GmpLength { len: l }) if l == len
        ));
    }

    // SMPs are not GMPs.
    let mut smp = req;
    smp[1] = 0x81;
    assert!(matches!(
        host.send_gmp(&got.from, &smp),
        Err(TransportError::NotGmp { class: 0x81 })
    ));
    // Only one SA agent per port.
    let other = shared.attach(b, 1).expect("second client at B");
    assert!(other.register_gsi_class(0x03).is_err());
}

/// A device that only does SMPs keeps the trait's default `send_gmp`.
struct SmpOnly;

impl MadDevice for SmpOnly {
    fn send(&mut self, _mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        Ok(())
    }
    fn recv(&mut self, _timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        Ok(None)
    }
}

#[test]
fn a_device_without_gsi_agents_refuses_gmps() {
    let mut dev: Box<dyn MadDevice> = Box::new(SmpOnly);
    assert!(matches!(
        dev.send_gmp(&MadAddress::gsi(1), &sa_get(1)),
        Err(TransportError::GmpUnsupported { class: 0x03 })
    ));
    let r = ReceivedMad::smp([0u8; MAD_SIZE], 7);
    assert_eq!((r.slid(), r.from.qpn, r.from.qkey), (7, 0, 0));
}
