//! Golden opensm.conf snippets: what maps, what does not and why, bad lines.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::*;

/// Files by path, and the cache dir.
struct FakeHost {
    files: HashMap<PathBuf, String>,
    cache: PathBuf,
}

impl FakeHost {
    fn new(files: &[(&str, &str)]) -> FakeHost {
        FakeHost {
            files: files
                .iter()
                .map(|(p, t)| (PathBuf::from(p), (*t).to_string()))
                .collect(),
            cache: PathBuf::from(DEFAULT_OSM_CACHE_DIR),
        }
    }
}

impl Host for FakeHost {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    fn cache_dir(&self) -> PathBuf {
        self.cache.clone()
    }
}

fn conv(text: &str, host: &FakeHost) -> Result<Imported, Vec<ImportError>> {
    import(Path::new("/etc/opensm/opensm.conf"), text, host)
}

/// The TOML part (without comments), as `key = value` lines.
fn keys(toml: &str) -> Vec<&str> {
    toml.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect()
}

const MAPPED: &str = "\
# a site's OpenSM
guid 0x0000000000000000
sm_priority 7
sm_key 0x0000000000000010
sa_key 0x0000000000000010
lmc 1
routing_engine updn,minhop
root_guid_file /etc/opensm/roots
sminfo_polling_timeout 1000
polling_retry_number 2
sweep_interval 5
force_heavy_sweep FALSE
partition_config_file /etc/opensm/partitions.conf
no_partition_enforcement FALSE
part_enforce off
m_key 0x00000000000000aa
m_key_protection_level 1
m_key_lease_period 60
honor_guid2lid_file TRUE
reassign_lids FALSE
qos TRUE
log_flags 0x03
";

#[test]
fn every_key_that_maps_becomes_its_ibsmd_key() {
    let host = FakeHost::new(&[
        (
            "/etc/opensm/roots",
            "# spines\n0x0002c90000000100\n0x0002c90000000101\n",
        ),
        (
            "/etc/opensm/partitions.conf",
            "Default=0x7fff,ipoib:ALL=full;\n",
        ),
        (
            "/var/cache/opensm/guid2lid",
            "0x0002c90300000001 0x0001 0x0001\n\n",
        ),
    ]);
    let got = conv(MAPPED, &host).expect("valid");
    assert_eq!(
        keys(&got.toml),
        [
            "priority = 7",
            "sm_key = \"0x0000000000000010\"",
            "poll_interval_ms = 1000",
            "repoll_interval_ms = 1000",
            "poll_retries = 3",
            "lmc = 1",
            "guid2lid = \"/var/cache/opensm/guid2lid\"",
            "routing = \"updown\"",
            "root_guid = [\"0x0002c90000000100\", \"0x0002c90000000101\"]",
            "sweep_interval_s = 5",
            "partitions_file = \"/etc/opensm/partitions.conf\"",
            "partition_enforcement = false",
            "m_key = \"0x00000000000000aa\"",
            "m_key_protection_level = 1",
            "m_key_lease_period = 60",
        ]
    );
    assert_eq!(got.mapped, 14);
    // Each key says where it came from.
    assert!(got
        .toml
        .contains("# OpenSM sm_priority 7 (line 3)\npriority = 7\n"));
    assert!(got.toml.contains("fallbacks; ibsmd has none"));
    // The output is a TOML document.
    let doc: toml::Table = got.toml.parse().expect("TOML");
    assert_eq!(
        doc.get("priority").and_then(toml::Value::as_integer),
        Some(7)
    );
    // What does not map is listed, in file order, each with why.
    let unmapped: Vec<&str> = got.unmapped.iter().map(|u| u.0.as_str()).collect();
    assert_eq!(
        unmapped,
        [
            "guid",
            "sa_key",
            "force_heavy_sweep",
            "no_partition_enforcement",
            "reassign_lids",
            "qos",
            "log_flags"
        ]
    );
    let why = |k: &str| {
        got.unmapped
            .iter()
            .find(|u| u.0 == k)
            .map(|u| u.3.clone())
            .unwrap_or_default()
    };
    assert!(why("guid").contains("\"umad\""), "{}", why("guid"));
    assert!(why("sa_key").contains("equals"));
    assert!(why("qos").contains("no QoS policy"));
    assert!(why("no_partition_enforcement").contains("part_enforce"));
    assert!(got
        .toml
        .contains("# qos TRUE (line 21): ibsmd has no QoS policy"));
}

#[test]
fn keys_that_cannot_map_say_why() {
    let host = FakeHost::new(&[]);
    let text = "\
guid 0x0002c90300001234
routing_engine ftree
root_guid_file /etc/opensm/missing-roots
partition_config_file /etc/opensm/partitions.conf
sweep_interval 0
sminfo_polling_timeout 90000
honor_guid2lid_file FALSE
part_enforce in
sa_key 0x99
lash_start_vl 0
some_future_option 1
";
    let got = conv(text, &host).expect("valid");
    assert_eq!(keys(&got.toml), Vec::<&str>::new(), "{}", got.toml);
    assert_eq!(got.mapped, 0);
    let why: HashMap<&str, &str> = got
        .unmapped
        .iter()
        .map(|u| (u.0.as_str(), u.3.as_str()))
        .collect();
    assert_eq!(why.len(), 11, "{why:?}");
    for (key, needle) in [
        ("guid", "umad:CA:PORT"),
        ("routing_engine", "ftree has no counterpart"),
        ("root_guid_file", "cannot read /etc/opensm/missing-roots"),
        ("partition_config_file", "only the default partition"),
        ("sweep_interval", "always light-sweeps"),
        ("sminfo_polling_timeout", "1..60000"),
        ("honor_guid2lid_file", "no LID cache"),
        ("part_enforce", "in alone has no counterpart"),
        ("sa_key", "differs"),
        ("lash_start_vl", "LASH"),
        ("some_future_option", "no equivalent"),
    ] {
        assert!(why[key].contains(needle), "{key}: {}", why[key]);
    }
}

