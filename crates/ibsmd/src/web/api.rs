//! The console's routes: the built-in assets, `/api/*` answered by the gRPC handlers
//! in-process under the API's credentials and roles (module doc of [`super`]).

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, Extensions, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_server::Control;
use ibsm_proto::v1::fabric_server::Fabric;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::groups::{self, Grouped};
use super::json;
use super::record::Recorder;
use super::source::{WebSource, MAX_STREAMS, STREAM_LIFETIME, STREAM_MIN_GAP};
use crate::auth::{read_only_allows, Role, Security};
use crate::fabric_service::FabricService;
use crate::http_serve::PeerCerts;

/// A stream with nothing new still sends the view this often (keeps proxies open).
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);
/// Most timeline entries one stream message carries.
const ENTRIES_PER_MESSAGE: usize = 2_000;

/// What every handler shares.
pub struct App {
    security: Security,
    recorder: Arc<Recorder>,
    fabrics: Vec<(String, FabricService)>,
    streams: Arc<tokio::sync::Semaphore>,
    /// The last large topology grouped (for its group and search answers).
    grouped: std::sync::Mutex<Option<Arc<Grouped>>>,
}

impl App {
    pub fn new(sources: Vec<WebSource>, security: Security, recorder: Arc<Recorder>) -> Arc<App> {
        let fabrics = sources
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    FabricService::new(Arc::clone(&s.slot), &s.name, s.repl.clone()),
                )
            })
            .collect();
        Arc::new(App {
            security,
            recorder,
            fabrics,
            streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
            grouped: std::sync::Mutex::new(None),
        })
    }

    /// The caller's role, or why it has none (answered 401): the API's mapping
    /// ([`Security::role_of`]) of the bearer token and the connection's verified client
    /// certificate. With mutual TLS a certificate is required, as the API's handshake
    /// requires one (the console's handshake lets a browser without one in, to say so).
    fn role(&self, headers: &HeaderMap, ext: &Extensions) -> Result<Role, tonic::Status> {
        let certs = ext.get::<PeerCerts>();
        if self.security.mtls && certs.is_none() {
            return Err(tonic::Status::unauthenticated(
                "missing credentials: a client certificate signed by the API's client CA is required (install one in the browser)",
            ));
        }
        self.security
            .role_of(headers, certs.map(|c| c.0.as_slice()))
    }

    /// The grouping of `name`'s current topology: the kept one when the topology is
    /// the same publication, else made anew (off the async workers).
    async fn grouped(&self, name: &str, f: &FabricService) -> Result<Arc<Grouped>, tonic::Status> {
        let t = f
            .get_topology(tonic::Request::new(pb::GetTopologyRequest {}))
            .await?
            .into_inner();
        let kept = self
            .grouped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(g) = kept.filter(|g| g.key == groups::key_of(name, &t)) {
            return Ok(g);
        }
        let name = name.to_string();
        let g = tokio::task::spawn_blocking(move || Arc::new(Grouped::new(&name, t)))
            .await
            .map_err(|e| tonic::Status::internal(format!("grouping the topology failed: {e}")))?;
        *self.grouped.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&g));
        Ok(g)
    }
}

type Shared = State<Arc<App>>;

pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new()
        .route(
            "/",
            get(|| async {
                asset(
                    "text/html; charset=utf-8",
                    include_str!("assets/index.html"),
                )
            }),
        )
        .route(
            "/app.css",
            get(|| async { asset("text/css", include_str!("assets/app.css")) }),
        )
        .route(
            "/app.js",
            get(|| async { asset("text/javascript", include_str!("assets/app.js")) }),
        )
        .route(
            "/fabric.js",
            get(|| async { asset("text/javascript", include_str!("assets/fabric.js")) }),
        )
        .route(
            "/timeline.js",
            get(|| async { asset("text/javascript", include_str!("assets/timeline.js")) }),
        )
        .route("/api/whoami", get(whoami))
        .route("/api/cluster", get(cluster))
        .route("/api/stream", get(stream))
        .route("/api/fabric/{what}", get(fabric))
        .route("/api/action", post(action))
        .with_state(app)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        v.to_string(),
    )
        .into_response()
}

