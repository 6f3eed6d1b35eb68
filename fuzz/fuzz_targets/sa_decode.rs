//! Feeds arbitrary bytes to the SA MAD decoder, every SA record decoder and the RMPP
//! helpers: what decodes must re-encode to a value that decodes equal, a record must
//! match itself under every mask, segmenting any payload and reassembling it must
//! give the payload back, and the reassembler must survive any sequence of MADs.
#![no_main]

use ibsm_mad::sa::*;
use ibsm_mad::{Method, MAD_SIZE};
use libfuzzer_sys::fuzz_target;

fn rec<R: SaRecord + PartialEq + core::fmt::Debug>(data: &[u8], other: &[u8]) {
    let Ok(r) = R::decode(data) else { return };
    let mut buf = vec![0u8; R::SIZE];
    r.encode_into(&mut buf).expect("SIZE bytes fit");
    assert_eq!(R::decode(&buf).as_ref(), Ok(&r), "{}", R::NAME);
    assert!(r.matches(&r, ComponentMask::ALL), "{}", R::NAME);
    if let Ok(t) = R::decode(other) {
        let mask = ComponentMask(u64::from_le_bytes(
            other.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]),
        ));
        // Matching is symmetric and monotone in the mask.
        assert_eq!(r.matches(&t, mask), t.matches(&r, mask), "{}", R::NAME);
        if r.matches(&t, mask) {
            assert!(r.matches(&t, ComponentMask(mask.0 & (mask.0 >> 1))));
        }
    }
}

fn records(d: &[u8], other: &[u8]) {
    rec::<ClassPortInfo>(d, other);
    rec::<NodeRecord>(d, other);
    rec::<PortInfoRecord>(d, other);
    rec::<SwitchInfoRecord>(d, other);
    rec::<LinkRecord>(d, other);
    rec::<SmInfoRecord>(d, other);
    rec::<GuidInfoRecord>(d, other);
    rec::<PKeyTableRecord>(d, other);
    rec::<SlToVlMappingTableRecord>(d, other);
    rec::<VlArbitrationTableRecord>(d, other);
    rec::<LinearForwardingTableRecord>(d, other);
    rec::<MulticastForwardingTableRecord>(d, other);
    rec::<PathRecord>(d, other);
    rec::<MultiPathRecord>(d, other);
    rec::<McMemberRecord>(d, other);
    rec::<ServiceRecord>(d, other);
    rec::<InformInfo>(d, other);
    rec::<InformInfoRecord>(d, other);
    rec::<SaNotice>(d, other);
}

fuzz_target!(|data: &[u8]| {
    // The whole MAD.
    if let Ok(m) = SaMad::decode(data) {
        let enc = m.encode();
        assert_eq!(SaMad::decode(&enc), Ok(m));
        let mut want = [0u8; MAD_SIZE];
        want.copy_from_slice(&data[..MAD_SIZE]);
        want[6..8].fill(0);
        want[18..20].fill(0);
        want[46..48].fill(0);
        assert_eq!(enc, want);
        let _ = (m.check_version(), m.response(Method::GET_RESP, SaStatus::SUCCESS));
        let _ = m.rmpp_ack(m.rmpp.seg_num());
        let _: Vec<&[u8]> = table_records(&m.data, m.attribute_offset).collect();
    }
    // Records from the SA data position and from the raw input.
    let tail = data.get(56..).unwrap_or(&[]);
    records(tail, data);
    records(data, tail);

    // Segment the input as a table payload and reassemble it.
    let tmpl = SaMad::new(Method::GET_TABLE_RESP, SaAttributeId::NODE_RECORD, 7);
    let segs = RmppSegments::new(&tmpl, data).expect("small payloads fit");
    let mut r = RmppReassembler::new(data.len().max(200));
    let mut done = false;
    for s in segs {
        assert!(!done, "segments after completion");
        let s = SaMad::decode(&s.encode()).expect("own segment decodes");
        match r.push(&s).expect("own segments reassemble") {
            RmppProgress::Incomplete { .. } => {}
            RmppProgress::Complete(m) => {
                assert_eq!(m.payload, data);
                done = true;
            }
        }
    }
    assert!(done);

    // Any sequence of 256-byte MADs (SA class forced) through one reassembler.
    let mut r = RmppReassembler::new(1000);
    for chunk in data.chunks_exact(MAD_SIZE) {
        let mut b = [0u8; MAD_SIZE];
        b.copy_from_slice(chunk);
        b[1] = 0x03;
        let m = SaMad::decode(&b).expect("SA class, 256 bytes");
        if let Ok(RmppProgress::Complete(msg)) = r.push(&m) {
            assert!(msg.payload.len() <= 1000);
        }
    }
});
