//! SMP layout against hand-written bytes from IBA 14.2.1 (not produced by the
//! encoder), constructors, and the typed errors for malformed input.

use ibsm_mad::modifier::*;
use ibsm_mad::*;

/// A DR SubnGet(NodeInfo) over path 0,1,3 as IBA lays it out.
fn dr_get_nodeinfo_bytes() -> [u8; 256] {
    let mut b = [0u8; 256];
    b[0] = 1; // BaseVersion
    b[1] = 0x81; // SubnDirectedRoute
    b[2] = 1; // ClassVersion
    b[3] = 0x01; // Get
    b[4..6].copy_from_slice(&[0x00, 0x00]); // D=0, Status=0
    b[6] = 0; // HopPointer
    b[7] = 2; // HopCount
    b[8..16].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
    b[16..18].copy_from_slice(&[0x00, 0x11]); // NodeInfo
    b[20..24].copy_from_slice(&[0, 0, 0, 0]);
    b[32..34].copy_from_slice(&[0xFF, 0xFF]); // DrSLID
    b[34..36].copy_from_slice(&[0xFF, 0xFF]); // DrDLID
    b[129] = 1; // InitialPath[1]
    b[130] = 3; // InitialPath[2]
    b
}

#[test]
fn get_dr_matches_iba_layout() {
    let s = Smp::get_dr(&[1, 3], AttributeId::NODE_INFO, 0, 0x0102_0304_0506_0708);
    assert_eq!(s.encode(), dr_get_nodeinfo_bytes());
    let d = Smp::decode(&dr_get_nodeinfo_bytes()).unwrap();
    assert_eq!(d, s);
    assert_eq!(d.directed().unwrap().path(), &[1, 3]);
    assert_eq!(d.method, Method::GET);
    assert!(!d.method.is_response());
}

#[test]
fn response_sets_d_bit_and_getresp() {
    let req = Smp::get_dr(&[1, 3], AttributeId::NODE_INFO, 0, 42);
    let ni = NodeInfo {
        base_version: 1,
        class_version: 1,
        node_type: NodeType::Switch,
        num_ports: 8,
        node_guid: 0x20_0000,
        ..NodeInfo::default()
    };
    let resp = req.response().with_attribute(&ni).with_status(0x1C);
    let b = resp.encode();
    assert_eq!(b[3], 0x81, "GetResp");
    assert_eq!(&b[4..6], &[0x80, 0x1C], "D bit + status");
    assert_eq!(&b[128..131], &[0, 1, 3], "paths kept");
    let back = Smp::decode(&b).unwrap();
    assert!(back.directed().unwrap().direction);
    assert_eq!(back.status, 0x1C);
    assert_eq!(back.tid, 42);
    assert_eq!(back.attribute::<NodeInfo>(), Ok(ni));
    assert!(matches!(
        back.attribute::<PortInfo>(),
        Err(MadError::AttributeMismatch { .. })
    ));
}

#[test]
fn lid_routed_layout() {
    let si = SmInfo {
        guid: 0x10_0004,
        sm_key: 1,
        act_count: 5,
        priority: 10,
        sm_state: SmState::Standby,
    };
    let s = Smp::set_lid_attr(SmInfoControl::Handover.attr_mod(), 9, &si);
    let b = s.encode();
    assert_eq!(&b[..4], &[1, 0x01, 1, 0x02]);
    assert_eq!(&b[16..18], &[0x00, 0x20]);
    assert_eq!(&b[20..24], &[0, 0, 0, 1]);
    assert_eq!(b[64 + 20], 0xA2, "Priority 10, SMState Standby");
    assert!(b[128..].iter().all(|&x| x == 0));
    let d = Smp::decode(&b).unwrap();
    assert_eq!(d.route, SmpRoute::Lid);
    assert_eq!(
        SmInfoControl::from_attr_mod(d.attr_mod),
        Ok(SmInfoControl::Handover)
    );
    assert_eq!(d.attribute::<SmInfo>(), Ok(si));
    // LID-routed status is the full 16 bits.
    let s = s.with_status(0x8001);
    assert_eq!(Smp::decode(&s.encode()).unwrap().status, 0x8001);
}

