//! When each SM last answered, as the others saw it: `PeerView::answered_at` and
//! `missed_polls`, and since when an SM is in its state (`NodeStatus::state_since`).
//! A drill dates a silent SM's last known state from these.

use std::time::Duration;

use super::*;

fn peer(lab: &Lab, viewer: usize, guid: u64) -> PeerView {
    let st = lab.sms[viewer].node.as_ref().unwrap().status();
    st.sms
        .into_iter()
        .find(|p| p.guid == guid)
        .unwrap_or_else(|| panic!("SM {viewer} does not list {guid:#x}"))
}

#[test]
fn a_hung_master_keeps_the_time_of_its_last_answer_and_counts_missed_polls() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let mut lab = Lab::new(topo, &[10, 5]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let master = lab.sms[0].node.as_ref().unwrap().status();
    let standby = lab.sms[1].node.as_ref().unwrap().status();
    // Each SM's own entry is dated by nobody; its state has a start.
    let me = standby.sms.iter().find(|p| p.is_self).unwrap();
    assert_eq!((me.answered_at, me.missed_polls), (None, 0));
    assert_eq!(standby.state, Some(SmState::Standby));
    assert!(standby.state_since > Duration::ZERO && standby.state_since <= lab.now);
    assert!(master.state_since <= lab.now);

    // The standby polls its master: the last answer is recent, nothing missed.
    let seen = peer(&lab, 1, master.port_guid);
    assert_eq!(seen.state, Some(SmState::Master));
    let answered = seen
        .answered_at
        .expect("the master answered the standby's polls");
    assert!(answered <= lab.now && answered > Duration::ZERO);
    assert_eq!(seen.missed_polls, 0);
    // And the master read the standby's SMInfo in its sweeps.
    assert!(peer(&lab, 0, standby.port_guid).answered_at.is_some());

    // The master's SM hangs: its port stays on the fabric, its SMInfo goes silent.
    lab.sms[0].node = None;
    let hung_at = lab.now;
    let last = peer(&lab, 1, master.port_guid)
        .answered_at
        .expect("answered before");
    while lab.state(1) == Some(SmState::Standby) {
        lab.run_to(lab.now + Duration::from_millis(50));
        assert!(lab.now < hung_at + Duration::from_secs(120), "no takeover");
    }
    // Polls went unanswered; the last answer's time did not move.
    let seen = peer(&lab, 1, master.port_guid);
    assert_eq!(seen.answered_at, Some(last));
    assert!(seen.answered_at.unwrap() <= hung_at);
    assert_eq!(seen.state, Some(SmState::Master), "last seen MASTER");
    let st1 = lab.sms[1].node.as_ref().unwrap().status();
    assert!(
        st1.state_since > hung_at,
        "state_since moves with the state"
    );
    assert!(
        st1.state_reason.contains("master or higher SM"),
        "why it is in its state: {}",
        st1.state_reason
    );
    assert_eq!(st1.handed_over_to, 0);
    lab.run_to(lab.now + Duration::from_secs(3));
    assert_eq!(lab.masters(), vec![1]);
    let seen = peer(&lab, 1, master.port_guid);
    assert_eq!(seen.answered_at, Some(last));
    assert!(
        seen.missed_polls >= 1,
        "the new master's sweeps read the silent SM port: {seen:?}"
    );
}
