//! [`MadDevice`] over a umad port (kernel or ibsim's umad2sim).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_mad::{MadAddress, MAD_SIZE};
use ibsm_umad::{Dest, GsiClass, PortSpec, UmadOptions, UmadPort};

use crate::device::{gmp_class, MadDevice, ReceivedMad};
use crate::error::TransportError;

/// A umad port used for SMPs and, with [`UmadDevice::open_with_sa`] or
/// [`UmadDevice::register_gsi`], GMPs. Requests go out with the kernel's own response
/// tracking set to `request_timeout` (a Linux kernel drops responses to requests sent
/// with timeout 0) and no kernel retries: retries belong to
/// `ibsm_core::transactions`. The kernel's "request timed out" notices are swallowed
/// here for the same reason (and so is ibsim's bounce of an undeliverable MAD, which
/// comes back with the same status).
#[derive(Debug)]
pub struct UmadDevice {
    /// Shared by the handles [`MadDevice::try_share`] gives (its I/O takes `&self`).
    port: Arc<UmadPort>,
}

impl UmadDevice {
    /// Open the port `spec` names (`umad`, `umadN`, `umad:CA[:PORT]`), SMP agents only:
    /// what sweeping and discovery need, and all a tool may take on a port where
    /// another SM's SA holds class 0x03.
    pub fn open(spec: &PortSpec, request_timeout: Duration) -> Result<UmadDevice, TransportError> {
        let opts = UmadOptions {
            request_timeout,
            request_retries: 0,
            ..UmadOptions::default()
        };
        Ok(UmadDevice {
            port: Arc::new(UmadPort::open_spec(spec, opts)?),
        })
    }

    /// [`UmadDevice::open`] plus the Subnet Administrator's GSI agent
    /// ([`GsiClass::SUBN_ADM`]: class 0x03, version 2, on QP1, raw RMPP): the device of an
    /// SM that serves SA. Under ibsim the SA's requests reach only a client that holds
    /// `issmN` open, as the SM does anyway (see the `ibsm_umad` crate doc).
    pub fn open_with_sa(
        spec: &PortSpec,
        request_timeout: Duration,
    ) -> Result<UmadDevice, TransportError> {
        let mut dev = UmadDevice::open(spec, request_timeout)?;
        dev.register_gsi(GsiClass::SUBN_ADM)?;
        Ok(dev)
    }

    /// Wrap an already open port (its GSI agents, if any, included).
    pub fn from_port(port: UmadPort) -> UmadDevice {
        UmadDevice {
            port: Arc::new(port),
        }
    }

    /// Register a GSI agent for another class ([`UmadPort::register_gsi`]); only before
    /// the device is shared ([`MadDevice::try_share`]).
    pub fn register_gsi(&mut self, class: GsiClass) -> Result<u32, TransportError> {
        let port = Arc::get_mut(&mut self.port).ok_or(TransportError::Shared {
            what: "register a GSI agent",
        })?;
        Ok(port.register_gsi(class)?)
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

    fn send_gmp(&mut self, to: &MadAddress, mad: &[u8]) -> Result<(), TransportError> {
        let class = gmp_class(mad)?;
        if self.port.agent_id(class).is_none() {
            return Err(TransportError::GmpUnsupported { class });
        }
        Ok(self.port.send_gmp(mad, to)?)
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
                        from: r.source_address(),
                        mad: r.mad,
                    }))
                }
                None => return Ok(None),
            }
        }
    }

    fn try_share(&self) -> Option<Box<dyn MadDevice + Send>> {
        Some(Box::new(UmadDevice {
            port: Arc::clone(&self.port),
        }))
    }
}
