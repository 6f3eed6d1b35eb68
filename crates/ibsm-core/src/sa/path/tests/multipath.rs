//! MultiPathRecord (GetMulti) queries: each answer is checked against PathRecord
//! queries of the same port pairs (themselves checked against walks of the LFTs in
//! `fabric`), and the agent's RMPP answer is reassembled as a client would.

use std::collections::BTreeSet;
use std::time::Duration;

use ibsm_fabric::gen;
use ibsm_mad::sa::{
    ComponentMask, MultiPathRecord, PathRecord, RmppFlags, RmppProgress, RmppReassembler, RmppType,
    SaAttributeId, SaMad, SaStatus, RMPP_VERSION,
};
use ibsm_mad::{MadAddress, Method};

use super::super::multipath_records;
use super::fabric::{ask, ctx, net, PLT};
use crate::sa::{make_gid, SaAgent, SaConfig, SaFabric, DEFAULT_SUBNET_PREFIX};

type Gid = [u8; 16];

fn gid(guid: u64) -> Gid {
    make_gid(DEFAULT_SUBNET_PREFIX, guid)
}

/// A MultiPathRecord for `sgids` to `dgids`, with NumbPath if given.
fn mpr(sgids: &[Gid], dgids: &[Gid], numb: Option<u8>) -> (MultiPathRecord, ComponentMask) {
    let mut r = MultiPathRecord::with_gids(sgids, dgids).expect("at most 11 GIDs");
    let mut mask = MultiPathRecord::SGID_COUNT | MultiPathRecord::DGID_COUNT;
    if let Some(n) = numb {
        r.numb_path = n;
        mask |= MultiPathRecord::NUMB_PATH;
    }
    (r, mask)
}

fn multi(
    f: &SaFabric,
    from: u16,
    r: &MultiPathRecord,
    mask: ComponentMask,
) -> Result<Vec<PathRecord>, SaStatus> {
    let c = ctx(f);
    let req = c.requester(MadAddress::gsi(from), false);
    multipath_records(&c, &req, r, mask, PLT)
}

/// Every path of a GetTable PathRecord query from `s` to `d` (by GID).
fn pair_paths(f: &SaFabric, from: u16, s: u64, d: u64) -> Vec<PathRecord> {
    let t = PathRecord {
        sgid: gid(s),
        dgid: gid(d),
        ..PathRecord::default()
    };
    ask(
        f,
        from,
        Method::GET_TABLE,
        &t,
        PathRecord::SGID | PathRecord::DGID,
    )
}

#[test]
fn pairs_are_taken_in_order_up_to_numb_path() {
    let n = net(gen::fat_tree_3level(4).expect("topology"), 2);
    let f = n.fabric();
    let cas = n.cas();
    let (s, d) = ([cas[0], cas[5]], [cas[9], cas[12], cas[15]]);
    let sg: Vec<Gid> = s.iter().map(|c| gid(c.2)).collect();
    let dg: Vec<Gid> = d.iter().map(|c| gid(c.2)).collect();
    // Without NumbPath: every path of every pair, pair by pair, source-major, each
    // pair's paths exactly as a PathRecord table for that pair lists them.
    let (r, m) = mpr(&sg, &dg, None);
    let all = multi(&f, s[0].1, &r, m).expect("answered");
    let mut want = Vec::new();
    for a in &s {
        for b in &d {
            want.extend(pair_paths(&f, s[0].1, a.2, b.2));
        }
    }
    assert_eq!(want.len(), 6 * 16, "LMC 2: 16 LID pairs per port pair");
    assert_eq!(all, want);
    // NumbPath bounds the whole answer, not each pair.
    let (r, m) = mpr(&sg, &dg, Some(18));
    let some = multi(&f, s[0].1, &r, m).expect("answered");
    assert_eq!(some, want[..18].to_vec());
    let firsts: BTreeSet<(u16, u16)> = some[..4]
        .iter()
        .map(|p| (p.slid - s[0].1, p.dlid - d[0].1))
        .collect();
    assert_eq!(
        firsts,
        BTreeSet::from([(0, 0), (1, 1), (2, 2), (3, 3)]),
        "a pair's distinct (in-step) LMC paths first"
    );
    assert!(some[..16].iter().all(|p| p.dgid == gid(d[0].2)));
    assert_eq!(some[16].dgid, gid(d[1].2), "then the next pair");
    // More paths than OpenSM's bound: 127 without NumbPath.
    let dg: Vec<Gid> = n.cas()[8..12].iter().map(|c| gid(c.2)).collect();
    let (r, m) = mpr(&sg, &dg, None);
    assert_eq!(multi(&f, s[0].1, &r, m).expect("answered").len(), 127);
    let (r, m) = mpr(&sg, &dg, Some(0));
    assert!(multi(&f, s[0].1, &r, m).expect("answered").is_empty());
}

