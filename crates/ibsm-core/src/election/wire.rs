//! The edge between the election's [`SmInfoMsg`] and SMPs on the wire.
//!
//! The election works on small typed messages (so the model checker can explore them
//! cheaply); this module decodes the SMInfo/Notice SMPs that reach an SM into those
//! messages and encodes what the election wants to send back into SMPs. It is the ONE
//! conversion: the daemon (`ibsmd`) and the fabric simulation (`ibsm-testkit`) both use
//! it, so what the simulator proves about the election holds for the bytes the daemon
//! puts on the wire.
//!
//! Responses are built from the request that arrived (IBA 14.2.2: same TID, paths and
//! HopPointer, D bit set, Method GetResp), which is what ibsim and the embedded
//! simulator route back.
//!
//! Nothing here panics on input: every decode or encode problem is a [`WireError`]
//! that says what was wrong with which SMP.

use ibsm_mad::{
    AttributeId, DirectedRoute, MadError, Method, Notice, NoticeType, ProducerType, Smp,
    SmpAttribute, SmpRoute, Trap144, TrapDetails,
};

use super::types::{DrRoute, SmInfo, SmInfoMsg, SmRoute, SmState};

/// Why an SMP could not be converted to or from an [`SmInfoMsg`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The SMP is not SMInfo (Get/Set/GetResp) nor Notice (Trap/TrapRepress).
    #[error("SMP (tid {tid:#x}) with attribute {attr_id:?} and method {method:?} is not for the election")]
    NotForElection {
        /// Transaction ID.
        tid: u64,
        /// AttributeID.
        attr_id: AttributeId,
        /// Method.
        method: Method,
    },
    /// The attribute payload does not decode (for SMInfo: reserved SMState 4..=15).
    #[error("SMP (tid {tid:#x}, method {method:?}): {what} payload does not decode: {source}")]
    Payload {
        /// Transaction ID.
        tid: u64,
        /// Method.
        method: Method,
        /// Which attribute.
        what: &'static str,
        /// The codec's error.
        source: MadError,
    },
    /// A SubnTrap(Notice) that is not trap 144 (the election handles only 144).
    #[error("SubnTrap (tid {tid:#x}) carries trap {trap:?}, not 144; it is not for the election")]
    NotTrap144 {
        /// Transaction ID.
        tid: u64,
        /// Trap number, `None` for a vendor-specific or malformed notice.
        trap: Option<u16>,
    },
    /// A directed route the election asked for cannot be put in an SMP header.
    #[error("cannot address {dest}: {source}")]
    Route {
        /// The route (rendered).
        dest: String,
        /// The codec's error.
        source: MadError,
    },
    /// [`encode_request`] was given a response, or [`encode_response`] a request.
    #[error("{msg} cannot be encoded as a {wanted}")]
    WrongKind {
        /// What was given (`Get`, `GetResp`...).
        msg: &'static str,
        /// "request" or "response".
        wanted: &'static str,
    },
}

fn msg_name(msg: &SmInfoMsg) -> &'static str {
    match msg {
        SmInfoMsg::Get { .. } => "SubnGet(SMInfo)",
        SmInfoMsg::Set { .. } => "SubnSet(SMInfo)",
        SmInfoMsg::GetResp { .. } => "SubnGetResp(SMInfo)",
        SmInfoMsg::Trap144 { .. } => "SubnTrap(Notice 144)",
        SmInfoMsg::TrapRepress { .. } => "SubnTrapRepress(Notice)",
    }
}

