//! Plain data types of the SMInfo election: states, control packets, the SMInfo
//! payload, routes and the messages the state machine consumes and produces.

use std::fmt;
use std::time::Duration;

/// SMInfo.SMState and the SMInfo attribute are ibsm-mad's (one type for one IBA thing:
/// what the codec decodes is what the election reasons about).
pub use ibsm_mad::{SmInfo, SmState};

/// SubnSet(SMInfo) AttributeModifier: the control packet one SM sends another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControlPacket {
    /// 1: hand mastership over to the receiver.
    Handover,
    /// 2: acknowledge a HANDOVER.
    Acknowledge,
    /// 3: STANDBY -> NOTACTIVE.
    Disable,
    /// 4: NOTACTIVE -> STANDBY.
    Standby,
    /// 5: STANDBY -> DISCOVERING.
    Discover,
}

impl ControlPacket {
    /// All five, in wire order.
    pub const ALL: [ControlPacket; 5] = [
        ControlPacket::Handover,
        ControlPacket::Acknowledge,
        ControlPacket::Disable,
        ControlPacket::Standby,
        ControlPacket::Discover,
    ];

    /// The AttributeModifier value.
    pub fn attr_mod(self) -> u32 {
        match self {
            ControlPacket::Handover => 1,
            ControlPacket::Acknowledge => 2,
            ControlPacket::Disable => 3,
            ControlPacket::Standby => 4,
            ControlPacket::Discover => 5,
        }
    }

    /// Decodes an AttributeModifier; `None` for anything but 1..=5.
    pub fn from_attr_mod(attr_mod: u32) -> Option<ControlPacket> {
        match attr_mod {
            1 => Some(ControlPacket::Handover),
            2 => Some(ControlPacket::Acknowledge),
            3 => Some(ControlPacket::Disable),
            4 => Some(ControlPacket::Standby),
            5 => Some(ControlPacket::Discover),
            _ => None,
        }
    }

    /// The SMState the sender must put in the payload (IBA, and OpenSM's
    /// `check_set_req_legality`): ACKNOWLEDGE carries STANDBY, the others MASTER.
    pub fn required_sender_state(self) -> SmState {
        match self {
            ControlPacket::Acknowledge => SmState::Standby,
            _ => SmState::Master,
        }
    }

    /// Whether an SM in `state` accepts this packet (OpenSM's
    /// `osm_sm_state_mgr_check_legality`). MASTER accepts ACKNOWLEDGE only while
    /// it waits for one after sending HANDOVER; that part is decided by the
    /// state machine, so this table says `false` for (Master, Acknowledge).
    pub fn legal_in(self, state: SmState) -> bool {
        use ControlPacket as C;
        use SmState as S;
        matches!(
            (state, self),
            (S::Discovering, C::Handover)
                | (
                    S::Standby,
                    C::Discover | C::Disable | C::Handover | C::Acknowledge
                )
                | (S::NotActive, C::Standby)
                | (S::Master, C::Handover)
        )
    }
}

impl fmt::Display for ControlPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ControlPacket::Handover => "HANDOVER",
            ControlPacket::Acknowledge => "ACKNOWLEDGE",
            ControlPacket::Disable => "DISABLE",
            ControlPacket::Standby => "STANDBY",
            ControlPacket::Discover => "DISCOVER",
        })
    }
}

/// A directed route as it appears in an SMP header. For a request we send, only
/// `initial_path[1..=hop_cnt]` matters (index 0 unused, as in IBA); for a reply to
/// a request that arrived by directed route, the driver passes the request's
/// header back unchanged and the wire layer turns it into a response.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DrRoute {
    /// Hop count.
    pub hop_cnt: u8,
    /// Initial path (port numbers, index 0 unused).
    pub initial_path: Vec<u8>,
    /// Return path as recorded by the switches (empty on requests we originate).
    pub return_path: Vec<u8>,
    /// DrSLID (0xFFFF for a pure directed route).
    pub dr_slid: u16,
    /// DrDLID (0xFFFF for a pure directed route).
    pub dr_dlid: u16,
}

