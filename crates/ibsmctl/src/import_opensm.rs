//! `ibsmctl import-opensm [opensm.conf]`: an OpenSM configuration turned into the
//! keys of ibsmd's config file (deploy/ibsmd.toml), for an operator moving a subnet
//! from OpenSM to ibsmd.
//!
//! Every option that maps becomes its ibsmd key, with a comment naming the OpenSM
//! option and line it came from; every option that does not map is listed after
//! them, as comments, each with the reason (so the output stays a valid config file).
//! Files an option names are looked at as OpenSM would at start: the
//! `root_guid_file`'s GUIDs become `root_guid`, a `partition_config_file` that exists
//! becomes `partitions_file`, and OpenSM's LID cache (`$OSM_CACHE_DIR/guid2lid`,
//! default `/var/cache/opensm/guid2lid`) becomes `guid2lid`, so the first ibsmd master
//! keeps every LID OpenSM gave.
//!
//! OpenSM's format (its `osm_subn_parse_conf_file`): one `key value` a line, `#`
//! comments, `(null)` for an unset value. Lines that are not that, a value a mapped
//! key cannot take, and a key given twice are errors naming the file and line; all of
//! them are reported, and nothing is printed then.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where OpenSM keeps its configuration by default.
pub const DEFAULT_OPENSM_CONF: &str = "/etc/opensm/opensm.conf";
/// OpenSM's cache dir when `OSM_CACHE_DIR` is not set.
pub const DEFAULT_OSM_CACHE_DIR: &str = "/var/cache/opensm";

/// A line of the OpenSM config that cannot be converted. (Display and Error by hand:
/// this file uses std alone, so the fuzz target can include it.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// The file (the opensm.conf, or a file it names such as the root GUID file).
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.why)
    }
}

impl std::error::Error for ImportError {}

/// A TOML basic string: quotes, backslashes and control characters escaped.
fn toml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text for a TOML comment: control characters (which TOML refuses there, a lone CR
/// among them) shown escaped.
fn comment_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                format!("\\u{:04X}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// What the conversion looks at besides the config text: the files it names and
/// OpenSM's cache dir. A trait so tests need no real files.
pub trait Host {
    /// A file's text.
    fn read(&self, path: &Path) -> std::io::Result<String>;
    /// OpenSM's cache dir (`$OSM_CACHE_DIR`, else [`DEFAULT_OSM_CACHE_DIR`]).
    fn cache_dir(&self) -> PathBuf;
}

/// The real host.
pub struct RealHost;

impl Host for RealHost {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn cache_dir(&self) -> PathBuf {
        std::env::var_os("OSM_CACHE_DIR")
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_OSM_CACHE_DIR), PathBuf::from)
    }
}

/// The conversion's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The ibsmd config (TOML), unmapped options listed as comments at its end.
    pub toml: String,
    /// OpenSM options that became ibsmd keys.
    pub mapped: usize,
    /// OpenSM options that did not, with why: `(key, value, line, why)`.
    pub unmapped: Vec<(String, String, usize, String)>,
}

/// One `key value` line.
#[derive(Debug, Clone)]
struct Opt {
    line: usize,
    value: String,
}

impl Opt {
    /// `None` for OpenSM's unset value.
    fn set(&self) -> Option<&str> {
        (self.value != "(null)" && !self.value.is_empty()).then_some(self.value.as_str())
    }
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn boolean(s: &str) -> Option<bool> {
    match s {
        "TRUE" | "true" => Some(true),
        "FALSE" | "false" => Some(false),
        _ => None,
    }
}

/// The conversion in progress.
struct Out<'a> {
    path: &'a Path,
    opts: BTreeMap<String, Opt>,
    toml: String,
    mapped: usize,
    /// Keys handled (mapped, or unmapped with a specific reason).
    done: BTreeMap<String, ()>,
    unmapped: Vec<(String, String, usize, String)>,
    errors: Vec<ImportError>,
}

