//! ibsim's console: sending one command to a running [`Ibsim`] and reading its answer
//! up to the next prompt (serialized by a mutex), the link and error-rate commands, the
//! `Attached` client list, and reaping the clients whose process is gone.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

use crate::child::{lock, pid_alive, POLL_STEP};
use crate::error::{io_err, LabError, Result};
use crate::ibsim::Ibsim;
use crate::parse::{parse_attached, AttachedClient, PROMPT};
impl Ibsim {
    /// Send one console command (a single line, e.g. `Dump "Switch1"`) and return what
    /// ibsim printed in answer, up to its next prompt. Waits at most 10 s.
    pub fn console(&self, command: &str) -> Result<String> {
        self.console_timeout(command, Duration::from_secs(10))
    }

    /// [`Ibsim::console`] with an explicit timeout.
    pub fn console_timeout(&self, command: &str, timeout: Duration) -> Result<String> {
        if command.contains('\n') {
            return Err(LabError::Console(format!(
                "console command must be one line, got {command:?}"
            )));
        }
        let mut writer = lock(&self.console);
        let mut out = File::open(&self.stdout_path)
            .map_err(io_err(format!("opening {}", self.stdout_path.display())))?;
        let start = out
            .seek(SeekFrom::End(0))
            .map_err(io_err(format!("seeking {}", self.stdout_path.display())))?;
        tracing::debug!(sockname = %self.sockname, command, "ibsim console");
        writer
            .write_all(format!("{command}\n").as_bytes())
            .and_then(|()| writer.flush())
            .map_err(io_err(format!("writing `{command}` to ibsim's console")))?;
        let deadline = Instant::now() + timeout;
        let mut buf = Vec::new();
        loop {
            out.read_to_end(&mut buf)
                .map_err(io_err(format!("reading {}", self.stdout_path.display())))?;
            let text = String::from_utf8_lossy(&buf);
            if let Some(i) = text.rfind(PROMPT) {
                let answer = text.get(..i).unwrap_or("").trim_end().to_string();
                tracing::debug!(start, answer, "ibsim console answer");
                return Ok(answer);
            }
            if let Some(st) = self.exit_status() {
                return Err(self.died_error(st));
            }
            if Instant::now() >= deadline {
                return Err(LabError::Timeout {
                    what: format!("ibsim's answer to `{command}`"),
                    timeout,
                    context: format!("output so far: {text:?}"),
                });
            }
            std::thread::sleep(POLL_STEP);
        }
    }

    /// `Unlink "node"[port]`, or `Unlink "node"` (all links) when `port` is `None`.
    pub fn unlink(&self, node: &str, port: Option<u8>) -> Result<String> {
        self.console(&format!("Unlink {}", node_ref(node, port)))
    }

    /// `ReLink "node"[port]`: restore a link removed by `Unlink` (all when `port` is `None`).
    pub fn relink(&self, node: &str, port: Option<u8>) -> Result<String> {
        self.console(&format!("ReLink {}", node_ref(node, port)))
    }

    /// `Link "node"[port] "remote"[remote_port]`: connect two ports.
    pub fn link(&self, node: &str, port: u8, remote: &str, remote_port: u8) -> Result<String> {
        self.console(&format!(
            "Link {} {}",
            node_ref(node, Some(port)),
            node_ref(remote, Some(remote_port))
        ))
    }

    /// `Clear "node"[port]`: unlink and reset.
    pub fn clear(&self, node: &str, port: Option<u8>) -> Result<String> {
        self.console(&format!("Clear {}", node_ref(node, port)))
    }

    /// `Error "node"[port] <rate%> [attr]`: drop `rate_percent` % of packets through the
    /// port, optionally only those of attribute `attr_id` (e.g. 0x11 NodeInfo).
    pub fn error_rate(
        &self,
        node: &str,
        port: u8,
        rate_percent: u8,
        attr_id: Option<u16>,
    ) -> Result<String> {
        let mut cmd = format!("Error {} {rate_percent}", node_ref(node, Some(port)));
        if let Some(a) = attr_id {
            cmd.push_str(&format!(" {a}"));
        }
        self.console(&cmd)
    }

    /// The clients currently attached (console `Attached`).
    pub fn attached(&self) -> Result<Vec<AttachedClient>> {
        Ok(parse_attached(&self.console("Attached")?))
    }

    /// Disconnect client `id` (console `X <id>`).
    pub fn disconnect_client(&self, id: u32) -> Result<String> {
        self.console(&format!("X {id}"))
    }

    /// Emulate the kernel closing a dead process's umad/issm files: disconnect every
    /// attached client whose pid is gone (or a zombie). Returns the clients dropped.
    pub fn reap_dead_clients(&self) -> Result<Vec<AttachedClient>> {
        let dead: Vec<AttachedClient> = self
            .attached()?
            .into_iter()
            .filter(|c| !pid_alive(c.pid))
            .collect();
        for c in &dead {
            tracing::info!(client = c.id, pid = c.pid, node = %c.node, "reaping dead ibsim client");
            self.disconnect_client(c.id)?;
        }
        Ok(dead)
    }
}

fn node_ref(node: &str, port: Option<u8>) -> String {
    match port {
        Some(p) => format!("\"{node}\"[{p}]"),
        None => format!("\"{node}\""),
    }
}
