//! Opening a umad port as an SA client.

use std::time::Duration;

use ibsm_transport::{TransportError, UmadDevice};
use ibsm_umad::{GsiClass, PortSpec};

/// The client's QP1 agent: class 0x03, version 2, with only Report (0x06) in the
/// method mask (the one request a client takes; responses to our own requests reach
/// the agent that sent them without being in any mask).
pub const SA_CLIENT_CLASS: GsiClass = GsiClass {
    class: 0x03,
    class_version: 2,
    methods: &[0x06],
};

/// Open the port `spec` names (`umad`, `umadN`, `umad:CA[:PORT]`) with the SMP agents
/// (for the 0-hop reads of the local port) and [`SA_CLIENT_CLASS`]. Each request waits
/// up to `request_timeout` in the kernel for its response: give it at least the
/// client's [`crate::ClientConfig::timeout`].
///
/// Where another agent already takes Reports of class 0x03 on the port, the agent is
/// registered with no method at all: requests and answers work, Reports do not come.
pub fn open_umad(spec: &PortSpec, request_timeout: Duration) -> Result<UmadDevice, TransportError> {
    let mut dev = UmadDevice::open(spec, request_timeout)?;
    if let Err(e) = dev.register_gsi(SA_CLIENT_CLASS) {
        tracing::warn!(error = %e, "SA client agent with Report refused; registering without it (no Reports)");
        let mut dev = UmadDevice::open(spec, request_timeout)?;
        dev.register_gsi(GsiClass {
            methods: &[],
            ..SA_CLIENT_CLASS
        })?;
        return Ok(dev);
    }
    Ok(dev)
}
