//! The transport's own ceiling for SA queries: a responder with no SM logic that
//! answers every SubnAdmGet(PathRecord) with one fixed, valid record (the request's
//! SLID/DLID and GIDs, MTU 4096, 100 Gb/s, the default P_Key) through the same device
//! ibsmd uses ([`UmadDevice::open_with_sa`], `issmN` held open so ibsim hands it the
//! SA's requests). `bench/sa.sh` runs it on an HCA of the fabric and drives it with
//! the same client as the SMs (`ibsmctl sa --sa-lid LID bench path`): its rate is
//! the "floor" row, what ibsim/umad2sim carries with nothing behind the answer.
//! SubnAdmSet/Delete(MCMemberRecord) are answered the same way (`bench join`): the
//! request's record back, an MGID from a counter when it asked for one (MLID 0xC001,
//! no group kept, no MFT, no replication), so a join costs only the transport.
//!
//! Usage: `sa_floor [umad[:CA[:PORT]]]` (default `umad`), under umad2sim on ibsim;
//! runs until killed. Anything else is ignored.

use std::time::Duration;

use ibsm_mad::sa::{McMemberRecord, PathRecord, SaAttributeId, SaMad, SaStatus, Selector};
use ibsm_mad::Method;
use ibsm_transport::{MadDevice, UmadDevice};
use ibsm_umad::PortSpec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = std::env::args().nth(1).unwrap_or_else(|| "umad".into());
    let spec = PortSpec::parse(&spec).map_err(|e| format!("port {spec}: {e}"))?;
    let mut dev = UmadDevice::open_with_sa(&spec, Duration::from_millis(200))?;
    let _issm = ibsm_umad::open_issm(dev.port().ca_index())?;
    eprintln!("sa_floor: answering SubnAdmGet(PathRecord), SubnAdmSet/Delete(MCMemberRecord)");
    let mut next_mgid = 1u64;
    loop {
        let Some(r) = dev.recv(Duration::from_secs(1))? else {
            continue;
        };
        if r.is_smp() {
            continue;
        }
        let Ok(q) = SaMad::decode(&r.mad) else {
            continue;
        };
        if q.attribute_id() == SaAttributeId::MC_MEMBER_RECORD
            && (q.method() == Method::SET || q.method() == Method::DELETE)
        {
            let Ok(mut rec) = q.record::<McMemberRecord>() else {
                continue;
            };
            if rec.mgid == [0; 16] {
                rec.mgid = [
                    0xff, 0x12, 0x60, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                ];
                rec.mgid[8..].copy_from_slice(&next_mgid.to_be_bytes());
                next_mgid += 1;
            }
            rec.mlid = 0xC001;
            let method = if q.method() == Method::SET {
                Method::GET_RESP
            } else {
                Method::DELETE_RESP
            };
            let mut a = q.response(method, SaStatus::SUCCESS);
            a.set_record(&rec)?;
            if let Err(e) = dev.send_gmp(&r.from, &a.encode()) {
                eprintln!("sa_floor: answer to LID {} not sent: {e}", r.from.lid);
            }
            continue;
        }
        if q.method() != Method::GET || q.attribute_id() != SaAttributeId::PATH_RECORD {
            continue;
        }
        let Ok(t) = q.record::<PathRecord>() else {
            continue;
        };
        let rec = PathRecord {
            sgid: t.sgid,
            dgid: t.dgid,
            slid: t.slid,
            dlid: t.dlid,
            reversible: true,
            numb_path: 1,
            p_key: 0xffff,
            mtu_selector: Selector::Exactly,
            mtu: 5,
            rate_selector: Selector::Exactly,
            rate: 16,
            packet_life_time_selector: Selector::Exactly,
            packet_life_time: 18,
            ..PathRecord::default()
        };
        let mut a = q.response(Method::GET_RESP, SaStatus::SUCCESS);
        a.set_record(&rec)?;
        if let Err(e) = dev.send_gmp(&r.from, &a.encode()) {
            eprintln!("sa_floor: answer to LID {} not sent: {e}", r.from.lid);
        }
    }
}
