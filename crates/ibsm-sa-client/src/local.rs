//! [`LocalPort`]: what the client learns about its own port with 0-hop directed-route
//! SubnGets (NodeInfo, then PortInfo of that port): its GUID and GID (the join and the
//! ServiceGID need them), its LID, and the master SM's LID (where the SA is).
//!
//! Read through the device rather than sysfs because umad2sim fakes sysfs only for
//! libibumad (see `ibsm_umad`), and the embedded simulator has none.

use std::time::{Duration, Instant};

use ibsm_mad::sa::Gid;
use ibsm_mad::{NodeInfo, PortInfo, Smp, SmpAttribute};
use ibsm_transport::MadDevice;

use crate::error::SaClientError;

/// The default (link-local) subnet prefix, fe80::/64.
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xFE80_0000_0000_0000;

/// The client's own port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalPort {
    /// NodeInfo.NodeGUID.
    pub node_guid: u64,
    /// NodeInfo.PortGUID.
    pub port_guid: u64,
    /// NodeInfo.LocalPortNum: the port the device is on.
    pub port_num: u8,
    /// PortInfo.LID (0 before an SM assigned one).
    pub lid: u16,
    /// PortInfo.LMC.
    pub lmc: u8,
    /// PortInfo.MasterSMLID: where the SA answers (0: no master yet).
    pub sm_lid: u16,
    /// PortInfo.MasterSMSL.
    pub sm_sl: u8,
    /// PortInfo.GIDPrefix (the subnet prefix).
    pub gid_prefix: u64,
}

impl LocalPort {
    /// The port's GID: GIDPrefix (the link-local fe80:: when the port still has 0,
    /// as a port no SM set it on does), then PortGUID.
    pub fn gid(&self) -> Gid {
        let prefix = match self.gid_prefix {
            0 => DEFAULT_SUBNET_PREFIX,
            p => p,
        };
        let mut g = [0u8; 16];
        g[..8].copy_from_slice(&prefix.to_be_bytes());
        g[8..].copy_from_slice(&self.port_guid.to_be_bytes());
        g
    }

    /// Read the local port through `dev`: a 0-hop SubnGet(NodeInfo), then
    /// SubnGet(PortInfo) of the port it names, each tried `tries` times with `timeout`.
    /// Other MADs that arrive meanwhile are dropped (nothing is in flight yet).
    pub fn read<D: MadDevice + ?Sized>(
        dev: &mut D,
        timeout: Duration,
        tries: u32,
    ) -> Result<LocalPort, SaClientError> {
        let ni: NodeInfo = get_local(dev, 0, timeout, tries)?;
        let pi: PortInfo = get_local(dev, u32::from(ni.local_port_num), timeout, tries)?;
        Ok(LocalPort {
            node_guid: ni.node_guid,
            port_guid: ni.port_guid,
            port_num: ni.local_port_num,
            lid: pi.lid,
            lmc: pi.lmc,
            sm_lid: pi.master_sm_lid,
            sm_sl: pi.master_sm_sl,
            gid_prefix: pi.gid_prefix,
        })
    }
}

/// One 0-hop SubnGet of `A` with retries.
fn get_local<A: SmpAttribute, D: MadDevice + ?Sized>(
    dev: &mut D,
    attr_mod: u32,
    timeout: Duration,
    tries: u32,
) -> Result<A, SaClientError> {
    let name = std::any::type_name::<A>()
        .rsplit("::")
        .next()
        .unwrap_or("attribute");
    let tid = u64::from(crate::tid::seed_tid());
    let smp = Smp::get_dr_attr::<A>(&[], attr_mod, tid);
    for _ in 0..tries.max(1) {
        dev.send(&smp.encode())?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(r) = dev.recv(left)? else { break };
            if !r.is_smp() {
                continue;
            }
            let Ok(resp) = Smp::decode(&r.mad) else {
                continue;
            };
            if !resp.method.is_response() || resp.tid as u32 != tid as u32 {
                continue;
            }
            if resp.status & 0x7FFF != 0 {
                return Err(SaClientError::LocalPort(format!(
                    "SubnGet({name}) of the local port answered status {:#06x}",
                    resp.status
                )));
            }
            return resp
                .attribute::<A>()
                .map_err(|e| SaClientError::LocalPort(format!("SubnGet({name}) answer: {e}")));
        }
    }
    Err(SaClientError::LocalPort(format!(
        "no answer to a 0-hop SubnGet({name}) after {} tries of {timeout:?}",
        tries.max(1)
    )))
}
