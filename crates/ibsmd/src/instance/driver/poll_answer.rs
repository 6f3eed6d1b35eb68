//! The port's reader thread: it reads the device, answers a SubnGet(SMInfo) the moment
//! it arrives from what the node last published ([`SmInfoResponder`], taken after each
//! batch of the node's outputs), and hands every MAD, answered ones marked, to the SM
//! thread in arrival order. A standby's poll is so answered whatever step the SM thread
//! is in (a sweep's end, a routing result, a descheduled thread), so a busy master is no
//! lost master.
//!
//! What stays on the SM thread: everything else, the SMInfo Sets (HANDOVER, DISABLE ...)
//! included, and the note of each poll (the node counts it, and refreshes the poller's
//! roster entry from it: `Input::SmInfoAnswered`). The answer carries the ActCount of
//! the node's last batch of work: a master whose SM thread hangs answers with an
//! ActCount that stands still, which its standbys' stall rule declares lost
//! (`hung_master_window`).
//!
//! Needs a device that can be shared between two threads (`MadDevice::try_share`: the
//! umad port and the embedded simulator can); otherwise, or with
//! `InstanceConfig::sminfo_answer_thread` off, the SM thread reads the device itself.
//! The hand-off costs one channel send per MAD; the SM thread, busy, finds them queued.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ibsm_core::election::SmInfoResponder;
use ibsm_transport::{MadDevice, ReceivedMad, TransportError};

use crate::error::DaemonError;
use crate::metrics::Metrics;

/// Longest wait of the reader in the device, so it notices a stop this often.
const READ_WAIT: Duration = Duration::from_millis(20);

/// One MAD as the SM thread takes it.
pub(in crate::instance) struct Incoming {
    pub(in crate::instance) mad: ReceivedMad,
    /// A SubnGet(SMInfo) the reader thread already answered.
    pub(in crate::instance) answered: bool,
}

/// What the SM thread and the reader share: the node's latest SMInfo answer state.
#[derive(Default)]
struct Shared {
    responder: Mutex<Option<SmInfoResponder>>,
    stop: AtomicBool,
}

/// The SM thread's side of the reader thread.
pub(in crate::instance) struct PollAnswerer {
    rx: mpsc::Receiver<Result<Incoming, TransportError>>,
    shared: Arc<Shared>,
    /// What was last published (to publish only changes).
    last: Option<SmInfoResponder>,
    thread: Option<JoinHandle<()>>,
    name: String,
}

impl PollAnswerer {
    /// Start the reader thread on `dev` (a handle of the port shared with the SM
    /// thread, which keeps sending on its own).
    pub(in crate::instance) fn spawn(
        name: &str,
        dev: Box<dyn MadDevice + Send>,
        metrics: Arc<Metrics>,
    ) -> Result<PollAnswerer, DaemonError> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("{name}-reader"))
            .spawn(move || read_loop(dev, &theirs, &tx, &metrics))
            .map_err(|source| DaemonError::Thread {
                name: name.to_string(),
                what: "port reader",
                source,
            })?;
        Ok(PollAnswerer {
            rx,
            shared,
            last: None,
            thread: Some(thread),
            name: name.to_string(),
        })
    }

    /// The node's SMInfo answer state now (`None`: not running yet, or stopped: the
    /// SM thread answers).
    pub(in crate::instance) fn publish(&mut self, responder: Option<SmInfoResponder>) {
        if responder == self.last {
            return;
        }
        if let Ok(mut r) = self.shared.responder.lock() {
            r.clone_from(&responder);
        }
        self.last = responder;
    }

    /// The next MAD read, waiting up to `timeout`. A device error ends the reader and
    /// is returned (the SM thread ends on it, as on its own read's error).
    pub(in crate::instance) fn recv(
        &self,
        timeout: Duration,
    ) -> Result<Option<Incoming>, DaemonError> {
        let r = if timeout.is_zero() {
            self.rx.try_recv().map_err(|e| match e {
                mpsc::TryRecvError::Empty => None,
                mpsc::TryRecvError::Disconnected => Some(()),
            })
        } else {
            self.rx.recv_timeout(timeout).map_err(|e| match e {
                mpsc::RecvTimeoutError::Timeout => None,
                mpsc::RecvTimeoutError::Disconnected => Some(()),
            })
        };
        match r {
            Ok(Ok(m)) => Ok(Some(m)),
            Ok(Err(e)) => Err(e.into()),
            Err(None) => Ok(None),
            Err(Some(())) => Err(DaemonError::Node {
                name: self.name.clone(),
                why: "the port's reader thread ended".to_string(),
            }),
        }
    }
}

impl Drop for PollAnswerer {
    /// Stop the reader (within [`READ_WAIT`]) before the port's keepalive goes.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_loop(
    mut dev: Box<dyn MadDevice + Send>,
    shared: &Shared,
    tx: &mpsc::Sender<Result<Incoming, TransportError>>,
    metrics: &Metrics,
) {
    while !shared.stop.load(Ordering::Relaxed) {
        let mad = match dev.recv(READ_WAIT) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let answered = SmInfoResponder::is_sminfo_get(&mad.mad) && answer(&mut *dev, shared, &mad);
        if answered {
            metrics.sminfo_fast_answered();
        }
        if tx.send(Ok(Incoming { mad, answered })).is_err() {
            return;
        }
    }
}

/// Answer the SubnGet(SMInfo) `mad` from the node's last published state; false when
/// there is none yet or the answer could not be sent (the SM thread answers then).
fn answer(dev: &mut dyn MadDevice, shared: &Shared, mad: &ReceivedMad) -> bool {
    let responder = match shared.responder.lock() {
        Ok(r) => r.clone(),
        Err(_) => None,
    };
    let Some(a) = responder.and_then(|r| r.answer(&mad.mad, mad.slid())) else {
        return false;
    };
    let sent = match a.dlid {
        Some(l) if l != 0 => dev.send_lid(l, &a.mad),
        _ => dev.send(&a.mad),
    };
    match sent {
        Ok(()) => true,
        Err(err) => {
            tracing::debug!(%err, slid = mad.slid(), "SMInfo answer not sent by the reader: the SM thread answers");
            false
        }
    }
}
