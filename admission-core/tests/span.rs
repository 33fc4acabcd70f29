//! Issue 28: the caller's span travels with the work. Events inside work on
//! a pool's worker thread sit under the span that was current when the work
//! was admitted, orphans included, and no span leaks into later work on the
//! same thread. A `tracing-subscriber` layer records each event's span
//! parents; the subscriber is scoped to the test (not global, but for one
//! test), so the worker threads reach it only through the span the work
//! carried.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use admission_core::{Admission, Pool};
use tracing::field::{Field, Visit};
use tracing::{Event, Instrument, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One recorded event: its message and its spans, outermost first.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    message: String,
    spans: Vec<&'static str>,
    thread: Option<String>,
}

#[derive(Clone, Default)]
struct Parents(Arc<Mutex<Vec<Seen>>>);

impl Parents {
    fn seen(&self) -> Vec<Seen> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn only(&self, message: &str) -> Seen {
        let seen: Vec<Seen> = self
            .seen()
            .into_iter()
            .filter(|s| s.message == message)
            .collect();
        assert_eq!(seen.len(), 1, "one {message:?} event: {seen:?}");
        seen.into_iter().next().unwrap()
    }
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Parents {
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.from_root().map(|span| span.name()).collect())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Seen {
                message: message.0,
                spans,
                thread: std::thread::current().name().map(str::to_owned),
            });
    }
}

fn subscriber() -> (Parents, impl Subscriber + Send + Sync) {
    let parents = Parents::default();
    (
        parents.clone(),
        tracing_subscriber::registry().with(parents),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn events_inside_work_sit_under_the_span_current_when_it_was_admitted() {
    let (parents, subscriber) = subscriber();
    let _guard = tracing::subscriber::set_default(subscriber);
    let pool = Pool::new("span-work", 1).unwrap();
    let here = std::thread::current().id();
    let ran_on = pool
        .run(
            move || {
                tracing::info!("walking");
                Ok::<_, std::fmt::Error>(std::thread::current().id())
            },
            Admission::FailFast,
        )
        .instrument(tracing::info_span!("request"))
        .await
        .unwrap();
    assert_ne!(ran_on, here, "the work ran on a worker thread");
    assert_eq!(parents.only("walking").spans, ["request"]);

    // A slot taken in one span and offloaded in another: the span current
    // when the work was bound to the slot is the one it carries.
    let slot = pool.try_admit().unwrap();
    async {
        slot.offload(|| {
            tracing::info!("offloaded");
            Ok::<_, std::fmt::Error>(())
        })
        .await
        .unwrap();
    }
    .instrument(tracing::info_span!("handler"))
    .await;
    assert_eq!(parents.only("offloaded").spans, ["handler"]);
}

/// The one test that sets a global subscriber: events of work admitted
/// outside any span reach only the global default on a worker thread.
#[tokio::test(flavor = "current_thread")]
async fn work_admitted_outside_any_span_is_under_none_even_on_a_thread_that_ran_a_span() {
    let (parents, subscriber) = subscriber();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    // One worker: the second piece of work runs on the thread the first ran
    // on, inside its span.
    let pool = Pool::new("span-none", 1).unwrap();
    // Kept open throughout: a span left entered on the thread would show.
    let request = tracing::info_span!("request");
    pool.run(
        || {
            tracing::info!("first");
            Ok::<_, std::fmt::Error>(())
        },
        Admission::Wait,
    )
    .instrument(request.clone())
    .await
    .unwrap();
    pool.run(
        || {
            tracing::info!("second");
            Ok::<_, std::fmt::Error>(())
        },
        Admission::Wait,
    )
    .await
    .unwrap();
    let (first, second) = (parents.only("first"), parents.only("second"));
    assert_eq!(first.thread, second.thread, "the same worker thread");
    assert_eq!(first.spans, ["request"]);
    assert!(second.spans.is_empty(), "no span left behind: {second:?}");
    drop(request);
}

#[tokio::test(flavor = "current_thread")]
async fn an_orphan_keeps_its_callers_span_for_its_events_and_its_failure_report() {
    let (parents, subscriber) = subscriber();
    let _guard = tracing::subscriber::set_default(subscriber);
    let pool = Pool::new("span-orphan", 1).unwrap();
    let (started_tx, started) = std_mpsc::channel();
    let (release, held) = std_mpsc::channel::<()>();
    let slot = pool.try_admit().unwrap();
    let future = tracing::info_span!("request").in_scope(|| {
        slot.offload(move || {
            started_tx.send(()).unwrap();
            held.recv().unwrap();
            tracing::info!("after the caller left");
            Err::<(), _>(std::fmt::Error)
        })
    });
    started.recv().unwrap();
    // The caller goes away while its work runs on, holding the slot.
    drop(future);
    release.send(()).unwrap();
    // The orphan ends and reports its failure; its slot comes back after.
    let _slot = pool.admit().await.unwrap();
    assert_eq!(parents.only("after the caller left").spans, ["request"]);
    let report = parents.only("orphaned work failed after its caller went away");
    assert_eq!(report.spans, ["request"], "the report too");
    assert_eq!(pool.stats().orphan_failures, 1);
}
