//! [`SaConfig`]: the Subnet Administrator's knobs, with OpenSM's defaults where OpenSM
//! has the same knob, so a query answers the same under either SM.

use std::time::Duration;

/// The SA's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaConfig {
    /// SA_Key (OpenSM's `sa_key`, default 1): a request whose SA header SM_Key is
    /// neither 0 nor this is dropped (IBA C15-0.1.5); one carrying it is trusted
    /// (proxy joins, queries across partitions).
    pub sa_key: u64,
    /// ClassPortInfo.RespTimeValue (4.096 us x 2^value). Default 16 (268 ms), what
    /// OpenSM answers with its defaults: it derives the value from its 200 ms
    /// `transaction_timeout` (the smallest power-of-two step covering it, plus 8), as
    /// `saquery -c` against OpenSM 3.3.23 on ibsim prints it (0x10).
    pub resp_time_value: u8,
    /// PathRecord and MCMemberRecord PacketLifeTime (OpenSM's `packet_life_time`,
    /// default 0x12).
    pub packet_life_time: u8,
    /// How long a GetTableResp segment window waits for its RMPP ACK before it is sent
    /// again.
    pub rmpp_timeout: Duration,
    /// How many times a window is sent again before the transfer is aborted.
    pub rmpp_retries: u32,
    /// RMPP transfers in flight at once; a GetTable beyond them is answered
    /// ERR_NO_RESOURCES (the requester retries), so a flood of queries cannot grow the
    /// SA's memory without bound.
    pub max_transfers: usize,
    /// How long a Report waits for its ReportResp before it is sent again.
    pub report_timeout: Duration,
    /// How many times a Report is sent again before the subscriber is given up for
    /// that notice.
    pub report_retries: u32,
    /// Multicast groups at most (IBA allows 16k MLIDs: 0xC000-0xFFFE).
    pub max_groups: usize,
    /// ServiceRecords at most.
    pub max_services: usize,
    /// InformInfo subscriptions at most.
    pub max_subscriptions: usize,
}

impl Default for SaConfig {
    fn default() -> Self {
        SaConfig {
            sa_key: 1,
            resp_time_value: 16,
            packet_life_time: 0x12,
            rmpp_timeout: Duration::from_millis(200),
            rmpp_retries: 4,
            max_transfers: 256,
            report_timeout: Duration::from_millis(500),
            report_retries: 4,
            max_groups: 16_383,
            max_services: 65_536,
            max_subscriptions: 65_536,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenSM 3.3.23's ClassPortInfo (ibsm-mad's `sa_golden` fixture, `saquery -c`
    /// on ibsim) has RespTimeValue 0x10; a client sizing its timeouts from either SA
    /// waits the same.
    #[test]
    fn the_default_response_time_is_opensms() {
        let cpi = crate::sa::class_port_info(SaConfig::default().resp_time_value);
        assert_eq!(cpi.resp_time_value, 0x10);
    }
}