impl Out<'_> {
    fn get(&self, key: &str) -> Option<&Opt> {
        self.opts.get(key)
    }

    fn error(&mut self, line: usize, why: String) {
        self.errors.push(ImportError {
            path: self.path.to_path_buf(),
            line,
            why,
        });
    }

    /// `key = value` lines for OpenSM's `from`, under a comment naming it.
    fn emit(&mut self, from: &str, lines: &[String]) {
        self.done.insert(from.to_string(), ());
        let Some(o) = self.opts.get(from) else { return };
        let _ = writeln!(
            self.toml,
            "# OpenSM {from} {} (line {})",
            comment_text(&o.value),
            o.line
        );
        for l in lines {
            let _ = writeln!(self.toml, "{l}");
        }
        self.toml.push('\n');
        self.mapped += 1;
    }

    fn unmapped(&mut self, key: &str, why: impl Into<String>) {
        self.done.insert(key.to_string(), ());
        if let Some(o) = self.opts.get(key) {
            self.unmapped
                .push((key.to_string(), o.value.clone(), o.line, why.into()));
        }
    }

    /// A mapped key's number in `lo..=hi`, or an error on its line.
    fn ranged(&mut self, key: &str, lo: u64, hi: u64) -> Option<u64> {
        let o = self.get(key)?.clone();
        let v = o.set()?;
        match number(v) {
            Some(n) if (lo..=hi).contains(&n) => Some(n),
            _ => {
                self.error(
                    o.line,
                    format!("{key} {v:?} is not a number in {lo}..={hi}"),
                );
                self.done.insert(key.to_string(), ());
                None
            }
        }
    }

    fn flag(&mut self, key: &str) -> Option<bool> {
        let o = self.get(key)?.clone();
        let v = o.set()?;
        let b = boolean(v);
        if b.is_none() {
            self.error(o.line, format!("{key} {v:?} is not TRUE or FALSE"));
            self.done.insert(key.to_string(), ());
        }
        b
    }
}

/// Split the text into options; bad lines and repeated keys are errors.
fn parse_lines(path: &Path, text: &str) -> (BTreeMap<String, Opt>, Vec<ImportError>) {
    let mut opts: BTreeMap<String, Opt> = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let err = |why: String| ImportError {
            path: path.to_path_buf(),
            line,
            why,
        };
        let (key, value) = match content.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => {
                errors.push(err(format!(
                    "{content:?} has no value (OpenSM's lines are `key value`; `(null)` for none)"
                )));
                continue;
            }
        };
        if !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            errors.push(err(format!("{key:?} is not an option name")));
            continue;
        }
        if let Some(first) = opts.get(key) {
            errors.push(err(format!(
                "{key} is given again (first on line {}): which one OpenSM used is ambiguous",
                first.line
            )));
            continue;
        }
        opts.insert(
            key.to_string(),
            Opt {
                line,
                value: value.to_string(),
            },
        );
    }
    (opts, errors)
}

