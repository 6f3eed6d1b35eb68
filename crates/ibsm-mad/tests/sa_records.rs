//! SA records: for every record, an independent table of its components (number, bit
//! offset, bit width, reserved?) written from the IBA tables, not from the codec.
//! Property tests check that
//! - `encode(decode(b)) == b & used_bits` (used bits = the non-reserved components),
//! - `decode(encode(r)) == r`, and a short buffer is a typed error,
//! - `matches(a, b, component i)` is true exactly when component i's bits are equal,
//! - the table's numbering is the record's own (`COMPONENTS`).

use ibsm_mad::sa::*;
use ibsm_mad::{MadError, SmState};
use proptest::prelude::*;

/// (component number, bit offset, bit width, reserved).
type Table = &'static [(u32, usize, usize, bool)];

const F: bool = false;
const R: bool = true;
/// Component number of a used field that is not a component (table blocks).
const N: u32 = 99;

const NODE_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 16, R),
    (2, 32, 8, F),
    (3, 40, 8, F),
    (4, 48, 8, F),
    (5, 56, 8, F),
    (6, 64, 64, F),
    (7, 128, 64, F),
    (8, 192, 64, F),
    (9, 256, 16, F),
    (10, 272, 16, F),
    (11, 288, 32, F),
    (12, 320, 8, F),
    (13, 328, 24, F),
    (14, 352, 512, F),
];

const PORT_INFO_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 8, F),
    (2, 24, 8, F),
    (3, 32, 64, F),
    (4, 96, 64, F),
    (5, 160, 16, F),
    (6, 176, 16, F),
    (7, 192, 32, F),
    (8, 224, 16, F),
    (9, 240, 16, F),
    (10, 256, 8, F),
    (11, 264, 8, F),
    (12, 272, 8, F),
    (13, 280, 8, F),
    (14, 288, 4, F),
    (15, 292, 4, F),
    (16, 296, 4, F),
    (17, 300, 4, F),
    (18, 304, 2, F),
    (19, 306, 3, R),
    (20, 309, 3, F),
    (21, 312, 4, F),
    (22, 316, 4, F),
    (23, 320, 4, F),
    (24, 324, 4, F),
    (25, 328, 4, F),
    (26, 332, 4, F),
    (27, 336, 8, F),
    (28, 344, 8, F),
    (29, 352, 8, F),
    (30, 360, 4, F),
    (31, 364, 4, F),
    (32, 368, 3, F),
    (33, 371, 5, F),
    (34, 376, 4, F),
    (35, 380, 1, F),
    (36, 381, 1, F),
    (37, 382, 1, F),
    (38, 383, 1, F),
    (39, 384, 16, F),
    (40, 400, 16, F),
    (41, 416, 16, F),
    (42, 432, 8, F),
    (43, 440, 1, F),
    (44, 441, 2, F),
    (45, 443, 5, F),
    (46, 448, 3, R),
    (47, 451, 5, F),
    (48, 456, 4, F),
    (49, 460, 4, F),
    (50, 464, 16, F),
    (51, 480, 8, R),
    (52, 488, 24, F),
    (53, 512, 16, F),
    (54, 528, 4, F),
    (55, 532, 4, F),
    (56, 536, 3, R),
    (57, 539, 5, F),
];

const LINK_RECORD: Table = &[(0, 0, 16, F), (1, 16, 8, F), (2, 24, 8, F), (3, 32, 16, F)];

const SM_INFO_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 16, R),
    (2, 32, 64, F),
    (3, 96, 64, F),
    (4, 160, 32, F),
    (5, 192, 4, F),
    (6, 196, 4, F),
];

const PATH_RECORD: Table = &[
    (0, 0, 32, F),
    (1, 32, 32, F),
    (2, 64, 128, F),
    (3, 192, 128, F),
    (4, 320, 16, F),
    (5, 336, 16, F),
    (6, 352, 1, F),
    (7, 353, 3, R),
    (8, 356, 20, F),
    (9, 376, 8, F),
    (10, 384, 8, F),
    (11, 392, 1, F),
    (12, 393, 7, F),
    (13, 400, 16, F),
    (14, 416, 12, F),
    (15, 428, 4, F),
    (16, 432, 2, F),
    (17, 434, 6, F),
    (18, 440, 2, F),
    (19, 442, 6, F),
    (20, 448, 2, F),
    (21, 450, 6, F),
    (22, 456, 8, F),
];

