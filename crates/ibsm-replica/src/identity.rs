//! What a data dir belongs to: the file [`IDENTITY_FILE`] holds the on-disk format
//! version, this member's node id and the id of the cluster it is part of.
//!
//! Why: a data dir copied from another cluster, or left by a newer release, must not be
//! opened as if it were ours (its log would be replayed into the wrong fabric), and a
//! member whose store was lost must not silently bootstrap a second cluster beside the
//! first. So:
//!
//! - the file is written when the store is first opened; the cluster id when the
//!   cluster is bootstrapped (the lowest initial member makes a random one) or, on the
//!   other members, when the first authenticated leader RPC carries it;
//! - on open, a newer format or another node id is refused with a clear error;
//! - a dir that was ever a member (the file exists) but whose store holds nothing is
//!   not bootstrapped again unless the operator says so (`--force-bootstrap`);
//! - every Raft RPC carries the sender's cluster id ([`CLUSTER_ID_HEADER`]); a receiver
//!   that knows its own refuses another.

use std::path::{Path, PathBuf};

use crate::NodeId;

/// The file in the data dir.
pub const IDENTITY_FILE: &str = "ibsm-cluster";
/// On-disk format of this release (the redb tables and this file).
pub const FORMAT_VERSION: u32 = 1;
/// Metadata key carrying the sender's cluster id on Raft RPCs.
pub const CLUSTER_ID_HEADER: &str = "ibsm-cluster-id";

/// The content of [`IDENTITY_FILE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub format: u32,
    pub node_id: NodeId,
    /// Unknown until bootstrapped or learned from the leader.
    pub cluster_id: Option<String>,
}

/// Why a data dir's identity is refused or unreadable.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: {why}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("{}: written by a newer ibsm (data format {found}, this release reads {FORMAT_VERSION}): upgrade ibsmd or use another --data-dir", path.display())]
    Newer { path: PathBuf, found: u32 },
    #[error("{}: this data dir belongs to node {found}, but this is node {want}: give each member its own --data-dir", path.display())]
    OtherNode {
        path: PathBuf,
        found: NodeId,
        want: NodeId,
    },
}

impl Identity {
    fn render(&self) -> String {
        let mut s = format!(
            "# ibsm replica data dir: do not edit, do not copy between members\nformat = {}\nnode_id = {}\n",
            self.format, self.node_id
        );
        if let Some(c) = &self.cluster_id {
            s.push_str(&format!("cluster_id = {c}\n"));
        }
        s
    }

    fn parse(path: &Path, text: &str) -> Result<Identity, IdentityError> {
        let err = |line: usize, why: String| IdentityError::Parse {
            path: path.to_path_buf(),
            line,
            why,
        };
        let (mut format, mut node_id, mut cluster_id) = (None, None, None);
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let (k, v) = l
                .split_once('=')
                .ok_or_else(|| err(i + 1, format!("expected key = value, found {l:?}")))?;
            let (k, v) = (k.trim(), v.trim());
            match k {
                "format" => {
                    format = Some(
                        v.parse::<u32>()
                            .map_err(|e| err(i + 1, format!("format {v:?}: {e}")))?,
                    )
                }
                "node_id" => {
                    node_id = Some(
                        v.parse::<NodeId>()
                            .map_err(|e| err(i + 1, format!("node_id {v:?}: {e}")))?,
                    )
                }
                "cluster_id" => {
                    if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(err(i + 1, format!("cluster_id {v:?} is not hex")));
                    }
                    cluster_id = Some(v.to_string());
                }
                other => return Err(err(i + 1, format!("unknown key {other:?}"))),
            }
        }
        Ok(Identity {
            format: format.ok_or_else(|| err(0, "no format line".into()))?,
            node_id: node_id.ok_or_else(|| err(0, "no node_id line".into()))?,
            cluster_id,
        })
    }
}

fn path_of(dir: &Path) -> PathBuf {
    dir.join(IDENTITY_FILE)
}

/// The identity of `dir`, `None` if it has none yet. A newer format or another node
/// id is an error.
pub fn read(dir: &Path, node_id: NodeId) -> Result<Option<Identity>, IdentityError> {
    let path = path_of(dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(IdentityError::Io { path, source }),
    };
    let id = Identity::parse(&path, &text)?;
    if id.format > FORMAT_VERSION {
        return Err(IdentityError::Newer {
            path,
            found: id.format,
        });
    }
    if id.node_id != node_id {
        return Err(IdentityError::OtherNode {
            path,
            found: id.node_id,
            want: node_id,
        });
    }
    Ok(Some(id))
}

/// Write `id` to `dir` (atomically: a temp file renamed over the old one).
pub fn write(dir: &Path, id: &Identity) -> Result<(), IdentityError> {
    let path = path_of(dir);
    let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
    let io = |source| IdentityError::Io {
        path: path.clone(),
        source,
    };
    std::fs::write(&tmp, id.render()).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)
}

/// A new random cluster id (32 hex digits from the OS's random source).
pub fn new_cluster_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let d = tempfile::tempdir().expect("tempdir");
        assert!(read(d.path(), 1).expect("empty").is_none());
        let id = Identity {
            format: FORMAT_VERSION,
            node_id: 1,
            cluster_id: Some("00ff".into()),
        };
        write(d.path(), &id).expect("write");
        assert_eq!(read(d.path(), 1).expect("read"), Some(id.clone()));
        let e = read(d.path(), 2).expect_err("other node");
        assert!(e.to_string().contains("belongs to node 1"), "{e}");
        write(
            d.path(),
            &Identity {
                format: FORMAT_VERSION + 1,
                ..id
            },
        )
        .expect("write");
        let e = read(d.path(), 1).expect_err("newer");
        assert!(e.to_string().contains("newer"), "{e}");
        std::fs::write(d.path().join(IDENTITY_FILE), "format = 1\nnode_id = x\n").expect("w");
        let e = read(d.path(), 1).expect_err("garbage");
        assert!(e.to_string().contains(":2:"), "{e}");
    }
}