#[test]
fn an_apm_query_answers_one_diagonal_whatever_the_order() {
    let n = net(gen::fat_tree_3level(4).expect("topology"), 1);
    let f = n.fabric();
    let cas = n.cas();
    let (s, d) = ([cas[0], cas[3]], [cas[10], cas[14]]);
    let ask_apm = |sg: [u64; 2], dg: [u64; 2]| {
        let (r, m) = mpr(
            &[gid(sg[0]), gid(sg[1])],
            &[gid(dg[0]), gid(dg[1])],
            Some(2),
        );
        multi(&f, s[0].1, &r, m).expect("answered")
    };
    let two = ask_apm([s[0].2, s[1].2], [d[0].2, d[1].2]);
    assert_eq!(two.len(), 2, "{two:?}");
    let ends = |p: &PathRecord| (p.sgid, p.dgid);
    assert_ne!(two[0].sgid, two[1].sgid, "two sources");
    assert_ne!(two[0].dgid, two[1].dgid, "two destinations");
    assert!(two.iter().all(|p| p.preference == 0));
    // Every path is one a PathRecord query of its pair also answers.
    for p in &two {
        let (sg, dg) = ends(p);
        let guid = |g: Gid| u64::from_be_bytes(g[8..].try_into().expect("8 bytes"));
        assert!(pair_paths(&f, s[0].1, guid(sg), guid(dg)).contains(p));
    }
    // The same answer for the GIDs in any order.
    let set = |v: &[PathRecord]| v.iter().map(|p| (p.slid, p.dlid)).collect::<BTreeSet<_>>();
    assert_eq!(set(&two), set(&ask_apm([s[1].2, s[0].2], [d[1].2, d[0].2])));
    assert_eq!(set(&two), set(&ask_apm([s[0].2, s[1].2], [d[1].2, d[0].2])));
    // With LMC 1 the two paths leave from different LID offsets.
    let offsets: BTreeSet<u16> = two
        .iter()
        .map(|p| {
            let src = s.iter().find(|c| gid(c.2) == p.sgid).expect("a source");
            p.slid - src.1
        })
        .collect();
    assert_eq!(offsets.len(), 2, "{two:?}");
}

#[test]
fn bad_ends_and_masks_are_refused_with_their_status() {
    let n = net(gen::fat_tree_3level(4).expect("topology"), 0);
    let f = n.fabric();
    let cas = n.cas();
    let (a, b) = (cas[0], cas[7]);
    let status = |r: &MultiPathRecord, m: ComponentMask| multi(&f, a.1, r, m).err();
    let (r, m) = mpr(&[gid(a.2)], &[gid(0xDEAD)], None);
    assert_eq!(
        status(&r, m),
        Some(SaStatus::ERR_REQ_INVALID_GID),
        "unknown port"
    );
    let mut mc = gid(a.2);
    mc[0] = 0xFF;
    let (r, m) = mpr(&[mc], &[gid(b.2)], None);
    assert_eq!(
        status(&r, m),
        Some(SaStatus::ERR_REQ_INVALID_GID),
        "multicast SGID"
    );
    let (r, m) = mpr(&[make_gid(0x1234_0000_0000_0000, a.2)], &[gid(b.2)], None);
    assert_eq!(
        status(&r, m),
        Some(SaStatus::ERR_REQ_INVALID_GID),
        "foreign prefix"
    );
    let (r, _) = mpr(&[gid(a.2)], &[gid(b.2)], None);
    assert_eq!(
        status(&r, MultiPathRecord::SGID_COUNT),
        Some(SaStatus::ERR_REQ_INVALID),
        "no DGIDCount: no destination"
    );
    let (r, m) = mpr(&[gid(a.2)], &[gid(b.2)], None);
    assert_eq!(
        status(&r, m | MultiPathRecord::SERVICE_ID_8MSB),
        Some(SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS),
        "half a ServiceID"
    );
    assert_eq!(multi(&f, a.1, &r, m).expect("answered").len(), 1);
}

