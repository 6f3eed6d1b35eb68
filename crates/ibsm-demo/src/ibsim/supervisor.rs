//! The one thread that starts every process of the demo (so `PR_SET_PDEATHSIG` ties
//! them to it) and runs ibsim console commands, one at a time.

use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::demo::DemoError;

pub(super) type Job = Box<dyn FnOnce() + Send>;

/// The one thread that starts processes (their `PR_SET_PDEATHSIG` follows it) and
/// talks to ibsim's console.
pub(super) struct Supervisor {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Supervisor {
    pub(super) fn start() -> anyhow::Result<Supervisor> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("ibsim-demo-supervisor".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })?;
        Ok(Supervisor {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Run `f` on the supervisor thread and wait for its result.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, DemoError> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        {
            let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
            let sender = guard
                .as_ref()
                .ok_or_else(|| DemoError::Unavailable("the demo is shutting down".into()))?;
            sender.send(job).map_err(|_| {
                DemoError::Unavailable("the demo's supervisor thread is gone".into())
            })?;
        }
        rx.await.map_err(|_| {
            DemoError::Unavailable("the demo's supervisor thread dropped a job".into())
        })
    }

    pub(super) fn shutdown(&self) {
        drop(self.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}
