//! The replication writer of a daemon (`ibsmd::replication`), against a real
//! one-member Raft replica on disk.

mod common;

use std::time::{Duration, Instant};

use ibsm_replica::LidRange;
use ibsmd::replication::{FabricRecord, Replication};

/// Two SMs became MASTER together and both claimed; the election then kept the one
/// whose claim was older. It is deposed by the newer epoch, but as it stays MASTER it
/// must claim again and write, or the fabric runs with nothing replicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_master_that_stays_master_claims_again_and_writes() {
    const OURS: u64 = 0x0002_c903_0000_0001;
    const OTHER: u64 = 0x0002_c903_0000_0002;
    let dir = tempfile::tempdir().expect("tempdir");
    let repl = Replication::start(common::one_member_cluster(dir.path()))
        .await
        .expect("replica starts");

    repl.become_master(OURS);
    common::wait_async("our claim commits", || {
        let st = repl.status();
        (st.held_epoch == Some(1))
            .then_some(())
            .ok_or(format!("{st:?}"))
    })
    .await;

    // The other master's claim lands after ours.
    let theirs = repl
        .replica()
        .claim_mastership(OTHER)
        .await
        .expect("the other claim commits");
    assert_eq!(theirs, 2);

    // Our next sweep's record is refused as stale: deposed, and degraded meanwhile.
    let mut record = FabricRecord::default();
    record.guid2lid.insert(
        OURS,
        LidRange {
            min_lid: 1,
            max_lid: 1,
        },
    );
    repl.publish(record.clone());
    let deposed_at = Instant::now();
    common::wait_async("deposed, with the reason in status", || {
        let st = repl.status();
        (st.deposed && st.degraded && st.degraded_reason.contains("deposed by epoch 2"))
            .then_some(())
            .ok_or(format!("{st:?}"))
    })
    .await;
    assert!(
        repl.replica().with_state(|s| s.guid2lid.is_empty()),
        "a deposed master wrote with its stale epoch"
    );

    // Still MASTER: it claims epoch 3 and the next record is written with it.
    common::wait_async("claimed again", || {
        let st = repl.status();
        (st.held_epoch == Some(3) && !st.deposed && !st.degraded)
            .then_some(())
            .ok_or(format!("{st:?}"))
    })
    .await;
    assert!(
        deposed_at.elapsed() >= Duration::from_millis(500),
        "claimed again before the election could settle"
    );
    assert_eq!(
        repl.replica().with_state(|s| s.master_guid),
        Some(OURS),
        "the epoch holder"
    );
    repl.publish(record);
    common::wait_async("the record is replicated", || {
        let n = repl.replica().with_state(|s| s.guid2lid.len());
        (n == 1)
            .then_some(())
            .ok_or(format!("{n} guid2lid entries"))
    })
    .await;

    // A deposed master that stepped down does not claim again.
    repl.replica()
        .claim_mastership(OTHER)
        .await
        .expect("a third claim commits");
    let mut r2 = FabricRecord::default();
    r2.guid2lid.insert(
        OURS,
        LidRange {
            min_lid: 2,
            max_lid: 2,
        },
    );
    repl.publish(r2);
    common::wait_async("deposed again", || {
        let st = repl.status();
        st.deposed.then_some(()).ok_or(format!("{st:?}"))
    })
    .await;
    repl.stop_master();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(repl.replica().with_state(|s| s.epoch), 4);
    assert_eq!(repl.replica().with_state(|s| s.master_guid), Some(OTHER));
    repl.shutdown().await;
}
