//! SM election: the sans-IO SMInfo state machine (IBA 14.4, "Multiple SMs").
//!
//! [`Election`] is driven like quinn-proto: the driver calls
//! [`Election::handle_sweep`] (the SM ports a sweep found with IsSM),
//! [`Election::handle_message`] (an SMInfo SMP, trap 144 or TrapRepress that arrived),
//! [`Election::handle_smps_sent`] (ActCount) and [`Election::handle_timeout`], then
//! drains [`Election::poll_transmit`], [`Election::poll_event`] and asks
//! [`Election::poll_timeout`]. Time is a `Duration` since the driver's epoch; nothing
//! here reads a clock or does I/O. Messages are [`SmInfoMsg`] (what the election
//! needs of an SMP) so the model checker in `ibsm-testkit` can explore them cheaply;
//! [`wire`] converts them to and from `ibsm_mad::Smp` at the edge (daemon and simulator alike).
//!
//! # The rules (precisely)
//!
//! Ranking: higher priority wins; on equal priority the LOWER port GUID wins.
//!
//! * **DISCOVERING** (initial state): SubnGet(SMInfo) to every known SM port (timeout
//!   `query_timeout`, `query_retries` retries). When all answered or gave up: an SM in
//!   MASTER found -> STANDBY polling the best such master; else a DISCOVERING/STANDBY SM
//!   that outranks us -> STANDBY polling it (OpenSM does the same); else MASTER. Answers
//!   whose SMInfo.GUID differs from the queried port, or whose SM_Key is non-zero and not
//!   ours, are ignored (OpenSM exits on the latter; we report
//!   [`ElectionEvent::RemoteSmKeyMismatch`]). A round entered from another state
//!   (the master went silent, the SM we followed stood by, DISCOVER...) asks for a
//!   fresh sweep at once ([`ElectionEvent::DiscoveryNeeded`]) and, unless a known SM
//!   answers MASTER, concludes only after that sweep has been reported: a cable down
//!   on the directed path to a live master must not look like a dead master, and an SM
//!   that came up since our last sweep may be the master (seen on ibsim: a standby that
//!   kept re-following a STANDBY from its stale list, then took MASTER beside the real
//!   one). A master that went silent is asked once more (no retries) over its old
//!   route, and again with retries if the fresh sweep finds it over another one.
//!   A master lost to missed polls is not asked again over the route its polls died on
//!   (they were its last queries there); only over another one the fresh sweep finds.
//!   The TIDs of those polls stay valid through the round: a late answer is the lost
//!   master's answer, so a master that was only slow (a starved host) is followed
//!   again if it answers before the fresh sweep is in. A round that concludes MASTER
//!   without an answer from some known SM port confirms it (see "A false takeover").
//!   A round that follows a MASTER before its sweep is in reports
//!   [`ElectionEvent::DiscoveryWithdrawn`] (below) too: a master is in charge.
//!   **One exception to waiting for the sweep**: when every query of the round is
//!   settled and the best SM that outranks us answered DISCOVERING (it noticed the
//!   loss and is taking over; no MASTER answered), the round concludes at once,
//!   STANDBY behind it, and reports [`ElectionEvent::DiscoveryWithdrawn`]: the driver
//!   stops the sweep it started for the round (ibsmd: the standby's heavy sweep; what
//!   it read is dropped, never kept as a discovery to reuse or verify). Why: both
//!   standbys of a dead master miss its polls together, and the outranked one's full
//!   discovery (12.5k SMPs, ~180 ms at k=16 on ibsim) competes for the fabric with the
//!   winner's takeover reads, slowing the takeover it will only follow. The STANDBY
//!   rules then apply to that SM: `discovering_grace` while it stays DISCOVERING,
//!   FollowedNotMaster if it goes STANDBY. A STANDBY answer does not qualify (that is
//!   the stale-view loop above), and only once per masterless period: until a MASTER
//!   is followed (or we become one), the next round waits for its fresh sweep as
//!   always, so a DISCOVERING SM that never takes over cannot hold us on a stale view.
//!   Following it does not end the masterless period (`masterless_takeover` keeps
//!   counting from the loss). The standbys notice within a poll of each other, so the
//!   winner often still answers STANDBY to our query; when a known SM that answered
//!   the round then queries us naming itself DISCOVERING (outranking us) or MASTER in
//!   the payload, it is asked again at once (no retries, one query at a time), and
//!   that answer, never the payload, may conclude the round as above.
//! * **STANDBY**: SubnGet(SMInfo) to the master every `poll_interval`. A poll that is not
//!   answered within `poll_interval` is a miss, and the master is re-polled every
//!   `repoll_interval` until it answers; `poll_retries` misses in a row ->
//!   DISCOVERING ([`TransitionReason::MissedPolls`]); an answer to any poll of the
//!   streak, however late, ends it (see "Detection" below). An answer in MASTER whose ActCount
//!   has not changed for `stall_window` -> DISCOVERING ([`TransitionReason::ActCountStalled`]);
//!   that master (at that ActCount) is then treated as dead by discovery and by master
//!   polls until its ActCount moves again, otherwise we would follow it straight back.
//!   We follow only a master. The followed SM answering STANDBY is not our master any
//!   more (it handed over, or follows a higher SM): DISCOVERING at once
//!   ([`TransitionReason::FollowedNotMaster`]), which finds the real master. Answering
//!   DISCOVERING while it outranks us (a higher SM still looking around, about to take
//!   MASTER) is tolerated for `discovering_grace` (1 s), then the same. NOTACTIVE, or
//!   DISCOVERING from an SM we outrank -> DISCOVERING ([`TransitionReason::MasterResigned`]).
//!   OpenSM 3.3.23 differs on purpose: it counts a polled higher STANDBY SM as alive
//!   forever and a DISCOVERING one as a missed poll; the former left the demo's third
//!   SM polling the old master, a standby, after the best SM came back and took MASTER.
//!   On entering STANDBY behind a master we outrank, and on every priority raise, we
//!   send trap 144 to the master's LID (retried until TrapRepress).
//! * **MASTER**: answers SubnGet(SMInfo); a requester our sweeps have not found that
//!   names itself in the payload (an SM started after our last heavy sweep: IsSM moves
//!   no PortState, and a lower newcomer sends no trap 144) is read back and one
//!   [`ElectionEvent::HeavySweepRequested`] reported. Every `master_poll_interval` (and on trap 144,
//!   and for ports new in a sweep) reads the SMInfo of the other SM ports. When one in
//!   STANDBY or MASTER outranks us it sends HANDOVER (timeout `handover_timeout`,
//!   `handover_retries` retries) and goes STANDBY behind it when an ACKNOWLEDGE arrives
//!   **or** the HANDOVER's response comes back with status 0 (OpenSM never sends
//!   ACKNOWLEDGE: its acceptance is the status-0 response). A rejected or unanswered
//!   HANDOVER leaves us MASTER (never masterless); the next master poll retries.
//!   **Two masters that see each other**: the lower one hands over to the higher one as
//!   above; the higher one accepts HANDOVER (legal in MASTER), stays MASTER, answers
//!   ACKNOWLEDGE and reports [`ElectionEvent::HeavySweepRequested`]; it does nothing else
//!   about a lower master (OpenSM's "wait for handover"). So the lower one always yields.
//!   A master that a known SM queries with a payload naming itself MASTER and
//!   outranking us reads that SM back at once (one query at a time per SM), so it
//!   does not wait for its next master poll to yield.
//! * **NOTACTIVE**: answers SubnGet(SMInfo), accepts only STANDBY (-> STANDBY behind the
//!   sender).
//!
//! Control packets (SubnSet(SMInfo), AttributeModifier 1..=5) are checked in this order;
//! a failure is answered with MAD status [`STATUS_INVALID_VALUE`] (0x1C, "invalid
//! attribute value or modifier"; OpenSM sends 7) and [`ElectionEvent::ControlRejected`]:
//!
//! 1. the modifier is a control packet;
//! 2. SM_Key per [`SmKeyPolicy`] (failures counted in [`Election::sm_key_violations`]).
//!    Strict (default): our key, or 0 only in a HANDOVER from the SM we follow as master
//!    while STANDBY (OpenSM before 3.3.21 sends 0 there; 3.3.21+ sends its key; OpenSM
//!    itself checks no SM_Key on received Sets). Non-zero wrong keys are always refused;
//! 3. payload SMState: ACKNOWLEDGE needs STANDBY, the others MASTER;
//! 4. our state accepts it ([`ControlPacket::legal_in`]): DISCOVERING HANDOVER; STANDBY
//!    DISCOVER, DISABLE, HANDOVER, ACKNOWLEDGE; NOTACTIVE STANDBY; MASTER HANDOVER, plus
//!    ACKNOWLEDGE while our HANDOVER is outstanding.
//!
//! **Planned handover** ([`Election::handover_to`], target e.g. [`Election::best_standby`]):
//! as MASTER, HANDOVER to a known SM last seen STANDBY (or MASTER), completed as above.
//! It sticks: on completion, if we outranked the target, our advertised priority drops
//! to the highest one that ranks below the target's last SMInfo priority until
//! [`Election::set_priority`] or until a HANDOVER makes us MASTER again (the yield did
//! its job; kept, the SM handing back may still outrank it and we would hand straight
//! back); refused (typed [`ElectionError`]) when impossible (target
//! priority 0 with a higher GUID). If every answer was lost but the target then answers
//! MASTER, the handover counts as done rather than letting the target hand back.
//!
//! HANDOVER received in STANDBY makes us MASTER at once and we send ACKNOWLEDGE (payload
//! SMState STANDBY); we never wait for anything from the old master.
//!
//! SM_Key in answers (IBA 14.4.1: 0 unless the requester is authenticated): our real
//! SM_Key when the requester passes the M_Key rule, i.e. our port's M_Key
//! (`ElectionConfig::m_key`) is 0 or equals the SMP's M_Key, or its payload presents our
//! SM_Key; else 0. OpenSM 3.3.23 answers the same way and ignores a peer whose answer
//! carries an SM_Key other than its own, so with no M_Key (the default) OpenSM reads
//! our key; answering it 0 would make OpenSM ignore us (no handover to us, dual masters).
//! Our own SMInfo requests carry `ElectionConfig::m_key` as their M_Key, so a peer
//! applying the same rule with the fabric's M_Key authenticates us. SMInfo itself is
//! not guarded by an SMA's M_Key check (it is the SM's attribute, answered by the SM),
//! so M_Key protection of the ports never stops polls or control packets.
//!
//! Sticky mode (`sticky_priority`, like OPA FM's elevated priority): on becoming MASTER
//! our advertised priority rises to that value, so a returning SM with a higher configured
//! priority finds a master that outranks it and stays STANDBY (no trap, no handover). The
//! elevation is dropped when we leave MASTER. With OpenSM: OpenSM compares the priority we
//! advertise, so an OpenSM of configured priority below the sticky value also stays
//! STANDBY; one at 15 with a lower GUID still outranks us, and an OpenSM *master* that
//! sees our elevated priority hands over to us. Non-sticky (default) is what the model
//! checker proves "highest live SM ends master" for.
//!
//! # Never masterless (`ElectionConfig::masterless_takeover`)
//!
//! IBA has a lower SM wait in STANDBY behind any SM that outranks it, so when the
//! master dies the subnet has no master until the best standby notices. An OpenSM
//! standby notices after 4 missed polls of 10 s: about a minute with nobody answering
//! the SA or repairing the fabric. The rule: a DISCOVERING round whose best SM outranks
//! us but answers STANDBY (it follows no master we can find, so it has not noticed
//! the loss) takes MASTER ([`TransitionReason::HigherSmIdle`]) once the subnet has
//! been masterless for `masterless_takeover` (default 1 s), counted from when we lost
//! our master (or started). From then on the MASTER rules apply unchanged: the master
//! polls read that SM, find it STANDBY and outranking us, and send HANDOVER, which
//! OpenSM accepts at once, so mastership goes back to the SM the priorities name as
//! soon as it answers, and until then the fabric and the SA have a master. An SM that
//! answers DISCOVERING is about to take MASTER itself and is waited for, as before
//! (`discovering_grace`). `None` restores IBA's rule alone.
//!
//! With sticky priority: we become MASTER through this rule like any other way, so the
//! elevation applies, and if it reaches above the idle SM's priority we keep the
//! subnet (that is what sticky asks for: no mastership change once a master is in
//! charge); below it, we hand over as above. The risk the bound guards against: an SM
//! that sees a master we cannot reach (a partitioned view) answers STANDBY too; we then
//! become a second master until our master polls or its sweeps meet, and the IBA
//! two-masters rule makes the lower of the two hand over. A second of patience keeps that
//! to faults that last longer than a second.
//!
//! # Trusted SMs (`ElectionConfig::trusted_sm_guids`)
//!
//! Why: IBA lets any SM of higher priority take mastership (trap 144, then the master
//! hands over), and we tell every requester our SM_Key when our port has no M_Key, so
//! anyone with root on a host can start an SM of priority 15 and get the subnet. With
//! the setting, only the listed port GUIDs (and ours, always: an SM never distrusts
//! itself) take part in the election for us. Any other SM:
//!
//! * is never followed: a DISCOVERING round neither follows an untrusted MASTER nor
//!   waits for an untrusted higher SM; without a trusted one it concludes MASTER by
//!   the normal rules (the fabric is masterless for us);
//! * is never handed over to: a MASTER that reads a higher untrusted STANDBY or MASTER
//!   (master poll, trap 144) sends no HANDOVER, [`Election::handover_to`] refuses it
//!   ([`ElectionError::UntrustedTarget`]) and [`Election::best_standby`] skips it; an
//!   answer read after a trap 144 from a port our sweeps have not found names itself,
//!   so it never leads to a HANDOVER either;
//! * has its control packets (all five) refused with [`RejectReason::UntrustedSender`];
//! * reads SM_Key 0 in our SMInfo answers, and so does any requester we cannot tell.
//!
//! An untrusted MASTER is a rogue: a trusted master keeps mastership and keeps
//! sweeping, and says so ([`ElectionEvent::RogueMaster`], a warning in the log);
//! other untrusted SMs are reported as [`ElectionEvent::UntrustedSmSeen`]; both once
//! per change of their (priority, state); [`Election::untrusted_sms`] lists them.
//! What the setting cannot do: stop a rogue from claiming MASTER on its own. OpenSM
//! told SM_Key 0 ignores us and makes itself master of the fabric it sees (seen on
//! ibsim); keeping it from reprogramming ports is the job of M_Keys, not of SMInfo.
//!
//! Who is asking ([`Election::requester_port`]): the SMInfo payload's GUID proves
//! nothing (a sender writes what it likes there), so the requester is told by how the
//! SMP came. LID-routed: its SLID, which the sending port's hardware sets from its LID,
//! looked up among the LIDs of the SM ports our sweep found (the base LID only: with
//! LMC > 0 an SM sending from another of its LIDs is not told) (an SM has IsSM set, so an SM's port is among them; a port without
//! IsSM is no SM to trust). Directed route: the return path, which the switches on the
//! way record (the sender only writes the initial path), reversed and compared with the
//! route our sweep recorded to each SM port; a DR SMP with LID-routed parts or no return
//! path is not told. A trusted SM that reaches us over another path than the one our
//! sweep found (several equal paths in a fat tree) is therefore not recognised: it
//! reads SM_Key 0 and its control packets are refused, the safe way round; an ibsm
//! peer accepts SM_Key 0 answers, OpenSM ignores them. Control packets must also name,
//! in the payload, the port they came from. The same holds for a trusted SM whose port
//! set IsSM after our last sweep: until a sweep reports its port it is not told (its
//! query is one of the unknown requesters that trigger a heavy sweep at once). A
//! trusted OpenSM started beside us may so read SM_Key 0 once, ignore us and claim
//! MASTER; we then hand over to it as to any higher trusted master (seen on ibsim).
//! Telling requesters by every end port of the topology, not only the SM ports, would
//! close that window; not done yet.
//!
//! # Detection: polls, quick re-polls, and a hung master
//!
//! A standby polls an answering master every `poll_interval` (25 ms: 40 SMPs/s per
//! standby on the master, a few microseconds of SMA and SM time each on hardware).
//! The first poll that goes unanswered for `poll_interval` is a miss; from then on the
//! master is re-polled every `repoll_interval` (20 ms), and `poll_retries` (3) misses in
//! a row declare it lost. So a dead master is declared lost `poll_interval` x 2 +
//! (`poll_retries` - 1) x `repoll_interval` = 90 ms at most after its last answer (65-90
//! ms after a SIGKILL), against 300-400 ms for the old 100 ms x 3. A false failover
//! needs the master silent to every poll of a streak for `poll_interval` +
//! (`poll_retries` - 1) x `repoll_interval` = 65 ms: an answer to any poll of the streak,
//! however late, counts (the TIDs of the streak's polls stay valid), so SMInfo latency
//! above 25 ms costs re-polls, not a failover. SMInfo is answered by the master's MAD
//! thread as soon as it reads the request, never queued behind its sweep's SMPs (the
//! configurator's window limits *its* SMPs, not the answers), and the standby's polls
//! leave at once, outside its own agents' windows; a busy routing worker is a thread of
//! its own. What silenced an ibsm master: a long step of its MAD thread, above
//! all the end of a heavy sweep; a driver now answers polls off that thread from
//! [`SmInfoResponder`] (ibsmd: as it reads them, and by a stand-in reader while its SM
//! thread is busy), so only a driver without that path still has the problem below. ibsmd builds the SA snapshot and its path table on its
//! worker (`SubnetConfig::offload_sa_snapshot`: 70-190 ms at k=32 when built inline);
//! what stays on the thread (the rest of the sweep's end, the API's fabric view, some
//! timer steps) still reaches 50-115 ms on a 2-core host with every core busy.
//! `bench/detection.sh` measures it (a k=32 master sweeping back to back, every core
//! busy, with the master's longest step): there the live master was declared lost 8
//! times in 30 s with the snapshot inline, 2-3 times with it offloaded (the standby
//! then hands straight back). Answering off the MAD thread is what removes it.
//! Since a late answer to the streak counts through the DISCOVERING round that
//! follows (see DISCOVERING above), such a detection rarely ends in MASTER: the round
//! waits for a fresh sweep (long at k=32), and the stalled master's queued answers
//! arrive first (30 s with a longest master step of 232 ms, host loaded by other jobs
//! too: 17 detections, 0 went on to MASTER). On fabrics where SMP latency
//! can exceed the streak (congested VL15, a host that can stall the SM's thread), raise
//! `poll_interval` and `repoll_interval` together. The DISCOVERING round that follows adds no query
//! timeout of its own for the lost master (see above), only the fresh sweep a takeover
//! needs anyway. A replicated standby gets that sweep sooner: it verifies the fabric
//! it already knows (`subnet::verify`, ~3k Gets at k=16) instead of walking it, so a
//! stalled master's late answers have less time to arrive before MASTER; there the
//! Raft heartbeat below holds the loss off for a busy master that leads Raft, and a
//! false takeover still ends within a re-poll of its answer (below).
//!
//! # A busy master: the Raft heartbeat as a second opinion (`leader_heartbeat_grace`)
//!
//! Polls alone cannot tell a dead master from one whose MAD thread is busy for longer
//! than a streak. With replication the standby has a second source: when the master it
//! follows is the Raft leader, the leader's AppendEntries (a heartbeat every 50 ms) come
//! from the same process on other threads and another network, and keep coming while
//! the MAD thread is busy. So after `poll_retries` misses, if the Raft leader is the SM
//! we follow and its last heartbeat is at most `leader_heartbeat_fresh` (75 ms) old, the
//! standby does not declare the master lost: it polls on every `repoll_interval`, and
//! any answer of the streak ends it as usual ([`Election::losses_held_off`] counts such
//! streaks). It never declares anything on the heartbeat's word: the heartbeat only
//! delays, at most `leader_heartbeat_grace` (1 s) per streak, so an SM port that died
//! under a live process (a pulled cable, a dead HCA) is still declared lost after the
//! grace. A killed master sends no heartbeat either: its last one is older than 75 ms
//! by the time its third miss is counted (25 + 2 x 20 ms after its last answer, plus
//! the first poll's wait), or at worst one re-poll later, so detection is unchanged
//! within one `repoll_interval`. The driver feeds the heartbeat with
//! [`Election::handle_leader_contact`] (ibsmd: the follower's Raft service notes each
//! AppendEntries it accepts; the leader's node id maps to its SM port through the
//! replicated `sm.<guid>.node` registration). When the master is not the Raft leader
//! (after a failover the new master need not be), there is no second opinion and
//! polls alone decide.
//!
//! Our own starvation is no evidence: when the standby's timer for a poll fires more
//! than `repoll_interval` after it was due, this process was descheduled, and the
//! master's answer may be waiting unread (or still in a simulator that starved with
//! us). The wait is then not judged: the poll keeps its TID and gets one more
//! `repoll_interval`, and nothing is counted; at most `poll_retries` such excuses per
//! streak, so a dead master behind a host that keeps starving us is still declared
//! lost, at most twice as late. The driver reads what already arrived before it runs
//! timers (ibsmd does), so an on-time tick sees every answer that came in time.
//!
//! # A false takeover, and how short the two masters last
//!
//! A live master whose answers stop for a whole streak (its host starved for over
//! 65 ms) is declared lost; if no answer comes back before the DISCOVERING round
//! concludes, the standby becomes MASTER beside it. IBA's two-masters rule (the lower
//! hands over to the higher) ends that once they read each other, and the master
//! polls every `master_poll_interval` (1 s) made that 1 s (seen on ibsim under load:
//! 981, 985, 978 ms). The rule now: a MASTER concluded from a round in which some
//! known SM port did not answer (above all the lost master, which the round does not
//! ask again) queries each such port at once and re-sends every `repoll_interval`
//! for one `master_poll_interval` (one TID: an answer to any copy counts; the
//! periodic master poll takes over after that). Its first answer goes through the
//! MASTER rules: a MASTER or STANDBY that outranks us gets HANDOVER at once, which a
//! master accepts. And that query names us MASTER in its payload, so when it is the
//! new master that outranks the old one (sticky priorities), the old master reads it
//! back at once and hands over. Either way the two masters last until the old one
//! answers again plus at most one `repoll_interval` and two round trips; what the
//! protocol cannot shorten is the silence itself: until the old master answers,
//! nothing can tell it from a dead one. The cost: up to `master_poll_interval` /
//! `repoll_interval` (50) SMPs to a port that is really gone, once per takeover.
//!
//! A hung master answers SMInfo but initiates nothing: its ActCount stops. `stall_window`
//! (default 6 s: three light sweeps of a master at the default 2 s; ibsmd sets three of
//! its own light-sweep intervals) declares it lost ([`TransitionReason::ActCountStalled`])
//! within one poll of that. A healthy ibsm master moves ActCount at least every light
//! sweep, and, while a heavy sweep waits for its routing worker, every
//! `master_poll_interval` (1 s) with its SMInfo queries of the other SM ports (the
//! standby among them), so a long routing computation is no stall. OpenSM 3.3.23's
//! ActCount moves with every SMInfo it answers (seen on ibsim), so an OpenSM master never
//! looks stalled to this rule.
//!
//! ActCount: the driver reports the SMPs it initiates (requests and traps, including the
//! ones this machine emits) with [`Election::handle_smps_sent`], never responses: a
//! master that merely answers polls must not look alive to the stall rule.

mod answer;
mod config;
mod machine;
mod types;
pub mod wire;

pub(crate) use answer::response_dlid;
pub use answer::{SmInfoAnswer, SmInfoResponder};
#[cfg(feature = "fault-injection")]
pub use config::InjectedFault;
pub use config::{
    ElectionConfig, ElectionConfigError, ElectionError, SmKeyPolicy, DEFAULT_POLL_INTERVAL,
    DEFAULT_REPOLL_INTERVAL, MAX_PRIORITY, STATUS_INVALID_VALUE,
};
pub use machine::{route_for_new_request, Election};
pub use types::{
    ControlPacket, DrRoute, ElectionEvent, RejectReason, SmInfo, SmInfoMsg, SmPort, SmRoute,
    SmState, TransitionReason, Transmit,
};

#[cfg(test)]
mod tests;
