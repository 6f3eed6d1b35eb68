//! SA MAD and RMPP: header round trips, segmentation (PayloadLength as the kernel's
//! RMPP puts it on the wire for OpenSM) and reassembly, with its typed errors.

use ibsm_mad::sa::*;
use ibsm_mad::{MadError, Method, NodeInfo, NodeType, MAD_SIZE};
use proptest::prelude::*;

fn mad256() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), MAD_SIZE)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn sa_mad_roundtrips_on_used_bytes(mut b in mad256()) {
        b[1] = 0x03;
        let m = SaMad::decode(&b).expect("SA class");
        let mut want = b.clone();
        want[6..8].fill(0); // ClassSpecific: reserved for the SA
        want[18..20].fill(0); // common header Reserved
        want[46..48].fill(0); // SA header Reserved
        prop_assert_eq!(m.encode().to_vec(), want);
        prop_assert_eq!(SaMad::decode(&m.encode()), Ok(m));
        prop_assert_eq!(m.rmpp.resp_time, b[26] >> 3);
        prop_assert_eq!(m.rmpp.flags.0, b[26] & 7);
        prop_assert_eq!(m.component_mask.0, u64::from_be_bytes(b[48..56].try_into().unwrap()));
        prop_assert_eq!(&m.data[..], &b[56..]);
    }

    #[test]
    fn sa_mad_decode_never_panics(b in mad256(), n in 0usize..=256) {
        let r = SaMad::decode(&b[..n]);
        if n < 256 {
            let short = matches!(r, Err(SaError::Mad(MadError::TooShort { need: 256, .. })));
            prop_assert!(short);
        } else if b[1] != 0x03 {
            prop_assert_eq!(r, Err(SaError::NotSaClass(b[1])));
        }
    }

    #[test]
    fn segments_reassemble(len in 0usize..3000, resp_time in 0u8..32, tid: u64) {
        let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let mut t = SaMad::new(Method::GET_TABLE_RESP, SaAttributeId::NODE_RECORD, tid);
        t.rmpp.resp_time = resp_time;
        t.attribute_offset = 14;
        let cut = RmppSegments::new(&t, &payload).unwrap();
        let segs: Vec<SaMad> = cut.clone().collect();
        let n = len.div_ceil(200).max(1);
        prop_assert_eq!(segs.len(), n);
        prop_assert_eq!(cut.wire_len(n as u32 + 1), None);
        for (i, s) in segs.iter().enumerate() {
            let first = i == 0;
            let last = i + 1 == n;
            // Written: whole MADs, the last one only up to its data.
            let wire = cut.wire_len(i as u32 + 1).unwrap();
            prop_assert_eq!(wire, if last { 56 + len - 200 * (n - 1) } else { 256 });
            prop_assert!(s.encode()[wire..].iter().all(|b| *b == 0));
            prop_assert_eq!(s.rmpp.version, 1);
            prop_assert_eq!(s.rmpp.rmpp_type, RmppType::DATA);
            prop_assert_eq!(s.rmpp.resp_time, resp_time);
            prop_assert_eq!(s.rmpp.seg_num(), i as u32 + 1);
            prop_assert!(s.rmpp.is_active());
            prop_assert_eq!(s.rmpp.flags.contains(RmppFlags::FIRST), first);
            prop_assert_eq!(s.rmpp.flags.contains(RmppFlags::LAST), last);
            let want = if last {
                20 + len - 200 * (n - 1)
            } else if first {
                len + 20 * n
            } else {
                0
            };
            prop_assert_eq!(s.rmpp.payload_length() as usize, want);
            prop_assert_eq!(s.attribute_offset, 14);
            prop_assert_eq!(s.tid(), tid);
            // Wire round trip of every segment.
            prop_assert_eq!(SaMad::decode(&s.encode()), Ok(*s));
        }
        let mut r = RmppReassembler::default();
        let mut done = None;
        for (i, s) in segs.iter().enumerate() {
            match r.push(s).unwrap() {
                RmppProgress::Incomplete { last } => prop_assert_eq!(last, i as u32 + 1),
                RmppProgress::Complete(m) => done = Some(m),
            }
        }
        let m = done.expect("complete");
        prop_assert_eq!(&m.payload, &payload);
        prop_assert_eq!(m.first.tid(), tid);
        // A retransmitted segment after completion is a duplicate.
        let dup = matches!(r.push(&segs[n - 1]), Err(SaError::RmppDuplicate { .. }));
        prop_assert!(dup);
    }
}