const MC_MEMBER_RECORD: Table = &[
    (0, 0, 128, F),
    (1, 128, 128, F),
    (2, 256, 32, F),
    (3, 288, 16, F),
    (4, 304, 2, F),
    (5, 306, 6, F),
    (6, 312, 8, F),
    (7, 320, 16, F),
    (8, 336, 2, F),
    (9, 338, 6, F),
    (10, 344, 2, F),
    (11, 346, 6, F),
    (12, 352, 4, F),
    (13, 356, 20, F),
    (14, 376, 8, F),
    (15, 384, 4, F),
    (16, 388, 4, F),
    (17, 392, 1, F),
];

const INFORM_INFO_RECORD: Table = &[
    (0, 0, 128, F),
    (1, 128, 16, F),
    (2, 144, 48, R),
    (3, 192, 128, F),
    (4, 320, 16, F),
    (5, 336, 16, F),
    (6, 352, 16, R),
    (7, 368, 8, F),
    (8, 376, 8, F),
    (9, 384, 16, F),
    (10, 400, 16, F),
    (11, 416, 24, F),
    (12, 440, 3, R),
    (13, 443, 5, F),
    (14, 448, 8, R),
    (15, 456, 24, F),
];

const SWITCH_INFO_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 16, R),
    (2, 32, 16, F),
    (3, 48, 16, F),
    (4, 64, 16, F),
    (5, 80, 16, F),
    (6, 96, 8, F),
    (7, 104, 8, F),
    (8, 112, 8, F),
    (9, 120, 5, F),
    (10, 125, 1, F),
    (11, 126, 2, F),
    (12, 128, 16, F),
    (13, 144, 16, F),
    (14, 160, 1, F),
    (15, 161, 1, F),
    (16, 162, 1, F),
    (17, 163, 1, F),
    (18, 164, 1, F),
    (19, 165, 11, R),
    (20, 176, 16, F),
];

const LFT_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 16, F),
    (2, 32, 32, R),
    (N, 64, 512, F),
];

const MFT_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 4, F),
    (2, 20, 3, R),
    (3, 23, 9, F),
    (4, 32, 32, R),
    (N, 64, 512, F),
];

const P_KEY_TABLE_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 16, F),
    (2, 32, 8, F),
    (3, 40, 24, R),
    (N, 64, 512, F),
];

const SL_TO_VL_RECORD: Table = &[
    (0, 0, 16, F),
    (1, 16, 8, F),
    (2, 24, 8, F),
    (3, 32, 32, R),
    (N, 64, 64, F),
];

const MULTI_PATH_RECORD: Table = &[
    (0, 0, 1, F),
    (1, 1, 3, R),
    (2, 4, 20, F),
    (3, 24, 8, F),
    (4, 32, 8, F),
    (5, 40, 1, F),
    (6, 41, 7, F),
    (7, 48, 16, F),
    (8, 64, 12, F),
    (9, 76, 4, F),
    (10, 80, 2, F),
    (11, 82, 6, F),
    (12, 88, 2, F),
    (13, 90, 6, F),
    (14, 96, 2, F),
    (15, 98, 6, F),
    (16, 104, 8, F),
    (17, 112, 2, F),
    (18, 114, 6, R),
    (19, 120, 8, F),
    (20, 128, 8, F),
    (21, 136, 56, F),
];

const SA_NOTICE: Table = &[(N, 0, 640, F)];

fn guid_info_record_table() -> Vec<(u32, usize, usize, bool)> {
    let mut t = vec![(0, 0, 16, F), (1, 16, 8, F), (2, 24, 8, R), (3, 32, 32, R)];
    for k in 0..8 {
        t.push((4 + k, 64 + 64 * k as usize, 64, F));
    }
    t
}

fn vl_arb_record_table() -> Vec<(u32, usize, usize, bool)> {
    let mut t = vec![(0, 0, 16, F), (1, 16, 8, F), (2, 24, 8, F), (3, 32, 32, R)];
    for k in 0..32 {
        t.push((N, 64 + 16 * k + 4, 12, F)); // Reserved(4) VL(4) Weight(8)
    }
    t
}

