//! M_Key checking by the simulated SMAs (IBA 14.2.4): each protection level, the
//! hidden key at level 1, silent discards and M_KeyViolations, the lease period.

mod common;

use std::time::Duration;

use common::Rig;
use ibsm_mad::{AttributeId, NodeInfo, PortInfo, Smp};
use ibsm_sim::ClientId;

const KEY: u64 = 0x1122_3344_5566_7788;
const WRONG: u64 = 0x0BAD;
/// Switch1, one hop from Hca1.
const SW1: &[u8] = &[1];
/// Hca2, behind Switch1 port 3 and Switch2 port 1.
const HCA2: &[u8] = &[1, 3, 1];

fn with_key(mut smp: Smp, key: u64) -> Smp {
    smp.m_key = key;
    smp
}

fn get(rig: &mut Rig, sm: ClientId, path: &[u8], attr: AttributeId, key: u64) -> Option<Smp> {
    let tid = rig.next_tid();
    let req = with_key(Smp::get_dr(path, attr, 0, tid), key);
    let out = rig.exchange(sm, &req.encode());
    assert!(out.len() <= 1, "at most one answer");
    out.first()
        .map(|d| Smp::decode(&d.mad).expect("answer decodes"))
}

fn set_pi(rig: &mut Rig, sm: ClientId, path: &[u8], pi: &PortInfo, key: u64) -> Option<Smp> {
    let tid = rig.next_tid();
    let req = with_key(Smp::set_dr_attr(path, 0, tid, pi), key);
    let out = rig.exchange(sm, &req.encode());
    out.first()
        .map(|d| Smp::decode(&d.mad).expect("answer decodes"))
}

/// Reads the management PortInfo at `path` with the key, as the SM that set it would.
fn read_pi(rig: &mut Rig, sm: ClientId, path: &[u8]) -> PortInfo {
    get(rig, sm, path, AttributeId::PORT_INFO, KEY)
        .expect("the right key is always answered")
        .attribute()
        .expect("PortInfo decodes")
}

/// Programs `path`'s M_Key with protection `level` and `lease` seconds (the port is
/// fresh: M_Key 0 passes any key).
fn protect(rig: &mut Rig, sm: ClientId, path: &[u8], level: u8, lease: u16) -> PortInfo {
    let pi: PortInfo = get(rig, sm, path, AttributeId::PORT_INFO, 0)
        .expect("a fresh port answers")
        .attribute()
        .unwrap();
    assert_eq!(pi.m_key, 0, "fresh fabric: no M_Key");
    let want = PortInfo {
        m_key: KEY,
        m_key_protect_bits: level,
        m_key_lease_period: lease,
        ..pi
    };
    let r = set_pi(rig, sm, path, &want, WRONG).expect("M_Key 0 lets any key set it");
    assert_eq!(r.status, 0);
    let back = read_pi(rig, sm, path);
    assert_eq!(
        (back.m_key, back.m_key_protect_bits, back.m_key_lease_period),
        (KEY, level, lease)
    );
    back
}

#[test]
fn level_0_gets_are_open_and_show_the_key_sets_need_it() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let pi = protect(&mut rig, sm, SW1, 0, 0);

    let anon: PortInfo = get(&mut rig, sm, SW1, AttributeId::PORT_INFO, WRONG)
        .expect("level 0: Get without the key is answered")
        .attribute()
        .unwrap();
    assert_eq!(anon.m_key, KEY, "level 0 shows the M_Key");

    let changed = PortInfo {
        subnet_timeout: 7,
        ..pi
    };
    assert!(
        set_pi(&mut rig, sm, SW1, &changed, WRONG).is_none(),
        "Set without the key is discarded silently"
    );
    assert_eq!(rig.sim.stats().dropped_m_key, 1);
    let after = read_pi(&mut rig, sm, SW1);
    assert_eq!(after.subnet_timeout, pi.subnet_timeout, "nothing changed");
    assert_eq!(after.m_key_violations, 1);

    let r = set_pi(&mut rig, sm, SW1, &changed, KEY).expect("Set with the key");
    assert_eq!(r.status, 0);
    assert_eq!(read_pi(&mut rig, sm, SW1).subnet_timeout, 7);
}