/// A gRPC status as the HTTP answer a browser understands.
fn status_response(s: &tonic::Status) -> Response {
    use tonic::Code;
    let code = match s.code() {
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::FailedPrecondition | Code::AlreadyExists => StatusCode::CONFLICT,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut r = json_response(
        code,
        &json!({"error": s.message(), "code": format!("{:?}", s.code())}),
    );
    if code == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

fn bad_request(why: String) -> Response {
    json_response(StatusCode::BAD_REQUEST, &json!({"error": why}))
}

async fn whoami(State(app): Shared, headers: HeaderMap, ext: Extensions) -> Response {
    match app.role(&headers, &ext) {
        Ok(role) => json_response(
            StatusCode::OK,
            &json!({"role": if role == Role::Admin { "admin" } else { "read-only" },
                    "authenticates": app.security.authenticates(),
                    "certificate": ext.get::<PeerCerts>().is_some(),
                    "instances": app.fabrics.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()}),
        ),
        Err(s) => status_response(&s),
    }
}

async fn cluster(State(app): Shared, headers: HeaderMap, ext: Extensions) -> Response {
    if let Err(s) = app.role(&headers, &ext) {
        return status_response(&s);
    }
    let view = app.recorder.view().borrow().clone();
    let (entries, _) = app.recorder.entries_after(0, usize::MAX);
    json_response(
        StatusCode::OK,
        &json!({"cluster": *view, "timeline": entries}),
    )
}

/// The live view: `data: {"cluster": ..., "timeline": [new entries]}` messages.
async fn stream(State(app): Shared, headers: HeaderMap, ext: Extensions) -> Response {
    if let Err(s) = app.role(&headers, &ext) {
        return status_response(&s);
    }
    let Ok(permit) = Arc::clone(&app.streams).try_acquire_owned() else {
        return status_response(&tonic::Status::resource_exhausted(format!(
            "{MAX_STREAMS} console streams are open already"
        )));
    };
    let mut view = app.recorder.view();
    let recorder = Arc::clone(&app.recorder);
    let (tx, out) = mpsc::channel::<Result<Bytes, Infallible>>(2);
    tokio::spawn(async move {
        let _permit = permit;
        let end = tokio::time::Instant::now() + STREAM_LIFETIME;
        let mut cursor = 0;
        loop {
            let v = view.borrow_and_update().clone();
            let (entries, last) = recorder.entries_after(cursor, ENTRIES_PER_MESSAGE);
            cursor = last;
            // The clock at sending: the cluster view's own `now_ms` is when it last
            // changed, and the timeline draws every SM's last state up to now.
            let msg =
                json!({"cluster": *v, "timeline": entries, "now_ms": super::record::now_ms()});
            if tx
                .send(Ok(Bytes::from(format!("data: {msg}\n\n"))))
                .await
                .is_err()
            {
                return;
            }
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(end) => return,
                r = view.changed() => if r.is_err() { return },
                _ = tokio::time::sleep(HEARTBEAT) => {}
            }
            tokio::time::sleep(STREAM_MIN_GAP).await;
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(out)),
    )
        .into_response()
}

/// `?a=1&b=x` as pairs (the console sends plain numbers and names).
fn query(uri: &Uri) -> Vec<(String, String)> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `%XX` and `+` of a query value decoded (invalid escapes kept as they are).
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn param<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The instance to ask: `?sm=NAME`, else the one that is MASTER, else the first that runs.
async fn pick(app: &App, q: &[(String, String)]) -> Result<usize, Response> {
    if let Some(name) = param(q, "sm") {
        return app
            .fabrics
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| {
                json_response(
                    StatusCode::NOT_FOUND,
                    &json!({"error": format!("no SM instance named {name:?} here")}),
                )
            });
    }
    let view = app.recorder.view().borrow().clone();
    let insts = view["instances"].as_array().cloned().unwrap_or_default();
    let by_state = |want: Option<&str>| {
        insts
            .iter()
            .find(|i| i["running"] == true && want.is_none_or(|w| i["state"] == w))
            .and_then(|i| i["name"].as_str().map(str::to_string))
    };
    let name = by_state(Some("MASTER")).or_else(|| by_state(None));
    Ok(name
        .and_then(|n| app.fabrics.iter().position(|(f, _)| *f == n))
        .unwrap_or(0))
}

fn lid(q: &[(String, String)], key: &str) -> Result<u32, String> {
    let v = param(q, key).ok_or_else(|| format!("?{key}=LID is missing"))?;
    let n = v.strip_prefix("0x").map_or_else(
        || v.parse::<u32>().ok(),
        |h| u32::from_str_radix(h, 16).ok(),
    );
    n.filter(|n| (1..0xc000).contains(n))
        .ok_or_else(|| format!("?{key}={v}: not a unicast LID (1..0xbfff, decimal or 0x hex)"))
}

async fn fabric(
    State(app): Shared,
    headers: HeaderMap,
    ext: Extensions,
    uri: Uri,
    axum::extract::Path(what): axum::extract::Path<String>,
) -> Response {
    if let Err(s) = app.role(&headers, &ext) {
        return status_response(&s);
    }
    let q = query(&uri);
    let i = match pick(&app, &q).await {
        Ok(i) => i,
        Err(r) => return r,
    };
    let Some((name, f)) = app.fabrics.get(i) else {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": "no SM instance"}),
        );
    };
    let answer = match what.as_str() {
        // Large at 10k nodes: converted off the async workers, as GetTopology is built.
        // Past FULL_MAX nodes the overview only (`?full=1`: every node anyway).
        "topology" => match app.grouped(name, f).await {
            Ok(g) if g.topo.nodes.len() > groups::FULL_MAX && param(&q, "full") != Some("1") => {
                off_workers(move || g.overview()).await
            }
            Ok(g) => off_workers(move || json::topology_json(&g.topo)).await,
            Err(e) => Err(e),
        },
        "group" => {
            let Some(id) = param(&q, "id").and_then(|v| v.parse::<usize>().ok()) else {
                return bad_request("?id=N (a group of the topology's overview) is missing".into());
            };
            match app.grouped(name, f).await {
                Ok(g) => match off_workers(move || g.group(id).unwrap_or(Value::Null)).await {
                    Ok(Value::Null) => {
                        return json_response(
                            StatusCode::NOT_FOUND,
                            &json!({"error": format!("no group {id} in the current topology (reload it)")}),
                        )
                    }
                    other => other,
                },
                Err(e) => Err(e),
            }
        }
        "search" => {
            let text = percent_decode(param(&q, "q").unwrap_or(""));
            match app.grouped(name, f).await {
                Ok(g) => off_workers(move || g.search(&text)).await,
                Err(e) => Err(e),
            }
        }
        "lids" => match f.get_lids(tonic::Request::new(pb::GetLidsRequest {})).await {
            Ok(r) => off_workers(move || json::lids_json(r.get_ref())).await,
            Err(e) => Err(e),
        },
        "partitions" => f
            .list_partitions(tonic::Request::new(pb::ListPartitionsRequest {}))
            .await
            .map(|r| json::partitions_json(r.get_ref())),
        "groups" => f
            .list_multicast_groups(tonic::Request::new(pb::ListMulticastGroupsRequest {}))
            .await
            .map(|r| json::groups_json(r.get_ref())),
        "route" => {
            let (src_lid, dst_lid) = match (lid(&q, "src"), lid(&q, "dst")) {
                (Ok(s), Ok(d)) => (s, d),
                (Err(e), _) | (_, Err(e)) => return bad_request(e),
            };
            match f
                .get_route(tonic::Request::new(pb::GetRouteRequest {
                    src_lid,
                    dst_lid,
                }))
                .await
            {
                // The group of every node on the way, for a page showing the overview.
                Ok(r) => match app.grouped(name, f).await {
                    Ok(g) => {
                        let r = r.into_inner();
                        let mut v = json::route_json(&r);
                        let mut guids = vec![r.src_port_guid];
                        guids.extend(r.hops.iter().map(|h| h.node_guid));
                        guids.push(r.dst_port_guid);
                        v["groups"] = guids.iter().map(|&x| g.group_of_guid(x)).collect();
                        Ok(v)
                    }
                    Err(_) => Ok(json::route_json(r.get_ref())),
                },
                Err(e) => Err(e),
            }
        }
        other => {
            return json_response(
                StatusCode::NOT_FOUND,
                &json!({"error": format!("no fabric view {other:?}: topology, group, search, lids, route, partitions, groups")}),
            )
        }
    };
    match answer {
        Ok(mut v) => {
            v["sm"] = Value::from(name.as_str());
            json_response(StatusCode::OK, &v)
        }
        Err(s) => status_response(&s),
    }
}

