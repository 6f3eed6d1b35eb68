//! Feeds arbitrary bytes to every Raft body decoder a peer's bytes reach
//! (`ibsm_replica::payload`: vote, append-entries and forward payloads, the snapshot
//! chunk's vote and meta, the snapshot's FabricState, a Command). The first byte picks
//! the body, the second whether the format tag is right. Invariants: a wrong format tag
//! is always refused; whatever decodes re-encodes to bytes that decode to the same
//! bytes again (a fixed point); a decoded Command applied to a state never panics and a
//! refused one changes nothing.
#![no_main]

use ibsm_replica::network::FORMAT_BINCODE_V1;
use ibsm_replica::payload::{decode, Body, Decoded};
use ibsm_replica::{Command, FabricState, Outcome};
use libfuzzer_sys::fuzz_target;

fn apply(cmd: &Command, state: &FabricState) {
    let mut s = state.clone();
    if let Outcome::Refused(_) = s.apply(cmd) {
        assert_eq!(&s, state, "a refused command changed the state");
    }
}

fuzz_target!(|data: &[u8]| {
    let [pick, tag, bytes @ ..] = data else {
        return;
    };
    let body = Body::ALL[usize::from(*pick) % Body::ALL.len()];
    let format = if tag & 1 == 0 {
        FORMAT_BINCODE_V1
    } else {
        u32::from(*tag)
    };
    let tagged = matches!(
        body,
        Body::VoteRequest | Body::AppendEntriesRequest | Body::ForwardRequest
    );
    let Ok(v) = decode(body, format, bytes) else {
        return;
    };
    assert!(
        !tagged || format == FORMAT_BINCODE_V1,
        "format {format} accepted"
    );
    assert_eq!(v.body(), body);
    let once = v.encode().expect("a decoded value encodes");
    let back = Decoded::decode_encoded(&once, body).expect("re-encoded bytes decode");
    assert_eq!(back.encode().expect("encodes"), once, "not a fixed point");
    let state = FabricState {
        epoch: 3,
        ..FabricState::default()
    };
    match &v {
        Decoded::Command(c) => apply(c, &state),
        Decoded::ForwardRequest(ibsm_replica::network::ForwardRequest::Write(c)) => {
            apply(c, &state)
        }
        Decoded::SnapshotData(s) => {
            if let Decoded::SnapshotData(b) = &back {
                assert_eq!(b, s);
            }
        }
        Decoded::AppendEntriesRequest(a) => {
            for e in &a.entries {
                if let openraft::EntryPayload::Normal(c) = &e.payload {
                    apply(c, &state);
                }
            }
        }
        _ => {}
    }
});
