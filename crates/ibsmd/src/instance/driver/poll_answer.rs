//! SMInfo polls answered while the SM thread is busy: a stand-in reader of the port.
//!
//! The SM thread reads the port itself, as ever, and answers a SubnGet(SMInfo) the
//! moment it reads one (`Driver::take`), before the MADs queued ahead of it. While it
//! is inside a step (a MAD, its timers, a job's result, a publication) that has lasted
//! [`TAKE_OVER_AFTER`], a second thread, the stand-in, reads the port in its place: it
//! answers each SubnGet(SMInfo) from what the node last published
//! ([`SmInfoResponder`], taken after each batch of the node's outputs) and queues every
//! MAD, answered ones marked, for the SM thread, which takes the queue first when its
//! step ends and then the port back. A standby's poll is so answered within a few ms
//! whatever the SM thread is doing (a sweep's end, a routing result, a descheduled
//! thread), so a busy master is no lost master; and a bring-up's SMP answers, read by
//! the SM thread between its short steps, take no extra hop between threads (which
//! halved ibsim's answer rate when every MAD went through a reader thread).
//!
//! What stays on the SM thread: everything but the answer, the SMInfo Sets (HANDOVER,
//! DISABLE ...) included, and the note of each poll (the node counts it and refreshes
//! the poller's roster entry: `Input::SmInfoAnswered`). The answer carries the ActCount
//! of the node's last batch of work: a master whose SM thread hangs answers with an
//! ActCount that stands still, which its standbys' stall rule declares lost
//! (`hung_master_window`).
//!
//! The reading handle is behind a lock that whoever reads holds; the SM thread sends on
//! its own handle of the same port (`MadDevice::try_share`: a umad fd takes concurrent
//! reads and writes, umad2sim serializes writes under its device lock and queues reads
//! per descriptor; the embedded simulator shares its client). A device that cannot be
//! shared, or `InstanceConfig::sminfo_answer_thread` off, keeps the SM thread the only
//! reader and the only one to answer, in its turn.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ibsm_core::election::SmInfoResponder;
use ibsm_transport::{MadDevice, ReceivedMad, TransportError};

use crate::error::DaemonError;
use crate::metrics::Metrics;

/// A step of the SM thread this long makes the stand-in read the port: a few of them
/// fit in a standby's loss streak (65 ms at the defaults).
const TAKE_OVER_AFTER: Duration = Duration::from_millis(5);
/// How often the stand-in looks whether the SM thread is in a step that long.
const CHECK_EVERY: Duration = Duration::from_millis(2);
/// The stand-in's wait in the port per read: how long the SM thread, back from its
/// step, may wait for the port.
const STAND_IN_WAIT: Duration = Duration::from_millis(1);

/// One MAD as the SM thread takes it.
pub(in crate::instance) struct Incoming {
    pub(in crate::instance) mad: ReceivedMad,
    /// A SubnGet(SMInfo) already answered (by the stand-in, or by the SM thread as it
    /// read it).
    pub(in crate::instance) answered: bool,
}

/// What the SM thread and the stand-in share.
struct Shared {
    /// The reading handle of the port; held by whoever reads.
    port: Mutex<Box<dyn MadDevice + Send>>,
    /// The node's SMInfo answer state after its last batch of work.
    responder: Mutex<Option<SmInfoResponder>>,
    /// Since when (µs after `epoch`, at least 1) the SM thread is in a step; 0: it
    /// reads, or wants the port back.
    busy_since_us: AtomicU64,
    epoch: Instant,
    stop: AtomicBool,
}