#[test]
fn bad_lines_are_errors_with_their_line_numbers() {
    let host = FakeHost::new(&[("/etc/opensm/roots", "0x0002c90000000100\nspine-2\n")]);
    let text = "\
sm_priority 16
# fine
lmc
sm_key 0xZZ
sweep_interval 10
sweep_interval 20
honor_guid2lid_file yes
root_guid_file /etc/opensm/roots
m_key_protection_level 4
part_enforce sideways
bad/key 1
";
    let errs = conv(text, &host).expect_err("bad lines");
    let got: Vec<(String, usize)> = errs
        .iter()
        .map(|e| (e.path.display().to_string(), e.line))
        .collect();
    let conf = "/etc/opensm/opensm.conf".to_string();
    assert_eq!(
        got,
        [
            (conf.clone(), 1),
            (conf.clone(), 3),
            (conf.clone(), 4),
            (conf.clone(), 6),
            (conf.clone(), 7),
            (conf.clone(), 9),
            (conf.clone(), 10),
            (conf, 11),
            ("/etc/opensm/roots".to_string(), 2),
        ]
    );
    let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert!(
        text[0].starts_with("/etc/opensm/opensm.conf:1: sm_priority \"16\""),
        "{}",
        text[0]
    );
    assert!(text[1].contains("no value"), "{}", text[1]);
    assert!(text[3].contains("first on line 5"), "{}", text[3]);
    assert!(text[4].contains("TRUE or FALSE"), "{}", text[4]);
    assert!(text[8].contains("spine-2"), "{}", text[8]);
}

#[test]
fn debians_default_opensm_conf_converts() {
    let text = include_str!("../../tests/data/opensm-3.3.23-default.conf");
    let host = FakeHost::new(&[]);
    let got = conv(text, &host).expect("OpenSM's own template converts");
    assert_eq!(
        keys(&got.toml),
        [
            "priority = 0",
            "sm_key = \"0x0000000000000001\"",
            "poll_interval_ms = 10000",
            "repoll_interval_ms = 10000",
            "poll_retries = 5",
            "lmc = 0",
            "sweep_interval_s = 10",
            "partition_enforcement = true",
            "m_key = \"0x0000000000000000\"",
            "m_key_protection_level = 0",
            "m_key_lease_period = 0",
        ]
    );
    // Every option of the template is accounted for: mapped or listed with why.
    let options = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    assert_eq!(got.mapped + got.unmapped.len(), options);
    assert!(got.unmapped.iter().all(|u| !u.3.is_empty()));
    let _: toml::Table = got.toml.parse().expect("TOML");
}

proptest::proptest! {
    #[test]
    fn never_panics_and_any_output_is_toml(text in "(\\PC{0,40}\n){0,8}") {
        if let Ok(got) = conv(&text, &FakeHost::new(&[])) {
            proptest::prop_assert!(got.toml.parse::<toml::Table>().is_ok(), "{}", got.toml);
        }
    }
}

#[test]
fn odd_characters_stay_valid_toml() {
    let odd = "/srv/o\"p\\ensm\u{1}/partitions.conf";
    let host = FakeHost::new(&[(odd, "Default=0x7fff:ALL=full;\n")]);
    let text = format!("partition_config_file {odd}\nlog_prefix a\rb\u{7f}\nsm_priority 3\n");
    let got = conv(&text, &host).expect("valid");
    let doc: toml::Table = got.toml.parse().expect("TOML");
    assert_eq!(
        doc.get("partitions_file").and_then(toml::Value::as_str),
        Some(odd)
    );
    assert_eq!(
        doc.get("priority").and_then(toml::Value::as_integer),
        Some(3)
    );
}

#[test]
fn the_lid_cache_is_carried_over_even_without_honor_guid2lid_file() {
    // OpenSM reads its cache at start unless reassign_lids is TRUE.
    let host = FakeHost::new(&[("/var/cache/opensm/guid2lid", "0x1 0x1 0x1\n\n")]);
    let got = conv("reassign_lids FALSE\nsm_priority 1\n", &host).expect("valid");
    assert!(got
        .toml
        .contains("guid2lid = \"/var/cache/opensm/guid2lid\""));
    assert_eq!(got.mapped + got.unmapped.len(), 2, "{got:?}");
    let got = conv("reassign_lids TRUE\nhonor_guid2lid_file TRUE\n", &host).expect("valid");
    assert!(!got.toml.contains("guid2lid ="), "{}", got.toml);
    assert_eq!(got.unmapped.len(), 2);
}