fn service_record_table() -> Vec<(u32, usize, usize, bool)> {
    let mut t = vec![
        (0, 0, 64, F),
        (1, 64, 128, F),
        (2, 192, 16, F),
        (3, 208, 16, R),
        (4, 224, 32, F),
        (5, 256, 128, F),
        (6, 384, 512, F),
    ];
    for k in 0..16 {
        t.push((7 + k, 896 + 8 * k as usize, 8, F));
    }
    for k in 0..8 {
        t.push((23 + k, 1024 + 16 * k as usize, 16, F));
    }
    for k in 0..4 {
        t.push((31 + k, 1152 + 32 * k as usize, 32, F));
    }
    for k in 0..2 {
        t.push((35 + k, 1280 + 64 * k as usize, 64, F));
    }
    t
}

/// ClassPortInfo has no components; its used bits as (offset, width).
const CLASS_PORT_INFO_USED: &[(usize, usize)] = &[
    (0, 256), // versions, CapabilityMask(2), CapabilityMask2/RespTimeValue, RedirectGID, TC/SL/FL, LID, P_Key
    (264, 312), // RedirectQP .. TrapQ_Key (byte 32 reserved)
];

fn set_bits(m: &mut [u8], off: usize, width: usize) {
    for bit in off..off + width {
        m[bit / 8] |= 0x80 >> (bit % 8);
    }
}

fn mask_of(size: usize, table: &[(u32, usize, usize, bool)], with_reserved: bool) -> Vec<u8> {
    let mut m = vec![0u8; size];
    for &(_, off, w, res) in table {
        if !res || with_reserved {
            set_bits(&mut m, off, w);
        }
    }
    m
}

fn bits_equal(a: &[u8], b: &[u8], off: usize, width: usize) -> bool {
    let mut m = vec![0u8; a.len()];
    set_bits(&mut m, off, width);
    a.iter().zip(b).zip(&m).all(|((x, y), k)| x & k == y & k)
}

fn enc<T: SaRecord>(r: &T) -> Vec<u8> {
    let mut v = vec![0u8; T::SIZE];
    r.encode_into(&mut v).expect("SIZE bytes");
    v
}

/// Round trip on the used bits, short-buffer error, and `matches` per component.
fn check<T: SaRecord + PartialEq + std::fmt::Debug>(
    table: &[(u32, usize, usize, bool)],
    a_bytes: &[u8],
    b_bytes: &[u8],
) {
    check_min::<T>(table, a_bytes, b_bytes, T::SIZE);
}

/// [`check`] for a record that decodes from `min_len` bytes already.
fn check_min<T: SaRecord + PartialEq + std::fmt::Debug>(
    table: &[(u32, usize, usize, bool)],
    a_bytes: &[u8],
    b_bytes: &[u8],
    min_len: usize,
) {
    let size = T::SIZE;
    assert_eq!(mask_of(size, table, true).len(), size);
    let used = mask_of(size, table, false);
    let a = T::decode(a_bytes).expect("decodes");
    let ea = enc(&a);
    let want: Vec<u8> = a_bytes[..size]
        .iter()
        .zip(&used)
        .map(|(x, m)| x & m)
        .collect();
    assert_eq!(ea, want, "{}: encode(decode(b)) != b & used_bits", T::NAME);
    assert_eq!(T::decode(&ea).as_ref(), Ok(&a), "{}", T::NAME);
    assert!(matches!(
        T::decode(&a_bytes[..min_len - 1]),
        Err(SaError::Mad(MadError::TooShort { .. }))
    ));
    let mut out = vec![0u8; size - 1];
    assert!(a.encode_into(&mut out).is_err());
    // A template equal in every field matches under any mask.
    assert!(a.matches(&a, ComponentMask::ALL), "{}", T::NAME);
    // Component by component: b gets a's bytes except inside one component.
    for &(i, off, w, res) in table.iter().filter(|t| t.0 != N) {
        let mut mixed = a_bytes[..size].to_vec();
        let mut m = vec![0u8; size];
        set_bits(&mut m, off, w);
        for ((x, y), k) in mixed.iter_mut().zip(b_bytes).zip(&m) {
            *x = (*x & !k) | (y & k);
        }
        let b = T::decode(&mixed).expect("decodes");
        let want = res || bits_equal(&ea, &enc(&b), off, w);
        assert_eq!(
            a.matches(&b, ComponentMask::component(i)),
            want,
            "{}: component {i}",
            T::NAME
        );
        // The other components still match.
        let others = ComponentMask::ALL.without(ComponentMask::component(i));
        assert!(a.matches(&b, others), "{}: components but {i}", T::NAME);
    }
}

