//! A walk's text sent in chunks under the write-progress bound.
//!
//! This module owns [`Chunked`], the body of a scrape: the walk's text (a
//! held `Bytes`, see `held`) handed to the server [`CHUNK`] bytes at a
//! time, each chunk a copy, so that what the server's send buffers hold
//! of a scrape is one chunk, never the walk's buffer; and its watchdog,
//! which drops the rest of the text (its held bytes back at once) when the
//! server has taken no chunk for the write timeout. A peer whose HTTP/2
//! flow-control window stays shut (`SETTINGS_INITIAL_WINDOW_SIZE = 0`)
//! keeps the server from ever asking for a chunk; the connection's write
//! timeout cannot see that (the socket is writable), this bound does. It
//! must never keep the text past the bound without a chunk taken, and
//! never end a body whose reader keeps taking chunks, however slowly.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use http_body::{Frame, SizeHint};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The most of a scrape handed to the server at once: "progress" means
/// bytes moving, not one 10 MB frame parked in a send buffer.
pub(crate) const CHUNK: usize = 16 * 1024;

/// A scrape's body: see the module docs.
#[derive(Debug)]
pub(crate) struct Chunked {
    state: Arc<State>,
    size: u64,
    // Dropped with the body: the watchdog ends at once.
    _stop: oneshot::Sender<()>,
}

#[derive(Debug)]
struct State {
    /// What the server has not taken yet; `None` once sent or dropped.
    rest: Mutex<Option<Bytes>>,
    since: Instant,
    /// Milliseconds from `since` to the last chunk taken.
    taken: AtomicU64,
    /// The watchdog dropped the rest: the body ends with an error.
    stalled: AtomicBool,
}

impl State {
    fn rest(&self) -> std::sync::MutexGuard<'_, Option<Bytes>> {
        self.rest.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn taken_at(&self) -> Instant {
        self.since + Duration::from_millis(self.taken.load(Ordering::Acquire))
    }
}

/// The error a [`Chunked`] body ends with after its watchdog dropped it:
/// the server resets the stream (HTTP/2) or closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriteStalled;

impl std::fmt::Display for WriteStalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no part of the response was taken within the write timeout")
    }
}

impl std::error::Error for WriteStalled {}

impl Chunked {
    /// `text` under `bound`, counted from now. Needs a tokio runtime (the
    /// watchdog is a task).
    pub(crate) fn new(text: Bytes, bound: Duration) -> Chunked {
        let size = text.len() as u64;
        let state = Arc::new(State {
            rest: Mutex::new((!text.is_empty()).then_some(text)),
            since: Instant::now(),
            taken: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let watched = Arc::clone(&state);
        tokio::spawn(async move {
            tokio::select! {
                _ = stopped => {}
                () = watch(&watched, bound) => {}
            }
        });
        Chunked {
            state,
            size,
            _stop: stop,
        }
    }
}

/// Drops the rest of the text once no chunk was taken for `bound`.
async fn watch(state: &State, bound: Duration) {
    loop {
        tokio::time::sleep_until(state.taken_at() + bound).await;
        if state.taken_at().elapsed() >= bound {
            let mut rest = state.rest();
            if rest.is_some() {
                state.stalled.store(true, Ordering::Release);
                drop(rest.take());
                dropped_logged(Instant::now());
            }
            return;
        }
    }
}

/// At most one log line per this interval about dropped scrape bodies.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Dropped bodies since the last line, and when the next line may be written.
static DROPPED: Mutex<(u64, Option<Instant>)> = Mutex::new((0, None));

/// Counts a dropped body at `now` in `books` (count since the last line,
/// when the next is due): the count to log when a line is due (the first
/// at once, then at most one per [`LOG_EVERY`]).
fn dropped_due(books: &mut (u64, Option<Instant>), now: Instant) -> Option<u64> {
    let (count, next) = books;
    *count += 1;
    if next.is_some_and(|next| now < next) {
        return None;
    }
    *next = Some(now + LOG_EVERY);
    Some(std::mem::take(count))
}

/// Counts a dropped body and logs the count at `WARN` when a line is due.
fn dropped_logged(now: Instant) {
    let due = dropped_due(
        &mut DROPPED.lock().unwrap_or_else(PoisonError::into_inner),
        now,
    );
    if let Some(count) = due {
        tracing::warn!(
            count,
            "scrape bodies dropped: no part taken within the write timeout \
             (a reader that stopped reading, or an HTTP/2 window kept shut), \
             at most one line per {} s",
            LOG_EVERY.as_secs()
        );
    }
}

impl http_body::Body for Chunked {
    type Data = Bytes;
    type Error = WriteStalled;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WriteStalled>>> {
        let state = &self.state;
        let mut rest = state.rest();
        let Some(text) = rest.as_mut() else {
            return Poll::Ready(
                state
                    .stalled
                    .swap(false, Ordering::AcqRel)
                    .then_some(Err(WriteStalled)),
            );
        };
        let chunk = Bytes::copy_from_slice(&text[..text.len().min(CHUNK)]);
        text.advance(chunk.len());
        if text.is_empty() {
            // The walk's buffer goes back now, not when the last chunk is sent.
            *rest = None;
        }
        let ms = u64::try_from(state.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        state.taken.store(ms, Ordering::Release);
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.state.rest().is_none() && !self.state.stalled.load(Ordering::Acquire)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.size)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use http_body_util::BodyExt as _;

    use super::{CHUNK, Chunked, LOG_EVERY, WriteStalled, dropped_due};
    use crate::exporter::held::HeldBytes;

    #[test]
    fn dropped_bodies_are_logged_at_once_then_once_per_interval_with_the_count() {
        let mut books = (0, None);
        let start = tokio::time::Instant::now();
        assert_eq!(dropped_due(&mut books, start), Some(1), "the first at once");
        assert_eq!(dropped_due(&mut books, start + LOG_EVERY / 2), None);
        assert_eq!(dropped_due(&mut books, start + LOG_EVERY / 2), None);
        assert_eq!(
            dropped_due(&mut books, start + LOG_EVERY),
            Some(3),
            "every drop since the last line"
        );
        assert_eq!(dropped_due(&mut books, start + LOG_EVERY), None);
    }

    #[tokio::test]
    async fn a_reader_that_keeps_taking_chunks_gets_the_whole_text_in_chunks() {
        let held = HeldBytes::new(1 << 20);
        let text = "x".repeat(3 * CHUNK + 7);
        let mut body = Chunked::new(held.hold(text.clone()), Duration::from_millis(500));
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.expect("never cut").into_data().expect("data");
            assert!(chunk.len() <= CHUNK);
            got.extend_from_slice(&chunk);
            // Slower than the bound in all, never the bound between chunks.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(got, text.as_bytes());
        assert_eq!(held.gauge.get(), 0, "the walk's buffer is back");
    }

    #[tokio::test]
    async fn a_body_nobody_asks_for_gives_its_held_bytes_back_at_the_bound() {
        let held = HeldBytes::new(1 << 20);
        let bound = Duration::from_millis(200);
        let started = Instant::now();
        let mut body = Chunked::new(held.hold("x".repeat(4 * CHUNK)), bound);
        body.frame().await.unwrap().unwrap();
        assert_eq!(held.gauge.get(), 4 * CHUNK as i64, "held while unsent");
        // Nothing signals the watchdog's drop: poll the gauge.
        while held.gauge.get() != 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the held bytes never came back"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(started.elapsed() >= bound, "not before the bound");
        let ended = body.frame().await.unwrap().unwrap_err();
        assert_eq!(ended, WriteStalled);
        assert!(body.frame().await.is_none());
    }
}