/// Convert `text` (the OpenSM config at `path`) into an ibsmd config.
pub fn import(path: &Path, text: &str, host: &dyn Host) -> Result<Imported, Vec<ImportError>> {
    let (opts, errors) = parse_lines(path, text);
    let mut o = Out {
        path,
        opts,
        toml: String::new(),
        mapped: 0,
        done: BTreeMap::new(),
        unmapped: Vec::new(),
        errors,
    };
    let _ = writeln!(
        o.toml,
        "# ibsmd configuration converted from {} by `ibsmctl import-opensm`.\n\
         # Keys: deploy/ibsmd.toml. Options that do not map are listed at the end.\n\
         # ibsmd also needs credentials for its API (auth_token_file, tls_*, or\n\
         # insecure_plaintext for a lab): add them, then `ibsmd --config FILE`.\n",
        comment_text(&path.display().to_string())
    );
    election(&mut o);
    lids(&mut o, host);
    routing(&mut o, host);
    sweeps(&mut o);
    partitions(&mut o, host);
    m_key(&mut o);
    let rest: Vec<(String, String, usize)> = o
        .opts
        .iter()
        .filter(|(k, _)| !o.done.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.value.clone(), v.line))
        .collect();
    for (k, v, line) in rest {
        o.unmapped
            .push((k.clone(), v, line, reason(&k).to_string()));
    }
    if !o.errors.is_empty() {
        o.errors.sort_by_key(|e| (e.path.clone(), e.line));
        return Err(o.errors);
    }
    o.unmapped.sort_by_key(|u| u.2);
    let _ = writeln!(
        o.toml,
        "# ---- OpenSM options with no ibsmd key ({}), and why ----",
        o.unmapped.len()
    );
    for (k, v, line, why) in &o.unmapped {
        let _ = writeln!(
            o.toml,
            "# {k} {} (line {line}): {}",
            comment_text(v),
            comment_text(why)
        );
    }
    Ok(Imported {
        toml: o.toml,
        mapped: o.mapped,
        unmapped: o.unmapped,
    })
}

fn election(o: &mut Out) {
    if let Some(p) = o.ranged("sm_priority", 0, 15) {
        o.emit("sm_priority", &[format!("priority = {p}")]);
    }
    if let Some(k) = o.ranged("sm_key", 0, u64::MAX) {
        o.emit("sm_key", &[format!("sm_key = \"0x{k:016x}\"")]);
    }
    let sm_key = o
        .get("sm_key")
        .and_then(|k| k.set().and_then(number))
        .unwrap_or(1);
    if let Some(v) = o.get("sa_key").and_then(|k| k.set().and_then(number)) {
        let why = if v == sm_key {
            "ibsmd's SA_Key is its SM_Key, which this equals"
        } else {
            "ibsmd's SA_Key is its SM_Key; this differs, so SA clients that send this SA_Key must be given the SM_Key"
        };
        o.unmapped("sa_key", why);
    }
    match o.ranged("sminfo_polling_timeout", 1, u64::MAX) {
        Some(ms) if ms <= 60_000 => o.emit(
            "sminfo_polling_timeout",
            &[
                format!("poll_interval_ms = {ms}"),
                format!("repoll_interval_ms = {ms}"),
            ],
        ),
        Some(_) => o.unmapped(
            "sminfo_polling_timeout",
            "ibsmd's poll_interval_ms is 1..60000; its default (25 ms) applies",
        ),
        None => {}
    }
    match o.ranged("polling_retry_number", 0, u64::from(u32::MAX)) {
        Some(n) if n < 100 => o.emit(
            "polling_retry_number",
            &[format!(
                "# OpenSM declares its master lost after this many retries of a missed poll\n\
                 poll_retries = {}",
                n + 1
            )],
        ),
        Some(_) => o.unmapped(
            "polling_retry_number",
            "ibsmd's poll_retries is 1..100; its default (3) applies",
        ),
        None => {}
    }
    if let Some(g) = o.get("guid").and_then(|g| g.set().and_then(number)) {
        if g == 0 {
            o.unmapped(
                "guid",
                "0 is OpenSM's first port whose link is up, which is ibsmd's default fabric \"umad\"",
            );
        } else {
            o.unmapped(
                "guid",
                format!(
                    "ibsmd names its port by CA and number: fabric = \"umad:CA:PORT\" (ibstat -p lists port GUIDs; this one is 0x{g:016x})"
                ),
            );
        }
    }
}