impl DrRoute {
    /// A pure directed route (DrSLID = DrDLID = 0xFFFF) through the given output
    /// ports, first hop first.
    pub fn new(ports: &[u8]) -> DrRoute {
        let mut initial_path = Vec::with_capacity(ports.len() + 1);
        initial_path.push(0);
        initial_path.extend_from_slice(ports);
        DrRoute {
            hop_cnt: u8::try_from(ports.len()).unwrap_or(u8::MAX),
            initial_path,
            return_path: Vec::new(),
            dr_slid: 0xffff,
            dr_dlid: 0xffff,
        }
    }
}

/// Where an SMInfo SMP goes: a LID (LID-routed SMP) or a directed route.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SmRoute {
    /// LID-routed to this LID.
    Lid(u16),
    /// Directed route.
    Directed(DrRoute),
}

impl fmt::Display for SmRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmRoute::Lid(lid) => write!(f, "lid {lid}"),
            SmRoute::Directed(dr) => {
                f.write_str("dr ")?;
                let end = usize::from(dr.hop_cnt) + 1;
                let hops = dr.initial_path.get(1..end).unwrap_or(&[]);
                if hops.is_empty() {
                    return f.write_str("0");
                }
                for (i, p) in hops.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{p}")?;
                }
                Ok(())
            }
        }
    }
}

/// A port that advertises PortInfo.CapabilityMask.IsSM, as a sweep found it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SmPort {
    /// Its port GUID (what SMInfo.GUID must equal).
    pub guid: u64,
    /// How to reach it.
    pub route: SmRoute,
    /// Its LID if it has one (trap 144 from it carries this as IssuerLID).
    pub lid: Option<u16>,
}

/// One SMInfo-related SMP, decoded to what the election needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SmInfoMsg {
    /// SubnGet(SMInfo). `m_key` is the SMP's M_Key, `info` the request's payload
    /// (a requester may present its SM_Key and state there).
    Get {
        /// Transaction ID.
        tid: u64,
        /// SMP M_Key.
        m_key: u64,
        /// Payload of the request.
        info: SmInfo,
    },
    /// SubnSet(SMInfo) carrying a control packet in the AttributeModifier.
    /// `attr_mod` is kept raw so an invalid modifier can be answered with a status.
    Set {
        /// Transaction ID.
        tid: u64,
        /// SMP M_Key.
        m_key: u64,
        /// Raw AttributeModifier (1..=5 are the control packets).
        attr_mod: u32,
        /// Payload: the sender's SMInfo.
        info: SmInfo,
    },
    /// SubnGetResp(SMInfo), answering a Get or a Set; `status` is the MAD status.
    GetResp {
        /// Transaction ID of the request answered.
        tid: u64,
        /// MAD status (0 = success).
        status: u16,
        /// AttributeModifier echoed from the request.
        attr_mod: u32,
        /// The responder's SMInfo.
        info: SmInfo,
    },
    /// SubnTrap(Notice) trap 144 (local changes: SM priority changed) sent to the master.
    Trap144 {
        /// Transaction ID.
        tid: u64,
        /// Notice.IssuerLID.
        issuer_lid: u16,
        /// The issuer's port GUID if the transport knows it (0 if not).
        issuer_guid: u64,
    },
    /// SubnTrapRepress(Notice): the master saw the trap.
    TrapRepress {
        /// Transaction ID of the trap.
        tid: u64,
    },
}

impl SmInfoMsg {
    /// The transaction ID.
    pub fn tid(&self) -> u64 {
        match self {
            SmInfoMsg::Get { tid, .. }
            | SmInfoMsg::Set { tid, .. }
            | SmInfoMsg::GetResp { tid, .. }
            | SmInfoMsg::Trap144 { tid, .. }
            | SmInfoMsg::TrapRepress { tid } => *tid,
        }
    }

    /// Whether this is a response (GetResp, TrapRepress) rather than a request.
    pub fn is_response(&self) -> bool {
        matches!(
            self,
            SmInfoMsg::GetResp { .. } | SmInfoMsg::TrapRepress { .. }
        )
    }
}

