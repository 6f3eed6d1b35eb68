//! `--partitions-file FILE` (config key `partitions_file`): OpenSM's partitions.conf
//! as the start-up partitions ([`ibsm_core::subnet::partitions_conf`] reads it),
//! read at start and again on SIGHUP or `Fabric/ReloadPartitions`
//! (`ibsmctl partitions reload`).
//!
//! A reload reads and checks the whole file first: a file that does not parse, or
//! whose partitions the configurator refuses, changes nothing and the error (with
//! its line and column) goes back to the caller and to the log. A good file
//! replaces the start-up partitions of the running instance; partitions set through
//! `Fabric/SetPartition` (replicated) stay on top, as at start. The file is this
//! daemon's: in a replicated cluster give every member the same file (the master's
//! is the one that is programmed).
//!
//! `mgid=` lines are read and checked but the SA does not pre-create such groups
//! (it creates each `ipoib` partition's broadcast group only): every one is logged
//! as not created and returned by the RPC, never silently dropped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ibsm_core::subnet::partitions_conf::{self, McastGroupDef, NotApplied, PartitionsConfError};
use ibsm_core::subnet::{Partition, SubnetConfig};

use crate::instance::{Command, Instance};

/// Why a partitions file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PartitionsFileError {
    /// The file cannot be read.
    #[error("partitions file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid UTF-8 / the grammar.
    #[error("partitions file {path}, {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and why.
        source: PartitionsConfError,
    },
    /// It parses, but the set is refused (more than 31 partitions on a port...).
    #[error("partitions file {path}: {why}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// A partitions file, read and checked.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The partitions to program (the default one, 0x7FFF, first).
    pub partitions: Vec<Partition>,
    /// `mgid=` groups read but not created.
    pub multicast_groups: Vec<McastGroupDef>,
    /// Other flags read but not applied.
    pub not_applied: Vec<NotApplied>,
}

impl Loaded {
    /// Everything read but not applied, one line each, in file order.
    pub fn not_applied(&self) -> Vec<String> {
        let mut out: Vec<(usize, usize, String)> = self
            .multicast_groups
            .iter()
            .map(|g| (g.at.line, g.at.column, describe_group(g)))
            .collect();
        out.extend(
            self.not_applied
                .iter()
                .map(|n| (n.at.line, n.at.column, format!("{}: {}", n.at, n.what))),
        );
        out.sort();
        out.into_iter().map(|(_, _, s)| s).collect()
    }
}

/// A multicast group line as the log and the API show it.
pub fn describe_group(g: &McastGroupDef) -> String {
    format!(
        "{}: mgid {} of partition {:#06x} (mtu {}, rate {}, sl {}, Q_Key {:#x}) not created: ibsm's SA creates only each ipoib partition's broadcast group",
        g.at,
        std::net::Ipv6Addr::from(g.mgid),
        g.p_key,
        g.params.mtu,
        g.params.rate,
        g.params.sl,
        g.params.q_key
    )
}

/// Read, parse and check `path` (the partition checks of
/// [`SubnetConfig::validate`]: P_Keys, IPoIB values, 31 partitions a port at most).
pub fn load(path: &Path) -> Result<Loaded, PartitionsFileError> {
    let bytes = std::fs::read(path).map_err(|source| PartitionsFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let file = partitions_conf::parse(&text).map_err(|source| PartitionsFileError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let check = SubnetConfig {
        partitions: file.partitions,
        ..SubnetConfig::default()
    };
    check.validate().map_err(|e| PartitionsFileError::Refused {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    Ok(Loaded {
        partitions: check.partitions,
        multicast_groups: file.multicast_groups,
        not_applied: file.not_applied,
    })
}

/// Log what a load did not apply (its `mgid=` groups, flags it cannot honour).
pub fn log_unapplied(path: &Path, loaded: &Loaded) {
    for line in loaded.not_applied() {
        tracing::warn!(file = %path.display(), "{line}");
    }
}

/// Read `path` again and hand its partitions to `inst`. Logs the outcome either way.
pub async fn reload(path: &Path, inst: &Arc<Instance>) -> Result<Loaded, String> {
    let result = reload_inner(path, inst).await;
    match &result {
        Ok(l) => {
            log_unapplied(path, l);
            tracing::info!(
                file = %path.display(),
                partitions = l.partitions.len(),
                "partitions file reloaded"
            );
        }
        Err(e) => tracing::error!("partitions file not reloaded, nothing changed: {e}"),
    }
    result
}

async fn reload_inner(path: &Path, inst: &Arc<Instance>) -> Result<Loaded, String> {
    let p = path.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || load(&p))
        .await
        .map_err(|e| format!("reading the partitions file failed: {e}"))?
        .map_err(|e| e.to_string())?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    inst.send(Command::SetPartitions {
        partitions: loaded.partitions.clone(),
        reply: tx,
    })
    .map_err(|e| e.to_string())?;
    rx.await
        .map_err(|_| format!("SM instance {} stopped", inst.name()))?
        .map_err(|e| format!("partitions file {}: {e}", path.display()))?;
    Ok(loaded)
}
