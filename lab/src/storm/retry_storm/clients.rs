//! The three client kinds the retry storm compares, each over the same
//! hyper-util client and the same counter of attempts: naive (up to three
//! immediate retries on any failure, a timed-out try included),
//! `tower::retry` with `TpsBudget` (20%, immediate retries on a `503`, an
//! error or a timed-out try), and `admission-client` (which times out no
//! try: it sends the time left and the server refuses what cannot finish).
//!
//! This module owns those clients and the counting service under them. It
//! must never retry on a client's behalf what that client would not.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use admission_client::{
    Error as ClientError, RETRY_AFTER_MS_HEADER, Retries, RetryLayer, RetryPolicy, RetryService,
};
use bytes::Bytes;
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::{Instant, timeout_at};
use tower::BoxError;
use tower::retry::budget::{Budget as _, TpsBudget};
use tower::retry::{Policy, Retry};
use tower::timeout::Timeout;
use tower::{Layer as _, Service, ServiceExt as _};

/// Which client makes the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Up to three immediate retries on any failure, each try timed out
    /// at the plan's per-try timeout.
    Naive,
    /// `tower::retry` with `TpsBudget` (ttl 10 s, 10/s, 20%), immediate,
    /// over `tower::timeout` at the per-try timeout.
    TowerTps,
    /// `admission-client`'s layer, default policy.
    Admission,
}

impl Kind {
    /// Every kind, in the tables' order.
    pub const ALL: [Kind; 3] = [Kind::Naive, Kind::TowerTps, Kind::Admission];

    /// The name in tables and the plot.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Naive => "naive (3 immediate retries)",
            Kind::TowerTps => "tower::retry + TpsBudget 20%",
            Kind::Admission => "admission-client",
        }
    }
}

/// Per-second counters, indexed by whole seconds since the run's start.
#[derive(Debug)]
pub struct Seconds {
    start: Instant,
    counts: Vec<AtomicU64>,
}