fn lids(o: &mut Out, host: &dyn Host) {
    if let Some(l) = o.ranged("lmc", 0, 7) {
        o.emit("lmc", &[format!("lmc = {l}")]);
    }
    let reassign = o.flag("reassign_lids");
    let honor = o.flag("honor_guid2lid_file");
    if reassign == Some(true) {
        o.unmapped(
            "reassign_lids",
            "OpenSM gives every port a new LID at start; ibsmd keeps LIDs (the ones ports carry, its replica's); no guid2lid is carried over",
        );
        o.unmapped(
            "honor_guid2lid_file",
            "reassign_lids TRUE: OpenSM ignores its guid2lid",
        );
        return;
    }
    if reassign.is_some() {
        o.unmapped("reassign_lids", "FALSE is ibsmd's behaviour: LIDs are kept");
    }
    let cache = host.cache_dir().join("guid2lid");
    let line = "honor_guid2lid_file";
    match host.read(&cache) {
        Ok(_) => {
            let note = if honor == Some(true) {
                "# OpenSM's LID cache, honored as OpenSM did"
            } else {
                "# OpenSM's LID cache: the LIDs it gave (it prefers the LIDs ports carry,\n\
                 # which on a running fabric are the same)"
            };
            let key = format!("guid2lid = {}", toml_str(&cache.display().to_string()));
            if o.get(line).is_some() {
                o.emit(line, &[note.to_string(), key]);
            } else {
                // Neither option given: OpenSM reads its cache at start all the same.
                let _ = writeln!(o.toml, "# OpenSM's LID cache, which it reads at start\n{key}\n");
            }
        }
        Err(e) => o.unmapped(
            line,
            format!(
                "no LID cache to carry over ({}: {e}; OSM_CACHE_DIR names another dir?): ibsmd keeps the LIDs ports carry",
                cache.display()
            ),
        ),
    }
}

fn routing(o: &mut Out, host: &dyn Host) {
    if let Some(engines) = o
        .get("routing_engine")
        .and_then(|r| r.set().map(str::to_string))
    {
        let first = engines.split(',').next().unwrap_or("").trim().to_string();
        let ours = match first.as_str() {
            "minhop" => Some("minhop"),
            "updn" => Some("updown"),
            _ => None,
        };
        match ours {
            Some(r) => {
                let mut lines = Vec::new();
                if engines.contains(',') {
                    lines.push(format!(
                        "# the engines after {first} were OpenSM's fallbacks; ibsmd has none"
                    ));
                }
                lines.push(format!("routing = \"{r}\""));
                o.emit("routing_engine", &lines);
            }
            None => o.unmapped(
                "routing_engine",
                format!(
                    "ibsmd routes with minhop or updown (OpenSM's updn); {first} has no counterpart, so ibsmd's default minhop applies (updown is the deadlock-free choice)"
                ),
            ),
        }
    } else if o.get("routing_engine").is_some() {
        o.unmapped(
            "routing_engine",
            "unset: OpenSM's default minhop, which is ibsmd's default",
        );
    }
    if let Some(file) = o
        .get("root_guid_file")
        .and_then(|r| r.set().map(PathBuf::from))
    {
        match host.read(&file) {
            Ok(text) => {
                let mut guids = Vec::new();
                for (i, raw) in text.lines().enumerate() {
                    let t = raw.split('#').next().unwrap_or("").trim();
                    if t.is_empty() {
                        continue;
                    }
                    match number(t).filter(|g| *g != 0) {
                        Some(g) => guids.push(format!("\"0x{g:016x}\"")),
                        None => o.errors.push(ImportError {
                            path: file.clone(),
                            line: i + 1,
                            why: format!("{t:?} is not a switch NodeGUID"),
                        }),
                    }
                }
                o.emit(
                    "root_guid_file",
                    &[format!("root_guid = [{}]", guids.join(", "))],
                );
            }
            Err(e) => o.unmapped(
                "root_guid_file",
                format!(
                    "cannot read {}: {e}; give root_guid by hand",
                    file.display()
                ),
            ),
        }
    } else if o.get("root_guid_file").is_some() {
        o.unmapped(
            "root_guid_file",
            "unset: roots are found automatically, as in ibsmd",
        );
    }
    if let Some(n) = o
        .get("max_wire_smps")
        .and_then(|m| m.set().map(str::to_string))
    {
        o.unmapped(
            "max_wire_smps",
            format!(
                "a throughput setting, not behaviour: ibsmd keeps smp_window SMPs in flight (default 64; OpenSM's {n} would make its sweeps far slower)"
            ),
        );
    }
}