async fn off_workers(f: impl FnOnce() -> Value + Send + 'static) -> Result<Value, tonic::Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| tonic::Status::internal(format!("converting the answer failed: {e}")))
}

fn guid_arg(v: &Value) -> Result<u64, String> {
    match v {
        Value::Null => Ok(0),
        Value::String(s) if s.is_empty() => Ok(0),
        Value::String(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16)
            .map_err(|e| format!("to_guid {s:?}: {e}")),
        other => Err(format!("to_guid {other}: expected 0x-hex text")),
    }
}

/// `POST /api/action` `{"action": "handover"|"sweep"|"priority", "sm": NAME, ...}`: the
/// matching Control RPC on that instance, if the caller's role may call it.
async fn action(State(app): Shared, headers: HeaderMap, ext: Extensions, body: Bytes) -> Response {
    let role = match app.role(&headers, &ext) {
        Ok(r) => r,
        Err(s) => return status_response(&s),
    };
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad_request(format!("the request body is not JSON: {e}")),
    };
    let method = match req["action"].as_str() {
        Some("handover") => "Handover",
        Some("sweep") => "Sweep",
        Some("priority") => "SetPriority",
        other => {
            return bad_request(format!(
                "action {other:?}: expected handover, sweep or priority"
            ))
        }
    };
    let path = format!("/ibsm.v1.Control/{method}");
    if role == Role::ReadOnly && !read_only_allows(&path) {
        return status_response(&tonic::Status::permission_denied(format!(
            "{path}: the read-only credential may only look; this action needs the admin credential"
        )));
    }
    let sm = req["sm"].as_str().unwrap_or("");
    let Some((_, control)) = app.recorder.controls.iter().find(|(n, _)| n == sm) else {
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("no SM instance named {sm:?} here")}),
        );
    };
    tracing::info!(action = method, sm, "web console: action");
    let out = match method {
        "Handover" => {
            let to_guid = match guid_arg(&req["to_guid"]) {
                Ok(g) => g,
                Err(e) => return bad_request(e),
            };
            control
                .handover(tonic::Request::new(pb::HandoverRequest { to_guid }))
                .await
                .map(|r| r.get_ref().outcome.clone())
        }
        "Sweep" => {
            let heavy = req["heavy"].as_bool().unwrap_or(false);
            control
                .sweep(tonic::Request::new(pb::SweepRequest { heavy }))
                .await
                .map(|r| r.get_ref().summary.clone())
        }
        _ => {
            let Some(priority) = req["priority"].as_u64().and_then(|p| u32::try_from(p).ok())
            else {
                return bad_request("priority: expected a number 0..=15".into());
            };
            control
                .set_priority(tonic::Request::new(pb::SetPriorityRequest { priority }))
                .await
                .map(|_| format!("{sm}: priority {priority}"))
        }
    };
    match out {
        Ok(outcome) => json_response(StatusCode::OK, &json!({"outcome": outcome})),
        Err(s) => status_response(&s),
    }
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn query_values_are_percent_decoded_and_bad_escapes_kept() {
        assert_eq!(percent_decode("hca-9%20HCA-1"), "hca-9 HCA-1");
        assert_eq!(percent_decode("a+b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%C3%A9"), "é");
    }
}
