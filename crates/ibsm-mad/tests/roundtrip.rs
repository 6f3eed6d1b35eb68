//! Property tests: for every attribute, `encode(decode(b)) == b & used_bits` where
//! `used_bits` is written out here from the IBA tables independently of the codec,
//! so a field dropped, shifted or mis-sized in the codec shows up as a mismatch.
//! Also SMP round trips for both routings and "decode never panics" on arbitrary bytes.

use ibsm_mad::modifier::*;
use ibsm_mad::*;
use proptest::prelude::*;

/// Mask of the bits an attribute defines (1 = field bit, 0 = reserved / past the end).
fn used_bits(id: AttributeId) -> [u8; 64] {
    let mut m = [0u8; 64];
    match id {
        AttributeId::NODE_INFO => m[..40].fill(0xFF),
        AttributeId::NODE_DESCRIPTION
        | AttributeId::LINEAR_FORWARDING_TABLE
        | AttributeId::P_KEY_TABLE
        | AttributeId::GUID_INFO
        | AttributeId::MULTICAST_FORWARDING_TABLE
        | AttributeId::VENDOR_DIAG
        | AttributeId::NOTICE => m.fill(0xFF),
        AttributeId::PORT_INFO => {
            m.fill(0xFF);
            m[34] = 0xC7; // M_KeyProtectBits(2) Reserved(3) LMC(3)
            m[52] = 0x1F; // Reserved(3) RespTimeValue(5)
            m[56] = 0x00; // Reserved(8) before LinkRoundTripLatency
            m[63] = 0x1F; // Reserved(3) LinkSpeedExtEnabled(5)
        }
        AttributeId::SWITCH_INFO => {
            m[..16].fill(0xFF);
            m[16] = 0xF8; // 4 caps + EnhancedPort0, Reserved(3)
            m[18] = 0xFF;
            m[19] = 0xFF; // MulticastFDBTop; byte 17 reserved
        }
        AttributeId::SM_INFO => m[..21].fill(0xFF),
        AttributeId::SL_TO_VL_MAPPING_TABLE => m[..8].fill(0xFF),
        AttributeId::VL_ARBITRATION_TABLE => {
            for w in m.chunks_exact_mut(2) {
                w[0] = 0x0F;
                w[1] = 0xFF;
            }
        }
        AttributeId::RANDOM_FORWARDING_TABLE => {
            for w in m.chunks_exact_mut(4) {
                w.copy_from_slice(&[0xFF, 0xFF, 0xF0, 0xFF]);
            }
        }
        AttributeId::LED_INFO => m[0] = 0x80,
        other => panic!("no mask for {other}"),
    }
    m
}

fn check<A: SmpAttribute + PartialEq + std::fmt::Debug>(bytes: &[u8; 64]) -> Option<A> {
    let a = A::decode(bytes).ok()?;
    let mask = used_bits(A::ID);
    let mut want = *bytes;
    for (w, m) in want.iter_mut().zip(mask) {
        *w &= m;
    }
    let enc = a.encode();
    assert_eq!(enc, want, "{}: encode(decode(b)) != b & used_bits", A::ID);
    assert_eq!(A::decode(&enc).as_ref(), Ok(&a), "{}", A::ID);
    // Decoding from a longer buffer ignores the tail; a shorter one is a typed error.
    let mut long = [0xA5u8; 80];
    long[..64].copy_from_slice(bytes);
    assert_eq!(A::decode(&long).as_ref(), Ok(&a));
    assert!(matches!(A::decode(&[]), Err(MadError::TooShort { .. })));
    Some(a)
}

fn bytes64() -> impl Strategy<Value = [u8; 64]> {
    proptest::array::uniform32(any::<u8>()).prop_flat_map(|a| {
        proptest::array::uniform32(any::<u8>()).prop_map(move |b| {
            let mut out = [0u8; 64];
            out[..32].copy_from_slice(&a);
            out[32..].copy_from_slice(&b);
            out
        })
    })
}

