//! A full disk under a running replica: the writes fail, openraft stops its Raft core
//! (it does not acknowledge what it could not persist), and the daemon must say so:
//! `degraded`, with the reason, not a member that looks healthy while replicating
//! nothing. The test runs itself again as a child with `IBSM_DISK_FULL_CHILD` set; the
//! child sets RLIMIT_FSIZE to 0 once its claim has committed, which makes every later
//! write to a regular file fail with EFBIG, as a full disk fails it with ENOSPC, and
//! lifts the limit again: a new core must then run on the store and writes commit.

mod common;

use std::process::Command;

use ibsm_replica::LidRange;
use ibsmd::replication::{FabricRecord, Replication};

const CHILD: &str = "IBSM_DISK_FULL_CHILD";
const NAME: &str = "a_full_disk_makes_the_member_degraded_with_the_reason_until_it_has_room";

fn child() {
    const OURS: u64 = 0x0002_c903_0000_0001;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let repl = rt
        .block_on(Replication::start(common::one_member_cluster(dir.path())))
        .expect("replica starts");
    let _guard = rt.enter();
    repl.become_master(OURS);
    common::wait_blocking("our claim commits", || {
        let st = repl.status();
        (st.held_epoch == Some(1) && !st.degraded)
            .then_some(())
            .ok_or(format!("{st:?}"))
    });

    // SAFETY: plain libc calls with valid arguments; the signal is ignored so that the
    // failing write returns EFBIG instead of killing the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0, "setrlimit");
    }

    let mut record = FabricRecord::default();
    record.guid2lid.insert(
        OURS,
        LidRange {
            min_lid: 1,
            max_lid: 1,
        },
    );
    repl.publish(record);
    common::wait_blocking("degraded, with the reason", || {
        let st = repl.status();
        (st.degraded
            && st.degraded_reason.contains("Raft core stopped")
            && st.degraded_reason.contains("storage error"))
        .then_some(())
        .ok_or(format!("{st:?}"))
    });
    let st = repl.status();
    eprintln!("DEGRADED: {}", st.degraded_reason);
    assert!(
        repl.metrics().stopped.is_some(),
        "the metrics say the core stopped"
    );
    assert!(
        repl.replica().with_state(|s| s.guid2lid.is_empty()),
        "a write that could not be persisted was applied"
    );

    // Room on the disk again: a new core runs on the store, and writes commit.
    // SAFETY: as above.
    unsafe {
        let lim = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0, "setrlimit");
    }
    common::wait_blocking("a new Raft core runs", || {
        let m = repl.metrics();
        m.stopped.is_none().then_some(()).ok_or(format!("{m:?}"))
    });
    let mut record = FabricRecord::default();
    record.guid2lid.insert(
        OURS,
        LidRange {
            min_lid: 2,
            max_lid: 2,
        },
    );
    repl.publish(record);
    common::wait_blocking("the write after the restart commits", || {
        let st = repl.status();
        let n = repl.replica().with_state(|s| s.guid2lid.len());
        (n == 1 && !st.degraded)
            .then_some(())
            .ok_or(format!("{n} guid2lid entries, {st:?}"))
    });
    eprintln!("RECOVERED");
    std::process::exit(0);
}

#[test]
fn a_full_disk_makes_the_member_degraded_with_the_reason_until_it_has_room() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the child: {stderr}");
    assert!(
        stderr.contains("DEGRADED: the Raft core stopped on a storage error"),
        "the reason names the storage error: {stderr}"
    );
    assert!(stderr.contains("RECOVERED"), "{stderr}");
}