impl Shared {
    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn port(&self) -> MutexGuard<'_, Box<dyn MadDevice + Send>> {
        self.port.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The SM thread's side: its reads of the port, and the stand-in behind them.
pub(in crate::instance) struct PollAnswerer {
    shared: Arc<Shared>,
    /// MADs the stand-in read, in order.
    rx: mpsc::Receiver<Result<Incoming, TransportError>>,
    /// What was last published (to publish only changes).
    last: Option<SmInfoResponder>,
    thread: Option<JoinHandle<()>>,
}

impl PollAnswerer {
    /// Start the stand-in; `reading` is a handle of the port shared with the SM
    /// thread, which keeps sending on its own.
    pub(in crate::instance) fn spawn(
        name: &str,
        reading: Box<dyn MadDevice + Send>,
        metrics: Arc<Metrics>,
    ) -> Result<PollAnswerer, DaemonError> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            port: Mutex::new(reading),
            responder: Mutex::new(None),
            busy_since_us: AtomicU64::new(0),
            epoch: Instant::now(),
            stop: AtomicBool::new(false),
        });
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("{name}-sminfo"))
            .spawn(move || stand_in(&theirs, &tx, &metrics))
            .map_err(|source| DaemonError::Thread {
                name: name.to_string(),
                what: "SMInfo stand-in",
                source,
            })?;
        Ok(PollAnswerer {
            shared,
            rx,
            last: None,
            thread: Some(thread),
        })
    }

    /// The node's SMInfo answer state now (`None`: not running yet, or stopped: the
    /// SM thread answers in its turn).
    pub(in crate::instance) fn publish(&mut self, responder: Option<SmInfoResponder>) {
        if responder == self.last {
            return;
        }
        if let Ok(mut r) = self.shared.responder.lock() {
            r.clone_from(&responder);
        }
        self.last = responder;
    }

    /// The SM thread's read: what the stand-in read first, else the port, waiting up to
    /// `timeout`. From its return until the next call the SM thread counts as in a step.
    pub(in crate::instance) fn recv(
        &self,
        timeout: Duration,
    ) -> Result<Option<Incoming>, TransportError> {
        self.shared.busy_since_us.store(0, Ordering::Relaxed);
        let r = self.read(timeout);
        self.shared
            .busy_since_us
            .store(self.shared.now_us(), Ordering::Relaxed);
        r
    }

    fn read(&self, timeout: Duration) -> Result<Option<Incoming>, TransportError> {
        if let Ok(m) = self.rx.try_recv() {
            return m.map(Some);
        }
        let mut port = self.shared.port();
        // The stand-in queues what it read before it lets the port go.
        if let Ok(m) = self.rx.try_recv() {
            return m.map(Some);
        }
        Ok(port.recv(timeout)?.map(|mad| Incoming {
            mad,
            answered: false,
        }))
    }
}

impl Drop for PollAnswerer {
    /// Stop the stand-in (within [`CHECK_EVERY`]) before the port's keepalive goes.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The stand-in: while the SM thread is in a step of [`TAKE_OVER_AFTER`] or more, read
/// the port, answer SMInfo polls, queue everything for the SM thread.
fn stand_in(
    shared: &Shared,
    tx: &mpsc::Sender<Result<Incoming, TransportError>>,
    metrics: &Metrics,
) {
    let after = u64::try_from(TAKE_OVER_AFTER.as_micros()).unwrap_or(u64::MAX);
    let busy = || {
        let since = shared.busy_since_us.load(Ordering::Relaxed);
        since != 0 && shared.now_us().saturating_sub(since) >= after
    };
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(CHECK_EVERY);
        if !busy() {
            continue;
        }
        let Ok(mut port) = shared.port.try_lock() else {
            continue;
        };
        let (took_over, mut read, mut answered_n) = (Instant::now(), 0u64, 0u64);
        while shared.busy_since_us.load(Ordering::Relaxed) != 0
            && !shared.stop.load(Ordering::Relaxed)
        {
            let mad = match port.recv(STAND_IN_WAIT) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let answered = SmInfoResponder::is_sminfo_get(&mad.mad)
                && answer(&mut **port, &shared.responder, &mad);
            if answered {
                metrics.sminfo_fast_answered();
                answered_n += 1;
            }
            read += 1;
            if tx.send(Ok(Incoming { mad, answered })).is_err() {
                return;
            }
        }
        drop(port);
        if answered_n > 0 {
            tracing::debug!(
                answered = answered_n,
                read,
                ms = u64::try_from(took_over.elapsed().as_millis()).unwrap_or(u64::MAX),
                "SMInfo stand-in: polls answered while the SM thread was busy"
            );
        }
    }
}

/// Answer the SubnGet(SMInfo) `mad` from the node's last published state; false when
/// there is none yet or the answer could not be sent (the SM thread answers then).
fn answer(
    dev: &mut dyn MadDevice,
    responder: &Mutex<Option<SmInfoResponder>>,
    mad: &ReceivedMad,
) -> bool {
    let responder = responder
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let Some(a) = responder.and_then(|r| r.answer(&mad.mad, mad.slid())) else {
        return false;
    };
    send_answer(dev, &a, mad.slid())
}

/// Send an answer built by [`SmInfoResponder::answer`]; false (logged) if the device
/// refused it.
pub(in crate::instance) fn send_answer(
    dev: &mut dyn MadDevice,
    a: &ibsm_core::election::SmInfoAnswer,
    slid: u16,
) -> bool {
    let sent = match a.dlid {
        Some(l) if l != 0 => dev.send_lid(l, &a.mad),
        _ => dev.send(&a.mad),
    };
    match sent {
        Ok(()) => true,
        Err(err) => {
            tracing::debug!(%err, slid, "SMInfo answer not sent ahead: the node answers it in its turn");
            false
        }
    }
}
