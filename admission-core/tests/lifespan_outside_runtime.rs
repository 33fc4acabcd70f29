//! `Shutdown::spawn_lifespan` is `#[track_caller]`: called outside a tokio
//! runtime it panics, and the panic names the caller's line, not a line of
//! the coordinator. A binary of its own: it replaces the process-wide panic
//! hook while it runs.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use admission_core::Shutdown;

#[test]
fn spawn_lifespan_outside_a_runtime_panics_at_the_callers_line() {
    let shutdown = Shutdown::default();
    let seen: Arc<Mutex<Option<(String, u32)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let previous = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if let Some(location) = info.location() {
            *record.lock().unwrap() = Some((location.file().to_owned(), location.line()));
        }
    }));
    let line = line!() + 2;
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        shutdown.spawn_lifespan(|stop| async move { stop.cancelled().await });
    }));
    panic::set_hook(previous);

    assert!(outcome.is_err(), "outside a runtime it panics");
    let (file, at) = seen
        .lock()
        .unwrap()
        .clone()
        .expect("the hook saw the panic");
    assert!(
        file.ends_with("lifespan_outside_runtime.rs"),
        "the panic names the caller's file, not the coordinator's: {file}:{at}"
    );
    assert_eq!(at, line, "the caller's line");
}