#[test]
fn malformed_smps_are_typed_errors() {
    let good = dr_get_nodeinfo_bytes();
    assert_eq!(
        Smp::decode(&good[..100]),
        Err(MadError::TooShort {
            what: "SMP",
            need: 256,
            got: 100
        })
    );
    let mut b = good;
    b[0] = 2;
    assert_eq!(Smp::decode(&b), Err(MadError::BadBaseVersion(2)));
    let mut b = good;
    b[1] = 0x03;
    assert_eq!(Smp::decode(&b), Err(MadError::NotSmpClass(0x03)));
    let mut b = good;
    b[2] = 2;
    assert_eq!(
        Smp::decode(&b),
        Err(MadError::BadClassVersion {
            class: 0x81,
            version: 2
        })
    );
    let mut b = good;
    b[7] = 64;
    assert_eq!(Smp::decode(&b), Err(MadError::HopCountTooLarge(64)));
    b[7] = 63;
    assert!(Smp::decode(&b).is_ok());
    // Trailing bytes are ignored.
    let mut long = [0u8; 300];
    long[..256].copy_from_slice(&good);
    assert!(Smp::decode(&long).is_ok());
    // Errors render with what/where/why.
    let e = Smp::decode(&good[..10]).unwrap_err().to_string();
    assert!(
        e.contains("SMP") && e.contains("256") && e.contains("10"),
        "{e}"
    );
}

#[test]
fn path_limits() {
    let long = [1u8; 64];
    assert_eq!(
        Smp::try_get_dr(&long, AttributeId::NODE_INFO, 0, 1),
        Err(MadError::PathTooLong(64))
    );
    let s = Smp::get_dr(&long, AttributeId::NODE_INFO, 0, 1);
    assert_eq!(s.directed().unwrap().hop_cnt, 63, "clamped, logged");
    assert!(Smp::decode(&s.encode()).is_ok());
    let ok = Smp::try_get_dr(&long[..63], AttributeId::NODE_INFO, 0, 1).unwrap();
    assert_eq!(ok.directed().unwrap().path().len(), 63);
    let local = Smp::get_dr(&[], AttributeId::NODE_INFO, 0, 1);
    assert_eq!(local.directed().unwrap().hop_cnt, 0);
    assert_eq!(local.directed().unwrap().path(), &[] as &[u8]);
}

#[test]
fn strict_enums_reject_reserved_values() {
    let mut b = [0u8; 64];
    b[20] = 0xA4; // SMState 4 is reserved
    assert!(matches!(
        SmInfo::decode(&b),
        Err(MadError::InvalidField {
            field: "SMState",
            value: 4,
            ..
        })
    ));
    assert!(SmInfoControl::from_attr_mod(0).is_err());
    assert!(SmInfoControl::from_attr_mod(6).is_err());
    assert_eq!(SmInfoControl::from_attr_mod(5), Ok(SmInfoControl::Discover));
    assert!(VlArbBlock::from_attr_mod(0x0000_0003).is_err());
    assert!(VlArbBlock::from_attr_mod(0x0005_0003).is_err());
    assert_eq!(SmState::try_from(3), Ok(SmState::Master));
    assert_eq!(u8::from(SmState::Discovering), 1);
}

#[test]
fn diag_code_as_the_seed_describes() {
    assert_eq!(DiagCode(0).universal(), DiagUniversal::Ready);
    assert!(DiagCode(0).is_ok());
    assert_eq!(DiagCode(1).universal(), DiagUniversal::PerformingSelfTest);
    assert_eq!(DiagCode(2).universal(), DiagUniversal::Initializing);
    assert_eq!(DiagCode(2).vendor(), None);
    // Soft error with vendor code 0x123 in bits 14:4.
    let d = DiagCode((0x123 << 4) | 3);
    assert_eq!(d.universal(), DiagUniversal::SoftError);
    assert_eq!(d.vendor(), Some(DiagVendor::Code(0x123)));
    // Hard error, bit 15: bits 14:4 index VendorDiag.
    let d = DiagCode(0x8000 | (0x7 << 4) | 4);
    assert_eq!(d.universal(), DiagUniversal::HardError);
    assert_eq!(d.vendor(), Some(DiagVendor::VendorDiagIndex(7)));
    assert_eq!(DiagCode(9).universal(), DiagUniversal::Reserved(9));
}

