//! Operations: the mutations `POST /operations` makes and the reads
//! `GET /operations/{id}` serves, each with its pure work under the
//! request's lease.
//!
//! This module owns [`Store`], [`Operation`] and the two handlers. It must
//! never run pure work outside
//! [`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure):
//! that is what keeps it under the lease the middleware took.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actix_web::http::header::LOCATION;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use admission_actix::Rejection;
use admission_core::Class;
use serde_json::{Value, json};

use super::problem::Problem;
use super::serve::AppState;

/// The longest pure work a `POST /operations` may ask for.
pub const MAX_WORK_MS: u64 = 600_000;

/// Operations kept for `GET /operations/{id}`; the oldest go first.
const KEPT: usize = 4096;

/// Where an operation is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Created; its transition has not ended.
    Pending,
    /// Its transition ended.
    Completed,
}

impl State {
    /// The name used in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Completed => "completed",
        }
    }
}

/// One operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Its id, unique in the process.
    pub id: u64,
    /// Where it is.
    pub state: State,
    /// How long its transition's pure work takes.
    pub work_ms: u64,
}

impl Operation {
    /// The JSON body the routes answer with.
    pub fn to_json(&self) -> Value {
        json!({ "id": self.id, "state": self.state.as_str(), "work_ms": self.work_ms })
    }
}

/// The error for an operation that is not (or no longer) in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownOperation(());

impl fmt::Display for UnknownOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown operation")
    }
}

impl std::error::Error for UnknownOperation {}

/// The operations of the process, the newest 4096 of them. Clones share it.
///
/// # Examples
///
/// ```
/// use admission_examples::workflow::{State, Store};
///
/// let store = Store::default();
/// let op = store.create(5);
/// assert_eq!(op.state, State::Pending);
/// assert_eq!(store.complete(op.id).unwrap().state, State::Completed);
/// assert_eq!(store.get(op.id).unwrap().state, State::Completed);
/// assert!(store.get(op.id + 1).is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    operations: BTreeMap<u64, Operation>,
}

impl Store {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Creates a pending operation.
    pub fn create(&self, work_ms: u64) -> Operation {
        self.with(|inner| {
            inner.next += 1;
            let op = Operation {
                id: inner.next,
                state: State::Pending,
                work_ms,
            };
            inner.operations.insert(op.id, op.clone());
            while inner.operations.len() > KEPT {
                inner.operations.pop_first();
            }
            op
        })
    }

    /// Marks an operation completed.
    ///
    /// # Errors
    ///
    /// [`UnknownOperation`] when it was never created or was evicted.
    pub fn complete(&self, id: u64) -> Result<Operation, UnknownOperation> {
        self.with(|inner| {
            let op = inner.operations.get_mut(&id).ok_or(UnknownOperation(()))?;
            op.state = State::Completed;
            Ok(op.clone())
        })
    }

    /// The operation with this id.
    pub fn get(&self, id: u64) -> Option<Operation> {
        self.with(|inner| inner.operations.get(&id).cloned())
    }

    /// How many operations are kept.
    pub fn len(&self) -> usize {
        self.with(|inner| inner.operations.len())
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads `work_ms` from a query string, percent-decoded as
/// `application/x-www-form-urlencoded` (so `%35` is 5, and `+5`, a space
/// then 5, is no integer): absent is 0, and every occurrence must be
/// valid.
fn work_ms(query: &str) -> Result<u64, Problem> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(query)
        .map_err(|_| Problem::BadQuery)?
        .into_inner();
    let mut found = 0;
    for (key, value) in pairs {
        if key == "work_ms" {
            found = match value.parse::<u64>() {
                Ok(ms) if ms <= MAX_WORK_MS && !value.starts_with('+') => ms,
                _ => return Err(Problem::BadWorkMs),
            };
        }
    }
    Ok(found)
}

/// `POST /operations?work_ms=MS`: creates an operation and runs its
/// transition, MS of pure work under the request's *work* lease.
pub(crate) async fn create(
    req: HttpRequest,
    app: web::Data<AppState>,
) -> Result<HttpResponse, Rejection> {
    let work_ms = match work_ms(req.query_string()) {
        Ok(ms) => ms,
        Err(problem) => return Ok(problem.error_response()),
    };
    let pending = app.store.create(work_ms);
    let store = app.store.clone();
    let done = app
        .requests
        .execute_pure(Class::Work, move || {
            std::thread::sleep(Duration::from_millis(work_ms));
            store.complete(pending.id)
        })
        .await?;
    Ok(HttpResponse::Created()
        .insert_header((LOCATION, format!("/operations/{}", done.id)))
        .json(done.to_json()))
}

/// `GET /operations/{id}`: the operation, looked up as pure work under the
/// request's *control* lease. An id that is not an unsigned integer is a
/// `400` that does not repeat it.
pub(crate) async fn read(
    id: web::Path<String>,
    app: web::Data<AppState>,
) -> Result<HttpResponse, Rejection> {
    let Some(id) = operation_id(&id) else {
        return Ok(Problem::BadOperationId.error_response());
    };
    let store = app.store.clone();
    let found = app
        .requests
        .execute_pure(Class::Control, move || Ok::<_, Infallible>(store.get(id)))
        .await?;
    Ok(match found {
        Some(op) => HttpResponse::Ok().json(op.to_json()),
        None => Problem::NoSuchOperation.error_response(),
    })
}

/// An operation id: decimal digits only (no sign, no spaces), fitting a
/// `u64`.
fn operation_id(raw: &str) -> Option<u64> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_ms_reads_the_query() {
        assert_eq!(work_ms(""), Ok(0));
        assert_eq!(work_ms("work_ms=1500"), Ok(1500));
        assert_eq!(work_ms("a=b&work_ms=7"), Ok(7));
        assert_eq!(work_ms("work_ms=-1"), Err(Problem::BadWorkMs));
        assert_eq!(work_ms("work_ms"), Err(Problem::BadWorkMs));
        assert!(work_ms(&format!("work_ms={}", MAX_WORK_MS + 1)).is_err());
    }

    #[test]
    fn work_ms_is_percent_decoded_like_any_form_value() {
        assert_eq!(work_ms("work_ms=%35"), Ok(5), "%35 is 5");
        assert_eq!(work_ms("work%5Fms=7"), Ok(7), "the key is decoded too");
        assert_eq!(
            work_ms("work_ms=+5"),
            Err(Problem::BadWorkMs),
            "+ is a space"
        );
        assert_eq!(work_ms("work_ms=%2B5"), Err(Problem::BadWorkMs), "no sign");
        assert_eq!(work_ms("work_ms=%zz"), Err(Problem::BadWorkMs));
        assert_eq!(work_ms("work_ms=1&work_ms=abc"), Err(Problem::BadWorkMs));
    }

    #[test]
    fn operation_ids_are_digits_only() {
        assert_eq!(operation_id("42"), Some(42));
        assert_eq!(operation_id("+42"), None);
        assert_eq!(operation_id(" 42"), None);
        assert_eq!(operation_id("-1"), None);
        assert_eq!(operation_id(""), None);
        assert_eq!(operation_id(&"9".repeat(10_000)), None, "too large");
        assert_eq!(operation_id("<script>alert(1)</script>"), None);
    }

    #[test]
    fn the_store_keeps_the_newest() {
        let store = Store::default();
        let first = store.create(0);
        for _ in 0..KEPT {
            store.create(0);
        }
        assert_eq!(store.len(), KEPT, "bounded");
        assert!(store.get(first.id).is_none(), "the oldest went first");
        assert_eq!(store.complete(first.id), Err(UnknownOperation(())));
    }
}
