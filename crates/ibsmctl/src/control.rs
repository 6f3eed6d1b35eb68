//! The control-API commands: a tonic client of `ibsm.v1.Control` (ibsmd's gRPC).
//!
//! Exit codes are the point of this module's error type: scripts and tests branch on
//! them, so every failure is classified once, here ([`CtlError::exit_code`]):
//! 2 = the request was invalid (usage, `INVALID_ARGUMENT`, `OUT_OF_RANGE`),
//! 3 = nobody answered (connect failure, `UNAVAILABLE`, deadline on connect),
//! 4 = the SM refused in its current state (`FAILED_PRECONDITION`),
//! 1 = anything else.

use std::time::Duration;

use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{
    ControlPacket, GetStatusRequest, HandoverRequest, ListSmsRequest, SendControlRequest,
    SetPriorityRequest, SweepRequest, WatchRequest,
};
use serde_json::json;
use thiserror::Error;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::Code;

use crate::args::fmt_guid;
use crate::render;

/// A failed control command, classified for the exit code.
#[derive(Debug, Error)]
pub enum CtlError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot connect to {endpoint}: {detail}")]
    Connect { endpoint: String, detail: String },
    #[error("{rpc} on {endpoint}: {} ({:?}): {}{}", .status.code().description(), .status.code(), .status.message(), auth_hint(.status.code()))]
    Rpc {
        rpc: &'static str,
        endpoint: String,
        status: tonic::Status,
    },
    #[error("{rpc} on {endpoint}: no answer within {timeout:?}")]
    Timeout {
        rpc: &'static str,
        endpoint: String,
        timeout: Duration,
    },
}

fn auth_hint(code: Code) -> &'static str {
    match code {
        Code::Unauthenticated => " (give --token-file FILE or $IBSM_TOKEN_FILE, or mutual TLS)",
        _ => "",
    }
}

impl CtlError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CtlError::Usage(_) => 2,
            CtlError::Connect { .. } => 3,
            CtlError::Timeout { .. } => 1,
            CtlError::Rpc { status, .. } => match status.code() {
                Code::InvalidArgument | Code::OutOfRange => 2,
                Code::Unavailable => 3,
                Code::FailedPrecondition => 4,
                _ => 1,
            },
        }
    }
}

/// The three control packets an operator may send by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Packet {
    Disable,
    Standby,
    Discover,
}

impl Packet {
    fn wire(self) -> ControlPacket {
        match self {
            Packet::Disable => ControlPacket::Disable,
            Packet::Standby => ControlPacket::Standby,
            Packet::Discover => ControlPacket::Discover,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Packet::Disable => "DISABLE",
            Packet::Standby => "STANDBY",
            Packet::Discover => "DISCOVER",
        }
    }
}

/// One control-API request, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Status,
    Sms,
    SetPriority(u8),
    Handover {
        to: Option<u64>,
    },
    /// `hold_ms` 0 (a bad --hold-s) is sent as is: the server names the range.
    StepDown {
        hold_ms: u64,
    },
    Control {
        packet: Packet,
        guid: u64,
    },
    Sweep {
        heavy: bool,
    },
    Watch {
        count: Option<u64>,
    },
}

/// Where and how to talk to ibsmd.
#[derive(Debug, Clone)]
pub struct Target {
    pub endpoint: String,
    pub connect_timeout: Duration,
    pub rpc_timeout: Duration,
    pub json: bool,
    pub auth: Auth,
}

/// Credentials: ibsmd refuses to serve without a bearer token or mutual TLS unless
/// it runs with `--insecure-plaintext`.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    /// File holding the bearer token (sent as `authorization: Bearer <token>`).
    pub token_file: Option<std::path::PathBuf>,
    /// CA certificate (PEM) that signed the server's certificate (https endpoints).
    pub ca_cert: Option<std::path::PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS.
    pub client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// DNS name expected in the server's certificate (default: the endpoint's host).
    pub tls_domain: Option<String>,
}

/// Adds the bearer token, when there is one, to every request.
#[derive(Debug, Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// A channel with the bearer token on every call (any `ibsm.v1` client wraps it).
pub type AuthChannel = InterceptedService<Channel, Bearer>;

type Client = ControlClient<AuthChannel>;

/// Read a token file: its content without surrounding whitespace; at least 16
/// visible ASCII bytes (what ibsmd accepts).
pub fn read_token(path: &std::path::Path) -> Result<MetadataValue<Ascii>, CtlError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CtlError::Usage(format!("--token-file {}: {e}", path.display())))?;
    let token = text.trim();
    if token.len() < 16 {
        return Err(CtlError::Usage(format!(
            "--token-file {}: the token is {} bytes; at least 16 are required",
            path.display(),
            token.len()
        )));
    }
    if let Some((i, c)) = token.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
        return Err(CtlError::Usage(format!(
            "--token-file {}: byte {i} is {c:?}: only visible ASCII is allowed",
            path.display()
        )));
    }
    format!("Bearer {token}")
        .parse()
        .map_err(|e| CtlError::Usage(format!("--token-file {}: {e}", path.display())))
}

