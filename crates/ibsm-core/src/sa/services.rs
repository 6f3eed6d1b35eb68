//! ServiceRecords as the SA keeps them (IBA 15.2.5.14), with OpenSM's rules so a
//! client sees the same answers from either SM:
//!
//! - A record is named by ServiceID, ServiceGID and ServiceP_Key (OpenSM's "RID");
//!   SubnAdmSet needs ServiceID and ServiceGID in the mask (else ERR_REQ_INVALID, as
//!   OpenSM answers). Without ServiceP_Key in the mask the record is the default
//!   partition's (0xFFFF, what OpenSM answers in that case). Setting a registered RID
//!   again replaces the record and restarts its lease.
//! - Without ServiceLease in the mask the lease is infinite (OpenSM); 0xFFFFFFFF is
//!   infinite; any other value is seconds from the Set. A lease of 0 expires at the
//!   next timeout, as OpenSM's lease timer does.
//! - The ServiceGID must be a port of the fabric and, unless the requester is trusted
//!   (SA_Key), its own port: one port cannot advertise (or delete) another's
//!   services. OpenSM does not check ownership; we do because a Delete by anyone would
//!   let any port take down another's services. Refusals are ERR_REQ_INVALID, as
//!   OpenSM's `validate_sr`. A named ServiceP_Key must be in the requester's and in
//!   the service port's P_Key tables (ERR_REQ_INVALID).
//! - Delete of an RID that is not registered: ERR_NO_RECORDS (OpenSM).
//! - Get/GetTable match by component mask (ServiceData fields one component each, as
//!   `ServiceRecord::matches` does); an untrusted requester sees only services in a
//!   partition it holds (OpenSM's `osm_physp_has_pkey` check on the requester).
//!
//! Leases are kept as the `Duration` since the driver's epoch at which they end; the SA
//! reads no clock.

use std::collections::BTreeMap;
use std::time::Duration;

use ibsm_mad::sa::{ComponentMask, Gid, SaStatus, ServiceRecord};

use super::context::Requester;
use super::fabric::{make_gid, split_gid, SaFabric, DEFAULT_SUBNET_PREFIX};

/// The name of a registered service (OpenSM's RID).
pub type ServiceKey = (u64, Gid, u16);

/// One registered service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The record as registered (ServiceGID with the subnet prefix).
    pub record: ServiceRecord,
    /// When its lease ends (`None`: infinite).
    pub expires: Option<Duration>,
}

/// Every registered service (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Services {
    map: BTreeMap<ServiceKey, Service>,
    changed: bool,
}

const RID_MASK: ComponentMask =
    ComponentMask(ServiceRecord::SERVICE_ID.0 | ServiceRecord::SERVICE_GID.0);

fn key_of(r: &ServiceRecord) -> ServiceKey {
    (r.service_id, r.service_gid, r.service_p_key)
}

fn holds(pkeys: &[ibsm_mad::attr::PKey], pkey: u16) -> bool {
    let base = pkey & 0x7FFF;
    base != 0 && pkeys.iter().any(|k| k.0 & 0x7FFF == base)
}

/// When a lease of `secs` seconds that starts at `now` ends (`None`: infinite).
pub fn lease_end(now: Duration, secs: u32) -> Option<Duration> {
    (secs != ServiceRecord::INFINITE_LEASE).then(|| now + Duration::from_secs(u64::from(secs)))
}

impl Services {
    /// No services.
    pub fn new() -> Services {
        Services::default()
    }