/// The election's route of an SMP that arrived: a directed route carries its paths
/// (so the election can derive a route back for a new request); a LID-routed one
/// carries `lid_hint` (the trap's IssuerLID, the packet's SLID, or 0 when the
/// transport does not say).
pub fn arrival_route(smp: &Smp, lid_hint: u16) -> SmRoute {
    match &smp.route {
        SmpRoute::Directed(dr) => {
            let n = usize::from(dr.hop_cnt).min(ibsm_mad::MAX_HOPS);
            SmRoute::Directed(DrRoute {
                hop_cnt: dr.hop_cnt,
                initial_path: dr.initial_path.get(..=n).unwrap_or(&[]).to_vec(),
                return_path: dr.return_path.get(..=n).unwrap_or(&[]).to_vec(),
                dr_slid: dr.dr_slid,
                dr_dlid: dr.dr_dlid,
            })
        }
        SmpRoute::Lid => SmRoute::Lid(lid_hint),
    }
}

fn sm_info_of(smp: &Smp) -> Result<SmInfo, WireError> {
    smp.attribute::<SmInfo>()
        .map_err(|source| WireError::Payload {
            tid: smp.tid,
            method: smp.method,
            what: "SMInfo",
            source,
        })
}

/// Decodes an SMP the election cares about: SubnGet/SubnSet/SubnGetResp(SMInfo),
/// SubnTrap(Notice) trap 144 and SubnTrapRepress(Notice).
///
/// A SubnGet whose payload does not decode still decodes (as an all-zero NOTACTIVE
/// SMInfo): a Get's payload is optional and OpenSM sends zeros; it must be answered.
pub fn decode(smp: &Smp) -> Result<SmInfoMsg, WireError> {
    match (smp.attr_id, smp.method) {
        (AttributeId::SM_INFO, Method::GET) => Ok(SmInfoMsg::Get {
            tid: smp.tid,
            m_key: smp.m_key,
            info: sm_info_of(smp).unwrap_or(SmInfo {
                guid: 0,
                sm_key: 0,
                act_count: 0,
                priority: 0,
                sm_state: SmState::NotActive,
            }),
        }),
        (AttributeId::SM_INFO, Method::SET) => Ok(SmInfoMsg::Set {
            tid: smp.tid,
            m_key: smp.m_key,
            attr_mod: smp.attr_mod,
            info: sm_info_of(smp)?,
        }),
        (AttributeId::SM_INFO, Method::GET_RESP) => Ok(SmInfoMsg::GetResp {
            tid: smp.tid,
            status: smp.status,
            attr_mod: smp.attr_mod,
            info: sm_info_of(smp)?,
        }),
        (AttributeId::NOTICE, Method::TRAP) => {
            let notice = smp
                .attribute::<Notice>()
                .map_err(|source| WireError::Payload {
                    tid: smp.tid,
                    method: smp.method,
                    what: "Notice",
                    source,
                })?;
            match notice.trap_number() {
                Some(144) => Ok(SmInfoMsg::Trap144 {
                    tid: smp.tid,
                    issuer_lid: notice.issuer_lid,
                    issuer_guid: 0,
                }),
                trap => Err(WireError::NotTrap144 { tid: smp.tid, trap }),
            }
        }
        (AttributeId::NOTICE, Method::TRAP_REPRESS) => Ok(SmInfoMsg::TrapRepress { tid: smp.tid }),
        (attr_id, method) => Err(WireError::NotForElection {
            tid: smp.tid,
            attr_id,
            method,
        }),
    }
}

/// [`decode`], for callers that only route: `None` when the SMP is not for the election
/// or does not decode (logged at debug level with the reason).
pub fn decode_for_election(smp: &Smp) -> Option<SmInfoMsg> {
    match decode(smp) {
        Ok(m) => Some(m),
        Err(err @ WireError::NotForElection { .. }) => {
            tracing::trace!(%err, "not an election SMP");
            None
        }
        Err(err) => {
            tracing::debug!(%err, "dropping an election SMP");
            None
        }
    }
}