fn numbering(
    table: &[(u32, usize, usize, bool)],
    components: &[(&str, u32)],
    fields: ComponentMask,
) {
    let mine: Vec<u32> = table.iter().map(|t| t.0).filter(|&i| i != N).collect();
    let theirs: Vec<u32> = components.iter().map(|c| c.1).collect();
    assert_eq!(mine, theirs);
    let field_bits = table
        .iter()
        .filter(|t| !t.3 && t.0 != N)
        .fold(0u64, |m, t| m | (1 << t.0));
    assert_eq!(fields, ComponentMask(field_bits));
}

#[test]
fn component_numbering_is_ibas() {
    numbering(
        NODE_RECORD,
        NodeRecord::COMPONENTS,
        NodeRecord::FIELD_COMPONENTS,
    );
    numbering(
        PORT_INFO_RECORD,
        PortInfoRecord::COMPONENTS,
        PortInfoRecord::FIELD_COMPONENTS,
    );
    numbering(
        LINK_RECORD,
        LinkRecord::COMPONENTS,
        LinkRecord::FIELD_COMPONENTS,
    );
    numbering(
        SM_INFO_RECORD,
        SmInfoRecord::COMPONENTS,
        SmInfoRecord::FIELD_COMPONENTS,
    );
    numbering(
        PATH_RECORD,
        PathRecord::COMPONENTS,
        PathRecord::FIELD_COMPONENTS,
    );
    numbering(
        MC_MEMBER_RECORD,
        McMemberRecord::COMPONENTS,
        McMemberRecord::FIELD_COMPONENTS,
    );
    numbering(
        INFORM_INFO_RECORD,
        InformInfoRecord::COMPONENTS,
        InformInfoRecord::FIELD_COMPONENTS,
    );
    numbering(
        &service_record_table(),
        ServiceRecord::COMPONENTS,
        ServiceRecord::FIELD_COMPONENTS,
    );
    // Spot checks against OpenSM's IB_*_COMPMASK_* values.
    assert_eq!(PathRecord::DGID, ComponentMask(1 << 2));
    assert_eq!(PathRecord::SGID, ComponentMask(1 << 3));
    assert_eq!(PathRecord::PACKET_LIFE_TIME, ComponentMask(1 << 21));
    assert_eq!(PathRecord::SERVICE_ID, ComponentMask(0b11));
    assert_eq!(McMemberRecord::MGID, ComponentMask(1 << 0));
    assert_eq!(McMemberRecord::JOIN_STATE, ComponentMask(1 << 16));
    assert_eq!(NodeRecord::LID, ComponentMask(1 << 0));
    assert_eq!(NodeRecord::NODE_GUID, ComponentMask(1 << 7));
    assert_eq!(PortInfoRecord::CAPABILITY_MASK, ComponentMask(1 << 7));
    assert_eq!(
        PortInfoRecord::LINK_SPEED_EXT_ENABLED,
        ComponentMask(1 << 57)
    );
    assert_eq!(ServiceRecord::SERVICE_DATA64_1, ComponentMask(1 << 36));
    assert_eq!(InformInfoRecord::PRODUCER_TYPE, ComponentMask(1 << 15));
    assert_eq!(SmInfoRecord::SM_STATE, ComponentMask(1 << 6));
}

fn bytes(n: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), n)
}

