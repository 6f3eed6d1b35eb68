//! What the tests of the `ibsmd` binary share: the binary, a child killed on drop, a
//! free loopback port, one `GetStatus` over plaintext gRPC.
#![allow(dead_code)] // each test binary uses its own part of this

use std::process::{Child, Command, Stdio};

use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{GetStatusRequest, Status};

/// The binary under test.
pub const IBSMD: &str = env!("CARGO_BIN_EXE_ibsmd");

/// Kills the child on drop (also on panic).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// `ibsmd ARGS`, stdout discarded, stderr piped, killed when the guard drops.
pub fn spawn(args: &[&str]) -> Reaped {
    let child = Command::new(IBSMD)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ibsmd");
    Reaped(child)
}

/// `GetStatus` of the ibsmd serving plaintext gRPC on loopback port `grpc`; `None`
/// while it does not answer.
pub async fn status(grpc: u16) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://127.0.0.1:{grpc}"))
        .await
        .ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}
