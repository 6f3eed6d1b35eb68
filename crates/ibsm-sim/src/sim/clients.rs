//! The simulator's clients, SM endpoints at CA ports as `umad`/`issm` on a host:
//! attaching and detaching one, its IsSM bit, the GMP classes it registered (its QP1
//! agents), and which client takes what arrives at a port (its SM first; a GMP request
//! the client of its class) or answers a request it was handed.

use ibsm_fabric::NodeIdx;

use crate::error::SimError;
use crate::state::NONE;

use super::simulator::{ClientRec, Sim};
use super::types::ClientId;

impl Sim {
    /// Attaches an SM endpoint (umad) to CA/router port `port` of `node`. Several clients
    /// may share a port: SMA responses go to the client that sent the request, SMInfo
    /// requests and traps to the port's SM (IsSM set), else to the first attached.
    pub fn attach(&mut self, node: NodeIdx, port: u8) -> Result<ClientId, SimError> {
        let idx = self.user_port(node, port)?;
        let rec = self.node_rec(node)?;
        if rec.switch != NONE || port == 0 {
            return Err(SimError::NotCaPort { node, port });
        }
        if rec.removed {
            return Err(SimError::NodeRemoved(node));
        }
        let id = u32::try_from(self.clients.len()).map_err(|_| SimError::TooManyClients)?;
        self.clients.push(ClientRec {
            port: idx,
            attached: true,
            is_sm: false,
            gsi_classes: [0; 4],
        });
        tracing::debug!(client = id, node = node.0, port, "client attached");
        Ok(ClientId(id))
    }

    /// Detaches a client (its process died or closed umad): clears its IsSM and drops
    /// what is still queued for it.
    pub fn detach(&mut self, client: ClientId) -> Result<(), SimError> {
        self.set_is_sm(client, false)?;
        if let Some(c) = self.clients.get_mut(client.0 as usize) {
            c.attached = false;
        }
        Ok(())
    }

    /// Sets or clears PortInfo.CapabilityMask.IsSM of the client's port, like opening or
    /// closing `/dev/infiniband/issmN`. The bit stays set while any client of the port holds it.
    pub fn set_is_sm(&mut self, client: ClientId, is_sm: bool) -> Result<(), SimError> {
        let port = self.client_rec(client)?.port;
        if let Some(c) = self.clients.get_mut(client.0 as usize) {
            c.is_sm = is_sm;
        }
        let any = self
            .clients
            .iter()
            .any(|c| c.attached && c.port == port && c.is_sm);
        if let Some(pi) = self.fabric.port_info.get_mut(port as usize) {
            pi.capability_mask.set(ibsm_mad::CapabilityMask::IS_SM, any);
        }
        Ok(())
    }

    /// Registers `client` for GMP class `class` (e.g. 0x03, Subnet Administration), like a
    /// umad agent on QP1: GMP *requests* of that class sent to QP1 of the client's port
    /// are handed to it. Responses need no registration: they go to the client whose
    /// request they answer. As on a kernel, one client per port may hold a class;
    /// another client of the same port asking for it gets [`SimError::ClassInUse`].
    /// The SMP classes 0x01 and 0x81 are not GMPs ([`SimError::NotGmpClass`]).
    pub fn register_gsi_class(&mut self, client: ClientId, class: u8) -> Result<(), SimError> {
        if matches!(class, 0x01 | 0x81) {
            return Err(SimError::NotGmpClass(class));
        }
        let port = self.client_rec(client)?.port;
        if let Some(holder) = self.gsi_client_at(port, class) {
            if holder == client {
                return Ok(());
            }
            return Err(SimError::ClassInUse { class, holder });
        }
        if let Some(w) = self
            .clients
            .get_mut(client.0 as usize)
            .and_then(|c| c.gsi_classes.get_mut(usize::from(class / 64)))
        {
            *w |= 1 << (class % 64);
        }
        tracing::debug!(client = client.0, class, "GMP class registered");
        Ok(())
    }

    /// Undoes [`Sim::register_gsi_class`] (a no-op when the client does not hold it).
    pub fn unregister_gsi_class(&mut self, client: ClientId, class: u8) -> Result<(), SimError> {
        self.client_rec(client)?;
        if let Some(w) = self
            .clients
            .get_mut(client.0 as usize)
            .and_then(|c| c.gsi_classes.get_mut(usize::from(class / 64)))
        {
            *w &= !(1 << (class % 64));
        }
        Ok(())
    }

    /// The attached client at port `arr` registered for GMP class `class`.
    pub(super) fn gsi_client_at(&self, arr: u32, class: u8) -> Option<ClientId> {
        self.clients
            .iter()
            .position(|c| c.attached && c.port == arr && c.takes_class(class))
            .and_then(|i| u32::try_from(i).ok())
            .map(ClientId)
    }

    /// The (node, port) a client is attached to.
    pub fn client_port(&self, client: ClientId) -> Result<(NodeIdx, u8), SimError> {
        let c = self.client_rec(client)?;
        let p = self
            .fabric
            .port(c.port)
            .ok_or(SimError::UnknownClient(client))?;
        Ok((NodeIdx(p.node), p.num))
    }

    /// The client that takes unsolicited MADs at port `arr`: its SM, else the first attached.
    pub(super) fn client_at(&self, arr: u32) -> Option<ClientId> {
        let mut first = None;
        for (i, c) in self.clients.iter().enumerate() {
            if c.attached && c.port == arr {
                let id = ClientId(u32::try_from(i).ok()?);
                if c.is_sm {
                    return Some(id);
                }
                first = first.or(Some(id));
            }
        }
        first
    }

    /// The SLID of the LID-routed request with `tid` handed to `client`.
    pub(super) fn reply_lid(&self, client: ClientId, tid: u64) -> Option<u16> {
        self.forwarded
            .iter()
            .rev()
            .find(|f| !f.gmp && f.tid == tid && f.responder == client)
            .map(|f| f.requester_lid)
    }
}
