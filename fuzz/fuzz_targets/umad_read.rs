//! Feeds arbitrary bytes, as one `read()` of a umad descriptor returned them (56-byte
//! header + MAD), to ibsm-umad's `decode_read`. Invariants: only a read shorter than the
//! header is an error; "no packet" only for a short EAGAIN header; a decoded MAD holds
//! exactly the bytes after the header (zero-filled); encode -> decode gives it back;
//! the SMP decode of the MAD never panics; the source address maps to a `MadAddress`
//! and back to the same LID, QP, SL and GRH.
#![no_main]

use ibsm_umad::{decode_read, ReadError, UMAD_HDR_SIZE, UMAD_READ_SIZE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_read(data) {
        Err(ReadError::Short { len }) => {
            assert_eq!(len, data.len());
            assert!(len < UMAD_HDR_SIZE);
        }
        Ok(None) => assert!(data.len() < UMAD_HDR_SIZE + 24),
        Ok(Some(r)) => {
            let n = data.len().min(UMAD_READ_SIZE);
            assert_eq!(&r.mad[..n - UMAD_HDR_SIZE], &data[UMAD_HDR_SIZE..n]);
            assert!(r.mad[n - UMAD_HDR_SIZE..].iter().all(|&b| b == 0));
            assert_eq!(r.mgmt_class(), r.mad[1]);
            let bytes = r.encode();
            assert_eq!(decode_read(&bytes), Ok(Some(r.clone())));
            let from = r.source_address();
            let back = ibsm_umad::Address::from(&from);
            assert_eq!((back.lid, back.qpn, back.sl), (r.source.lid, r.source.qpn, r.source.sl));
            assert_eq!(back.grh_present, r.source.grh_present);
            if r.is_smp() || r.source.qkey != 0 {
                assert_eq!(from.qkey, r.source.qkey);
            } else {
                assert_eq!(from.qkey, ibsm_mad::GSI_QKEY);
            }
            if let Ok(smp) = r.smp() {
                assert_eq!(ibsm_mad::Smp::decode(&smp.encode()), Ok(smp));
            }
        }
    }
});
