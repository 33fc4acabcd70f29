//! What the service's calls do.
//!
//! This module owns [`App`]: `Walk` runs one full walk through the gate and
//! answers its text; `Stream` runs one walk, then streams its text in parts.
//! Registry work from a handler is one line: a refusal, a failure or a panic
//! becomes the call's `Status` through `admission_tonic::Rejection`.

use std::pin::Pin;
use std::task::{Context, Poll};

use admission_core::{Admission, Pool};
use admission_tonic::Rejection;
use tonic::{Request, Response, Status};

use super::proto::{Exposition, WalkRequest};
use crate::walk::{Departure, Walker};

/// Lines per `Stream` message when the request says 0.
const DEFAULT_LINES: usize = 1000;

/// Where walks run.
#[derive(Debug)]
pub(crate) enum Backend {
    /// Admission: a pool of N slots and N threads.
    Admission(Pool),
    /// tokio's blocking pool; the limit lives in tonic's server settings.
    Blocking,
}

/// State shared by every call.
#[derive(Debug)]
pub struct App {
    pub(crate) backend: Backend,
    pub(crate) walker: Walker,
}

impl App {
    /// `Walk`: the whole registry as exposition text, fail-fast.
    pub(crate) async fn walk(
        &self,
        _call: Request<WalkRequest>,
    ) -> Result<Response<Exposition>, Status> {
        let (text, series) = self.full_walk().await?;
        Ok(Response::new(Exposition { text, series }))
    }

    /// `Stream`: one walk (holding a worker only while it runs), then its
    /// text in parts of `lines_per_message` lines; the call's lease is held
    /// until the last part has been sent.
    pub(crate) async fn stream(
        &self,
        call: Request<WalkRequest>,
    ) -> Result<Response<Parts>, Status> {
        let lines = match call.get_ref().lines_per_message {
            0 => DEFAULT_LINES,
            n => n as usize,
        };
        let (text, series) = self.full_walk().await?;
        Ok(Response::new(Parts::new(text, series, lines)))
    }

    /// One walk through the gate: its text and its sample lines. The
    /// walk's time after a cancelled call is not told apart (the service
    /// keeps no departure), so it all counts as busy.
    async fn full_walk(&self) -> Result<(String, u64), Status> {
        let walker = self.walker.clone();
        let work = move || {
            walker
                .walk(&Departure::default())
                .map(|(text, stats)| (text, stats.series as u64))
        };
        match &self.backend {
            Backend::Admission(pool) => Ok(pool
                .run(work, Admission::FailFast)
                .await
                .map_err(Rejection::from)?),
            Backend::Blocking => match tokio::task::spawn_blocking(work).await {
                Ok(Ok(walked)) => Ok(walked),
                // A code, never the error's or the panic's message.
                Ok(Err(_)) => Err(Status::internal(admission_http::WORK_FAILED)),
                Err(_) => Err(Status::internal(admission_http::WORK_PANICKED)),
            },
        }
    }
}

/// The parts of one walk's text, `lines` lines each, as a stream of
/// messages.
#[derive(Debug)]
pub struct Parts {
    text: String,
    at: usize,
    lines: usize,
    series: u64,
}

impl Parts {
    fn new(text: String, series: u64, lines: usize) -> Parts {
        Parts {
            text,
            at: 0,
            lines: lines.max(1),
            series,
        }
    }
}

impl futures_util::Stream for Parts {
    type Item = Result<Exposition, Status>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let rest = &self.text[self.at..];
        if rest.is_empty() {
            return Poll::Ready(None);
        }
        let end = rest
            .match_indices('\n')
            .nth(self.lines - 1)
            .map_or(rest.len(), |(i, _)| i + 1);
        let text = rest[..end].to_owned();
        self.at += end;
        Poll::Ready(Some(Ok(Exposition {
            text,
            series: self.series,
        })))
    }
}
