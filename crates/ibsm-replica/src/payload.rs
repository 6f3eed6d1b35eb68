//! Decoding of every body a peer can send to the Raft service, without a server.
//!
//! Why a module of its own: the Raft service ([`crate::network`]) decodes untrusted
//! bytes (bincode v1) inside async tonic handlers that need a running `Raft`. This
//! module runs the same decoders ([`crate::network`]'s `from_payload` for the
//! `RaftPayload` bodies, its `decode_bytes` for the snapshot chunk's vote and meta) on
//! plain bytes, so they can be unit-tested and fuzzed (`fuzz/fuzz_targets/
//! raft_payload.rs`) and every refusal is a [`WireError`], never a panic. [`Decoded::
//! encode`] is the sender's encoding, for round trips.

use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::{BasicNode, SnapshotMeta, Vote};

use crate::network::{decode_bytes, from_payload, ForwardRequest, WireError, FORMAT_BINCODE_V1};
use crate::state::{Command, FabricState};
use crate::{pb, NodeId, TypeConfig};

/// Which body the bytes are (which RPC field they arrived in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `Raft/Vote` request payload.
    VoteRequest,
    /// `Raft/AppendEntries` request payload (entries carry [`Command`]s).
    AppendEntriesRequest,
    /// `Raft/Forward` request payload.
    ForwardRequest,
    /// `SnapshotChunk.vote` of the first chunk.
    SnapshotVote,
    /// `SnapshotChunk.meta` of the first chunk.
    SnapshotMeta,
    /// The reassembled snapshot data: a [`FabricState`].
    SnapshotData,
    /// One [`Command`] (a log entry's application payload).
    Command,
}

impl Body {
    /// Every body, in a fixed order (fuzzing picks one by index).
    pub const ALL: [Body; 7] = [
        Body::VoteRequest,
        Body::AppendEntriesRequest,
        Body::ForwardRequest,
        Body::SnapshotVote,
        Body::SnapshotMeta,
        Body::SnapshotData,
        Body::Command,
    ];
}

/// A decoded body.
#[derive(Debug, Clone)]
pub enum Decoded {
    VoteRequest(VoteRequest<NodeId>),
    AppendEntriesRequest(AppendEntriesRequest<TypeConfig>),
    ForwardRequest(ForwardRequest),
    SnapshotVote(Vote<NodeId>),
    SnapshotMeta(SnapshotMeta<NodeId, BasicNode>),
    SnapshotData(FabricState),
    Command(Command),
}

/// Decode `bytes` as `body`, exactly as the service does. For the three
/// `RaftPayload` bodies the bytes are the payload field and `format` its format tag
/// (anything but [`FORMAT_BINCODE_V1`] is refused); the others carry no tag and ignore
/// `format`.
pub fn decode(body: Body, format: u32, bytes: &[u8]) -> Result<Decoded, WireError> {
    let payload = || pb::RaftPayload {
        format,
        payload: bytes.to_vec(),
    };
    Ok(match body {
        Body::VoteRequest => Decoded::VoteRequest(from_payload("vote request", &payload())?),
        Body::AppendEntriesRequest => {
            Decoded::AppendEntriesRequest(from_payload("append entries request", &payload())?)
        }
        Body::ForwardRequest => {
            Decoded::ForwardRequest(from_payload("forward request", &payload())?)
        }
        Body::SnapshotVote => Decoded::SnapshotVote(decode_bytes("snapshot vote", bytes)?),
        Body::SnapshotMeta => Decoded::SnapshotMeta(decode_bytes("snapshot meta", bytes)?),
        Body::SnapshotData => Decoded::SnapshotData(decode_bytes("snapshot data", bytes)?),
        Body::Command => Decoded::Command(decode_bytes("command", bytes)?),
    })
}

