//! The edge between the election's [`SmInfoMsg`] and SMPs on the wire.
//!
//! The election works on small typed messages (so the model checker can explore them);
//! this module decodes the SMInfo/Notice SMPs that reach the daemon into those messages
//! and encodes what the election wants to send back into SMPs. Responses are built from
//! the request that arrived (IBA 14.2.2: same TID, paths and HopPointer, D bit set,
//! Method GetResp), which is what ibsim and the embedded simulator route back.

use ibsm_core::election::{DrRoute, SmInfo, SmInfoMsg, SmRoute, SmState};
use ibsm_mad::{
    AttributeId, DirectedRoute, Method, Notice, NoticeType, ProducerType, Smp, SmpRoute, Trap144,
    TrapDetails,
};

/// Converts the codec's SMState to the election's.
pub fn state_from_mad(s: ibsm_mad::SmState) -> SmState {
    match s {
        ibsm_mad::SmState::NotActive => SmState::NotActive,
        ibsm_mad::SmState::Discovering => SmState::Discovering,
        ibsm_mad::SmState::Standby => SmState::Standby,
        ibsm_mad::SmState::Master => SmState::Master,
    }
}

/// Converts the election's SMState to the codec's.
pub fn state_to_mad(s: SmState) -> ibsm_mad::SmState {
    match s {
        SmState::NotActive => ibsm_mad::SmState::NotActive,
        SmState::Discovering => ibsm_mad::SmState::Discovering,
        SmState::Standby => ibsm_mad::SmState::Standby,
        SmState::Master => ibsm_mad::SmState::Master,
    }
}

fn info_from_mad(i: &ibsm_mad::SmInfo) -> SmInfo {
    SmInfo {
        guid: i.guid,
        sm_key: i.sm_key,
        act_count: i.act_count,
        priority: i.priority,
        state: state_from_mad(i.sm_state),
    }
}

fn info_to_mad(i: &SmInfo) -> ibsm_mad::SmInfo {
    ibsm_mad::SmInfo {
        guid: i.guid,
        sm_key: i.sm_key,
        act_count: i.act_count,
        priority: i.priority,
        sm_state: state_to_mad(i.state),
    }
}

/// The election's route of an SMP that arrived: a directed route carries its paths
/// (so the election can derive a route back for a new request); a LID-routed one
/// carries `lid_hint` (the trap's IssuerLID, or 0 when the transport does not say).
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

/// An SMP the election cares about, or `None` (not SMInfo/Notice, or undecodable).
pub fn decode_for_election(smp: &Smp) -> Option<SmInfoMsg> {
    match (smp.attr_id, smp.method) {
        (AttributeId::SM_INFO, Method::GET) => Some(SmInfoMsg::Get {
            tid: smp.tid,
            m_key: smp.m_key,
            info: smp
                .attribute::<ibsm_mad::SmInfo>()
                .map(|i| info_from_mad(&i))
                .unwrap_or(SmInfo {
                    guid: 0,
                    sm_key: 0,
                    act_count: 0,
                    priority: 0,
                    state: SmState::NotActive,
                }),
        }),
        (AttributeId::SM_INFO, Method::SET) => {
            let info = smp.attribute::<ibsm_mad::SmInfo>().ok()?;
            Some(SmInfoMsg::Set {
                tid: smp.tid,
                m_key: smp.m_key,
                attr_mod: smp.attr_mod,
                info: info_from_mad(&info),
            })
        }
        (AttributeId::SM_INFO, Method::GET_RESP) => {
            let info = smp.attribute::<ibsm_mad::SmInfo>().ok()?;
            Some(SmInfoMsg::GetResp {
                tid: smp.tid,
                status: smp.status,
                attr_mod: smp.attr_mod,
                info: info_from_mad(&info),
            })
        }
        (AttributeId::NOTICE, Method::TRAP) => {
            let notice = smp.attribute::<Notice>().ok()?;
            if notice.trap_number() != Some(144) {
                return None;
            }
            Some(SmInfoMsg::Trap144 {
                tid: smp.tid,
                issuer_lid: notice.issuer_lid,
                issuer_guid: 0,
            })
        }
        (AttributeId::NOTICE, Method::TRAP_REPRESS) => {
            Some(SmInfoMsg::TrapRepress { tid: smp.tid })
        }
        _ => None,
    }
}

/// Encodes a request the election originates (Get, Set, Trap144) for `dest`.
/// Returns the SMP and, for a LID-routed one, the destination LID.
pub fn encode_request(dest: &SmRoute, msg: &SmInfoMsg) -> Option<(Smp, Option<u16>)> {
    let (route, dlid) = match dest {
        SmRoute::Lid(l) => (SmpRoute::Lid, Some(*l)),
        SmRoute::Directed(dr) => {
            let end = usize::from(dr.hop_cnt) + 1;
            let hops = dr.initial_path.get(1..end).unwrap_or(&[]);
            (
                SmpRoute::Directed(DirectedRoute::outbound(hops).ok()?),
                None,
            )
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
                ibsm_mad::SmpAttribute::encode(&info_to_mad(info)),
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
                ibsm_mad::SmpAttribute::encode(&info_to_mad(info)),
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
                ibsm_mad::SmpAttribute::encode(&notice),
            )
        }
        SmInfoMsg::GetResp { .. } | SmInfoMsg::TrapRepress { .. } => return None,
    };
    Some((smp, dlid))
}

/// Encodes a response the election produced, from the request it answers.
pub fn encode_response(request: &Smp, msg: &SmInfoMsg) -> Option<Smp> {
    match msg {
        SmInfoMsg::GetResp { status, info, .. } => Some(
            request
                .response()
                .with_attribute(&info_to_mad(info))
                .with_status(*status),
        ),
        SmInfoMsg::TrapRepress { .. } => {
            let mut r = request.response();
            r.method = Method::TRAP_REPRESS;
            Some(r)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_round_trips_through_the_wire() {
        let dest = SmRoute::Directed(DrRoute::new(&[1, 3]));
        let info = SmInfo {
            guid: 0x1234,
            sm_key: 1,
            act_count: 7,
            priority: 9,
            state: SmState::Standby,
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
        assert_eq!(decode_for_election(&back), Some(msg));
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
        match decode_for_election(&Smp::decode(&resp.encode()).expect("decodes")) {
            Some(SmInfoMsg::GetResp { info: got, .. }) => assert_eq!(got, info),
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
        assert_eq!(decode_for_election(&back), Some(msg));
    }
}
