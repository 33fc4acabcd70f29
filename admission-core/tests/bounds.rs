//! Compile-time bounds of the public types: `Send`, `Sync` and `Unpin` as
//! each really is, pinned so that a change (a `Cell`, an `Rc`, a pinned
//! field) fails this build instead of a user's.
//!
//! Generic types are pinned for every argument that satisfies the stated
//! bounds, through generic functions that only compile if the bound holds.
//! `Scoped<F>` is pinned as *not* `Unpin` (it wraps tokio's
//! `TaskLocalFuture`, which is `!Unpin` whatever `F` is).

#![allow(dead_code)]

use std::future::Future;

use admission_core::pool::{PoolBuilder, RetryHint, Slot, WorkFuture};
use admission_core::request::{RequestPoolsBuilder, Scoped};
use admission_core::shutdown::{PoolReport, ShutdownReport};
use admission_core::stats::PoolStats;
use admission_core::{
    Admission, Class, Coalescing, Code, ConfigError, Lease, Pool, Refusal, RequestPools,
    Reservation, Shutdown, WorkError,
};

fn send<T: ?Sized + Send>() {}
fn sync<T: ?Sized + Sync>() {}
fn unpin<T: ?Sized + Unpin>() {}

/// `Send + Sync + Unpin`.
fn all<T: ?Sized + Send + Sync + Unpin>() {}

/// Compiles only when `T` is *not* `Unpin`: with `T: Unpin` both impls
/// apply and the call is ambiguous (the `static_assertions` technique).
trait AmbiguousIfUnpin<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
impl<T: ?Sized + Unpin> AmbiguousIfUnpin<u8> for T {}

macro_rules! not_unpin {
    ($t:ty) => {
        let _ = <$t as AmbiguousIfUnpin<_>>::check;
    };
}

/// The future of an `async` block: `Send` when its captures are, `!Unpin`.
type AsyncBlock = std::pin::Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

#[test]
fn bounds() {
    // The root.
    all::<Pool>();
    all::<Admission>();
    all::<Refusal>();
    all::<Code>();
    all::<Class>();
    all::<Lease>();
    all::<Reservation>();
    all::<RequestPools>();
    all::<Shutdown>();
    all::<ConfigError>();
    all::<WorkError<std::io::Error>>();
    all::<Coalescing<&'static str, std::sync::Arc<str>, String>>();

    // pool
    all::<Slot>();
    all::<WorkFuture<String, std::io::Error>>();
    all::<PoolBuilder>();
    all::<RetryHint>();

    // request
    all::<RequestPoolsBuilder>();
    send::<Scoped<AsyncBlock>>();
    sync::<Scoped<AsyncBlock>>();
    not_unpin!(Scoped<AsyncBlock>);

    // shutdown, stats
    all::<ShutdownReport>();
    all::<PoolReport>();
    all::<PoolStats>();

    #[cfg(feature = "prometheus")]
    all::<admission_core::metrics::AdmissionMetrics>();
}

/// `WorkFuture<T, E>` is `Send + Sync + Unpin` for any `Send` output and
/// error, `Sync` ones or not (it holds a oneshot receiver).
fn work_future<T: Send, E: Send>() {
    all::<WorkFuture<T, E>>();
}

/// `WorkError<E>` follows `E`.
fn work_error_send<E: Send>() {
    send::<WorkError<E>>();
}
fn work_error_sync<E: Sync>() {
    sync::<WorkError<E>>();
}
fn work_error_unpin<E: Unpin>() {
    unpin::<WorkError<E>>();
}

/// `Coalescing<K, T, E>` is `Send + Sync + Unpin` for the bounds its
/// methods ask (`K: Send`, `T, E: Send + Sync`), whatever else they are.
fn coalescing<K: Send, T: Send + Sync, E: Send + Sync>() {
    all::<Coalescing<K, T, E>>();
}

/// `Scoped<F>` is `Send` when `F` is, `Sync` when `F` is, and never `Unpin`.
fn scoped_send<F: Future + Send>() {
    send::<Scoped<F>>();
}
fn scoped_sync<F: Future + Sync>() {
    sync::<Scoped<F>>();
}

#[test]
fn scoped_is_not_unpin_even_over_an_unpin_future() {
    not_unpin!(Scoped<std::future::Ready<()>>);
    not_unpin!(Scoped<AsyncBlock>);
    unpin::<std::future::Ready<()>>();
}

#[test]
fn generic_bounds_hold_for_non_sync_arguments() {
    // `Cell` is `Send` but not `Sync`: the futures still are both.
    work_future::<std::cell::Cell<u8>, std::cell::Cell<u8>>();
    work_error_send::<std::cell::Cell<u8>>();
    work_error_sync::<u8>();
    work_error_unpin::<u8>();
    coalescing::<std::cell::Cell<u8>, u8, u8>();
    scoped_send::<std::future::Ready<std::cell::Cell<u8>>>();
    scoped_sync::<std::future::Ready<u8>>();
}