/// An SMP the driver must send. For responses (`msg.is_response()`), `dest` is
/// the `from` route the request arrived with, handed back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Transmit {
    /// Destination.
    pub dest: SmRoute,
    /// What to send.
    pub msg: SmInfoMsg,
}

/// Which rule fired to make the SM change state. Rendered by `Display` for logs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TransitionReason {
    /// Discovery found an SM in MASTER.
    FoundMaster {
        /// Its GUID.
        master: u64,
    },
    /// Discovery found a DISCOVERING/STANDBY SM that outranks us.
    FoundHigherSm {
        /// Its GUID.
        guid: u64,
        /// Its priority.
        priority: u8,
    },
    /// Discovery ended without finding a master or a higher SM.
    NoHigherSm {
        /// How many SMs answered.
        answered: usize,
        /// How many known SM ports were queried.
        queried: usize,
    },
    /// Discovery found no master for `masterless_for` (at least `masterless_takeover`)
    /// and the SM that outranks us still answers STANDBY: we take mastership until it is
    /// ready to have it handed over.
    HigherSmIdle {
        /// The higher SM.
        guid: u64,
        /// Its priority.
        priority: u8,
        /// How long the subnet had been without a master.
        masterless_for: Duration,
    },
    /// Standby: the master did not answer `missed` polls in a row.
    MissedPolls {
        /// The master's GUID.
        master: u64,
        /// Polls missed.
        missed: u32,
    },
    /// Standby: the master answers but its ActCount has not advanced for `stalled_for`.
    ActCountStalled {
        /// The master's GUID.
        master: u64,
        /// The frozen ActCount.
        act_count: u32,
        /// How long it has not moved.
        stalled_for: Duration,
    },
    /// Standby: the polled SM answers NOTACTIVE, or DISCOVERING while it no longer
    /// outranks us.
    MasterResigned {
        /// Its GUID.
        master: u64,
        /// The state it reported.
        state: SmState,
    },
    /// Standby: the SM we follow is not the master: it answers STANDBY (it follows
    /// someone else, e.g. after handing over), or it has answered DISCOVERING for
    /// longer than `discovering_grace`. We re-discover to find the real master.
    FollowedNotMaster {
        /// The SM we followed.
        guid: u64,
        /// What it answered.
        state: SmState,
        /// How long it had been answering that state (0 for STANDBY: no grace).
        waited: Duration,
    },
    /// A control packet from another SM.
    Control {
        /// The packet.
        packet: ControlPacket,
        /// SMInfo.GUID in its payload.
        from: u64,
    },
    /// Our own port is not Active any more (its link went down or retrained): we may
    /// have been cut off while another SM took over, so we look again, and do not
    /// conclude while the port stays down.
    LocalPortDown,
    /// Master: our HANDOVER was accepted (by ACKNOWLEDGE or a status-0 response).
    HandoverDone {
        /// The new master.
        to: u64,
        /// true if an ACKNOWLEDGE arrived, false if only the Set's response did.
        acknowledged: bool,
    },
}

impl fmt::Display for TransitionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransitionReason::FoundMaster { master } => write!(f, "found master {master:#018x}"),
            TransitionReason::FoundHigherSm { guid, priority } => {
                write!(f, "found higher SM {guid:#018x} priority {priority}")
            }
            TransitionReason::NoHigherSm { answered, queried } => write!(
                f,
                "no master or higher SM ({answered} of {queried} SM ports answered)"
            ),
            TransitionReason::HigherSmIdle {
                guid,
                priority,
                masterless_for,
            } => write!(
                f,
                "no master for {} ms and higher SM {guid:#018x} (priority {priority}) still STANDBY: \
                 taking mastership until it can be handed over",
                masterless_for.as_millis()
            ),
            TransitionReason::MissedPolls { master, missed } => {
                write!(f, "master {master:#018x} missed {missed} polls")
            }
            TransitionReason::ActCountStalled {
                master,
                act_count,
                stalled_for,
            } => write!(
                f,
                "master {master:#018x} ActCount stalled at {act_count} for {} ms",
                stalled_for.as_millis()
            ),
            TransitionReason::MasterResigned { master, state } => {
                write!(f, "master {master:#018x} now reports {state}")
            }
            TransitionReason::FollowedNotMaster {
                guid,
                state: SmState::Standby,
                ..
            } => write!(
                f,
                "followed SM {guid:#018x} reports STANDBY: it is not the master, looking for the real one"
            ),
            TransitionReason::FollowedNotMaster {
                guid,
                state,
                waited,
            } => write!(
                f,
                "followed SM {guid:#018x} still reports {state} after {} ms: not the master, looking for the real one",
                waited.as_millis()
            ),
            TransitionReason::Control { packet, from } => {
                write!(f, "{packet} from {from:#018x}")
            }
            TransitionReason::LocalPortDown => {
                write!(f, "our port left Active (link down or retrained)")
            }
            TransitionReason::HandoverDone { to, acknowledged } => write!(
                f,
                "handed over to {to:#018x}{}",
                if *acknowledged {
                    " (acknowledged)"
                } else {
                    " (accepted, no ACKNOWLEDGE)"
                }
            ),
        }
    }
}