#[test]
fn level_1_hides_the_key_from_gets_without_it() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let pi = protect(&mut rig, sm, HCA2, 1, 0);

    let anon: PortInfo = get(&mut rig, sm, HCA2, AttributeId::PORT_INFO, WRONG)
        .expect("level 1: Get without the key is answered")
        .attribute()
        .unwrap();
    assert_eq!(anon.m_key, 0, "level 1 hides the M_Key");
    assert_eq!(
        anon.m_key_protect_bits, 1,
        "the protection level is visible"
    );
    assert_eq!(anon.lid, pi.lid);
    assert!(get(&mut rig, sm, HCA2, AttributeId::NODE_INFO, WRONG).is_some());
    assert_eq!(
        read_pi(&mut rig, sm, HCA2).m_key,
        KEY,
        "the key holder sees it"
    );

    assert!(set_pi(&mut rig, sm, HCA2, &PortInfo { m_key: 0, ..pi }, WRONG).is_none());
    assert_eq!(
        read_pi(&mut rig, sm, HCA2).m_key,
        KEY,
        "a rogue cannot clear it"
    );
}

#[test]
fn levels_2_and_3_refuse_gets_without_the_key() {
    for level in [2, 3] {
        let mut rig = Rig::new();
        let sm = rig.attach("Hca1");
        protect(&mut rig, sm, SW1, level, 0);
        for attr in [
            AttributeId::NODE_INFO,
            AttributeId::PORT_INFO,
            AttributeId::SWITCH_INFO,
        ] {
            assert!(
                get(&mut rig, sm, SW1, attr, WRONG).is_none(),
                "level {level}: Get({attr:?}) without the key is discarded"
            );
            assert!(
                get(&mut rig, sm, SW1, attr, KEY).is_some(),
                "level {level}: Get({attr:?}) with the key is answered"
            );
        }
        assert_eq!(read_pi(&mut rig, sm, SW1).m_key_violations, 3);
        // The switch's other ports share port 0's key.
        let tid = rig.next_tid();
        let req = with_key(Smp::get_dr(SW1, AttributeId::PORT_INFO, 3, tid), WRONG);
        assert!(rig.exchange(sm, &req.encode()).is_empty());
        // Nodes beyond it are not protected by its key: the path still works.
        let ni: NodeInfo = get(&mut rig, sm, HCA2, AttributeId::NODE_INFO, WRONG)
            .expect("an unprotected node behind a protected switch answers")
            .attribute()
            .unwrap();
        assert_eq!(ni.local_port_num, 1);
    }
}

#[test]
fn lease_expiry_drops_the_protection_and_a_matching_smp_stops_the_timer() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    protect(&mut rig, sm, SW1, 2, 10);

    // First violation at t0 starts the 10 s lease.
    assert!(get(&mut rig, sm, SW1, AttributeId::NODE_INFO, WRONG).is_none());
    // The key holder shows up before it runs out: the timer stops.
    rig.now += Duration::from_secs(5);
    assert!(get(&mut rig, sm, SW1, AttributeId::NODE_INFO, KEY).is_some());
    rig.now += Duration::from_secs(6);
    assert!(
        get(&mut rig, sm, SW1, AttributeId::NODE_INFO, WRONG).is_none(),
        "11 s after the first violation, but the lease was renewed: still protected"
    );
    // This violation started a new lease; nobody answers it this time.
    rig.now += Duration::from_secs(9);
    assert!(get(&mut rig, sm, SW1, AttributeId::NODE_INFO, WRONG).is_none());
    rig.now += Duration::from_secs(1);
    let pi: PortInfo = get(&mut rig, sm, SW1, AttributeId::PORT_INFO, WRONG)
        .expect("lease expired: protection bits are 0, Gets are open")
        .attribute()
        .unwrap();
    assert_eq!(pi.m_key_protect_bits, 0);
    assert_eq!(pi.m_key, KEY, "the key itself stays");
    assert!(
        set_pi(&mut rig, sm, SW1, &pi, WRONG).is_none(),
        "Sets still need the key"
    );
}

#[test]
fn lease_period_zero_never_expires() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    protect(&mut rig, sm, SW1, 2, 0);
    assert!(get(&mut rig, sm, SW1, AttributeId::NODE_INFO, WRONG).is_none());
    rig.now += Duration::from_secs(100_000);
    assert!(get(&mut rig, sm, SW1, AttributeId::NODE_INFO, WRONG).is_none());
    assert_eq!(read_pi(&mut rig, sm, SW1).m_key_protect_bits, 2);
}
