//! Moving a subnet from OpenSM to ibsmd and back without a LID changing (issue 13):
//!
//! 1. OpenSM masters a fresh ibsim fabric with LIDs of its own choosing, made
//!    scattered (a guid2lid with `honor_guid2lid_file TRUE`), so that ibsmd's own
//!    assignment (1, 2, 3, ...) would differ; its LID cache (`$OSM_CACHE_DIR/guid2lid`,
//!    which OpenSM rewrites after its sweep) is taken and OpenSM stopped.
//! 2. `ibsmctl import-opensm` converts OpenSM's own config template (`opensm -c`) with
//!    `OSM_CACHE_DIR` naming that cache: its output names the cache as `guid2lid`.
//! 3. ibsmd runs on a *fresh* ibsim of the same net file (no port carries a LID, so
//!    nothing but the file can give OpenSM's LIDs) with `--config` that output: the
//!    fabric's LIDs (ibnetdiscover) must be exactly OpenSM's.
//! 4. `ibsmctl lids --format guid2lid` must hold the cache's mapping, and OpenSM,
//!    started on another fresh fabric with that file (`honor_guid2lid_file TRUE`),
//!    must give every port the same LIDs again.
//!
//! And [`once_the_replica_holds_lids_a_guid2lid_file_is_ignored`]: a replicated ibsmd
//! restarted on a fresh fabric with another `--guid2lid` keeps the replica's LIDs.
//!
//! Fails (never skips) when a tool is missing.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use ibsm_integration::{binary, run_ok};
use ibsm_labkit::{
    example_net, parse_guid2lid, Guid2LidEntry, Ibsim, IbsimOptions, Ibsmd, IbsmdOptions, OpenSm,
    OpenSmOptions, PortLid,
};

const NET: &str = "net.2sw2path4hca";
const SM_HOST: &str = "Hca1";
const READER: &str = "Hca2";
const STEP: Duration = Duration::from_secs(60);

/// Port GUID -> LID as the fabric holds it.
fn lid_map(ports: &[PortLid]) -> BTreeMap<u64, u16> {
    ports.iter().map(|p| (p.guid, p.lid)).collect()
}

/// Port GUID -> (min, max) of a guid2lid file.
fn file_map(entries: &[Guid2LidEntry]) -> BTreeMap<u64, (u16, u16)> {
    entries
        .iter()
        .map(|e| (e.port_guid, (e.min_lid, e.max_lid)))
        .collect()
}

#[test]
fn ibsmd_replaces_opensm_and_hands_back_without_a_lid_changing() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let net = example_net(NET)?;
    let (ibsmd_bin, ibsmctl) = (binary("ibsmd")?, binary("ibsmctl")?);
    let work = tempfile::tempdir()?;

    // 1. OpenSM with scattered LIDs; its own LID cache.
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let ports = sim.port_lids(READER)?;
    ensure!(ports.len() == 6, "2 switches and 4 CA ports: {ports:?}");
    let scattered: Vec<(u64, u16)> = ports
        .iter()
        .zip(0u16..)
        .map(|(p, i)| (p.guid, 0x101 + 7 * i))
        .collect();
    let mut osm = OpenSm::start(
        &sim,
        SM_HOST,
        OpenSmOptions {
            priority: 5,
            guid2lid: scattered.clone(),
            ..Default::default()
        },
    )?;
    osm.wait_subnet_up(STEP)?;
    let opensm_lids = lid_map(&sim.port_lids(READER)?);
    ensure!(
        opensm_lids == scattered.iter().copied().collect::<BTreeMap<_, _>>(),
        "OpenSM did not give the scattered LIDs: {opensm_lids:?}"
    );
    let cache_text =
        std::fs::read_to_string(osm.dir().join("guid2lid")).context("OpenSM's guid2lid cache")?;
    let cache = file_map(&parse_guid2lid(&cache_text)?);
    ensure!(
        cache
            .iter()
            .map(|(g, (lo, _))| (*g, *lo))
            .collect::<BTreeMap<_, _>>()
            == opensm_lids,
        "OpenSM's cache {cache:?} is not the fabric's LIDs {opensm_lids:?}"
    );
    let cache_dir = work.path().join("osm-cache");
    std::fs::create_dir_all(&cache_dir)?;
    let cache_file = cache_dir.join("guid2lid");
    std::fs::write(&cache_file, &cache_text)?;
    osm.kill()?;
    drop(sim);

    // 2. OpenSM's config template, converted with that cache.
    let conf = work.path().join("opensm.conf");
    run_ok(
        Command::new(ibsm_labkit::require_tool("opensm")?)
            .arg("-c")
            .arg(&conf),
        STEP,
    )?;
    let toml = run_ok(
        Command::new(&ibsmctl)
            .arg("import-opensm")
            .arg(&conf)
            .env("OSM_CACHE_DIR", &cache_dir),
        STEP,
    )?;
    let want = format!("guid2lid = {:?}", cache_file.display().to_string());
    ensure!(toml.contains(&want), "no `{want}` in:\n{toml}");
    let toml_path = work.path().join("ibsmd.toml");
    std::fs::write(&toml_path, &toml)?;

    // 3. ibsmd on a fresh fabric with the converted config.
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let fresh = sim.port_lids(READER)?;
    ensure!(
        fresh.iter().all(|p| p.lid == 0),
        "a fresh fabric carries no LID: {fresh:?}"
    );
    let mut sm = Ibsmd::start(
        &sim,
        SM_HOST,
        &ibsmd_bin,
        IbsmdOptions {
            args: vec![
                "--insecure-plaintext".into(),
                "--config".into(),
                toml_path.display().to_string(),
            ],
            ..IbsmdOptions::default()
        },
    )?;
    sm.wait_subnet_up(STEP)?;
    let ibsmd_lids = lid_map(&sim.port_lids(READER)?);
    ensure!(
        ibsmd_lids == opensm_lids,
        "ibsmd moved LIDs: {ibsmd_lids:?} vs OpenSM's {opensm_lids:?}\n{}",
        sm.log()
    );
    ensure!(
        sm.log().contains("LIDs seeded from --guid2lid"),
        "{}",
        sm.log()
    );

    // 4. The LIDs written back as OpenSM's cache, and OpenSM on them.
    let addr = sm.grpc_addr().context("ibsmd's gRPC address")?;
    let exported = run_ok(
        Command::new(&ibsmctl).args([
            "--endpoint",
            &format!("http://{addr}"),
            "lids",
            "--format",
            "guid2lid",
        ]),
        STEP,
    )?;
    let back = file_map(&parse_guid2lid(&exported)?);
    ensure!(
        back == cache,
        "ibsmctl lids --format guid2lid {back:?} is not OpenSM's cache {cache:?}"
    );
    sm.kill()?;
    drop(sim);

    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let mut osm = OpenSm::start(
        &sim,
        SM_HOST,
        OpenSmOptions {
            priority: 5,
            guid2lid_file: Some(exported),
            ..Default::default()
        },
    )?;
    osm.wait_subnet_up(STEP)?;
    let returned = lid_map(&sim.port_lids(READER)?);
    ensure!(
        returned == opensm_lids,
        "OpenSM on ibsmd's export moved LIDs: {returned:?} vs {opensm_lids:?}"
    );
    Ok(())
}