#[test]
fn first_payload_length_counts_the_sa_header_of_every_segment() {
    // 3 NodeRecords (112 bytes each padded) = 336 bytes: 2 segments.
    let t = SaMad::new(Method::GET_TABLE_RESP, SaAttributeId::NODE_RECORD, 1);
    let payload = vec![0u8; 336];
    let s = RmppSegments::new(&t, &payload).unwrap();
    assert_eq!(s.segment_count(), 2);
    assert_eq!(s.total_payload_length(), 336 + 40);
    assert_eq!(s.segment(1).unwrap().rmpp.payload_length(), 376);
    assert_eq!(s.segment(2).unwrap().rmpp.payload_length(), 20 + 136);
    assert!(s.segment(0).is_none() && s.segment(3).is_none());
    // Written: the first whole, the last as the 56 header bytes and its 136.
    assert_eq!(s.wire_len(1), Some(256));
    assert_eq!(s.wire_len(2), Some(56 + 136));
    assert_eq!(s.wire_len(0), None);
    // Empty table: one segment, PayloadLength 20.
    let e = RmppSegments::new(&t, &[]).unwrap();
    assert_eq!(e.segment_count(), 1);
    let only = e.segment(1).unwrap();
    assert_eq!(only.rmpp.payload_length(), 20);
    assert_eq!(e.wire_len(1), Some(56));
    assert_eq!(
        only.rmpp.flags,
        RmppFlags::ACTIVE | RmppFlags::FIRST | RmppFlags::LAST
    );
    // Exactly 200 bytes: one full segment.
    let f = RmppSegments::new(&t, &[1u8; 200]).unwrap();
    assert_eq!(f.segment_count(), 1);
    assert_eq!(f.segment(1).unwrap().rmpp.payload_length(), 220);
    assert_eq!(f.wire_len(1), Some(256));
}

fn node(lid: u16) -> NodeRecord {
    NodeRecord {
        lid,
        node_info: NodeInfo {
            node_type: NodeType::Ca,
            node_guid: 0x1000 + u64::from(lid),
            ..NodeInfo::default()
        },
        node_description: ibsm_mad::NodeDescription::new("node"),
    }
}