    /// Every service, by RID.
    pub fn iter(&self) -> impl Iterator<Item = &Service> + '_ {
        self.map.values()
    }

    /// Number of services.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// None registered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// True once if something changed since the last call (to replicate).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Put a service in place as it is (loaded from a replica).
    pub fn insert(&mut self, s: Service) {
        self.map.insert(key_of(&s.record), s);
        self.changed = true;
    }

    /// Become `other` (a replica's services).
    pub fn replace_with(&mut self, other: Services) {
        self.map = other.map;
        self.changed = true;
    }

    /// The record a Set or Delete names, normalized (subnet prefix, default P_Key),
    /// and checked against the requester (see the module doc).
    fn checked(
        fabric: &SaFabric,
        req: &Requester,
        rec: &ServiceRecord,
        mask: ComponentMask,
    ) -> Result<ServiceRecord, SaStatus> {
        if !mask.contains(RID_MASK) {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let (prefix, guid) = split_gid(&rec.service_gid);
        if prefix != fabric.subnet_prefix && prefix != DEFAULT_SUBNET_PREFIX {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        if fabric.end_port_by_guid(guid).is_none() {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let own = req.port.is_some_and(|p| p.port_guid == guid);
        if !own && !req.trusted {
            return Err(SaStatus::ERR_REQ_INVALID);
        }
        let mut r = *rec;
        r.service_gid = make_gid(fabric.subnet_prefix, guid);
        if mask.contains(ServiceRecord::SERVICE_P_KEY) {
            let req_ok = req.trusted
                || req
                    .port
                    .is_some_and(|p| holds(fabric.pkeys_of(p.port_guid), r.service_p_key));
            if !req_ok || !holds(fabric.pkeys_of(guid), r.service_p_key) {
                return Err(SaStatus::ERR_REQ_INVALID);
            }
        } else {
            r.service_p_key = 0xFFFF;
        }
        if !mask.contains(ServiceRecord::SERVICE_LEASE) {
            r.service_lease = ServiceRecord::INFINITE_LEASE;
        }
        Ok(r)
    }

    /// SubnAdmSet(ServiceRecord): register or replace; the answer record.
    pub fn set(
        &mut self,
        now: Duration,
        fabric: &SaFabric,
        req: &Requester,
        rec: &ServiceRecord,
        mask: ComponentMask,
        max: usize,
    ) -> Result<ServiceRecord, SaStatus> {
        let r = Self::checked(fabric, req, rec, mask)?;
        let key = key_of(&r);
        if !self.map.contains_key(&key) && self.map.len() >= max {
            return Err(SaStatus::ERR_NO_RESOURCES);
        }
        self.map.insert(
            key,
            Service {
                record: r,
                expires: lease_end(now, r.service_lease),
            },
        );
        self.changed = true;
        Ok(r)
    }

    /// SubnAdmDelete(ServiceRecord): the record that was removed.
    pub fn delete(
        &mut self,
        fabric: &SaFabric,
        req: &Requester,
        rec: &ServiceRecord,
        mask: ComponentMask,
    ) -> Result<ServiceRecord, SaStatus> {
        let r = Self::checked(fabric, req, rec, mask)?;
        match self.map.remove(&key_of(&r)) {
            Some(s) => {
                self.changed = true;
                Ok(s.record)
            }
            None => Err(SaStatus::ERR_NO_RECORDS),
        }
    }

    /// Get/GetTable: the records matching `t` under `mask` that `req` may see.
    pub fn query(
        &self,
        fabric: Option<&SaFabric>,
        req: &Requester,
        t: &ServiceRecord,
        mask: ComponentMask,
    ) -> Vec<ServiceRecord> {
        let mut t = *t;
        if let Some(f) = fabric {
            let (prefix, guid) = split_gid(&t.service_gid);
            if prefix == DEFAULT_SUBNET_PREFIX {
                t.service_gid = make_gid(f.subnet_prefix, guid);
            }
        }
        let pkeys = match (fabric, req.port) {
            (Some(f), Some(p)) => Some(f.pkeys_of(p.port_guid)),
            _ => None,
        };
        self.map
            .values()
            .map(|s| s.record)
            .filter(|r| r.matches(&t, mask))
            .filter(|r| {
                req.trusted
                    || match pkeys {
                        Some(k) => holds(k, r.service_p_key),
                        // Unknown requester: only what the default partition shows.
                        None => r.service_p_key & 0x7FFF == 0x7FFF,
                    }
            })
            .collect()
    }

    /// The first lease to end.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.map.values().filter_map(|s| s.expires).min()
    }

    /// Remove every service whose lease ended by `now`; how many.
    pub fn handle_timeout(&mut self, now: Duration) -> usize {
        let before = self.map.len();
        self.map.retain(|_, s| {
            let keep = s.expires.is_none_or(|e| e > now);
            if !keep {
                tracing::info!(
                    service_id = format_args!("{:#018x}", s.record.service_id),
                    name = ?s.record.service_name,
                    "SA: service lease expired"
                );
            }
            keep
        });
        let n = before - self.map.len();
        if n > 0 {
            self.changed = true;
        }
        n
    }
}