/// SMInfo.SMState must be 0..=3 (record byte 24, bits 3:0).
fn fix_sm_state(mut b: Vec<u8>) -> Vec<u8> {
    b[24] &= 0xF3;
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn node_record(a in bytes(NodeRecord::SIZE), b in bytes(NodeRecord::SIZE)) {
        check::<NodeRecord>(NODE_RECORD, &a, &b);
    }

    #[test]
    fn port_info_record(a in bytes(PortInfoRecord::SIZE), b in bytes(PortInfoRecord::SIZE)) {
        check::<PortInfoRecord>(PORT_INFO_RECORD, &a, &b);
    }

    #[test]
    fn link_record(a in bytes(LinkRecord::SIZE), b in bytes(LinkRecord::SIZE)) {
        check::<LinkRecord>(LINK_RECORD, &a, &b);
    }

    #[test]
    fn sm_info_record(a in bytes(SmInfoRecord::SIZE), b in bytes(SmInfoRecord::SIZE)) {
        check::<SmInfoRecord>(SM_INFO_RECORD, &fix_sm_state(a), &fix_sm_state(b));
    }

    #[test]
    fn sm_info_record_rejects_reserved_sm_state(a in bytes(SmInfoRecord::SIZE), st in 4u8..16) {
        let mut a = a;
        a[24] = (a[24] & 0xF0) | st;
        let bad = matches!(SmInfoRecord::decode(&a), Err(SaError::Mad(MadError::InvalidField { .. })));
        prop_assert!(bad);
    }

    #[test]
    fn path_record(a in bytes(PathRecord::SIZE), b in bytes(PathRecord::SIZE)) {
        check::<PathRecord>(PATH_RECORD, &a, &b);
    }

    #[test]
    fn mc_member_record(a in bytes(McMemberRecord::SIZE), b in bytes(McMemberRecord::SIZE)) {
        check::<McMemberRecord>(MC_MEMBER_RECORD, &a, &b);
    }

    #[test]
    fn service_record(a in bytes(ServiceRecord::SIZE), b in bytes(ServiceRecord::SIZE)) {
        check::<ServiceRecord>(&service_record_table(), &a, &b);
    }

    #[test]
    fn inform_info_record(a in bytes(InformInfoRecord::SIZE), b in bytes(InformInfoRecord::SIZE)) {
        check::<InformInfoRecord>(INFORM_INFO_RECORD, &a, &b);
        // InformInfo alone is the record's bytes 24..60 and matches with its numbering.
        let ia = InformInfo::decode(&a[24..]).unwrap();
        let ra = InformInfoRecord::decode(&a).unwrap();
        prop_assert_eq!(ia, ra.inform_info);
        prop_assert_eq!(&ia.encode()[..], &ra.encode()[24..]);
        let rb = InformInfoRecord::decode(&b).unwrap();
        for i in 0..16 {
            let m = ComponentMask::component(i);
            let want = i < 2 || ra.matches(&rb, m);
            prop_assert_eq!(ia.matches(&rb.inform_info, m), want);
        }
    }

    #[test]
    fn switch_info_record(a in bytes(SwitchInfoRecord::SIZE), b in bytes(SwitchInfoRecord::SIZE)) {
        check::<SwitchInfoRecord>(SWITCH_INFO_RECORD, &a, &b);
    }

    #[test]
    fn lft_record(a in bytes(72), b in bytes(72)) {
        check::<LinearForwardingTableRecord>(LFT_RECORD, &a, &b);
    }

    #[test]
    fn mft_record(a in bytes(72), b in bytes(72)) {
        check::<MulticastForwardingTableRecord>(MFT_RECORD, &a, &b);
    }

    #[test]
    fn p_key_table_record(a in bytes(72), b in bytes(72)) {
        check::<PKeyTableRecord>(P_KEY_TABLE_RECORD, &a, &b);
    }

    #[test]
    fn sl_to_vl_record(a in bytes(16), b in bytes(16)) {
        check::<SlToVlMappingTableRecord>(SL_TO_VL_RECORD, &a, &b);
    }

    #[test]
    fn vl_arb_record(a in bytes(72), b in bytes(72)) {
        check::<VlArbitrationTableRecord>(&vl_arb_record_table(), &a, &b);
    }

    #[test]
    fn guid_info_record(a in bytes(72), b in bytes(72)) {
        check::<GuidInfoRecord>(&guid_info_record_table(), &a, &b);
    }

    #[test]
    fn sa_notice(a in bytes(80), b in bytes(80)) {
        check::<SaNotice>(SA_NOTICE, &a, &b);
    }

    #[test]
    fn multi_path_record_header(a in bytes(200), b in bytes(200)) {
        // No GIDs: the GID area is unused and decodes from the 24-byte header alone.
        let zero = |mut v: Vec<u8>| { v[15] = 0; v[16] = 0; v };
        check_min::<MultiPathRecord>(MULTI_PATH_RECORD, &zero(a), &zero(b), 24);
    }

    #[test]
    fn multi_path_record_gids(a in bytes(200), s in 0u8..=11, d in 0u8..=11) {
        let d = d.min(11 - s);
        let mut a = a;
        a[15] = s;
        a[16] = d;
        let n = usize::from(s + d);
        let r = MultiPathRecord::decode(&a).unwrap();
        prop_assert_eq!(r.sgids().len(), usize::from(s));
        prop_assert_eq!(r.dgids().len(), usize::from(d));
        prop_assert_eq!(r.wire_len(), 24 + 16 * n);
        let e = r.encode();
        prop_assert_eq!(&e[24..24 + 16 * n], &a[24..24 + 16 * n]);
        prop_assert!(e[24 + 16 * n..].iter().all(|&x| x == 0));
        prop_assert_eq!(MultiPathRecord::decode(&e), Ok(r));
        prop_assert_eq!(MultiPathRecord::decode(&e[..24 + 16 * n]), Ok(r));
        if n > 0 {
            prop_assert!(MultiPathRecord::decode(&e[..23 + 16 * n]).is_err());
        }
        let w = MultiPathRecord::with_gids(r.sgids(), r.dgids()).unwrap();
        prop_assert_eq!(w.sgids(), r.sgids());
        prop_assert_eq!(w.dgids(), r.dgids());
        let mut over = a.clone();
        over[15] = 6;
        over[16] = 6;
        let too_many = matches!(MultiPathRecord::decode(&over), Err(SaError::Mad(MadError::InvalidField { .. })));
        prop_assert!(too_many);
    }

    #[test]
    fn class_port_info(a in bytes(ClassPortInfo::SIZE)) {
        let mut used = vec![0u8; ClassPortInfo::SIZE];
        for &(o, w) in CLASS_PORT_INFO_USED {
            set_bits(&mut used, o, w);
        }
        let c = ClassPortInfo::decode(&a).unwrap();
        let want: Vec<u8> = a.iter().zip(&used).map(|(x, m)| x & m).collect();
        prop_assert_eq!(c.encode().to_vec(), want);
        prop_assert_eq!(ClassPortInfo::decode(&c.encode()), Ok(c));
        prop_assert!(ClassPortInfo::decode(&a[..71]).is_err());
    }

    #[test]
    fn sm_info_record_struct_roundtrip(lid: u16, guid: u64, key: u64, act: u32, prio in 0u8..16, st in 0u8..4) {
        let r = SmInfoRecord {
            lid,
            sm_info: ibsm_mad::SmInfo { guid, sm_key: key, act_count: act, priority: prio, sm_state: SmState::try_from(st).unwrap() },
        };
        prop_assert_eq!(SmInfoRecord::decode(&r.encode()), Ok(r));
    }
}

