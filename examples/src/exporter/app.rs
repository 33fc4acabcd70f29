//! The HTTP side: shared state, routes and handlers.
//!
//! This module owns the router. Handlers are one-liners over [`App`]; the
//! walk routes go through the gate, `/healthz` never touches the registry
//! and is never refused, and `/readyz` says what the readiness says
//! (never the pool's load: a saturated exporter stays ready).

use std::sync::Arc;
use std::time::Duration;

use admission_core::Admission;
use admission_core::trace::Trace;
use admission_http::balancer::Readiness;
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::State;
use axum::http::{StatusCode, Version, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;

use super::backend::{Backend, WalkError, Walked};
use super::body::Chunked;
use super::held::HeldBytes;
use crate::walk::{RegistryStats, WalkGauge, Walker};

/// The exposition content type `prometheus-client` encodes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// State shared by every handler and the cardinality loop.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) backend: Backend,
    pub(crate) walker: Walker,
    /// The bytes walk bodies hold, against `--max-held-mb`.
    pub(crate) held: HeldBytes,
    pub(crate) gauge: WalkGauge,
    pub(crate) cardinality: Gauge,
    pub(crate) workers: usize,
    pub(crate) readiness: Readiness,
    /// The criticality and budget headers are honoured as sent.
    pub(crate) trust_peers: bool,
    /// How long a scrape's body may go without the server taking a chunk
    /// over HTTP/2 (`--write-timeout-ms`): past it the body and its held
    /// bytes go.
    pub(crate) write_timeout: Duration,
    /// The walk pool's admission trace (`--trace-entries`), if kept.
    pub(crate) trace: Option<Trace>,
}

/// A scrape's body with its content type. The body is the walk's own
/// buffer (callers that shared a walk share it); over HTTP/2 it is handed
/// to the server in chunks under the write timeout ([`Chunked`]), since
/// a stream's flow control, not the socket, decides whether it moves.
#[derive(Debug)]
pub(crate) struct Exposition {
    text: Bytes,
    /// The write timeout, for an HTTP/2 stream; `None` over HTTP/1, whose
    /// connection's write timeout covers the one frame.
    chunked: Option<Duration>,
}

impl IntoResponse for Exposition {
    fn into_response(self) -> Response {
        let body = match self.chunked {
            Some(bound) => axum::body::Body::new(Chunked::new(self.text, bound)),
            None => axum::body::Body::from(self.text),
        };
        ([(header::CONTENT_TYPE, OPENMETRICS)], body).into_response()
    }
}

impl App {
    /// The whole registry as exposition text, fail-fast, for a request
    /// over `version`.
    pub(crate) async fn exposition(&self, version: Version) -> Result<Exposition, WalkError> {
        let walked = self.walk(Admission::FailFast).await?;
        Ok(Exposition {
            text: walked.text,
            chunked: (version >= Version::HTTP_2).then_some(self.write_timeout),
        })
    }

    /// The status page from one full walk (perhaps shared), fail-fast.
    pub(crate) async fn status_page(&self) -> Result<Html<String>, WalkError> {
        let walked = self.walk(Admission::FailFast).await?;
        Ok(Html(self.render(walked.stats)))
    }

    /// One walk through the gate (or a share of one, under coalescing);
    /// a scrape (fail-fast) is refused without a walk while bodies not
    /// yet read hold the memory bound.
    pub(crate) async fn walk(&self, admission: Admission) -> Result<Walked, WalkError> {
        if admission != Admission::Wait && self.held.is_full() {
            return Err(WalkError::MemoryBound);
        }
        self.backend.walk(&self.walker, &self.held, admission).await
    }

    fn render(&self, stats: RegistryStats) -> String {
        let pool = match self.backend.pool() {
            Some(pool) => {
                let s = pool.stats();
                format!(
                    "<tr><th>slots in use</th><td>{} of {}</td></tr>\
                     <tr><th>admitted</th><td>{}</td></tr>\
                     <tr><th>refused</th><td>{}</td></tr>\
                     <tr><th>coalesced</th><td>{}</td></tr>\
                     <tr><th>orphaned</th><td>{}</td></tr>",
                    s.in_use, s.capacity, s.admitted, s.refused, s.coalesced, s.orphaned
                )
            }
            None => String::new(),
        };
        format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>exporter status</title></head>\
             <body><h1>exporter status</h1><table>\
             <tr><th>families</th><td>{}</td></tr>\
             <tr><th>series</th><td>{}</td></tr>\
             <tr><th>lines</th><td>{}</td></tr>\
             <tr><th>bytes</th><td>{}</td></tr>\
             <tr><th>last cardinality walk</th><td>{}</td></tr>\
             <tr><th>walk gate</th><td>{} workers</td></tr>\
             <tr><th>walks running</th><td>{} (peak {})</td></tr>\
             <tr><th>walks started</th><td>{}</td></tr>\
             {pool}</table></body></html>\n",
            stats.families,
            stats.series,
            stats.lines,
            stats.bytes,
            self.cardinality.get(),
            self.workers,
            self.gauge.running(),
            self.gauge.peak(),
            self.gauge.started(),
        )
    }
}

