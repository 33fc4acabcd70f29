//! The ingress of the retry storm's second scenario: a proxy on 127.0.0.1
//! in front of the exporter that spends a fixed time of one of a few
//! workers on every attempt (the TLS, parsing and authentication an ingress
//! does per request) before it forwards the attempt, admitted or not.
//!
//! The work is spent whether or not the client still waits: an ingress
//! learns that a client left only when it writes the answer, so an attempt
//! a client abandoned still takes its turn at a worker and is still
//! forwarded. That is what lets retries cost capacity: the exporter's
//! refusals are cheap, the ingress's turns are not.
//!
//! This module owns that proxy. It must never answer for the exporter (a
//! forwarded attempt's answer is the exporter's, status, headers and body),
//! and it stops everything it started when [`Ingress::stop`] runs or the
//! handle is dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

/// What the ingress costs: `workers` turns at once, `cost` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressPlan {
    /// Attempts the ingress works on at once.
    pub workers: usize,
    /// The time of one worker each attempt takes, before it is forwarded.
    pub cost: Duration,
}

impl IngressPlan {
    /// Attempts per second the ingress can take.
    pub fn capacity(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a handful of workers")]
        let workers = self.workers as f64;
        workers / self.cost.as_secs_f64()
    }
}

/// A running ingress; dropping it stops it and every attempt it holds.
#[derive(Debug)]
pub(super) struct Ingress {
    addr: SocketAddr,
    _stop: DropGuard,
}

#[derive(Clone)]
struct Front {
    turns: Arc<Semaphore>,
    cost: Duration,
    upstream: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
    stop: CancellationToken,
}

impl Ingress {
    /// Starts an ingress on 127.0.0.1 in front of `upstream`.
    pub(super) async fn start(plan: IngressPlan, upstream: SocketAddr) -> std::io::Result<Ingress> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let front = Front {
            turns: Arc::new(Semaphore::new(plan.workers)),
            cost: plan.cost,
            upstream,
            client: Client::builder(TokioExecutor::new()).build_http(),
            stop: stop.clone(),
        };
        let app = axum::Router::new().fallback(forward).with_state(front);
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await;
        });
        Ok(Ingress {
            addr,
            _stop: stop.drop_guard(),
        })
    }

    /// Where clients send their attempts.
    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// One attempt: a turn at a worker, then the exporter's answer. The turn
/// and the forwarding run in a task of their own, so a client that leaves
/// saves the ingress nothing.
async fn forward(State(front): State<Front>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let uri = format!(
        "http://{}{}",
        front.upstream,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut upstream = http::Request::new(Full::<Bytes>::default());
    *upstream.method_mut() = parts.method;
    *upstream.headers_mut() = parts.headers;
    let (answer, answered) = oneshot::channel();
    let stop = front.stop.clone();
    tokio::spawn(stop.run_until_cancelled_owned(async move {
        {
            let Ok(_turn) = front.turns.acquire().await else {
                return;
            };
            tokio::time::sleep(front.cost).await;
        }
        let Ok(parsed) = uri.parse() else { return };
        *upstream.uri_mut() = parsed;
        let Ok(response) = front.client.request(upstream).await else {
            return;
        };
        let (parts, body) = response.into_parts();
        if let Ok(body) = body.collect().await {
            let _ = answer.send(Response::from_parts(parts, Body::from(body.to_bytes())));
        }
    }));
    answered
        .await
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
