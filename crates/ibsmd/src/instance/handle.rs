//! [`Instance`]: the handle to a running SM instance: starting its thread, reading
//! its status, sending it commands, stopping it.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use ibsm_core::election::SmState;
use ibsm_core::subnet::SubnetManager;
use ibsm_transport::MadDevice;
use tokio::sync::broadcast;

use crate::error::DaemonError;

use super::api::{record, Command, CommandError, EventRecord, InstanceConfig, Snapshot};
use super::driver::Driver;

/// Handle to a running SM instance.
pub struct Instance {
    name: String,
    cmd: Mutex<mpsc::Sender<Command>>,
    status: Arc<RwLock<Snapshot>>,
    events: broadcast::Sender<EventRecord>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// Start an instance on `device`. `keepalive` lives as long as the thread and is
    /// dropped when it ends (an open issm, or a guard that detaches a simulator client):
    /// that is what makes the port stop advertising IsSM.
    pub fn spawn(
        cfg: InstanceConfig,
        device: Box<dyn MadDevice + Send>,
        keepalive: Box<dyn Send>,
    ) -> Result<Instance, DaemonError> {
        SubnetManager::new(cfg.subnet.clone()).map_err(|e| DaemonError::SubnetConfig {
            name: cfg.name.clone(),
            why: e.to_string(),
        })?;
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let status = Arc::new(RwLock::new(Snapshot::new(&cfg)));
        let (events, _) = broadcast::channel(256);
        let name = cfg.name.clone();
        let thread_status = Arc::clone(&status);
        let thread_events = events.clone();
        let thread_metrics = Arc::clone(&cfg.metrics);
        let thread = std::thread::Builder::new()
            .name(format!("sm-{name}"))
            .spawn(move || {
                let span = tracing::info_span!("sm", name = %cfg.name);
                let _enter = span.enter();
                let name = cfg.name.clone();
                let result = Driver::new(
                    cfg,
                    device,
                    cmd_rx,
                    Arc::clone(&thread_status),
                    thread_events.clone(),
                )
                .and_then(Driver::run);
                if let Err(err) = &result {
                    tracing::error!(%err, "SM instance stopped on error");
                }
                drop(keepalive);
                thread_metrics.set_up(false);
                thread_metrics.set_state(SmState::NotActive);
                if let Ok(mut s) = thread_status.write() {
                    s.running = false;
                    s.state = SmState::NotActive;
                    s.master_guid = 0;
                }
                let why = match result {
                    Ok(()) => format!("SM instance {name} stopped"),
                    Err(e) => format!("SM instance {name} stopped: {e}"),
                };
                let _ = thread_events.send(record("stopped", why, None, None));
            })
            .map_err(|source| DaemonError::Thread {
                name: name.clone(),
                what: "SM",
                source,
            })?;
        Ok(Instance {
            name,
            cmd: Mutex::new(cmd_tx),
            status,
            events,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Instance name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The latest status.
    pub fn status(&self) -> Snapshot {
        match self.status.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.events.subscribe()
    }

    /// Queue a command.
    pub fn send(&self, cmd: Command) -> Result<(), CommandError> {
        let tx = self
            .cmd
            .lock()
            .map_err(|_| CommandError::Unavailable(self.name.clone()))?;
        tx.send(cmd)
            .map_err(|_| CommandError::Unavailable(self.name.clone()))
    }

    /// Whether the thread still runs.
    pub fn is_running(&self) -> bool {
        self.status().running
    }

    /// Stop the thread and wait for it.
    pub fn shutdown(&self) {
        let _ = self.send(Command::Shutdown);
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.shutdown();
    }
}
