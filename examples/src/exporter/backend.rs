//! Running one walk through the configured gate.
//!
//! This module owns the three ways a walk reaches a thread ([`Gate`]) and
//! [`WalkError`], the one answer a handler gives when a walk produced
//! nothing. The HTTP side of a refusal is core's: `WorkError` renders itself.

use std::fmt;

use admission_core::{Admission, Pool, Problem, WorkError};
use axum::response::{IntoResponse, Response};

use super::Gate;
use super::queue::UnboundedQueue;
use super::walk::Walker;

/// Where walks run.
#[derive(Debug)]
pub(crate) enum Backend {
    /// Admission: a pool of N slots and N threads.
    Admission(Pool),
    /// The incident's unbounded queue in front of N threads.
    Queue(UnboundedQueue),
    /// tokio's blocking pool; the limit lives in tower layers on the routes.
    Tower,
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
}

impl WalkError {
    /// The class named in logs.
    pub fn class(&self) -> &'static str {
        match self {
            WalkError::Admission(err) => err.class(),
            WalkError::Failed => "Failed",
            WalkError::Lost => "Lost",
        }
    }
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::Admission(err) => fmt::Display::fmt(err, f),
            WalkError::Failed => f.write_str("registry walk failed"),
            WalkError::Lost => f.write_str("registry walk lost before it ended"),
        }
    }
}

impl std::error::Error for WalkError {}

impl IntoResponse for WalkError {
    fn into_response(self) -> Response {
        // Core defines every answer once: a failure is a `500` with a code
        // and no message, a walk lost to shutdown a `503` saying so.
        match self {
            WalkError::Admission(err) => err.into_response(),
            WalkError::Failed => Problem::work_error(&WorkError::Failed(())).into_response(),
            WalkError::Lost => Problem::work_error(&WorkError::<()>::Cancelled).into_response(),
        }
    }
}

impl Backend {
    pub(crate) fn new(
        gate: Gate,
        workers: usize,
        queued: prometheus_client::metrics::gauge::Gauge,
    ) -> Result<Backend, Box<dyn std::error::Error + Send + Sync>> {
        Ok(match gate {
            Gate::Admission => Backend::Admission(Pool::new("registry", workers)?),
            Gate::UnboundedQueue => Backend::Queue(UnboundedQueue::spawn(workers, queued)?),
            Gate::TowerLimit => Backend::Tower,
        })
    }

    /// Walks the registry and hands the text to `then`, both off the
    /// runtime, through this backend's gate.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future never stops a walk that started: under admission
    /// it is orphaned and keeps its slot until it ends; in the queue it stays
    /// queued and still runs; on tokio's blocking pool it runs on.
    pub(crate) async fn walk<T, F>(
        &self,
        walker: &Walker,
        admission: Admission,
        then: F,
    ) -> Result<T, WalkError>
    where
        T: Send + 'static,
        F: FnOnce(String) -> T + Send + 'static,
    {
        let walker = walker.clone();
        let work = move || walker.walk().map(then);
        match self {
            Backend::Admission(pool) => pool
                .run(work, admission)
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
        }
    }
}