fn mad256() -> impl Strategy<Value = [u8; 256]> {
    (bytes64(), bytes64(), bytes64(), bytes64()).prop_map(|(a, b, c, d)| {
        let mut out = [0u8; 256];
        out[..64].copy_from_slice(&a);
        out[64..128].copy_from_slice(&b);
        out[128..192].copy_from_slice(&c);
        out[192..].copy_from_slice(&d);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_attribute_roundtrips_on_its_used_bits(b in bytes64()) {
        // Open attributes decode any bytes.
        prop_assert!(check::<NodeInfo>(&b).is_some());
        prop_assert!(check::<NodeDescription>(&b).is_some());
        prop_assert!(check::<PortInfo>(&b).is_some());
        prop_assert!(check::<SwitchInfo>(&b).is_some());
        prop_assert!(check::<LinearForwardingTable>(&b).is_some());
        prop_assert!(check::<PKeyTable>(&b).is_some());
        prop_assert!(check::<GuidInfo>(&b).is_some());
        prop_assert!(check::<SlToVlMappingTable>(&b).is_some());
        prop_assert!(check::<VlArbitrationTable>(&b).is_some());
        prop_assert!(check::<RandomForwardingTable>(&b).is_some());
        prop_assert!(check::<MulticastForwardingTable>(&b).is_some());
        prop_assert!(check::<Notice>(&b).is_some());
        prop_assert!(check::<LedInfo>(&b).is_some());
        prop_assert!(check::<VendorDiag>(&b).is_some());
        // SMInfo is strict about SMState.
        let sm = check::<SmInfo>(&b);
        prop_assert_eq!(sm.is_some(), b[20] & 0x0F <= 3);
    }

    #[test]
    fn sm_info_roundtrips(guid: u64, sm_key: u64, act_count: u32, priority in 0u8..16, st in 0u8..4) {
        let sm = SmInfo { guid, sm_key, act_count, priority, sm_state: SmState::try_from(st).unwrap() };
        prop_assert_eq!(SmInfo::decode(&sm.encode()), Ok(sm));
    }

    #[test]
    fn trap_details_roundtrip(b in bytes64(), trap in prop::sample::select(vec![64u16, 65, 66, 67, 128, 129, 130, 131, 144, 145])) {
        let mut d = [0u8; 54];
        d.copy_from_slice(&b[..54]);
        let t = TrapDetails::decode(trap, &d).expect("known trap");
        prop_assert_eq!(t.trap_number(), trap);
        prop_assert_eq!(TrapDetails::decode(trap, &t.encode()), Some(t));
        let n = Notice::generic(NoticeType::Urgent, ProducerType::SWITCH, 7, &t);
        let back = Notice::decode(&n.encode()).unwrap();
        prop_assert_eq!(back.details(), Some(t));
        prop_assert_eq!(back.trap_number(), Some(trap));
    }

    #[test]
    fn smp_decode_never_panics_and_reencodes(b in mad256()) {
        if let Ok(s) = Smp::decode(&b) {
            prop_assert_eq!(Smp::decode(&s.encode()), Ok(s));
        }
        for n in [0usize, 1, 16, 24, 64, 255] {
            let short = matches!(Smp::decode(&b[..n]), Err(MadError::TooShort { .. }));
            prop_assert!(short, "{} bytes must be TooShort", n);
        }
        prop_assert_eq!(Smp::peek_tid(&b), Some(u64::from_be_bytes(b[8..16].try_into().unwrap())));
        // Every attribute decoder on the SMP data field, and every typed modifier.
        let d = &b[64..128];
        let _ = (NodeInfo::decode(d), PortInfo::decode(d), SwitchInfo::decode(d), SmInfo::decode(d), Notice::decode(d));
        let m = u32::from_be_bytes(b[20..24].try_into().unwrap());
        let _ = (VlArbBlock::from_attr_mod(m), SmInfoControl::from_attr_mod(m));
    }

    #[test]
    fn smp_roundtrips_on_used_bytes(mut b in mad256(), directed: bool, hop_cnt in 0u8..=63) {
        b[0] = 1;
        b[1] = if directed { 0x81 } else { 0x01 };
        b[2] = 1;
        if directed { b[7] = hop_cnt; }
        let s = Smp::decode(&b).expect("valid SMP");
        let mut want = b;
        want[18..20].fill(0);
        if directed {
            want[36..64].fill(0);
        } else {
            want[6..8].fill(0); // ClassSpecific is reserved for LID-routed SMPs
            want[32..64].fill(0);
            want[128..].fill(0);
        }
        prop_assert_eq!(s.encode(), want);
        prop_assert_eq!(s.is_directed(), directed);
        prop_assert_eq!(s.mgmt_class().0, b[1]);
    }

    #[test]
    fn smp_struct_roundtrips(
        method: u8, status: u16, tid: u64, attr: u16, attr_mod: u32, m_key: u64,
        data in bytes64(), path in proptest::collection::vec(any::<u8>(), 0..=63),
        direction: bool, hop_ptr: u8, dr_slid: u16, dr_dlid: u16, ret in bytes64(),
    ) {
        let mut s = Smp::get_dr(&path, AttributeId(attr), attr_mod, tid);
        s.method = Method(method);
        s.status = status & 0x7FFF;
        s.m_key = m_key;
        s.data = data;
        {
            let dr = s.directed_mut().unwrap();
            dr.direction = direction;
            dr.hop_ptr = hop_ptr;
            dr.dr_slid = dr_slid;
            dr.dr_dlid = dr_dlid;
            dr.return_path = ret;
        }
        prop_assert_eq!(Smp::decode(&s.encode()), Ok(s));
        prop_assert_eq!(s.directed().unwrap().path(), &path[..]);
        let l = Smp { route: SmpRoute::Lid, status, ..s };
        prop_assert_eq!(Smp::decode(&l.encode()), Ok(l));
    }

    #[test]
    fn modifiers_roundtrip(m: u32) {
        let pk = PKeyBlock::from_attr_mod(m);
        prop_assert_eq!(pk.attr_mod(), m & 0x00FF_FFFF);
        let sl = Sl2VlPorts::from_attr_mod(m);
        prop_assert_eq!(sl.attr_mod(), m & 0x0003_FFFF);
        let mft = MftBlock::from_attr_mod(m);
        prop_assert_eq!(mft.attr_mod(), m & 0xF000_01FF);
        prop_assert_eq!(LftBlock::from_attr_mod(m).attr_mod(), m & 0xFFFF);
        prop_assert_eq!(RftBlock::from_attr_mod(m).attr_mod(), m & 0xFFFF);
        prop_assert_eq!(GuidBlock::from_attr_mod(m).attr_mod(), m & 0xFFFF);
        prop_assert_eq!(PortSelector::from_attr_mod(m).attr_mod(), m & 0xFF);
        match VlArbBlock::from_attr_mod(m) {
            Ok(v) => prop_assert_eq!(v.attr_mod(), m & 0xFFFF_00FF),
            Err(_) => prop_assert!(!(1..=4).contains(&(m >> 16))),
        }
        match SmInfoControl::from_attr_mod(m) {
            Ok(c) => prop_assert_eq!(c.attr_mod(), m),
            Err(_) => prop_assert!(!(1..=5).contains(&m)),
        }
    }
}
