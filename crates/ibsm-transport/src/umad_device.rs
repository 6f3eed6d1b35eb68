//! [`MadDevice`] over a umad port (kernel or ibsim's umad2sim).

use std::time::{Duration, Instant};

use ibsm_mad::MAD_SIZE;
use ibsm_umad::{Dest, PortSpec, UmadOptions, UmadPort};

use crate::device::{MadDevice, ReceivedMad};
use crate::error::TransportError;

/// A umad port used for SMPs. Requests go out with the kernel's own response
/// tracking set to `request_timeout` (a Linux kernel drops responses to requests
/// sent with timeout 0) and no kernel retries: retries belong to
/// `ibsm_core::transactions`. The kernel's "request timed out" notices are
/// swallowed here for the same reason.
#[derive(Debug)]
pub struct UmadDevice {
    port: UmadPort,
}

impl UmadDevice {
    /// Open the port `spec` names (`umad`, `umadN`, `umad:CA[:PORT]`).
    pub fn open(spec: &PortSpec, request_timeout: Duration) -> Result<UmadDevice, TransportError> {
        let opts = UmadOptions {
            request_timeout,
            request_retries: 0,
            ..UmadOptions::default()
        };
        Ok(UmadDevice {
            port: UmadPort::open_spec(spec, opts)?,
        })
    }

    /// Wrap an already open port.
    pub fn from_port(port: UmadPort) -> UmadDevice {
        UmadDevice { port }
    }

    /// The underlying port.
    pub fn port(&self) -> &UmadPort {
        &self.port
    }
}

impl MadDevice for UmadDevice {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        Ok(self.port.send(mad, Dest::Directed)?)
    }

    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        Ok(self.port.send(mad, Dest::Lid(dlid))?)
    }

    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.port.recv(left)? {
                Some(r) if r.is_timeout() => {
                    tracing::trace!(tid = r.tid(), "kernel request timeout ignored");
                    if left.is_zero() {
                        return Ok(None);
                    }
                }
                Some(r) => {
                    return Ok(Some(ReceivedMad {
                        mad: r.mad,
                        slid: r.source.lid,
                    }))
                }
                None => return Ok(None),
            }
        }
    }
}