/// A GetMulti request as a client sends it: one RMPP DATA segment, First and Last.
fn get_multi(r: &MultiPathRecord, mask: ComponentMask, tid: u64) -> SaMad {
    let mut m = SaMad::query(Method::GET_MULTI, tid, r, mask).expect("query");
    m.rmpp.version = RMPP_VERSION;
    m.rmpp.rmpp_type = RmppType::DATA;
    m.rmpp.flags = RmppFlags::ACTIVE
        .union(RmppFlags::FIRST)
        .union(RmppFlags::LAST);
    m.rmpp.data1 = 1;
    m.rmpp.data2 = u32::try_from(r.wire_len()).expect("small");
    m
}

#[test]
fn the_agent_answers_get_multi_with_path_records_over_rmpp() {
    let n = net(gen::fat_tree_3level(4).expect("topology"), 2);
    let f = n.fabric();
    let cas = n.cas();
    let sg: Vec<Gid> = cas[..3].iter().map(|c| gid(c.2)).collect();
    let dg: Vec<Gid> = cas[8..10].iter().map(|c| gid(c.2)).collect();
    let (r, m) = mpr(&sg, &dg, None);
    let want = multi(&f, cas[0].1, &r, m).expect("answered");
    assert_eq!(want.len(), 6 * 16);
    let mut sa = SaAgent::new(SaConfig::default());
    let c = ctx(&f);
    let addr = MadAddress::gsi(cas[0].1);
    sa.handle_mad(Duration::ZERO, &c, &get_multi(&r, m, 41).encode(), addr);
    let ack = SaMad::decode(&sa.poll_transmit().expect("an ACK").mad).expect("SA MAD");
    assert_eq!(
        (ack.method(), ack.rmpp.rmpp_type, ack.rmpp.seg_num()),
        (Method::GET_MULTI_RESP, RmppType::ACK, 1),
        "the request's one segment acknowledged"
    );
    let mut re = RmppReassembler::new(1 << 20);
    let mut got = None;
    'transfer: for _ in 0..1000 {
        let mut last = None;
        while let Some(out) = sa.poll_transmit() {
            let s = SaMad::decode(&out.mad).expect("SA MAD");
            assert_eq!(
                (s.method(), s.status(), s.attribute_id()),
                (
                    Method::GET_MULTI_RESP,
                    SaStatus::SUCCESS,
                    SaAttributeId::PATH_RECORD
                )
            );
            match re.push(&s).expect("segments in order") {
                RmppProgress::Complete(msg) => {
                    got = Some(
                        msg.records()
                            .map(|b| PathRecord::decode(b).expect("a PathRecord"))
                            .collect::<Vec<_>>(),
                    );
                    break 'transfer;
                }
                RmppProgress::Incomplete { .. } => last = Some(s),
            }
        }
        let s = last.expect("the SA stopped before the last segment");
        let a = s.rmpp_ack(s.rmpp.seg_num() + 8);
        sa.handle_mad(Duration::ZERO, &c, &a.encode(), addr);
    }
    assert_eq!(got.expect("the whole answer"), want);

    // Not an RMPP transfer: refused as OpenSM refuses it.
    let plain = SaMad::query(Method::GET_MULTI, 42, &r, m).expect("query");
    sa.handle_mad(Duration::ZERO, &c, &plain.encode(), addr);
    let e = SaMad::decode(&sa.poll_transmit().expect("an answer").mad).expect("SA MAD");
    assert_eq!(
        (e.method(), e.status()),
        (Method::GET_MULTI_RESP, SaStatus::ERR_REQ_INVALID)
    );
    // GetMulti of another attribute: not supported.
    let other = SaMad::query(
        Method::GET_MULTI,
        43,
        &PathRecord::default(),
        ComponentMask::NONE,
    )
    .expect("query");
    sa.handle_mad(Duration::ZERO, &c, &other.encode(), addr);
    let e = SaMad::decode(&sa.poll_transmit().expect("an answer").mad).expect("SA MAD");
    assert_eq!(e.status(), SaStatus::METHOD_ATTR_NOT_SUPPORTED);
}
