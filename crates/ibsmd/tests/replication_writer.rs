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

/// The MASTER's partition poll compares the generation of the replicated partition set
/// (decoded off the SM thread); it must move when a partition changes, and only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replicated_partition_set_changes_generation_only_when_a_partition_does() {
    use ibsm_core::subnet::{Membership, Partition, PartitionMember};
    use ibsm_replica::{Command, ConfigChange};
    use ibsmd::replication::{encode_partition, partition_key};

    let dir = tempfile::tempdir().expect("tempdir");
    let repl = Replication::start(common::one_member_cluster(dir.path()))
        .await
        .expect("replica starts");
    common::wait_async("the member leads", || {
        let m = repl.metrics();
        m.leader.is_some().then_some(()).ok_or(format!("{m:?}"))
    })
    .await;
    let (g0, set0) = repl.replicated_partitions();
    assert!(set0.is_empty(), "{set0:?}");

    let part = Partition {
        groups: Vec::new(),
        index0: false,
        name: "storage".into(),
        p_key: 0x0123,
        members: vec![PartitionMember {
            port_guid: 0x0002_c903_0000_0042,
            membership: Membership::Full,
        }],
        ipoib: None,
    };
    let set = |key: String, value: String| Command::Config(ConfigChange::Set { key, value });
    repl.replica()
        .write(set(partition_key(part.p_key), encode_partition(&part)))
        .await
        .expect("the partition commits");
    common::wait_async("the new set is decoded", || {
        let (g, s) = repl.replicated_partitions();
        (g > g0 && s.as_slice() == std::slice::from_ref(&part))
            .then_some(())
            .ok_or(format!("generation {g}, {s:?}"))
    })
    .await;
    let (g1, _) = repl.replicated_partitions();

    // Another key moves the applied index but not the set.
    let receipt = repl
        .replica()
        .write(set("sm_priority".into(), "3".into()))
        .await
        .expect("another key commits");
    common::wait_async("the cache saw the later index", || {
        let applied = repl.metrics().last_applied.unwrap_or(0);
        (applied >= receipt.log_index)
            .then_some(())
            .ok_or(format!("applied {applied}"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(repl.replicated_partitions().0, g1, "no partition changed");
    repl.shutdown().await;
}