/// Why an incoming SubnSet(SMInfo) was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// AttributeModifier is not a control packet (not 1..=5).
    UnknownControlPacket,
    /// The payload SM_Key does not match ours (see [`SmKeyPolicy`](super::SmKeyPolicy)).
    SmKeyMismatch,
    /// The payload SMState is not the one the packet requires.
    BadSenderState,
    /// The packet is not accepted in our current state.
    IllegalInState,
    /// `trusted_sm_guids` is set and the sender is not known to be one of them: its
    /// port (found by the SLID, or the directed route the SMP came by) is not a known
    /// SM port in the set, or the payload names another GUID than that port.
    UntrustedSender,
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::UnknownControlPacket => "unknown control packet",
            RejectReason::SmKeyMismatch => "SM_Key mismatch",
            RejectReason::BadSenderState => "sender SMState not allowed for this packet",
            RejectReason::IllegalInState => "packet not accepted in our state",
            RejectReason::UntrustedSender => "sender is not a trusted SM (trusted_sm_guids)",
        })
    }
}

/// What happened, for logs, metrics and the daemon's reactions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ElectionEvent {
    /// The SM changed state.
    StateChanged {
        /// Old state.
        from: SmState,
        /// New state.
        to: SmState,
        /// The rule that fired.
        reason: TransitionReason,
    },
    /// An incoming Set was rejected with status [`STATUS_INVALID_VALUE`](super::STATUS_INVALID_VALUE).
    ControlRejected {
        /// Raw AttributeModifier.
        attr_mod: u32,
        /// SMInfo.GUID in the payload.
        from: u64,
        /// Why.
        reason: RejectReason,
    },
    /// A peer answered SMInfo with a non-zero SM_Key different from ours; it is ignored
    /// (OpenSM exits in this case).
    RemoteSmKeyMismatch {
        /// The peer.
        guid: u64,
    },
    /// We started handing mastership over.
    HandoverStarted {
        /// Target.
        to: u64,
    },
    /// HANDOVER got no answer after all retries, or was rejected; we stay MASTER.
    HandoverFailed {
        /// Target.
        to: u64,
        /// MAD status of the rejection, `None` if it timed out.
        status: Option<u16>,
    },
    /// We accepted HANDOVER while already MASTER (another master yielded to us):
    /// the daemon should run a heavy sweep.
    HeavySweepRequested,
    /// We went DISCOVERING (from STANDBY, MASTER or NOTACTIVE): the SM ports and
    /// directed routes of our last sweep may be stale (a cable on the path to a silent
    /// master, an SM that came up since). Unless a known SM answers MASTER, the round
    /// waits for a sweep reported after this event
    /// ([`Election::handle_sweep`](super::Election::handle_sweep)); the driver should
    /// discover the fabric now (a prepared takeover's discovery does). Once per round.
    DiscoveryNeeded,
    /// The round that asked for [`ElectionEvent::DiscoveryNeeded`] concluded STANDBY
    /// without it: a known SM answered MASTER, or one that outranks us answered
    /// DISCOVERING (it is taking over; at most once per masterless period, see the
    /// module doc). The driver should stop the sweep it started for the round (it
    /// would compete for the fabric with the new master's takeover reads) and must not
    /// treat a stopped sweep as a discovery. A sweep reported anyway is harmless.
    DiscoveryWithdrawn,
    /// Our effective priority changed (set_priority, or sticky elevation).
    PriorityChanged {
        /// Old effective priority.
        from: u8,
        /// New effective priority.
        to: u8,
    },
    /// With `trusted_sm_guids` set: a known SM port outside the set answered our SMInfo
    /// query (first answer, or its state or priority changed). It is not followed, not
    /// handed over to, and reads SM_Key 0 from us. An untrusted MASTER is reported as
    /// [`ElectionEvent::RogueMaster`] instead.
    UntrustedSmSeen {
        /// Its port GUID.
        guid: u64,
        /// Its SMInfo.Priority.
        priority: u8,
        /// Its SMState.
        state: SmState,
    },
    /// With `trusted_sm_guids` set: an untrusted SM answers MASTER (first time, or again
    /// after answering another state, or with another priority). We ignore it: a
    /// trusted MASTER keeps mastership and keeps sweeping (`our_state` MASTER), a
    /// trusted SM looking for a master does not follow it.
    RogueMaster {
        /// Its port GUID.
        guid: u64,
        /// Its SMInfo.Priority.
        priority: u8,
        /// Our state when we saw it.
        our_state: SmState,
    },
    /// The answer to a control packet we sent with [`Election::send_control`](super::Election::send_control).
    ControlAnswered {
        /// Target.
        to: u64,
        /// Packet.
        packet: ControlPacket,
        /// MAD status, `None` if it timed out.
        status: Option<u16>,
    },
}

