//! Running `saquery` under umad2sim from one HCA of a running [`Ibsim`]:
//! [`Ibsim::saquery`] gives a [`Saquery`] bound to that node, whose methods run one
//! query each and return parsed records ([`SaTable`], or one [`SaRecord`] for the
//! queries that select one).
//!
//! Where the queries go: every saquery query goes to QP1 at the LID in the caller's
//! `/sys/class/infiniband/*/ports/*/sm_lid`, which umad2sim fills when saquery starts
//! from the caller port's PortInfo.MasterSMLID (the master SM programs it). saquery has
//! no option to aim elsewhere: the common `--sm_port`/`-s` of infiniband-diags is
//! excluded from saquery (`saquery --sm_port 4 SMIR` exits 2, "unrecognized option"),
//! and its `-s` means "IsSM ports". To query a particular SA, run saquery from a port
//! whose MasterSMLID is that SA's LID; with one master, that is every port.
//!
//! An SA that does RMPP itself (ibsm's) sends the first segment of a GetTableResp
//! again while nobody acknowledges it, and a saquery under umad2sim never does: those
//! resends reach whatever process next listens on QP1 of the same node, and saquery
//! takes the first answer it reads without looking at its TID. [`Saquery::spacing`]
//! makes the runner wait that long after the previous spaced query of the same node
//! (use at least the SA's whole resend span, [`IBSM_SA_RESEND_SPAN`] for ibsmd) so
//! every query reads its own answer.
//!
//! A saquery killed at [`Saquery::timeout`] would keep its ibsim client slot (ibsim only
//! notices a dead client when it forwards a MAD to it, and nobody sends MADs to a
//! saquery), so after such a kill the runner calls [`Ibsim::reap_dead_clients`] before
//! it returns the timeout.

use std::process::Command;
use std::time::Duration;

use crate::error::{LabError, Result};
use crate::ibsim::Ibsim;
use crate::sa_error::{classify_saquery, SaqueryError};
use crate::sa_record::{SaRecord, SaTable};
use crate::tools::require_tool;
/// The default deadline of one saquery process.
pub const SAQUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// What one saquery run printed, after it succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaqueryOutput {
    /// The command, as one would type it (`SIM_HOST=Hca1 saquery NR 16`).
    pub command: String,
    pub stdout: String,
    pub stderr: String,
}

impl SaqueryOutput {
    /// The answer as records.
    pub fn table(&self) -> SaTable {
        SaTable::parse(&self.stdout)
    }
}

/// How long ibsmd's SA keeps resending an unacknowledged GetTableResp segment: 4
/// resends 200 ms apart (its `SaConfig` defaults), with a margin. A node's next
/// saquery waits this long ([`Saquery::spacing`]) so it cannot read a stale resend.
pub const IBSM_SA_RESEND_SPAN: Duration = Duration::from_millis(1100);

/// PathRecord selectors for [`Saquery::path_records`] (`saquery -p --slid ...`); unset
/// ones are wildcards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathQuery {
    pub slid: Option<u16>,
    pub dlid: Option<u16>,
    /// SGID in IPv6 notation (`fe80::10:1`).
    pub sgid: Option<String>,
    pub dgid: Option<String>,
    pub pkey: Option<u16>,
    pub sl: Option<u8>,
    /// NumbPath (`-n`).
    pub numb_path: Option<u8>,
    /// Reversible (`-r`).
    pub reversible: Option<bool>,
    pub service_id: Option<u64>,
    /// More saquery arguments, appended as given.
    pub extra: Vec<String>,
}

impl PathQuery {
    /// saquery's arguments for this query (starting with `-p`).
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["-p".to_string()];
        let mut push = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(flag.to_string());
                a.push(v);
            }
        };
        push("--slid", self.slid.map(|v| v.to_string()));
        push("--dlid", self.dlid.map(|v| v.to_string()));
        push("--sgid", self.sgid.clone());
        push("--dgid", self.dgid.clone());
        push("--pkey", self.pkey.map(|v| format!("{v:#06x}")));
        push("--sl", self.sl.map(|v| v.to_string()));
        push("-n", self.numb_path.map(|v| v.to_string()));
        push("-r", self.reversible.map(|v| u8::from(v).to_string()));
        push("--service_id", self.service_id.map(|v| format!("{v:#x}")));
        a.extend(self.extra.iter().cloned());
        a
    }
}

/// saquery run from one node of an [`Ibsim`]. Build with [`Ibsim::saquery`].
#[derive(Debug, Clone)]
pub struct Saquery<'a> {
    sim: &'a Ibsim,
    host: String,
    sm_key: Option<u64>,
    timeout: Duration,
    sa_timeout_ms: Option<u32>,
    spacing: Option<Duration>,
}

