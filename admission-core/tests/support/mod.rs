//! Test support: a process-wide `tracing` capture, polling helpers and a
//! gate that holds worker threads until the test lets them go.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, Layer, SubscriberExt};
use tracing_subscriber::registry::Registry;

/// One captured event: its level, message and string fields.
#[derive(Debug, Clone)]
pub struct Captured {
    pub level: Level,
    pub message: String,
    pub fields: Vec<(String, String)>,
}

impl Captured {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Capture {
    events: Arc<Mutex<Vec<Captured>>>,
}

struct Fields<'a> {
    message: &'a mut String,
    fields: &'a mut Vec<(String, String)>,
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .push((field.name().to_owned(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.message = format!("{value:?}");
        } else {
            self.fields
                .push((field.name().to_owned(), format!("{value:?}")));
        }
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _ctx: LayerContext<'_, S>) {
        let mut message = String::new();
        let mut fields = Vec::new();
        event.record(&mut Fields {
            message: &mut message,
            fields: &mut fields,
        });
        self.events.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            message,
            fields,
        });
    }
}

/// Installs the capture as the global subscriber (events on worker threads
/// are seen too) and returns every event so far. Tests filter by the unique
/// pool name they use.
pub fn events() -> Vec<Captured> {
    static EVENTS: OnceLock<Arc<Mutex<Vec<Captured>>>> = OnceLock::new();
    let events = EVENTS.get_or_init(|| {
        let capture = Capture::default();
        let events = Arc::clone(&capture.events);
        tracing::subscriber::set_global_default(Registry::default().with(capture))
            .expect("no other global subscriber in this test binary");
        events
    });
    events.lock().unwrap().clone()
}

/// Events whose `pool` field is `pool`.
pub fn events_for(pool: &str) -> Vec<Captured> {
    events()
        .into_iter()
        .filter(|e| e.field("pool") == Some(pool))
        .collect()
}

/// Polls a future once with a no-op waker.
pub fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
}

/// A gate that work blocks on until the test opens it: `hold()` gives a
/// closure body for the worker; `started` says when the worker entered it.
pub struct Gate {
    release: std::sync::mpsc::Sender<()>,
    wait: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    started_tx: std::sync::mpsc::Sender<()>,
    started_rx: std::sync::mpsc::Receiver<()>,
}

impl Gate {
    pub fn new() -> Gate {
        let (release, wait) = std::sync::mpsc::channel();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        Gate {
            release,
            wait: Arc::new(Mutex::new(wait)),
            started_tx,
            started_rx,
        }
    }

    /// Work that reports its start, then blocks until [`open`](Self::open)
    /// lets one worker through (or the gate is dropped, then it fails).
    pub fn work(
        &self,
    ) -> impl FnOnce() -> Result<&'static str, std::sync::mpsc::RecvError> + Send + 'static {
        let wait = Arc::clone(&self.wait);
        let started = self.started_tx.clone();
        move || {
            started.send(()).unwrap();
            wait.lock().unwrap().recv().map(|()| "walked")
        }
    }

    /// Blocks the test thread until `n` workers have entered the gate.
    pub fn wait_started(&self, n: usize) {
        for _ in 0..n {
            self.started_rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("a worker entered the gate");
        }
    }

    /// Lets `n` workers through.
    pub fn open(&self, n: usize) {
        for _ in 0..n {
            self.release.send(()).unwrap();
        }
    }
}

/// Runs one piece of work on `pool` that takes exactly `took` on the
/// runtime's paused clock (`#[tokio::test(start_paused = true)]`): a real
/// worker thread holds it on a channel while the test moves the clock on,
/// so the pool measures `took` and no test sleeps for it. The pool must
/// have a free slot.
pub async fn run_for(pool: &admission_core::Pool, took: std::time::Duration) {
    let gate = Gate::new();
    let work = pool.try_admit().expect("a free slot").offload(gate.work());
    // The pool reads the start before the work reports it.
    gate.wait_started(1);
    tokio::time::advance(took).await;
    gate.open(1);
    assert_eq!(work.await, Ok("walked"), "the held work ends when let go");
}
