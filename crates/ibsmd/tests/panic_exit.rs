//! A panic on a thread other than main ends the whole process (the hook `ibsmd`'s
//! main installs), so a supervisor restarts it. The test runs itself again as a
//! child with `IBSM_PANIC_EXIT_CHILD` set: the child installs the hook, panics on a
//! worker thread and would otherwise go on running (and exit 0).

use std::process::Command;
use std::time::Duration;

const CHILD: &str = "IBSM_PANIC_EXIT_CHILD";

#[test]
fn a_panic_on_a_worker_thread_ends_the_process() {
    if std::env::var_os(CHILD).is_some() {
        ibsmd::install_panic_exit();
        let worker = std::thread::spawn(|| panic!("the SM thread broke an invariant"));
        let _ = worker.join();
        // Without the hook, the process lives on after its worker died.
        std::thread::sleep(Duration::from_secs(5));
        std::process::exit(0);
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "a_panic_on_a_worker_thread_ends_the_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    assert_eq!(
        out.status.code(),
        Some(ibsmd::PANIC_EXIT_CODE),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the SM thread broke an invariant"),
        "the panic message is printed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
