//! A process-wide `tracing` capture of admission's own events (worker
//! threads included), as admission-core's test support does it; the soak
//! counts the orphan reports that name its pool.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::Registry;

/// The message of the event that reports an orphan's failure.
const ORPHAN_FAILED: &str = "orphaned work failed";

/// One captured event: its message and its `pool` field.
#[derive(Debug, Clone)]
struct Captured {
    message: String,
    pool: Option<String>,
}

type Events = Arc<Mutex<Vec<Captured>>>;

/// Captures events from admission's crates only: the web frameworks'
/// and clients' own callsites stay disabled, and cost nothing.
struct Capture(Events);

fn is_admission(metadata: &Metadata<'_>) -> bool {
    metadata.target().starts_with("admission")
}

#[derive(Default)]
struct Fields {
    message: String,
    pool: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "pool" {
            self.pool = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "pool" => self.pool = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if is_admission(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        is_admission(metadata)
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Captured {
                message: fields.message,
                pool: fields.pool,
            });
    }
}

fn events() -> &'static Events {
    static EVENTS: OnceLock<Events> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let events = Events::default();
        tracing::subscriber::set_global_default(
            Registry::default().with(Capture(Arc::clone(&events))),
        )
        .expect("no other global subscriber in the soak binary");
        events
    })
}

/// Installs the capture, once per process, before the soak starts.
pub(crate) fn install() {
    events();
}

/// How many "orphaned work failed" events named `pool`.
pub(crate) fn orphan_failures(pool: &str) -> usize {
    events()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|e| e.message.contains(ORPHAN_FAILED) && e.pool.as_deref() == Some(pool))
        .count()
}