/// Encodes a request the election originates (Get, Set, Trap144) for `dest`.
/// Returns the SMP and, for a LID-routed one, the destination LID.
pub fn encode_request(dest: &SmRoute, msg: &SmInfoMsg) -> Result<(Smp, Option<u16>), WireError> {
    if msg.is_response() {
        return Err(WireError::WrongKind {
            msg: msg_name(msg),
            wanted: "request",
        });
    }
    let (route, dlid) = match dest {
        SmRoute::Lid(l) => (SmpRoute::Lid, Some(*l)),
        SmRoute::Directed(dr) => {
            let end = usize::from(dr.hop_cnt) + 1;
            let hops = dr
                .initial_path
                .get(1..end)
                .ok_or_else(|| WireError::Route {
                    dest: dest.to_string(),
                    source: MadError::PathTooLong(usize::from(dr.hop_cnt)),
                })?;
            let route = DirectedRoute::outbound(hops).map_err(|source| WireError::Route {
                dest: dest.to_string(),
                source,
            })?;
            (SmpRoute::Directed(route), None)
        }
    };
    let smp = match msg {
        SmInfoMsg::Get { tid, m_key, info } => Smp {
            m_key: *m_key,
            ..Smp::request(
                Method::GET,
                route,
                AttributeId::SM_INFO,
                0,
                *tid,
                SmpAttribute::encode(info),
            )
        },
        SmInfoMsg::Set {
            tid,
            m_key,
            attr_mod,
            info,
        } => Smp {
            m_key: *m_key,
            ..Smp::request(
                Method::SET,
                route,
                AttributeId::SM_INFO,
                *attr_mod,
                *tid,
                SmpAttribute::encode(info),
            )
        },
        SmInfoMsg::Trap144 {
            tid, issuer_lid, ..
        } => {
            let details = TrapDetails::CapabilityMaskChanged(Trap144 {
                lid: *issuer_lid,
                change_flags: Trap144::CHANGE_SM_PRIORITY,
                ..Trap144::default()
            });
            let notice = Notice::generic(
                NoticeType::Informational,
                ProducerType::CA,
                *issuer_lid,
                &details,
            );
            Smp::request(
                Method::TRAP,
                route,
                AttributeId::NOTICE,
                0,
                *tid,
                SmpAttribute::encode(&notice),
            )
        }
        SmInfoMsg::GetResp { .. } | SmInfoMsg::TrapRepress { .. } => {
            return Err(WireError::WrongKind {
                msg: msg_name(msg),
                wanted: "request",
            })
        }
    };
    Ok((smp, dlid))
}

