//! `MadDevice::recv` reports the LRH SLID, so a LID-routed request can be
//! answered LID-routed to its sender (what plain `sminfo` needs from an SM).

use std::time::{Duration, Instant};

use ibsm_fabric::{Node, NodeType, Topology};
use ibsm_mad::{AttributeId, Method, Smp, SmpRoute, PERMISSIVE_LID};
use ibsm_transport::{MadDevice, ReceivedMad, SharedSim};

/// Two CAs cabled back to back, LIDs 5 and 9 (no switch: LID routing needs no LFT).
fn back_to_back() -> Topology {
    let mut t = Topology::new();
    let a = t
        .add_node(Node::new(NodeType::Ca, 0xa0, 1, "hostA"))
        .expect("node A");
    let b = t
        .add_node(Node::new(NodeType::Ca, 0xb0, 1, "hostB"))
        .expect("node B");
    t.connect(a, 1, b, 1).expect("cable");
    t.set_port_lid(a, 1, 5, 0).expect("lid A");
    t.set_port_lid(b, 1, 9, 0).expect("lid B");
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

#[test]
fn lid_routed_request_carries_the_senders_lid_and_is_answered_there() {
    let topo = back_to_back();
    let shared = SharedSim::new(&topo);
    let (a, b) = (
        topo.find_by_guid(0xa0).expect("A"),
        topo.find_by_guid(0xb0).expect("B"),
    );
    let mut client = shared.attach(a, 1).expect("attach A");
    let mut sm = shared.attach(b, 1).expect("attach B");
    shared
        .with_sim(|s| s.set_is_sm(sm.client(), true))
        .expect("sim")
        .expect("IsSM");

    // `sminfo`: a LID-routed SubnGet(SMInfo) to the SM's LID.
    let get = Smp::get_lid(AttributeId::SM_INFO, 0, 0x1234);
    client.send_lid(9, &get.encode()).expect("send");
    let got = recv_within(&mut sm, Duration::from_secs(2)).expect("the SM got the Get");
    assert_eq!(got.slid(), 5, "SLID must be the requester's LID");
    let req = Smp::decode(&got.mad).expect("decode");
    assert_eq!(req.route, SmpRoute::Lid);
    assert_eq!(req.method, Method::GET);

    // The answer goes LID-routed to that SLID and reaches the requester from LID 9.
    let resp = req.response();
    sm.send_lid(got.slid(), &resp.encode()).expect("answer");
    let back = recv_within(&mut client, Duration::from_secs(2)).expect("answer arrived");
    assert_eq!(back.slid(), 9);
    let resp = Smp::decode(&back.mad).expect("decode");
    assert_eq!(resp.method, Method::GET_RESP);
    assert_eq!(resp.tid as u32, 0x1234);
}

#[test]
fn directed_route_answers_carry_the_permissive_slid() {
    let topo = back_to_back();
    let shared = SharedSim::new(&topo);
    let a = topo.find_by_guid(0xa0).expect("A");
    let mut dev = shared.attach(a, 1).expect("attach");
    let get = Smp::try_get_dr(&[1], AttributeId::NODE_INFO, 0, 7).expect("smp");
    dev.send(&get.encode()).expect("send");
    let back = recv_within(&mut dev, Duration::from_secs(2)).expect("answer");
    assert_eq!(back.slid(), PERMISSIVE_LID);
    assert_eq!(Smp::decode(&back.mad).expect("decode").tid as u32, 7);
}