impl fmt::Display for ElectionEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElectionEvent::StateChanged { from, to, reason } => {
                write!(f, "sm state: {from} -> {to} ({reason})")
            }
            ElectionEvent::ControlRejected {
                attr_mod,
                from,
                reason,
            } => write!(
                f,
                "rejected SubnSet(SMInfo) attr_mod {attr_mod} from {from:#018x}: {reason}"
            ),
            ElectionEvent::RemoteSmKeyMismatch { guid } => {
                write!(f, "SM {guid:#018x} answered with a foreign SM_Key; ignored")
            }
            ElectionEvent::HandoverStarted { to } => write!(f, "handover to {to:#018x} started"),
            ElectionEvent::HandoverFailed { to, status } => match status {
                Some(s) => write!(f, "handover to {to:#018x} rejected (status {s:#06x})"),
                None => write!(f, "handover to {to:#018x} timed out"),
            },
            ElectionEvent::HeavySweepRequested => f.write_str("heavy sweep requested"),
            ElectionEvent::DiscoveryNeeded => {
                f.write_str("discovering: a fresh sweep is needed before the round concludes")
            }
            ElectionEvent::DiscoveryWithdrawn => f.write_str(
                "discovering: concluded STANDBY before the fresh sweep; the sweep is no longer needed",
            ),
            ElectionEvent::PriorityChanged { from, to } => {
                write!(f, "sm priority: {from} -> {to}")
            }
            ElectionEvent::UntrustedSmSeen {
                guid,
                priority,
                state,
            } => write!(
                f,
                "untrusted SM {guid:#018x} (priority {priority}, {state}) is not in trusted_sm_guids: \
                 not followed, never handed over to, reads SM_Key 0"
            ),
            ElectionEvent::RogueMaster {
                guid,
                priority,
                our_state: SmState::Master,
            } => write!(
                f,
                "rogue master: untrusted SM {guid:#018x} (priority {priority}) answers MASTER; \
                 we are the trusted master and keep mastership"
            ),
            ElectionEvent::RogueMaster {
                guid,
                priority,
                our_state,
            } => write!(
                f,
                "rogue master: untrusted SM {guid:#018x} (priority {priority}) answers MASTER; \
                 not followed ({our_state})"
            ),
            ElectionEvent::ControlAnswered { to, packet, status } => match status {
                Some(s) => write!(f, "{packet} to {to:#018x} answered with status {s:#06x}"),
                None => write!(f, "{packet} to {to:#018x} timed out"),
            },
        }
    }
}
