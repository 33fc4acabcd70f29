//! Running one walk through the configured gate.
//!
//! This module owns the ways a walk reaches a thread ([`Gate`], with or
//! without coalescing) and [`WalkError`], the one answer a handler gives
//! when a walk produced nothing. The HTTP side of a refusal is the axum
//! adapter's `Rejection`, which renders core's problem.

use std::fmt;
use std::time::Duration;

use admission_axum::Rejection;
use admission_core::{Admission, Coalescing, Pool, WorkError};
use axum::response::{IntoResponse, Response};

use super::Gate;
use super::queue::UnboundedQueue;
use bytes::Bytes;

use super::held::HeldBytes;
use crate::walk::{Departure, RegistryStats, Walker};

/// One full walk's output, shared by every caller of the walk: cloning it
/// clones a pointer to the text, never the text.
#[derive(Debug, Clone)]
pub(crate) struct Walked {
    /// The whole registry as exposition text, served as the `/metrics`
    /// body, counted as held until its last share is dropped.
    pub(crate) text: Bytes,
    /// What the text holds, for the status page and the cardinality loop;
    /// counted once per walk on the walking thread, so no caller rescans
    /// the text on a runtime thread.
    pub(crate) stats: RegistryStats,
}

/// What coalesced walks are keyed by: the walk itself, not the route.
///
/// `/metrics`, `/` and the cardinality loop all walk the same registry into
/// the same text, and the walk counts the statistics the status page shows
/// once, on its thread. Keyed per route, a dashboard on `/` and Prometheus
/// on `/metrics` scraping together would cost two identical walks; keyed by
/// the walk, they cost one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FullWalk;

/// Where walks run.
#[derive(Debug)]
pub(crate) enum Backend {
    /// Admission: a pool of N slots and N threads.
    Admission(Gated),
    /// Admission with coalescing: a caller that arrives while a fresh walk
    /// runs shares its result; anyone else goes through the pool as above.
    Coalesced(Coalescing<FullWalk, Walked, fmt::Error>),
    /// The incident's unbounded queue in front of N threads.
    Queue(UnboundedQueue),
    /// tokio's blocking pool; the limit lives in tower layers on the routes.
    Tower,
}

/// An admission pool and how HTTP walks are admitted to it.
#[derive(Debug)]
pub(crate) struct Gated {
    pool: Pool,
    /// `true`: HTTP walks (asked for with [`Admission::FailFast`]) wait in
    /// the pool's bounded queue instead ([`Gate::AdmissionQueue`]).
    queue: bool,
}

/// Why a walk produced no output.
#[derive(Debug)]
#[non_exhaustive]
pub enum WalkError {
    /// Refused, failed or panicked under admission; renders as core says
    /// (`503` + `Retry-After` + problem JSON for a refusal, `500` otherwise).
    Admission(WorkError<fmt::Error>),
    /// The walk itself failed (unbounded queue or tower gates).
    Failed,
    /// The walk was discarded or lost before it ended (shutdown).
    Lost,
    /// Not started: responses not yet read by their clients hold the
    /// memory bound (`--max-held-mb`). Renders as `503` + `Retry-After`
    /// with the code `RESPONSE_MEMORY_BOUND`.
    MemoryBound,
}

impl WalkError {
    /// The class named in logs.
    pub fn class(&self) -> &'static str {
        match self {
            WalkError::Admission(err) => err.log_class(),
            WalkError::Failed => "Failed",
            WalkError::Lost => "Lost",
            WalkError::MemoryBound => "MemoryBound",
        }
    }
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::Admission(err) => fmt::Display::fmt(err, f),
            WalkError::Failed => f.write_str("registry walk failed"),
            WalkError::Lost => f.write_str("registry walk lost before it ended"),
            WalkError::MemoryBound => {
                f.write_str("responses not yet read hold the memory bound; walk not started")
            }
        }
    }
}

impl std::error::Error for WalkError {}