impl Seconds {
    pub(super) fn new(start: Instant, seconds: usize) -> Seconds {
        Seconds {
            start,
            counts: (0..seconds).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(super) fn add(&self, at: Instant) {
        let i = usize::try_from(at.saturating_duration_since(self.start).as_secs())
            .unwrap_or(usize::MAX);
        if let Some(count) = self.counts.get(i) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn get(&self, i: usize) -> u64 {
        self.counts.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    pub(super) fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// Attempts sent and refusals answered, per second, below every client.
#[derive(Debug, Clone)]
pub(super) struct Counted {
    client: Client<HttpConnector, Full<Bytes>>,
    attempts: Arc<Seconds>,
    refusals: Arc<Seconds>,
    /// Whether answers keep `x-admission-retry-after-ms`; without it the
    /// client above sees what a server of whole seconds only would send.
    fine_hint: bool,
}

type HyperError = hyper_util::client::legacy::Error;
type BoxFuture<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<Request<Full<Bytes>>> for Counted {
    type Response = Response<Incoming>;
    type Error = HyperError;
    type Future = BoxFuture<Result<Response<Incoming>, HyperError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), HyperError>> {
        self.client.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        self.attempts.add(Instant::now());
        let refusals = self.refusals.clone();
        let fine_hint = self.fine_hint;
        let answer = self.client.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            if response.status() == StatusCode::SERVICE_UNAVAILABLE {
                refusals.add(Instant::now());
            }
            if !fine_hint {
                response.headers_mut().remove(RETRY_AFTER_MS_HEADER);
            }
            Ok(response)
        })
    }
}

/// How one application request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ended {
    /// A 2xx within the deadline.
    Good,
    /// The last answer was a refusal.
    Refused,
    /// Rejected locally (the adaptive throttle).
    Throttled,
    /// The deadline passed, or the connection failed.
    Failed,
}

/// One client of a kind.
#[derive(Debug, Clone)]
pub(super) enum Caller {
    Naive(Counted, Duration),
    TowerTps(Timeout<Counted>, Arc<TpsBudget>),
    Admission(RetryService<Counted>),
}

impl Caller {
    pub(super) fn new(
        kind: Kind,
        attempts: Arc<Seconds>,
        refusals: Arc<Seconds>,
        timeout: Duration,
        attempt_timeout: Duration,
        fine_hint: bool,
    ) -> Caller {
        let client = Client::builder(TokioExecutor::new()).build_http();
        let counted = Counted {
            client,
            attempts,
            refusals,
            fine_hint,
        };
        match kind {
            Kind::Naive => Caller::Naive(counted, attempt_timeout),
            Kind::TowerTps => Caller::TowerTps(
                Timeout::new(counted, attempt_timeout),
                Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2)),
            ),
            Kind::Admission => {
                let layer = RetryLayer::new(RetryPolicy::default().timeout(timeout))
                    .expect("a valid policy");
                Caller::Admission(layer.layer(counted))
            }
        }
    }

    /// One application request to `uri`, within `deadline`; with the
    /// retries `admission-client` reports (hint and wait).
    pub(super) async fn call(&self, uri: &Uri, deadline: Instant) -> (Ended, Retries) {
        let request = || {
            Request::get(uri.clone())
                .body(Full::default())
                .expect("a valid request")
        };
        match self {
            Caller::Naive(counted, attempt_timeout) => {
                let mut ended = Ended::Failed;
                for _ in 0..4 {
                    let until = deadline.min(Instant::now() + *attempt_timeout);
                    match timeout_at(until, counted.clone().oneshot(request())).await {
                        Ok(Ok(response)) => {
                            ended = settle(response, deadline).await;
                            if ended == Ended::Good {
                                break;
                            }
                        }
                        Ok(Err(_)) => ended = Ended::Failed,
                        Err(_) if until < deadline => ended = Ended::Failed,
                        Err(_) => return (Ended::Failed, Retries::default()),
                    }
                }
                (ended, Retries::default())
            }
            Caller::TowerTps(counted, budget) => {
                budget.deposit();
                let retry = Retry::new(
                    TpsPolicy {
                        budget: budget.clone(),
                        left: 3,
                    },
                    counted.clone(),
                );
                match timeout_at(deadline, retry.oneshot(request())).await {
                    Ok(Ok(response)) => (settle(response, deadline).await, Retries::default()),
                    _ => (Ended::Failed, Retries::default()),
                }
            }
            Caller::Admission(service) => {
                let mut request = request();
                request
                    .extensions_mut()
                    .insert(admission_core::Caller::default().with_deadline(deadline));
                match service.clone().oneshot(request).await {
                    Ok(mut response) => {
                        let retries = response
                            .extensions_mut()
                            .remove::<Retries>()
                            .unwrap_or_default();
                        (settle(response, deadline).await, retries)
                    }
                    Err(ClientError::Throttled) => (Ended::Throttled, Retries::default()),
                    Err(_) => (Ended::Failed, Retries::default()),
                }
            }
        }
    }
}

/// Reads the answer's body within the deadline and judges it.
async fn settle(response: Response<Incoming>, deadline: Instant) -> Ended {
    let status = response.status();
    let body = timeout_at(deadline, response.into_body().collect()).await;
    match (status, body) {
        (s, Ok(Ok(_))) if s.is_success() => Ended::Good,
        (StatusCode::SERVICE_UNAVAILABLE, _) => Ended::Refused,
        _ => Ended::Failed,
    }
}

/// `tower::retry`'s policy as its documentation writes one with a budget:
/// retry a `503` or an error at once while the budget allows, at most
/// three times.
#[derive(Debug, Clone)]
struct TpsPolicy {
    budget: Arc<TpsBudget>,
    left: u32,
}

impl Policy<Request<Full<Bytes>>, Response<Incoming>, BoxError> for TpsPolicy {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _: &mut Request<Full<Bytes>>,
        result: &mut Result<Response<Incoming>, BoxError>,
    ) -> Option<Self::Future> {
        let failed = match result {
            Ok(response) => response.status() == StatusCode::SERVICE_UNAVAILABLE,
            Err(_) => true,
        };
        if failed && self.left > 0 && self.budget.withdraw() {
            self.left -= 1;
            Some(std::future::ready(()))
        } else {
            None
        }
    }

    fn clone_request(&mut self, request: &Request<Full<Bytes>>) -> Option<Request<Full<Bytes>>> {
        let mut clone = Request::new(request.body().clone());
        *clone.uri_mut() = request.uri().clone();
        *clone.method_mut() = request.method().clone();
        Some(clone)
    }
}