fn sweeps(o: &mut Out) {
    match o.ranged("sweep_interval", 0, u64::MAX) {
        Some(0) => o.unmapped(
            "sweep_interval",
            "0 turns OpenSM's periodic sweeps off; ibsmd always light-sweeps (sweep_interval_s 1..86400, default 2) and heavy-sweeps on traps and changes",
        ),
        Some(s) if s <= 86_400 => o.emit("sweep_interval", &[format!("sweep_interval_s = {s}")]),
        Some(_) => o.unmapped(
            "sweep_interval",
            "ibsmd's sweep_interval_s is 1..86400; its default (2) applies",
        ),
        None => {}
    }
    let interval = o
        .get("sweep_interval")
        .and_then(|s| s.set().and_then(number))
        .filter(|s| (1..=86_400).contains(s));
    match (o.flag("force_heavy_sweep"), interval) {
        (Some(true), Some(s)) => o.emit(
            "force_heavy_sweep",
            &[format!("heavy_sweep_interval_s = {s}")],
        ),
        (Some(true), None) => o.unmapped(
            "force_heavy_sweep",
            "no periodic sweep to make heavy (sweep_interval 0)",
        ),
        (Some(false), _) => o.unmapped(
            "force_heavy_sweep",
            "FALSE: OpenSM sweeps heavy only on change, as ibsmd does (plus a heavy sweep every heavy_sweep_interval_s, default 60, as a safety net)",
        ),
        (None, _) => {}
    }
}

fn partitions(o: &mut Out, host: &dyn Host) {
    if let Some(file) = o
        .get("partition_config_file")
        .and_then(|r| r.set().map(PathBuf::from))
    {
        match host.read(&file) {
            Ok(_) => o.emit(
                "partition_config_file",
                &[format!("partitions_file = {}", toml_str(&file.display().to_string()))],
            ),
            Err(e) => o.unmapped(
                "partition_config_file",
                format!(
                    "{}: {e}; OpenSM then runs only the default partition, as ibsmd does without partitions_file",
                    file.display()
                ),
            ),
        }
    }
    let off = o.flag("no_partition_enforcement");
    let part = o
        .get("part_enforce")
        .and_then(|p| p.set().map(str::to_string));
    let enforce = match (off, part.as_deref()) {
        (Some(true), _) | (_, Some("off")) => Some(false),
        (_, Some("both")) | (Some(false), None) => Some(true),
        (_, Some(dir @ ("in" | "out"))) => {
            o.unmapped(
                "part_enforce",
                format!("ibsmd enforces partitions both ways or not at all; {dir} alone has no counterpart, so both applies"),
            );
            None
        }
        (_, Some(other)) => {
            if let Some(line) = o.get("part_enforce").map(|p| p.line) {
                o.error(
                    line,
                    format!("part_enforce {other:?} is not both, in, out or off"),
                );
                o.done.insert("part_enforce".into(), ());
            }
            None
        }
        (None, None) => None,
    };
    if let Some(on) = enforce {
        let from = if off == Some(true) || part.is_none() {
            "no_partition_enforcement"
        } else {
            "part_enforce"
        };
        o.emit(from, &[format!("partition_enforcement = {on}")]);
        for k in ["no_partition_enforcement", "part_enforce"] {
            if k != from {
                o.unmapped(k, format!("folded into partition_enforcement with {from}"));
            }
        }
    }
}

fn m_key(o: &mut Out) {
    if let Some(k) = o.ranged("m_key", 0, u64::MAX) {
        o.emit("m_key", &[format!("m_key = \"0x{k:016x}\"")]);
    }
    if let Some(l) = o.ranged("m_key_protection_level", 0, 3) {
        o.emit(
            "m_key_protection_level",
            &[format!("m_key_protection_level = {l}")],
        );
    }
    if let Some(p) = o.ranged("m_key_lease_period", 0, 65_535) {
        o.emit("m_key_lease_period", &[format!("m_key_lease_period = {p}")]);
    }
}