/// A guid2lid (OpenSM's format) giving `ports` LIDs from `first` on, `step` apart.
fn scattered_file(ports: &[PortLid], first: u16, step: u16) -> (String, BTreeMap<u64, u16>) {
    let map: BTreeMap<u64, u16> = ports
        .iter()
        .zip(0u16..)
        .map(|(p, i)| (p.guid, first + step * i))
        .collect();
    let text = map
        .iter()
        .map(|(g, l)| format!("0x{g:016x} 0x{l:04x} 0x{l:04x}\n\n"))
        .collect();
    (text, map)
}

/// One replicated ibsmd (a single-member cluster) on `host` with its data in `data`.
fn replicated_ibsmd(
    sim: &Ibsim,
    bin: &std::path::Path,
    data: &std::path::Path,
    guid2lid: &std::path::Path,
) -> Result<Ibsmd> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let secret = data.with_extension("secret");
    std::fs::write(&secret, "migration-cluster-secret-0123456789\n")?;
    let args = [
        "--insecure-plaintext".to_string(),
        "--cluster-secret-file".into(),
        secret.display().to_string(),
        "--node-id".into(),
        "1".into(),
        "--peer".into(),
        format!("1=127.0.0.1:{port}"),
        "--data-dir".into(),
        data.display().to_string(),
        "--guid2lid".into(),
        guid2lid.display().to_string(),
    ];
    Ok(Ibsmd::start(
        sim,
        SM_HOST,
        bin,
        IbsmdOptions {
            grpc: format!("127.0.0.1:{port}"),
            rust_log: "info,openraft=warn,ibsmd::replication::writer=debug".into(),
            args: args.to_vec(),
            ..IbsmdOptions::default()
        },
    )?)
}

#[test]
fn once_the_replica_holds_lids_a_guid2lid_file_is_ignored() -> Result<()> {
    ibsm_labkit::require_lab()?;
    let net = example_net(NET)?;
    let ibsmd_bin = binary("ibsmd")?;
    let work = tempfile::tempdir()?;
    let data = work.path().join("data");

    // The first master of the cluster assigns the file's LIDs and replicates them.
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let ports = sim.port_lids(READER)?;
    let (first_text, first) = scattered_file(&ports, 0x101, 7);
    let (second_text, second) = scattered_file(&ports, 0x40, 3);
    ensure!(first != second);
    let (first_file, second_file) = (work.path().join("first"), work.path().join("second"));
    std::fs::write(&first_file, first_text)?;
    std::fs::write(&second_file, second_text)?;
    let mut sm = replicated_ibsmd(&sim, &ibsmd_bin, &data, &first_file)?;
    sm.wait_subnet_up(STEP)?;
    ensure!(lid_map(&sim.port_lids(READER)?) == first, "{}", sm.log());
    // The master's LIDs are in the replica once a write after mastership committed.
    sm.wait_log("replicated epoch", STEP)?;
    sm.kill()?;
    drop(sim);

    // Restarted on a fresh fabric (no port carries a LID) with another file: the
    // replica's LIDs win, and the log says the file was ignored.
    let sim = Ibsim::start(&net, IbsimOptions::default())?;
    let mut sm = replicated_ibsmd(&sim, &ibsmd_bin, &data, &second_file)?;
    sm.wait_subnet_up(STEP)?;
    let lids = lid_map(&sim.port_lids(READER)?);
    ensure!(
        lids == first,
        "the replica's LIDs {first:?} lost to the file's {second:?}: {lids:?}\n{}",
        sm.log()
    );
    ensure!(
        sm.log()
            .contains("--guid2lid ignored: the replica already holds LID assignments"),
        "{}",
        sm.log()
    );
    Ok(())
}
