//! Feeds arbitrary bytes, as one `read()` of a umad descriptor returned them (56-byte
//! header + MAD), to ibsm-umad's `decode_read`. Invariants: only a read shorter than the
//! header is an error; "no packet" only for a short EAGAIN header; a decoded MAD holds
//! exactly the bytes after the header (zero-filled); encode -> decode gives it back;
//! the SMP decode of the MAD never panics.
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
            if let Ok(smp) = r.smp() {
                assert_eq!(ibsm_mad::Smp::decode(&smp.encode()), Ok(smp));
            }
        }
    }
});