/// Why an OpenSM option with no ibsmd key has none.
fn reason(key: &str) -> &'static str {
    const BY_PREFIX: &[(&str, &str)] = &[
        ("qos", "ibsmd has no QoS policy: SL-to-VL and VLArb tables stay at its defaults"),
        ("cc_", "ibsmd has no congestion control manager"),
        ("congestion_control", "ibsmd has no congestion control manager"),
        ("perfmgr", "ibsmd has no performance manager (use infiniband-diags' perfquery, or a monitoring agent)"),
        ("log_", "ibsmd logs to stderr (the journal under systemd); RUST_LOG sets what"),
        ("force_log_flush", "ibsmd's log is not buffered"),
        ("accum_log_file", "ibsmd logs to stderr (the journal under systemd)"),
        ("per_module_logging", "RUST_LOG sets levels per module"),
        ("syslog", "ibsmd logs to stderr (the journal under systemd)"),
        ("event_", "ibsmd has no event plugins: `ibsmctl watch` streams its events"),
        ("console", "ibsmd's console is its gRPC API (`ibsmctl`, --grpc)"),
        ("dump_files_dir", "ibsmd writes no dump files: `ibsmctl topology|lids|route` read its state"),
        ("lid_matrix_dump_file", "ibsmd reads no precomputed hop matrix"),
        ("lfts_file", "ibsmd has no file routing engine"),
        ("sa_db", "ibsmd replicates the SA's state (groups, services, subscriptions) instead of dumping it"),
        ("torus", "ibsmd has no torus-2QoS routing engine"),
        ("lash", "ibsmd has no LASH routing engine"),
        ("nue", "ibsmd has no Nue routing engine"),
        ("dfsssp", "ibsmd has no DFSSSP routing engine"),
        ("do_mesh_analysis", "ibsmd has no LASH routing engine"),
        ("cn_guid_file", "ibsmd has no fat-tree engine with compute-node lists"),
        ("io_guid_file", "ibsmd has no fat-tree engine with I/O-node lists"),
        ("max_reverse_hops", "ibsmd has no fat-tree engine with I/O-node lists"),
        ("quasi_ftree", "ibsmd has no fat-tree engine"),
        ("ids_guid_file", "ibsmd has no DOR/Nue engine with switch ids"),
        ("guid_routing_order", "ibsmd routes destinations in LID order"),
        ("port_shifting", "ibsmd balances ports itself (minhop, updown)"),
        ("scatter_ports", "ibsmd balances ports itself (minhop, updown)"),
        ("hop_weights_file", "ibsmd has no per-port hop weights"),
        ("port_search_ordering_file", "ibsmd has no DOR engine"),
        ("connect_roots", "ibsmd's updown has no connect_roots option"),
        ("use_ucast_cache", "ibsmd repairs routes incrementally on its own (`subnet/repair.rs`)"),
        ("avoid_throttled_links", "ibsmd does not route around throttled links"),
        ("port_prof", "ibsmd does not profile port usage"),
        ("prefix_routes", "ibsmd has no router support"),
        ("max_wire_smps2", "ibsmd keeps smp_window SMPs in flight"),
        ("max_smps_timeout", "ibsmd keeps smp_window SMPs in flight"),
        ("transaction_", "ibsmd's MAD timeouts and retries are its own (not configurable)"),
        ("long_transaction_timeout", "ibsmd's MAD timeouts are its own (not configurable)"),
        ("max_msg_fifo_timeout", "ibsmd has no message FIFO"),
        ("single_thread", "ibsmd's threads are fixed (an SM thread, a routing worker)"),
        ("daemon", "run ibsmd under systemd (deploy/systemd/); it does not fork"),
        ("sm_inactive", "ibsmd always takes part in the election; stop it to leave"),
        ("ignore_other_sm", "ibsmd never ignores other SMs; trusted_sm_guids limits whom it obeys"),
        ("exit_on_fatal", "ibsmd exits on a fatal error (its supervisor restarts it)"),
        ("enable_quirks", "ibsmd has no vendor quirks"),
        ("no_clients_rereg", "ibsmd asks clients to re-register only when the SA's state is lost"),
        ("disable_multicast", "ibsmd's SA always serves multicast"),
        ("babbling_port_policy", "ibsmd does not disable babbling ports; it represses and rate-limits their traps"),
        ("drop_event_subscriptions", "ibsmd replicates InformInfo subscriptions across failovers"),
        ("ipoib_mcgroup_creation_validation", "ibsmd's SA validates IPoIB groups as OpenSM's default does"),
        ("mcgroup_join_validation", "ibsmd's SA validates joins as OpenSM's default does"),
        ("use_original_extended_sa_rates_only", "ibsmd's SA uses IBA's extended rates"),
        ("use_optimized_slvl", "ibsmd has no SL-to-VL optimisation"),
        ("fsync_high_avail_files", "ibsmd's replica (redb) always syncs its commits"),
        ("node_name_map", "ibsmd shows NodeDescription as the node reports it"),
        ("subnet_prefix", "ibsmd uses the default GID prefix fe80::/64"),
        ("m_key_lookup", "ibsmd tries the configured, learned and replicated M_Keys itself"),
        ("m_key_per_port", "ibsmd programs one M_Key on every port"),
        ("lmc_esp0", "ibsmd gives switch port 0 one LID, as OpenSM's default FALSE"),
        ("sm_sl", "ibsmd's SM uses SL 0"),
        ("sm_assigned_guid", "ibsmd assigns no alias GUIDs"),
        ("allow_both_pkeys", "ibsmd programs one membership (full or limited) per P_Key and port"),
        ("keep_pkey_indexes", "ibsmd writes whole P_Key tables; indexes are not kept"),
        ("sweep_on_trap", "ibsmd always sweeps on traps 128/144 (trap_sweep_hold_down_ms spaces them)"),
        ("port_profile_switch_nodes", "ibsmd does not profile port usage"),
        ("packet_life_time", "ibsmd programs SwitchInfo.LifeTimeValue 18, OpenSM's default 0x12; not configurable"),
        ("vl_stall_count", "ibsmd leaves VLStallCount as ports have it"),
        ("leaf_vl_stall_count", "ibsmd leaves VLStallCount as ports have it"),
        ("head_of_queue_lifetime", "ibsmd leaves HOQLife as ports have it"),
        ("leaf_head_of_queue_lifetime", "ibsmd leaves HOQLife as ports have it"),
        ("max_op_vls", "ibsmd programs OperationalVLs up to 4 (VLCap permitting); not configurable"),
        ("force_link_speed", "ibsmd leaves link speeds as ports negotiate them"),
        ("force_link_width", "ibsmd leaves link widths as ports negotiate them"),
        ("fdr10", "ibsmd leaves link speeds as ports negotiate them"),
        ("subnet_timeout", "ibsmd programs SubnetTimeOut 18, OpenSM's default; not configurable"),
        ("local_phy_errors_threshold", "ibsmd leaves error thresholds as ports have them"),
        ("overrun_errors_threshold", "ibsmd leaves error thresholds as ports have them"),
        ("use_mfttop", "ibsmd does not program MulticastFDBTop"),
        ("consolidate_ipv6_snm_req", "ibsmd's SA keeps one group per solicited-node address"),
        ("root_guid_file", "see routing"),
    ];
    BY_PREFIX
        .iter()
        .find(|(p, _)| key.starts_with(p))
        .map_or("ibsmd has no equivalent setting", |(_, why)| why)
}

// An explicit path: the fuzz target includes this file by path, which would look for
// a plain `mod tests` beside it.
#[cfg(test)]
#[path = "import_opensm/tests.rs"]
mod tests;