impl Ibsim {
    /// saquery under umad2sim from node `host` (`SIM_HOST`, e.g. `Hca1`).
    pub fn saquery(&self, host: &str) -> Saquery<'_> {
        Saquery {
            sim: self,
            host: host.to_string(),
            sm_key: None,
            timeout: SAQUERY_TIMEOUT,
            sa_timeout_ms: None,
            spacing: None,
        }
    }
}

impl<'a> Saquery<'a> {
    /// Send this SM_Key (`--smkey`). Without it saquery sends 0, "untrusted": OpenSM
    /// then hides member ports (`-m` lists each group once with PortGid `::`) and
    /// refuses P_Key table queries; with OpenSM's default key 1, `-m` lists members.
    pub fn sm_key(mut self, key: u64) -> Self {
        self.sm_key = Some(key);
        self
    }

    /// The deadline of the saquery process (default [`SAQUERY_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// saquery's own SA timeout (`-t`, default 1000 ms).
    pub fn sa_timeout_ms(mut self, ms: u32) -> Self {
        self.sa_timeout_ms = Some(ms);
        self
    }

    /// Start each query at least `quiet` after the previous spaced query of the same
    /// node finished (shared by every `Saquery` of this [`Ibsim`]; nodes do not wait for
    /// each other, so run one node's queries from one thread): against an SA that
    /// resends unacknowledged RMPP segments, see the module doc.
    pub fn spacing(mut self, quiet: Duration) -> Self {
        self.spacing = Some(quiet);
        self
    }