#[test]
fn capability_mask_bits_are_iba_positions() {
    let named = [
        (CapabilityMask::IS_SM, 1),
        (CapabilityMask::IS_NOTICE_SUPPORTED, 2),
        (CapabilityMask::IS_TRAP_SUPPORTED, 3),
        (CapabilityMask::IS_AUTOMATIC_MIGRATION_SUPPORTED, 5),
        (CapabilityMask::IS_SL_MAPPING_SUPPORTED, 6),
        (CapabilityMask::IS_M_KEY_NVRAM, 7),
        (CapabilityMask::IS_P_KEY_NVRAM, 8),
        (CapabilityMask::IS_LED_INFO_SUPPORTED, 9),
        (CapabilityMask::IS_SM_DISABLED, 10),
        (CapabilityMask::IS_SYSTEM_IMAGE_GUID_SUPPORTED, 11),
        (
            CapabilityMask::IS_P_KEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED,
            12,
        ),
        (CapabilityMask::IS_COMMUNICATION_MANAGEMENT_SUPPORTED, 16),
        (CapabilityMask::IS_SNMP_TUNNELING_SUPPORTED, 17),
        (CapabilityMask::IS_REINIT_SUPPORTED, 18),
        (CapabilityMask::IS_DEVICE_MANAGEMENT_SUPPORTED, 19),
        (CapabilityMask::IS_VENDOR_CLASS_SUPPORTED, 20),
        (CapabilityMask::IS_DR_NOTICE_SUPPORTED, 21),
        (CapabilityMask::IS_CAPABILITY_MASK_NOTICE_SUPPORTED, 22),
        (CapabilityMask::IS_BOOT_MANAGEMENT_SUPPORTED, 23),
        (CapabilityMask::IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED, 24),
        (CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED, 25),
    ];
    for (bit, pos) in named {
        assert_eq!(bit, 1u32 << pos);
    }
    // IsSM lands in byte 23 of PortInfo (CapabilityMask is bytes 20..24, big endian).
    let pi = PortInfo {
        capability_mask: CapabilityMask(CapabilityMask::IS_SM),
        ..PortInfo::default()
    };
    assert_eq!(pi.encode()[23], 0x02);
    let mut cm = CapabilityMask::default();
    cm.set(CapabilityMask::IS_SM_DISABLED, true);
    assert!(cm.is_sm_disabled());
    cm.set(CapabilityMask::IS_SM_DISABLED, false);
    assert_eq!(cm, CapabilityMask(0));
}

#[test]
fn trap_144_layout() {
    let t = Trap144 {
        lid: 0x0102,
        other_local_changes: true,
        capability_mask: CapabilityMask(CapabilityMask::IS_SM),
        change_flags: Trap144::CHANGE_SM_PRIORITY,
        capability_mask2: 0x0030,
    };
    let n = Notice::generic(
        NoticeType::Informational,
        ProducerType::CA,
        0x0102,
        &TrapDetails::CapabilityMaskChanged(t),
    );
    let b = n.encode();
    assert_eq!(b[0], 0x84, "IsGeneric + Type 4");
    assert_eq!(&b[1..4], &[0, 0, 1], "ProducerType CA");
    assert_eq!(&b[4..6], &[0, 144], "TrapNumber");
    assert_eq!(&b[6..8], &[0x01, 0x02], "IssuerLID");
    // DataDetails start at byte 10.
    assert_eq!(&b[12..14], &[0x01, 0x02], "LIDADDR");
    assert_eq!(b[15], 0x01, "OtherLocalChanges");
    assert_eq!(&b[16..20], &[0, 0, 0, 2], "CapabilityMask");
    assert_eq!(&b[20..22], &[0, 8], "ChangeFlags");
    assert_eq!(&b[22..24], &[0, 0x30], "CapabilityMask2");
    assert_eq!(
        Notice::decode(&b).unwrap().details(),
        Some(TrapDetails::CapabilityMaskChanged(t))
    );
    // Vendor notices and unknown traps have no typed details.
    let mut v = b;
    v[0] = 0x04;
    assert_eq!(Notice::decode(&v).unwrap().details(), None);
    let mut u = b;
    u[5] = 200;
    assert_eq!(Notice::decode(&u).unwrap().details(), None);
}

#[test]
fn other_enum_values_roundtrip() {
    assert_eq!(PortState::from(9), PortState::Other(9));
    assert_eq!(u8::from(PortState::Other(9)), 9);
    assert_eq!(PortState::from(4), PortState::Active);
    assert_eq!(NodeType::from(0), NodeType::Other(0));
    assert_eq!(PhysPortState::from(5), PhysPortState::LinkUp);
    assert_eq!(LftBlock::of_lid(130), LftBlock(2));
    assert_eq!(LftBlock(2).first_lid(), 128);
    assert_eq!(
        MftBlock::from_attr_mod(0x2000_0005),
        MftBlock {
            block: 5,
            position: 2
        }
    );
    assert_eq!(
        PKeyBlock::from_attr_mod(0x0003_0001),
        PKeyBlock { block: 1, port: 3 }
    );
    assert_eq!(NodeDescription::new("Hca1").as_str(), Ok("Hca1"));
    let long = "é".repeat(40); // 80 bytes, cut at a char boundary
    assert_eq!(NodeDescription::new(&long).as_str().unwrap().len(), 64);
}