impl IntoResponse for WalkError {
    fn into_response(self) -> Response {
        // Core defines every answer once: a failure is a `500` with a code
        // and no message, a walk lost to shutdown a `503` saying so.
        let rejection = match self {
            WalkError::Admission(err) => Rejection::from(err),
            WalkError::Failed => Rejection::from(WorkError::Failed(())),
            WalkError::Lost => Rejection::from(WorkError::<()>::Cancelled),
            WalkError::MemoryBound => return super::app::memory_bound(),
        };
        rejection.into_response()
    }
}

impl Backend {
    /// The backend for `gate`; `coalesce` is the staleness bound of
    /// coalescing, which only the admission gate has.
    pub(crate) fn new(
        gate: Gate,
        workers: usize,
        coalesce: Option<Duration>,
        queued: prometheus_client::metrics::gauge::Gauge,
    ) -> Result<Backend, Box<dyn std::error::Error + Send + Sync>> {
        Ok(match (gate, coalesce) {
            (Gate::Admission, None) => Backend::Admission(Gated {
                pool: Pool::new("registry", workers)?,
                queue: false,
            }),
            (Gate::AdmissionQueue, None) => Backend::Admission(Gated {
                pool: Pool::new("registry", workers)?,
                queue: true,
            }),
            (Gate::Admission, Some(staleness)) => Backend::Coalesced(Coalescing::new(
                &Pool::new("registry", workers)?,
                staleness,
            )?),
            (_, Some(_)) => {
                return Err(format!("coalescing needs the admission gate, not `{gate}`").into());
            }
            (Gate::UnboundedQueue, None) => Backend::Queue(UnboundedQueue::spawn(workers, queued)?),
            (Gate::TowerLimit, None) => Backend::Tower,
        })
    }

    /// The admission pool, when this backend has one.
    pub(crate) fn pool(&self) -> Option<&Pool> {
        match self {
            Backend::Admission(gated) => Some(&gated.pool),
            Backend::Coalesced(scrapes) => Some(scrapes.pool()),
            Backend::Queue(_) | Backend::Tower => None,
        }
    }

    /// Walks the registry off the runtime, through this backend's gate.
    /// Under coalescing, the result may be another caller's walk.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future never stops a walk that started: under admission
    /// it is orphaned and keeps its slot until it ends (a coalesced walk
    /// also while others still share it); in the queue it stays queued and
    /// still runs; on tokio's blocking pool it runs on.
    pub(crate) async fn walk(
        &self,
        walker: &Walker,
        held: &HeldBytes,
        admission: Admission,
    ) -> Result<Walked, WalkError> {
        let (walker, held) = (walker.clone(), held.clone());
        let caller = Departure::default();
        let watched = caller.clone();
        // `Bytes` takes the string's buffer over (no copy) and counts it as
        // held until its last share is dropped.
        let work = move || {
            let (text, stats) = walker.walk(&watched)?;
            Ok(Walked {
                text: held.hold(text),
                stats,
            })
        };
        // Dropped unanswered (the client left), it marks the walk's time
        // from then on as orphaned.
        let waiting = caller.waiting();
        let walked = match self {
            Backend::Admission(Gated { pool, queue }) => pool
                .run(work, http_admission(admission, *queue))
                .await
                .map_err(WalkError::Admission),
            Backend::Coalesced(scrapes) => scrapes
                .run(FullWalk, work, admission)
                .await
                .map_err(WalkError::Admission),
            Backend::Queue(queue) => match queue.run(work).await {
                Ok(walked) => walked.map_err(|_| WalkError::Failed),
                Err(_discarded) => Err(WalkError::Lost),
            },
            Backend::Tower => match tokio::task::spawn_blocking(work).await {
                Ok(walked) => walked.map_err(|_| WalkError::Failed),
                Err(_join) => Err(WalkError::Failed),
            },
        };
        waiting.answered();
        walked
    }
}

/// The admission a walk asked for, with fail-fast turned into the bounded
/// queue when the gate queues; the background walker's `Wait` is kept.
fn http_admission(asked: Admission, queue: bool) -> Admission {
    match asked {
        Admission::FailFast if queue => Admission::Queue,
        other => other,
    }
}