    /// The node saquery runs on.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn command(&self, args: &[String]) -> (Command, Vec<String>) {
        let mut full: Vec<String> = Vec::new();
        if let Some(k) = self.sm_key {
            full.push("--smkey".into());
            full.push(format!("{k:#x}"));
        }
        if let Some(t) = self.sa_timeout_ms {
            full.push("-t".into());
            full.push(t.to_string());
        }
        full.extend(args.iter().cloned());
        let mut cmd = self.sim.command_on(&self.host, "saquery");
        cmd.args(&full);
        (cmd, full)
    }

    /// Run saquery with `args` (after the runner's own `--smkey`/`-t`); a failure is a
    /// [`LabError::Saquery`] with its stderr.
    pub fn run(&self, args: &[&str]) -> Result<SaqueryOutput> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
        self.run_owned(&args)
    }

    fn run_owned(&self, args: &[String]) -> Result<SaqueryOutput> {
        require_tool("saquery")?;
        let (mut cmd, full) = self.command(args);
        let command = format!("SIM_HOST={} saquery {}", self.host, full.join(" "));
        tracing::debug!(%command, sockname = self.sim.sockname(), "saquery");
        if let Some(quiet) = self.spacing {
            let since = crate::child::lock(&self.sim.sa_last)
                .get(&self.host)
                .copied();
            if let Some(wait) =
                since.and_then(|t| (t + quiet).checked_duration_since(std::time::Instant::now()))
            {
                std::thread::sleep(wait);
            }
        }
        let result = self.sim.run(&mut cmd, self.timeout);
        if self.spacing.is_some() {
            crate::child::lock(&self.sim.sa_last)
                .insert(self.host.clone(), std::time::Instant::now());
        }
        let out = match result {
            Ok(out) => out,
            Err(e @ LabError::Timeout { .. }) => {
                let reaped = self.sim.reap_dead_clients();
                tracing::warn!(%command, ?reaped, "saquery killed at its deadline");
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        classify_saquery(
            &command,
            out.status.success(),
            &out.status.to_string(),
            &stdout,
            &stderr,
        )?;
        tracing::debug!(%command, bytes = stdout.len(), "saquery answered");
        Ok(SaqueryOutput {
            command,
            stdout,
            stderr,
        })
    }

    /// Run and parse: the records of the answer (see [`SaTable`] for what umad2sim
    /// leaves of a long table).
    pub fn query(&self, args: &[&str]) -> Result<SaTable> {
        Ok(self.run(args)?.table())
    }

    fn table(&self, args: Vec<String>) -> Result<SaTable> {
        Ok(self.run_owned(&args)?.table())
    }

    fn one(&self, args: Vec<String>) -> Result<SaRecord> {
        let out = self.run_owned(&args)?;
        let mut t = out.table();
        match (t.records.len(), t.undelivered.len()) {
            (1, 0) => Ok(t.records.remove(0)),
            (0, 0) => Err(SaqueryError::NoRecords {
                command: out.command,
                stderr: out.stderr,
            }
            .into()),
            (n, u) => Err(SaqueryError::NotOne {
                command: out.command,
                printed: n + u,
                undelivered: u,
                stdout: out.stdout,
            }
            .into()),
        }
    }

    /// `saquery NR <lid>`: the NodeRecord of the port with this LID.
    pub fn node_record(&self, lid: u16) -> Result<SaRecord> {
        self.one(vec!["NR".into(), lid.to_string()])
    }

    /// `saquery NR`: all NodeRecords (under umad2sim: the first one only).
    pub fn node_records(&self) -> Result<SaTable> {
        self.table(vec!["NR".into()])
    }

    /// `saquery PIR <lid>/<port>`: one PortInfoRecord (port 0 for a switch).
    pub fn port_info_record(&self, lid: u16, port: u8) -> Result<SaRecord> {
        self.one(vec!["PIR".into(), format!("{lid}/{port}")])
    }

    /// `saquery PIR`: all PortInfoRecords (under umad2sim: the first two).
    pub fn port_info_records(&self) -> Result<SaTable> {
        self.table(vec!["PIR".into()])
    }

    /// `saquery LR <lid>/<port>`: the LinkRecord from this port.
    pub fn link_record(&self, lid: u16, port: u8) -> Result<SaRecord> {
        self.one(vec!["LR".into(), format!("{lid}/{port}")])
    }

    /// `saquery LR`: all LinkRecords (under umad2sim: the first 21).
    pub fn link_records(&self) -> Result<SaTable> {
        self.table(vec!["LR".into()])
    }

    /// `saquery SMIR <lid>`: the SMInfoRecord of the SM at this LID.
    pub fn sm_info_record(&self, lid: u16) -> Result<SaRecord> {
        self.one(vec!["SMIR".into(), lid.to_string()])
    }

    /// `saquery SMIR`: every SM the SA knows.
    pub fn sm_info_records(&self) -> Result<SaTable> {
        self.table(vec!["SMIR".into()])
    }

    /// `saquery SWIR <lid>`: the SwitchInfoRecord of this switch. (saquery reads the
    /// SA's ClassPortInfo first: `MulticastFDBTop` is printed only when its
    /// CapabilityMask2 has IsMulticastFDBTopSupported.)
    pub fn switch_info_record(&self, lid: u16) -> Result<SaRecord> {
        self.one(vec!["SWIR".into(), lid.to_string()])
    }

    /// `saquery SWIR`: all SwitchInfoRecords.
    pub fn switch_info_records(&self) -> Result<SaTable> {
        self.table(vec!["SWIR".into()])
    }

    /// `saquery --src-to-dst <slid>:<dlid> -p`: the PathRecord between two LIDs
    /// (NumbPath 0x7f; one record at LMC 0). LIDs only: names are resolved from an `NR`
    /// table, which umad2sim cuts to one record.
    pub fn path_record(&self, slid: u16, dlid: u16) -> Result<SaRecord> {
        self.one(vec![
            "--src-to-dst".into(),
            format!("{slid}:{dlid}"),
            "-p".into(),
        ])
    }

    /// `saquery -p [selectors]`: PathRecords (under umad2sim: the first two).
    pub fn path_records(&self, query: &PathQuery) -> Result<SaTable> {
        self.table(query.args())
    }

    /// `saquery -g`: multicast groups (one MCMemberRecord per group with the default
    /// untrusted key; under umad2sim: the first three).
    pub fn mc_groups(&self) -> Result<SaTable> {
        self.table(vec!["-g".into()])
    }

    /// `saquery -m`: multicast members. Untrusted (no [`Saquery::sm_key`]): OpenSM
    /// returns one record per group with PortGid `::` and JoinState 0. Trusted: one
    /// record per member port, none for a group without members. `NodeDescription`
    /// comes from an `NR` table (`<unknown>` for all but the first node under umad2sim).
    pub fn mc_members(&self) -> Result<SaTable> {
        self.table(vec!["-m".into()])
    }

    /// `saquery -m <mlid>`: the PortGids saquery lists for one group (`fe80::10:7`,
    /// without the `(<node name>)` it appends). saquery filters a whole MCMemberRecord
    /// table, so under umad2sim only members among its first three records show.
    pub fn mc_member_gids(&self, mlid: u16) -> Result<Vec<String>> {
        let out = self.run_owned(&["-m".into(), format!("{mlid:#06x}")])?;
        Ok(crate::sa_record::parse_saquery(&out.stdout)
            .iter()
            .flat_map(|r| r.get_all("PortGid").map(str::to_string).collect::<Vec<_>>())
            .map(|g| g.split_whitespace().next().unwrap_or("").to_string())
            .collect())
    }

    /// `saquery SR`: ServiceRecords. Through umad2sim a ServiceRecord always lands in
    /// [`SaTable::undelivered`]: its last field lies past byte 224 of the MAD.
    pub fn service_records(&self) -> Result<SaTable> {
        self.table(vec!["SR".into()])
    }

    /// `saquery -c`: the SA's ClassPortInfo (a SubnAdmGet, the one query that is not a
    /// table).
    pub fn class_port_info(&self) -> Result<SaRecord> {
        self.one(vec!["-c".into()])
    }

    /// `saquery IIR`: InformInfoRecords (subscriptions).
    pub fn inform_info_records(&self) -> Result<SaTable> {
        self.table(vec!["IIR".into()])
    }
}
