//! How the instance thread reads: ahead of its turn, answering SubnAdmGet of fabric
//! records from the SA snapshot as they are read ([`SaReader`]) and queueing the rest
//! in order, and how it sends the SA's MADs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_core::election::SmInfoResponder;
use ibsm_core::node::Input;
use ibsm_core::sa::{SaReader, SaTransmit};
use ibsm_transport::ReceivedMad;

use super::poll_answer::Incoming;
use super::{count_received, slow_step, Driver};
use crate::error::DaemonError;

/// At most this many MADs read ahead of their turn (see [`Driver::read_ahead`]); the
/// rest wait in the device.
const MAX_PENDING: usize = 4096;

impl Driver {
    /// Read what the device holds now, without waiting: a SubnAdmGet of a fabric
    /// record is answered at once (`take`), anything else is queued for its turn. So
    /// an SA query waits behind at most the one MAD being handled, never behind a
    /// batch of SMP answers (a light sweep's, a trap burst) read before it.
    pub(super) fn read_ahead(&mut self) -> Result<(), DaemonError> {
        while self.pending.len() < MAX_PENDING {
            let Some(r) = self.recv(Duration::ZERO)? else {
                break;
            };
            self.take(r);
        }
        Ok(())
    }

    /// The next MAD, waiting up to `timeout`: through the SMInfo stand-in when there is
    /// one (first what it read while this thread was busy, SMInfo polls already
    /// answered, [`super::poll_answer`]), else from the device.
    pub(super) fn recv(&mut self, timeout: Duration) -> Result<Option<Incoming>, DaemonError> {
        match &self.reader {
            Some(r) => Ok(r.recv(timeout)?),
            None => Ok(self.dev.recv(timeout)?.map(|mad| Incoming {
                mad,
                answered: false,
            })),
        }
    }

    /// One MAD read: answered now by the SA reader, or queued. With the SMInfo
    /// stand-in, a SubnGet(SMInfo) is answered now too, ahead of the MADs queued before
    /// it, from the node's state after its last step (as the stand-in answers), and
    /// queued marked answered.
    pub(super) fn take(&mut self, mut r: Incoming) {
        if !r.mad.is_smp() && self.sa_read(&r.mad) {
            return;
        }
        if !r.answered && self.reader.is_some() && SmInfoResponder::is_sminfo_get(&r.mad.mad) {
            r.answered = self.answer_sminfo(&r.mad);
        }
        self.pending.push_back(r);
    }

    /// Answer a SubnGet(SMInfo) as read ([`SmInfoResponder::answer`], the node's own
    /// bytes); false: the node answers it in its turn.
    fn answer_sminfo(&mut self, m: &ReceivedMad) -> bool {
        let Some(a) = self
            .node
            .sminfo_responder()
            .and_then(|s| s.answer(&m.mad, m.slid()))
        else {
            return false;
        };
        let sent = super::poll_answer::send_answer(&mut *self.dev, &a, m.slid());
        if sent {
            self.cfg.metrics.sminfo_fast_answered();
        }
        sent
    }

    /// Handle the queued MADs in order, reading ahead after each.
    pub(super) fn handle_pending(&mut self) -> Result<(), DaemonError> {
        while let Some(r) = self.pending.pop_front() {
            let now = self.now();
            self.mad(now, &r);
            self.read_ahead()?;
        }
        Ok(())
    }

    /// Hand the node one MAD (logged when the step is slow).
    pub(super) fn mad(&mut self, now: Duration, r: &Incoming) {
        let t = Instant::now();
        count_received(&self.cfg.metrics, &r.mad);
        let m = &r.mad;
        let input = if r.answered {
            // Answered by the reader thread: the node notes it, sends nothing.
            Input::SmInfoAnswered {
                mad: &m.mad,
                slid: m.slid(),
            }
        } else if m.is_smp() {
            Input::Mad {
                mad: &m.mad,
                slid: m.slid(),
            }
        } else {
            // A GMP reaches the device only for a class it registered (the SA's 0x03).
            Input::Gmp {
                mad: &m.mad,
                from: m.from,
            }
        };
        self.node.handle_input(now, input);
        self.drain();
        slow_step("MAD", t);
    }

    /// Answer `r` from the SA snapshot if it is a SubnAdmGet of a fabric record and
    /// this SM is MASTER ([`SaReader`]); false: the node handles it (in its turn).
    fn sa_read(&mut self, r: &ReceivedMad) -> bool {
        let Some(reader) = &self.sa_reader else {
            return false;
        };
        if !SaReader::is_reader_query(&r.mad) {
            return false;
        }
        let t = Instant::now();
        let Some(a) = reader.answer(&r.mad, r.from) else {
            return false;
        };
        count_received(&self.cfg.metrics, r);
        self.sa_reader_counts.0 += 1;
        self.sa_reader_counts.1 += u64::from(a.error);
        tracing::trace!(
            lid = r.from.lid,
            error = a.error,
            queued = self.pending.len(),
            "SA: Get answered from the snapshot as read"
        );
        self.send_gmp(&a.transmit);
        slow_step("SA Get", t);
        true
    }

    /// Put one GMP on the device; a send error is counted, never fatal.
    pub(super) fn send_gmp(&mut self, t: &SaTransmit) {
        if let Err(err) = self.dev.send_gmp(&t.to, t.wire()) {
            self.send_errors = self.send_errors.saturating_add(1);
            tracing::debug!(%err, lid = t.to.lid, qpn = t.to.qpn, "SA answer not sent");
        }
    }

    /// Follow the node's SA snapshot and mastership: a reader of the snapshot the
    /// node's SA answers from while MASTER, none otherwise.
    pub(super) fn refresh_sa_reader(&mut self) {
        match self.node.sa_reader_snapshot() {
            Some(f)
                if self
                    .sa_reader
                    .as_ref()
                    .is_some_and(|r| Arc::ptr_eq(r.fabric(), f)) => {}
            Some(f) => {
                self.sa_reader = self
                    .node
                    .sa()
                    .map(|sa| SaReader::new(sa.config().clone(), Arc::clone(f)));
            }
            None => self.sa_reader = None,
        }
    }
}