fn read_pem(what: &str, path: &std::path::Path) -> Result<Vec<u8>, CtlError> {
    std::fs::read(path).map_err(|e| CtlError::Usage(format!("{what} {}: {e}", path.display())))
}

/// Run `req` against `target`, printing its result on stdout.
pub async fn run(target: &Target, req: Request) -> Result<(), CtlError> {
    let mut client = connect(target).await?;
    let ep = target.endpoint.clone();
    let json_out = target.json;
    match req {
        Request::Status => {
            let s = unary(target, "GetStatus", client.get_status(GetStatusRequest {})).await?;
            print_status(&s, json_out);
        }
        Request::Sms => {
            let r = unary(target, "ListSms", client.list_sms(ListSmsRequest {})).await?;
            if json_out {
                println!("{}", render::sms_json(&r.sms));
            } else {
                print!("{}", render::sms_text(&r.sms));
            }
        }
        Request::SetPriority(p) => {
            let s = unary(
                target,
                "SetPriority",
                client.set_priority(SetPriorityRequest {
                    priority: u32::from(p),
                }),
            )
            .await?;
            print_status(&s, json_out);
        }
        Request::Handover { to } => {
            let r = unary(
                target,
                "Handover",
                client.handover(HandoverRequest {
                    to_guid: to.unwrap_or(0),
                }),
            )
            .await?;
            if json_out {
                println!(
                    "{}",
                    json!({"target_guid": fmt_guid(r.target_guid), "outcome": r.outcome})
                );
            } else {
                println!("handover to {}: {}", fmt_guid(r.target_guid), r.outcome);
            }
        }
        Request::StepDown { hold_ms } => {
            let r = unary(
                target,
                "StepDown",
                client.step_down(ibsm_proto::v1::StepDownRequest { hold_ms }),
            )
            .await?;
            if json_out {
                println!(
                    "{}",
                    json!({"target_guid": fmt_guid(r.target_guid), "outcome": r.outcome,
                           "restored_priority": r.restored_priority,
                           "until_unix_ms": r.until_unix_ms})
                );
            } else {
                println!(
                    "stepped down: handover to {}: {}; priority {} comes back in {:.1} s",
                    fmt_guid(r.target_guid),
                    r.outcome,
                    r.restored_priority,
                    Duration::from_millis(hold_ms).as_secs_f64()
                );
            }
        }
        Request::Control { packet, guid } => {
            let r = unary(
                target,
                "SendControl",
                client.send_control(SendControlRequest {
                    packet: packet.wire() as i32,
                    guid,
                }),
            )
            .await?;
            if json_out {
                println!(
                    "{}",
                    json!({"packet": packet.name(), "guid": fmt_guid(guid), "outcome": r.outcome})
                );
            } else {
                println!("{} to {}: {}", packet.name(), fmt_guid(guid), r.outcome);
            }
        }
        Request::Sweep { heavy } => {
            let r = unary(target, "Sweep", client.sweep(SweepRequest { heavy })).await?;
            if json_out {
                println!("{}", json!({"heavy": heavy, "summary": r.summary}));
            } else {
                println!("{}", r.summary);
            }
        }
        Request::Watch { count } => {
            let mut stream = unary(target, "Watch", client.watch(WatchRequest {})).await?;
            let mut seen = 0u64;
            while !matches!(count, Some(c) if seen >= c) {
                let next = stream.message().await.map_err(|status| CtlError::Rpc {
                    rpc: "Watch",
                    endpoint: ep.clone(),
                    status,
                })?;
                let Some(ev) = next else { break };
                if json_out {
                    println!("{}", render::event_json(&ev));
                } else {
                    println!("{}", render::event_text(&ev));
                }
                seen += 1;
            }
        }
    }
    Ok(())
}

fn print_status(s: &ibsm_proto::v1::Status, json_out: bool) {
    if json_out {
        println!("{}", render::status_json(s));
    } else {
        print!("{}", render::status_text(s));
    }
}