impl Decoded {
    /// The bytes a sender puts on the wire for this value (the payload field, or the
    /// raw chunk field). `decode` of them gives an equal value back.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let enc = |what: &'static str, r: bincode::Result<Vec<u8>>| {
            r.map_err(|source| WireError::Encode { what, source })
        };
        match self {
            Decoded::VoteRequest(v) => enc("vote request", bincode::serialize(v)),
            Decoded::AppendEntriesRequest(v) => {
                enc("append entries request", bincode::serialize(v))
            }
            Decoded::ForwardRequest(v) => enc("forward request", bincode::serialize(v)),
            Decoded::SnapshotVote(v) => enc("snapshot vote", bincode::serialize(v)),
            Decoded::SnapshotMeta(v) => enc("snapshot meta", bincode::serialize(v)),
            Decoded::SnapshotData(v) => enc("snapshot data", bincode::serialize(v)),
            Decoded::Command(v) => enc("command", bincode::serialize(v)),
        }
    }

    /// Which body this is.
    pub fn body(&self) -> Body {
        match self {
            Decoded::VoteRequest(_) => Body::VoteRequest,
            Decoded::AppendEntriesRequest(_) => Body::AppendEntriesRequest,
            Decoded::ForwardRequest(_) => Body::ForwardRequest,
            Decoded::SnapshotVote(_) => Body::SnapshotVote,
            Decoded::SnapshotMeta(_) => Body::SnapshotMeta,
            Decoded::SnapshotData(_) => Body::SnapshotData,
            Decoded::Command(_) => Body::Command,
        }
    }

    /// Decode what [`Decoded::encode`] wrote, as format [`FORMAT_BINCODE_V1`].
    pub fn decode_encoded(bytes: &[u8], body: Body) -> Result<Decoded, WireError> {
        decode(body, FORMAT_BINCODE_V1, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ConfigChange, LidRange, Op};
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

    fn update() -> Command {
        Command::Update {
            epoch: 3,
            ops: vec![Op::SetGuid2Lid {
                port_guid: 0x0002_c900_0000_0001,
                range: LidRange {
                    min_lid: 4,
                    max_lid: 7,
                },
            }],
        }
    }

    /// One value of every body, as peers of this release send them.
    fn samples() -> Vec<Decoded> {
        let append = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(2, 1),
            prev_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
            entries: vec![
                Entry {
                    log_id: LogId::new(CommittedLeaderId::new(2, 1), 10),
                    payload: EntryPayload::Normal(update()),
                },
                Entry {
                    log_id: LogId::new(CommittedLeaderId::new(2, 1), 11),
                    payload: EntryPayload::Blank,
                },
            ],
            leader_commit: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
        };
        let mut state = FabricState::default();
        state.apply(&Command::ClaimMastership {
            epoch: 3,
            sm_guid: 0x10,
        });
        state.apply(&update());
        vec![
            Decoded::VoteRequest(VoteRequest::new(
                Vote::new(4, 2),
                Some(LogId::new(CommittedLeaderId::new(3, 1), 7)),
            )),
            Decoded::AppendEntriesRequest(append),
            Decoded::ForwardRequest(ForwardRequest::AddMember {
                node_id: 3,
                addr: "10.0.0.3:50051".into(),
            }),
            Decoded::ForwardRequest(ForwardRequest::Write(update())),
            Decoded::SnapshotVote(Vote::new_committed(5, 1)),
            Decoded::SnapshotMeta(SnapshotMeta {
                last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 11)),
                last_membership: Default::default(),
                snapshot_id: "2-1-11".into(),
            }),
            Decoded::SnapshotData(state),
            Decoded::Command(Command::Config(ConfigChange::Set {
                key: "partition/x".into(),
                value: "1".into(),
            })),
            Decoded::Command(Command::ClaimMastership {
                epoch: 4,
                sm_guid: 0x0002_c900_0000_0002,
            }),
            Decoded::ForwardRequest(ForwardRequest::YieldLeadership { to: 2 }),
        ]
    }

    #[test]
    fn every_body_round_trips() {
        for v in samples() {
            let bytes = v.encode().expect("encodes");
            let back = Decoded::decode_encoded(&bytes, v.body()).expect("decodes");
            assert_eq!(back.body(), v.body());
            assert_eq!(back.encode().expect("encodes"), bytes, "{v:?}");
        }
    }

    /// The raft_payload fuzz seeds are these samples as this release encodes them
    /// (first byte: the body's index in [`Body::ALL`], second: 0 = right format tag).
    /// A difference is a wire format change between releases: look at it, then
    /// rewrite the seeds with `IBSM_BLESS_FUZZ_SEEDS=1`.
    #[test]
    fn fuzz_seeds_are_this_releases_encoding() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/raft_payload");
        let bless = std::env::var_os("IBSM_BLESS_FUZZ_SEEDS").is_some();
        for (i, v) in samples().iter().enumerate() {
            let index = Body::ALL
                .iter()
                .position(|b| *b == v.body())
                .expect("listed");
            let mut seed = vec![u8::try_from(index).expect("few bodies"), 0];
            seed.extend(v.encode().expect("encodes"));
            let path = dir.join(format!("seed-{i}-{:?}", v.body()));
            if bless {
                std::fs::create_dir_all(&dir).expect("corpus dir");
                std::fs::write(&path, &seed).expect("write seed");
            }
            let on_disk =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                on_disk,
                seed,
                "{} differs from this release",
                path.display()
            );
        }
    }

    #[test]
    fn command_decodes_to_the_same_value() {
        let bytes = Decoded::Command(update()).encode().expect("encodes");
        match decode(Body::Command, FORMAT_BINCODE_V1, &bytes) {
            Ok(Decoded::Command(c)) => assert_eq!(c, update()),
            other => panic!("not the command back: {other:?}"),
        }
    }

    #[test]
    fn wrong_format_and_garbage_are_typed_errors() {
        let bytes = Decoded::Command(update()).encode().expect("encodes");
        assert!(matches!(
            decode(Body::ForwardRequest, 2, &bytes),
            Err(WireError::Format(2))
        ));
        for body in Body::ALL {
            let e = decode(body, FORMAT_BINCODE_V1, &[0xff; 3]).expect_err("garbage");
            assert!(matches!(e, WireError::Decode { .. }), "{body:?}: {e}");
        }
        // A length prefix far beyond the input is refused, not allocated.
        let mut huge = vec![2u8, 0, 0, 0, 0, 0, 0, 0];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(Body::Command, FORMAT_BINCODE_V1, &huge).is_err());
    }
}
