//! The SMA's entry point: a request that reached a node is checked against the
//! M_Key, then dispatched by method and attribute to its handler; the answer (or
//! the silence) goes back to the simulator as an [`SmaAction`].

use std::time::Duration;

use ibsm_mad::{AttributeId, Method};

use crate::mkey::MKeyCheck;
use crate::state::Fabric;
use crate::SimConfig;

use super::common::{STATUS_BAD_METHOD, STATUS_INVALID_VALUE, STATUS_UNSUPPORTED_ATTR};

/// What the SMA does with a request that reached it.
pub(crate) enum SmaAction {
    /// The response (status + data) has been written; send it back.
    Respond(u16),
    /// Nothing goes back (TrapRepress consumed).
    Consume,
    /// Nothing goes back: the M_Key check failed (IBA 14.2.4).
    MKeyViolation,
}

impl Fabric {
    /// Runs the SMA of the node owning port `arr` (the port that received the SMP) on
    /// a request. `method`, `attr`, `amod` come from the header; `data` is the request
    /// data field and receives the response data. `m_key` is the SMP's M_Key, checked
    /// at `now` (see the `mkey` module) before anything else.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sma(
        &mut self,
        cfg: &SimConfig,
        now: Duration,
        arr: u32,
        method: Method,
        m_key: u64,
        attr: AttributeId,
        amod: u32,
        data: &mut [u8; 64],
    ) -> SmaAction {
        let known = matches!(method, Method::GET | Method::SET | Method::TRAP_REPRESS);
        let hide_key = if known {
            match self.check_m_key(now, arr, method, m_key) {
                MKeyCheck::Pass { hide_key } => hide_key,
                MKeyCheck::Fail => return SmaAction::MKeyViolation,
            }
        } else {
            false
        };
        let set = match method {
            Method::GET => false,
            Method::SET => true,
            Method::TRAP_REPRESS => return SmaAction::Consume,
            _ => return SmaAction::Respond(STATUS_BAD_METHOD),
        };
        let result = match attr {
            AttributeId::NODE_INFO => self.get_only(set, amod, |f| f.node_info(cfg, arr)),
            AttributeId::NODE_DESCRIPTION => self.get_only(set, amod, |f| f.node_description(arr)),
            AttributeId::SWITCH_INFO => self.switch_info(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::GUID_INFO => self.guid_info(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::PORT_INFO => self.port_info_attr(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::P_KEY_TABLE => self.pkey_table(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::SL_TO_VL_MAPPING_TABLE => self.sl2vl(arr, amod, set.then_some(&*data)),
            AttributeId::VL_ARBITRATION_TABLE => self.vlarb(arr, amod, set.then_some(&*data)),
            AttributeId::LINEAR_FORWARDING_TABLE => self.lft(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::MULTICAST_FORWARDING_TABLE => {
                self.mft(cfg, arr, amod, set.then_some(&*data))
            }
            AttributeId::LED_INFO => self.led_info(arr, amod, set.then_some(&*data)),
            AttributeId::VENDOR_DIAG => {
                if set {
                    Err(STATUS_UNSUPPORTED_ATTR)
                } else if amod > 0xFFFF {
                    Err(STATUS_INVALID_VALUE)
                } else {
                    // NextIndex 0, no vendor diagnostics: every simulated port is healthy.
                    Ok([0u8; 64])
                }
            }
            // RandomFDBCap is 0: no RandomForwardingTable. Unknown attributes, SMInfo on
            // a port without an SM, Notice: method/attribute not supported.
            _ => Err(STATUS_UNSUPPORTED_ATTR),
        };
        match result {
            Ok(mut d) => {
                if hide_key && attr == AttributeId::PORT_INFO {
                    // Level 1: the M_Key field of PortInfo reads 0 without the key.
                    d[..8].fill(0);
                }
                *data = d;
                SmaAction::Respond(0)
            }
            Err(status) => SmaAction::Respond(status),
        }
    }
}