#[test]
fn padded_sizes_and_offsets() {
    assert_eq!(NodeRecord::padded_size(), 112);
    assert_eq!(NodeRecord::attribute_offset(), 14);
    assert_eq!(PortInfoRecord::padded_size(), 72);
    assert_eq!(SmInfoRecord::padded_size(), 32);
    assert_eq!(LinkRecord::padded_size(), 8);
    assert_eq!(McMemberRecord::padded_size(), 56);
    assert_eq!(PathRecord::padded_size(), 64);
    assert_eq!(ServiceRecord::padded_size(), 176);
    assert_eq!(InformInfoRecord::padded_size(), 64);
    assert_eq!(ClassPortInfo::padded_size(), 72);
    assert_eq!(SwitchInfoRecord::padded_size(), 24);
    assert_eq!(SlToVlMappingTableRecord::padded_size(), 16);
    assert_eq!(LinearForwardingTableRecord::attribute_offset(), 9);
    assert_eq!(MultiPathRecord::SIZE, 200);
    assert_eq!(SaNotice::SIZE, 80);
}

#[test]
fn join_state_and_selectors() {
    let j = JoinState::FULL_MEMBER.union(JoinState::SEND_ONLY_NON_MEMBER);
    assert!(j.contains(JoinState::FULL_MEMBER));
    assert!(!j.contains(JoinState::NON_MEMBER));
    assert_eq!(
        j.without(JoinState::FULL_MEMBER),
        JoinState::SEND_ONLY_NON_MEMBER
    );
    assert!(JoinState::default().is_empty());
    assert_eq!(format!("{j:?}"), "JoinState(FullMember|SendOnlyNonMember)");
    for v in 0..4u8 {
        assert_eq!(u8::from(Selector::from(v)), v);
    }
    assert_eq!(Selector::from(2), Selector::Exactly);
}

#[test]
fn service_name_text() {
    let n = ServiceName::new("DAPL");
    assert_eq!(n.as_str(), Ok("DAPL"));
    let long = "x".repeat(80);
    assert_eq!(ServiceName::new(&long).as_bytes().len(), 64);
}