/// The host of a plaintext `http://` endpoint when it is not a loopback address
/// (`localhost`, 127.0.0.0/8, ::1); `None` otherwise.
pub fn plaintext_remote_host(endpoint: &str) -> Option<String> {
    let rest = endpoint.strip_prefix("http://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or(v6)
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then(|| host.to_string())
}

async fn connect(target: &Target) -> Result<Client, CtlError> {
    Ok(ControlClient::new(channel(target).await?))
}

/// Connect to `target` (TLS and token as configured).
pub async fn channel(target: &Target) -> Result<AuthChannel, CtlError> {
    let bearer = Bearer(match &target.auth.token_file {
        Some(p) => Some(read_token(p)?),
        None => None,
    });
    let mut endpoint = Endpoint::from_shared(target.endpoint.clone())
        .map_err(|e| CtlError::Usage(format!("invalid endpoint {:?}: {e}", target.endpoint)))?
        .connect_timeout(target.connect_timeout);
    let a = &target.auth;
    if target.endpoint.starts_with("https://") {
        let mut tls = ClientTlsConfig::new();
        if let Some(ca) = &a.ca_cert {
            tls = tls.ca_certificate(Certificate::from_pem(read_pem("--ca-cert", ca)?));
        }
        if let Some((cert, key)) = &a.client_cert {
            tls = tls.identity(Identity::from_pem(
                read_pem("--client-cert", cert)?,
                read_pem("--client-key", key)?,
            ));
        }
        if let Some(d) = &a.tls_domain {
            tls = tls.domain_name(d.clone());
        }
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| CtlError::Usage(format!("TLS settings: {}", error_chain(&e))))?;
    } else if a.ca_cert.is_some() || a.client_cert.is_some() {
        return Err(CtlError::Usage(
            "--ca-cert/--client-cert need an https:// endpoint".into(),
        ));
    }
    if bearer.0.is_some() && !target.endpoint.starts_with("https://") {
        if let Some(host) = plaintext_remote_host(&target.endpoint) {
            eprintln!(
                "ibsmctl: warning: sending the bearer token in clear text to {host}, which is not a loopback address: anyone on the path can read it; use an https:// endpoint"
            );
        }
    }
    let connecting = endpoint.connect();
    // The connect timeout covers TCP; this one also covers the HTTP/2 handshake.
    match tokio::time::timeout(target.connect_timeout + Duration::from_secs(1), connecting).await {
        Ok(Ok(channel)) => Ok(InterceptedService::new(channel, bearer)),
        Ok(Err(e)) => Err(CtlError::Connect {
            endpoint: target.endpoint.clone(),
            detail: error_chain(&e),
        }),
        Err(_) => Err(CtlError::Connect {
            endpoint: target.endpoint.clone(),
            detail: format!("no connection within {:?}", target.connect_timeout),
        }),
    }
}

/// Await a unary call (or a stream's first response) with the RPC deadline.
pub async fn unary<T>(
    target: &Target,
    rpc: &'static str,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, CtlError> {
    match tokio::time::timeout(target.rpc_timeout, call).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(status)) => Err(CtlError::Rpc {
            rpc,
            endpoint: target.endpoint.clone(),
            status,
        }),
        Err(_) => Err(CtlError::Timeout {
            rpc,
            endpoint: target.endpoint.clone(),
            timeout: target.rpc_timeout,
        }),
    }
}

/// "transport error: tcp connect error: Connection refused (os error 111)".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn plaintext_token_warning_spares_loopback_only() {
        use super::plaintext_remote_host as h;
        assert_eq!(h("http://127.0.0.1:50051"), None);
        assert_eq!(h("http://127.5.0.1:50051"), None);
        assert_eq!(h("http://localhost:50051"), None);
        assert_eq!(h("http://[::1]:50051"), None);
        assert_eq!(h("https://10.0.0.5:50051"), None);
        assert_eq!(h("http://10.0.0.5:50051").as_deref(), Some("10.0.0.5"));
        assert_eq!(
            h("http://sm1.example:50051").as_deref(),
            Some("sm1.example")
        );
        assert_eq!(h("http://[fe80::1]:50051").as_deref(), Some("fe80::1"));
    }

    use super::*;

    #[test]
    fn exit_codes() {
        let rpc = |code| CtlError::Rpc {
            rpc: "X",
            endpoint: "e".into(),
            status: tonic::Status::new(code, "m"),
        };
        assert_eq!(CtlError::Usage("u".into()).exit_code(), 2);
        assert_eq!(
            CtlError::Connect {
                endpoint: "e".into(),
                detail: "d".into()
            }
            .exit_code(),
            3
        );
        assert_eq!(rpc(Code::InvalidArgument).exit_code(), 2);
        assert_eq!(rpc(Code::OutOfRange).exit_code(), 2);
        assert_eq!(rpc(Code::Unavailable).exit_code(), 3);
        assert_eq!(rpc(Code::FailedPrecondition).exit_code(), 4);
        assert_eq!(rpc(Code::Internal).exit_code(), 1);
        assert_eq!(rpc(Code::NotFound).exit_code(), 1);
        let msg = rpc(Code::FailedPrecondition).to_string();
        assert!(
            msg.contains("FailedPrecondition") && msg.contains(": m"),
            "{msg}"
        );
    }
}