/// Encodes a response the election produced (GetResp, TrapRepress), from the request
/// it answers.
pub fn encode_response(request: &Smp, msg: &SmInfoMsg) -> Result<Smp, WireError> {
    match msg {
        SmInfoMsg::GetResp { status, info, .. } => {
            Ok(request.response().with_attribute(info).with_status(*status))
        }
        SmInfoMsg::TrapRepress { .. } => {
            let mut r = request.response();
            r.method = Method::TRAP_REPRESS;
            Ok(r)
        }
        _ => Err(WireError::WrongKind {
            msg: msg_name(msg),
            wanted: "response",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn get_round_trips_through_the_wire() {
        let dest = SmRoute::Directed(DrRoute::new(&[1, 3]));
        let info = SmInfo {
            guid: 0x1234,
            sm_key: 1,
            act_count: 7,
            priority: 9,
            sm_state: SmState::Standby,
        };
        let msg = SmInfoMsg::Get {
            tid: 42,
            m_key: 0,
            info,
        };
        let (smp, dlid) = encode_request(&dest, &msg).expect("encodes");
        assert_eq!(dlid, None);
        let back = Smp::decode(&smp.encode()).expect("decodes");
        assert_eq!(back.directed().map(|d| d.path().to_vec()), Some(vec![1, 3]));
        assert_eq!(decode(&back), Ok(msg));
        // The response keeps the request's paths and TID, with D set.
        let resp = encode_response(
            &back,
            &SmInfoMsg::GetResp {
                tid: 42,
                status: 0,
                attr_mod: 0,
                info,
            },
        )
        .expect("response");
        assert_eq!(resp.tid, 42);
        assert_eq!(resp.method, Method::GET_RESP);
        assert!(resp.directed().is_some_and(|d| d.direction));
        match decode(&Smp::decode(&resp.encode()).expect("decodes")) {
            Ok(SmInfoMsg::GetResp { info: got, .. }) => assert_eq!(got, info),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn trap144_carries_the_issuer_lid() {
        let msg = SmInfoMsg::Trap144 {
            tid: 5,
            issuer_lid: 17,
            issuer_guid: 0,
        };
        let (smp, dlid) = encode_request(&SmRoute::Lid(3), &msg).expect("encodes");
        assert_eq!(dlid, Some(3));
        let back = Smp::decode(&smp.encode()).expect("decodes");
        assert_eq!(decode(&back), Ok(msg));
        // TrapRepress answers it with the same TID and decodes as TrapRepress.
        let rep = encode_response(&back, &SmInfoMsg::TrapRepress { tid: 5 }).expect("repress");
        assert_eq!(rep.method, Method::TRAP_REPRESS);
        assert_eq!(
            decode(&Smp::decode(&rep.encode()).expect("decodes")),
            Ok(SmInfoMsg::TrapRepress { tid: 5 })
        );
    }

    #[test]
    fn other_smps_are_typed_errors() {
        let smp = Smp::request(
            Method::GET,
            SmpRoute::Lid,
            AttributeId::NODE_INFO,
            0,
            9,
            [0; 64],
        );
        assert!(matches!(
            decode(&smp),
            Err(WireError::NotForElection { tid: 9, .. })
        ));
        assert_eq!(decode_for_election(&smp), None);
        // A Set whose SMState is reserved (15) is rejected, not defaulted.
        let mut data = [0u8; 64];
        data[20] = 0x3f;
        let set = Smp::request(
            Method::SET,
            SmpRoute::Lid,
            AttributeId::SM_INFO,
            1,
            10,
            data,
        );
        assert!(matches!(
            decode(&set),
            Err(WireError::Payload { what: "SMInfo", .. })
        ));
        // A Get with the same payload is still answered (payload optional).
        let get = Smp {
            method: Method::GET,
            ..set
        };
        assert!(matches!(decode(&get), Ok(SmInfoMsg::Get { .. })));
        // Wrong direction.
        assert!(matches!(
            encode_request(&SmRoute::Lid(1), &SmInfoMsg::TrapRepress { tid: 1 }),
            Err(WireError::WrongKind { .. })
        ));
        assert!(matches!(
            encode_response(
                &get,
                &SmInfoMsg::Get {
                    tid: 1,
                    m_key: 0,
                    info: sm_info_of(&get).unwrap_or(SmInfo {
                        guid: 0,
                        sm_key: 0,
                        act_count: 0,
                        priority: 0,
                        sm_state: SmState::NotActive
                    })
                }
            ),
            Err(WireError::WrongKind { .. })
        ));
    }

    #[test]
    fn bad_routes_are_typed_errors() {
        // hop_cnt says 5 but the path holds 2 hops.
        let mut dr = DrRoute::new(&[1, 2]);
        dr.hop_cnt = 5;
        let msg = SmInfoMsg::Get {
            tid: 1,
            m_key: 0,
            info: SmInfo {
                guid: 1,
                sm_key: 0,
                act_count: 0,
                priority: 0,
                sm_state: SmState::Discovering,
            },
        };
        assert!(matches!(
            encode_request(&SmRoute::Directed(dr), &msg),
            Err(WireError::Route { .. })
        ));
        // 64 hops do not fit in an SMP.
        let long = DrRoute::new(&[1; 64]);
        assert!(matches!(
            encode_request(&SmRoute::Directed(long), &msg),
            Err(WireError::Route { .. })
        ));
    }

    fn state() -> impl Strategy<Value = SmState> {
        prop_oneof![
            Just(SmState::NotActive),
            Just(SmState::Discovering),
            Just(SmState::Standby),
            Just(SmState::Master),
        ]
    }

    prop_compose! {
        fn info()(guid in any::<u64>(), sm_key in any::<u64>(), act_count in any::<u32>(),
                  priority in 0u8..=15, state in state()) -> SmInfo {
            SmInfo { guid, sm_key, act_count, priority, sm_state: state }
        }
    }

    fn request() -> impl Strategy<Value = SmInfoMsg> {
        prop_oneof![
            (any::<u64>(), any::<u64>(), info()).prop_map(|(tid, m_key, info)| SmInfoMsg::Get {
                tid,
                m_key,
                info
            }),
            (any::<u64>(), any::<u64>(), any::<u32>(), info()).prop_map(
                |(tid, m_key, attr_mod, info)| SmInfoMsg::Set {
                    tid,
                    m_key,
                    attr_mod,
                    info
                }
            ),
            (any::<u64>(), any::<u16>()).prop_map(|(tid, issuer_lid)| SmInfoMsg::Trap144 {
                tid,
                issuer_lid,
                issuer_guid: 0
            }),
        ]
    }

    fn route() -> impl Strategy<Value = SmRoute> {
        prop_oneof![
            any::<u16>().prop_map(SmRoute::Lid),
            proptest::collection::vec(1u8..=36, 0..=ibsm_mad::MAX_HOPS)
                .prop_map(|p| SmRoute::Directed(DrRoute::new(&p))),
        ]
    }

    proptest! {
        /// Whatever bytes arrive, decoding answers (Ok or a typed error), never panics.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 256),
                               class in prop_oneof![Just(0x01u8), Just(0x81u8)],
                               method in prop_oneof![Just(1u8), Just(2), Just(5), Just(7), Just(0x81)],
                               attr in prop_oneof![Just(0x0020u16), Just(0x0002), any::<u16>()]) {
            let mut b = bytes;
            if let Some(v) = b.get_mut(0) { *v = 1; }
            if let Some(v) = b.get_mut(1) { *v = class; }
            if let Some(v) = b.get_mut(2) { *v = 1; }
            if let Some(v) = b.get_mut(3) { *v = method; }
            if let Some(s) = b.get_mut(16..18) { s.copy_from_slice(&attr.to_be_bytes()); }
            if let Ok(smp) = Smp::decode(&b) {
                let _ = decode(&smp);
                let _ = arrival_route(&smp, 7);
                let _ = decode_for_election(&smp);
            }
        }

        /// Requests survive the bytes: encode, serialize, parse, decode gives the message back.
        #[test]
        fn requests_round_trip(dest in route(), msg in request()) {
            let (smp, dlid) = encode_request(&dest, &msg).expect("valid routes encode");
            match &dest {
                SmRoute::Lid(l) => prop_assert_eq!(dlid, Some(*l)),
                SmRoute::Directed(dr) => {
                    prop_assert_eq!(dlid, None);
                    let back = Smp::decode(&smp.encode()).expect("parses");
                    let hops = back.directed().map(|d| d.path().to_vec());
                    prop_assert_eq!(hops.as_deref(), dr.initial_path.get(1..));
                }
            }
            let back = Smp::decode(&smp.encode()).expect("parses");
            prop_assert_eq!(decode(&back), Ok(msg));
        }

        /// A response decodes to what the election answered, with the request's TID.
        #[test]
        fn responses_round_trip(dest in route(), req in request(), status in 0u16..0x8000,
                                answer in info()) {
            let (smp, _) = encode_request(&dest, &req).expect("encodes");
            // SMInfo requests are answered with GetResp, trap 144 with TrapRepress.
            let resp = match req {
                SmInfoMsg::Trap144 { tid, .. } => SmInfoMsg::TrapRepress { tid },
                _ => SmInfoMsg::GetResp { tid: req.tid(), status, attr_mod: smp.attr_mod, info: answer },
            };
            let bytes = encode_response(&smp, &resp).expect("encodes").encode();
            let back = Smp::decode(&bytes).expect("parses");
            prop_assert_eq!(back.tid, req.tid());
            prop_assert_eq!(decode(&back), Ok(resp));
        }
    }
}