async fn metrics(State(app): State<Arc<App>>, version: Version) -> Result<Exposition, WalkError> {
    app.exposition(version).await
}

async fn status(State(app): State<Arc<App>>) -> Result<Html<String>, WalkError> {
    app.status_page().await
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// `200` while the exporter takes new work, `503` from the stop signal on
/// (through the drain delay, while `/healthz` still answers `200`).
async fn readyz(State(app): State<Arc<App>>) -> (StatusCode, &'static str) {
    if app.readiness.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    }
}

/// `HEAD /metrics`: the head of a scrape without a walk (a `HEAD` has no
/// body, so walking the registry for it would be all cost).
async fn metrics_head() -> impl IntoResponse {
    [(header::CONTENT_TYPE, OPENMETRICS)]
}

/// `HEAD /`: the status page's head, without a walk.
async fn status_head() -> impl IntoResponse {
    [(header::CONTENT_TYPE, "text/html; charset=utf-8")]
}

/// Every answer the exporter gives for a request it does not serve: a
/// problem document with a code and a fixed title, never anything from
/// the request (path, query or headers).
pub(crate) fn problem(status: StatusCode, code: &'static str, title: &'static str) -> Response {
    let body = serde_json::json!({
        "code": code,
        "status": status.as_u16(),
        "title": title,
        "type": format!("urn:admission:{code}"),
    });
    (
        status,
        [
            (header::CONTENT_TYPE, "application/problem+json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// The refusal of a walk past the memory bound: `503`, a stable code,
/// and a retry after the write-progress timeout had time to free bodies.
pub(crate) fn memory_bound() -> Response {
    let mut response = problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "RESPONSE_MEMORY_BOUND",
        "Responses not yet read hold the memory bound",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    response
}

/// The walk pool's admission trace as JSON lines: outside the gate (it
/// never waits on load; its cost is bounded by `--trace-entries`), a `404`
/// when no trace is kept.
async fn trace(State(app): State<Arc<App>>) -> Response {
    let Some(trace) = &app.trace else {
        return not_found().await;
    };
    let mut lines = Vec::new();
    match trace.write_json_lines(&mut lines) {
        Ok(_) => (
            [
                (header::CONTENT_TYPE, "application/x-ndjson"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            lines,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn not_found() -> Response {
    problem(StatusCode::NOT_FOUND, "NOT_FOUND", "No such route")
}

async fn method_not_allowed() -> Response {
    problem(
        StatusCode::METHOD_NOT_ALLOWED,
        "METHOD_NOT_ALLOWED",
        "Method not allowed on this route",
    )
}

async fn overloaded(_: tower::BoxError) -> StatusCode {
    StatusCode::SERVICE_UNAVAILABLE
}

/// The routes: `/metrics` and `/` through the gate (`HEAD` answers
/// without a walk), `/healthz` outside it; anything else is a `404` or
/// `405` problem document. The status page `/` shows the walk pool's
/// counters: operator information (when the exporter saturates), to serve
/// to operators and the scraper only, as `/metrics` is.
pub(crate) fn router(app: Arc<App>) -> Router {
    let walks = Router::new()
        .route("/metrics", get(metrics).head(metrics_head))
        .route("/", get(status).head(status_head));
    let walks = match app.backend {
        // One semaphore shared by both walk routes (`Router::layer` layers
        // each route on its own); `LoadShed` turns "not ready" into a 503.
        Backend::Tower => walks.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(overloaded))
                .layer(LoadShedLayer::new())
                .layer(GlobalConcurrencyLimitLayer::new(app.workers)),
        ),
        Backend::Admission(_) | Backend::Coalesced(_) | Backend::Queue(_) => walks,
    };
    // Walks run for the caller the request's headers describe (criticality,
    // budget, under the trust policy); only the admission gates act on it.
    // `/healthz` is outside.
    let callers = admission_axum::CallerLayer::new();
    let walks = walks.layer(if app.trust_peers {
        callers.trust_peers()
    } else {
        callers
    });
    walks
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/debug/admission/trace", get(trace))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}