#[test]
fn table_of_records_roundtrips_through_rmpp() {
    let recs: Vec<NodeRecord> = (1..=5).map(node).collect();
    let t = encode_table(&recs).unwrap();
    assert_eq!(t.attribute_offset, 14);
    assert_eq!(t.record_count, 5);
    assert_eq!(t.bytes.len(), 5 * 112);
    // The raw builder gives the same bytes.
    let raw: Vec<[u8; NodeRecord::SIZE]> = recs.iter().map(|r| r.encode()).collect();
    let t2 = table_payload(NodeRecord::SIZE, raw.iter().map(|r| &r[..])).unwrap();
    assert_eq!(t2, t);
    let mut req = SaMad::query(
        Method::GET_TABLE,
        9,
        &NodeRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    req.sm_key = 7;
    let tmpl = get_table_resp_template(&req, SaStatus::SUCCESS, t.attribute_offset);
    assert_eq!(tmpl.method(), Method::GET_TABLE_RESP);
    assert_eq!(tmpl.sm_key, 7);
    let mut r = RmppReassembler::default();
    let mut got = None;
    for s in RmppSegments::new(&tmpl, &t.bytes).unwrap() {
        if let RmppProgress::Complete(m) = r.push(&SaMad::decode(&s.encode()).unwrap()).unwrap() {
            got = Some(m);
        }
    }
    let m = got.unwrap();
    let back: Vec<NodeRecord> = m
        .records()
        .map(|b| NodeRecord::decode(b).unwrap())
        .collect();
    assert_eq!(back, recs);
    // A record of the wrong size is refused by the raw builder.
    let err = table_payload(8, [&[0u8; 8][..], &[0u8; 7][..]]).unwrap_err();
    assert!(matches!(
        err,
        SaError::RecordSize {
            index: 1,
            len: 7,
            size: 8,
            ..
        }
    ));
}

fn three_segments() -> Vec<SaMad> {
    let t = SaMad::new(Method::GET_TABLE_RESP, SaAttributeId::PATH_RECORD, 42);
    RmppSegments::new(&t, &[5u8; 450]).unwrap().collect()
}

#[test]
fn reassembler_errors() {
    let s = three_segments();
    // Out of order: 2 before 1.
    let mut r = RmppReassembler::default();
    assert_eq!(
        r.push(&s[1]),
        Err(SaError::RmppOutOfOrder {
            expected: 1,
            got: 2
        })
    );
    // Still usable: 1, then 3 (lost 2), then 1 again (duplicate), then 2, 3.
    assert!(matches!(
        r.push(&s[0]),
        Ok(RmppProgress::Incomplete { last: 1 })
    ));
    assert_eq!(
        r.push(&s[2]),
        Err(SaError::RmppOutOfOrder {
            expected: 2,
            got: 3
        })
    );
    assert_eq!(
        r.push(&s[0]),
        Err(SaError::RmppDuplicate {
            seg_num: 1,
            expected: 2
        })
    );
    assert!(matches!(
        r.push(&s[1]),
        Ok(RmppProgress::Incomplete { last: 2 })
    ));
    assert!(matches!(r.push(&s[2]), Ok(RmppProgress::Complete(_))));
    // Foreign TID.
    let mut r = RmppReassembler::default();
    r.push(&s[0]).unwrap();
    let mut other = s[1];
    other.header.tid = 43;
    assert_eq!(
        r.push(&other),
        Err(SaError::RmppTidMismatch {
            expected: 42,
            got: 43
        })
    );
    // Oversize, known from the first segment's PayloadLength.
    let mut r = RmppReassembler::new(400);
    assert_eq!(
        r.push(&s[0]),
        Err(SaError::RmppOversize {
            limit: 400,
            got: 450
        })
    );
    // Oversize without an announced total.
    let mut r = RmppReassembler::new(300);
    let mut f = s[0];
    f.rmpp.data2 = 0;
    r.push(&f).unwrap();
    assert_eq!(
        r.push(&s[1]),
        Err(SaError::RmppOversize {
            limit: 300,
            got: 400
        })
    );
    // First flag missing on segment 1.
    let mut r = RmppReassembler::default();
    let mut nf = s[0];
    nf.rmpp.flags = RmppFlags::ACTIVE;
    assert_eq!(
        r.push(&nf),
        Err(SaError::RmppBadFirst {
            seg_num: 1,
            first: false
        })
    );
    // Last segment disagreeing with the announced total.
    let mut r = RmppReassembler::default();
    r.push(&s[0]).unwrap();
    r.push(&s[1]).unwrap();
    let mut l = s[2];
    l.rmpp.data2 = 21;
    assert!(matches!(
        r.push(&l),
        Err(SaError::RmppBadPayloadLength { seg_num: 3, .. })
    ));
    // Last PayloadLength out of 20..=220.
    let mut l2 = s[2];
    l2.rmpp.data2 = 221;
    let mut r = RmppReassembler::default();
    r.push(&s[0]).unwrap();
    r.push(&s[1]).unwrap();
    assert!(matches!(
        r.push(&l2),
        Err(SaError::RmppBadPayloadLength { .. })
    ));
    // STOP / ABORT from the sender.
    let mut ab = s[0];
    ab.rmpp.rmpp_type = RmppType::ABORT;
    ab.rmpp.status = RmppHeader::STATUS_UNSPECIFIED;
    assert_eq!(
        RmppReassembler::default().push(&ab),
        Err(SaError::RmppAborted {
            rmpp_type: 4,
            status: 127
        })
    );
    // An ACK is not data.
    let ack = s[0].rmpp_ack(5);
    assert!(matches!(
        RmppReassembler::default().push(&ack),
        Err(SaError::RmppNotData { .. })
    ));
}

#[test]
fn plain_mad_is_a_whole_message_and_acks_are_well_formed() {
    let mut m = SaMad::new(Method::GET_RESP, SaAttributeId::PATH_RECORD, 3);
    m.set_record(&PathRecord {
        dlid: 9,
        ..PathRecord::default()
    })
    .unwrap();
    let mut r = RmppReassembler::default();
    match r.push(&m).unwrap() {
        RmppProgress::Complete(msg) => {
            assert_eq!(msg.payload.len(), 200);
            assert_eq!(PathRecord::decode(&msg.payload).unwrap().dlid, 9);
        }
        p => panic!("{p:?}"),
    }
    let s = three_segments();
    let a = s[1].rmpp_ack(3);
    assert_eq!(
        a.method(),
        Method(0x12),
        "R bit flipped: GetTableResp -> GetTable"
    );
    assert_eq!(a.rmpp.rmpp_type, RmppType::ACK);
    assert_eq!(a.rmpp.seg_num(), 2);
    assert_eq!(a.rmpp.new_window_last(), 3);
    assert_eq!(a.tid(), 42);
}

#[test]
fn constants_methods_statuses_and_ids() {
    assert_eq!(SA_CLASS.0, 0x03);
    assert_eq!(SA_CLASS_VERSION, 2);
    assert_eq!(SA_HEADER_SIZE, 56);
    assert_eq!(SA_DATA_SIZE, 200);
    for (m, v, n) in [
        (Method::GET, 0x01, "Get"),
        (Method::SET, 0x02, "Set"),
        (Method::GET_RESP, 0x81, "GetResp"),
        (Method::REPORT, 0x06, "Report"),
        (Method::REPORT_RESP, 0x86, "ReportResp"),
        (Method::GET_TABLE, 0x12, "GetTable"),
        (Method::GET_TABLE_RESP, 0x92, "GetTableResp"),
        (Method::GET_MULTI, 0x14, "GetMulti"),
        (Method::GET_MULTI_RESP, 0x94, "GetMultiResp"),
        (Method::GET_TRACE_TABLE, 0x13, "GetTraceTable"),
        (Method::DELETE, 0x15, "Delete"),
        (Method::DELETE_RESP, 0x95, "DeleteResp"),
    ] {
        assert_eq!(m.0, v);
        assert_eq!(m.name(), Some(n));
    }
    for (s, v) in [
        (SaStatus::BAD_VERSION, 0x0004),
        (SaStatus::METHOD_NOT_SUPPORTED, 0x0008),
        (SaStatus::METHOD_ATTR_NOT_SUPPORTED, 0x000C),
        (SaStatus::INVALID_ATTRIBUTE, 0x001C),
        (SaStatus::ERR_NO_RESOURCES, 0x0100),
        (SaStatus::ERR_REQ_INVALID, 0x0200),
        (SaStatus::ERR_NO_RECORDS, 0x0300),
        (SaStatus::ERR_TOO_MANY_RECORDS, 0x0400),
        (SaStatus::ERR_REQ_INVALID_GID, 0x0500),
        (SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS, 0x0600),
        (SaStatus::ERR_REQ_DENIED, 0x0700),
    ] {
        assert_eq!(s.0, v);
        assert!(s.name().is_some());
    }
    assert_eq!(SaStatus::ERR_NO_RECORDS.class_code(), 3);
    assert_eq!(SaStatus::INVALID_ATTRIBUTE.invalid_field_code(), 7);
    assert_eq!(format!("{}", SaStatus(0x0300)), "ERR_NO_RECORDS(0x0300)");
    assert_eq!(SaAttributeId::ALL.len(), 21);
    for id in SaAttributeId::ALL {
        assert!(id.name().is_some());
    }
    assert_eq!(SaAttributeId::PATH_RECORD.0, 0x0035);
    assert_eq!(SaAttributeId::INFORM_INFO_RECORD.0, 0x00F3);
    assert_eq!(
        SaAttributeId::MULTI_PATH_RECORD.name(),
        Some("MultiPathRecord")
    );
    assert_eq!(
        format!("{:?}", SaAttributeId(0x0038)),
        "MCMemberRecord(0x0038)"
    );
}

#[test]
fn versions_are_checked_separately() {
    let mut b = SaMad::new(Method::GET, SaAttributeId::NODE_RECORD, 1).encode();
    b[2] = 1;
    let m = SaMad::decode(&b).expect("decodes so the SA can answer BAD_VERSION");
    assert_eq!(
        m.check_version(),
        Err(SaError::BadVersion {
            base_version: 1,
            class_version: 1
        })
    );
    let r = m.response(Method::GET_RESP, SaStatus::BAD_VERSION);
    assert_eq!(r.check_version(), Ok(()));
    assert_eq!(r.status(), SaStatus::BAD_VERSION);
    assert_eq!(r.tid(), 1);
}

#[test]
fn query_carries_the_template_and_mask() {
    let tmpl = PathRecord {
        dlid: 5,
        slid: 7,
        numb_path: 1,
        ..PathRecord::default()
    };
    let mask = PathRecord::DLID | PathRecord::SLID | PathRecord::NUMB_PATH;
    let q = SaMad::query(Method::GET, 77, &tmpl, mask).unwrap();
    let d = SaMad::decode(&q.encode()).unwrap();
    assert_eq!(d.attribute_id(), SaAttributeId::PATH_RECORD);
    assert_eq!(d.component_mask, mask);
    assert_eq!(d.attribute_offset, 8);
    let p: PathRecord = d.record().unwrap();
    assert_eq!(p, tmpl);
    let path = PathRecord {
        dlid: 5,
        slid: 7,
        numb_path: 1,
        hop_limit: 3,
        ..PathRecord::default()
    };
    assert!(path.matches(&p, mask));
    assert!(!path.matches(&p, mask | PathRecord::HOP_LIMIT));
}

#[test]
fn component_mask_helpers() {
    let m = ComponentMask::component(3) | ComponentMask::component(10);
    assert!(m.has(3) && m.has(10) && !m.has(4));
    assert!(m.contains(ComponentMask::component(3)));
    assert!(m.intersects(ComponentMask::component(10) | ComponentMask::component(1)));
    assert_eq!(m.iter().collect::<Vec<_>>(), vec![3, 10]);
    assert_eq!(ComponentMask::component(64), ComponentMask::NONE);
    assert!(!m.has(200));
    assert_eq!(
        m.without(ComponentMask::component(3)),
        ComponentMask::component(10)
    );
    assert!(ComponentMask::NONE.is_empty());
}
