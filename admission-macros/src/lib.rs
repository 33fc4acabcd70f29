//! Attributes for `admission`. Use each through the crate that re-exports it
//! (behind that crate's default `macros` feature), never from here:
//!
//! | attribute | use it as | what it does |
//! | --- | --- | --- |
//! | [`macro@reserved`] | `admission_core::reserved` | `#[reserved(slots = N)]` gives a loop-owner type its own reservation by implementing `LoopOwner` |
//! | [`macro@admitted_axum`] | `admission_axum::admitted` | `#[admitted(class = work)]` takes a request lease for one axum handler and runs its body under it |
//! | [`macro@admitted_actix`] | `admission_actix::admitted` | the same for one actix-web handler |
//!
//! `#[reserved]` generates code that names `::admission_core`;
//! `#[admitted]` names only its adapter (`::admission_axum` or
//! `::admission_actix`), which carries the response type a refusal becomes.
//! A crate that renamed the dependency says so with `crate = "..."`, which
//! names `admission-core` for `#[reserved]` and the adapter for
//! `#[admitted]`.
//!
//! The `#[admitted]` examples below are `ignore` blocks, not compiled here:
//! a proc-macro crate cannot cleanly depend on the adapters that depend on
//! it. Runnable examples belong in the adapters' docs; the workspace's UI
//! tests compile and run the same handlers.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

use proc_macro::TokenStream;

mod admitted;
mod common;
mod reserved;

/// Gives a loop-owner type its own reservation: `slots` slots and as many
/// worker threads, one reservation per type, shared by every value of the
/// type and created on first use.
///
/// It implements `admission_core::LoopOwner`, so `owner.execution(future)`
/// runs `future` in the owner's execution scope: every pure call inside takes
/// one of the reservation's slots (per call), request load cannot refuse it,
/// and it never takes request capacity.
///
/// Size `slots` as the owner's concurrent calls plus one spare: a loop that
/// makes one call at a time gets 2. The spare absorbs one call that outlived
/// its cancelled caller.
///
/// # Keys
///
/// * `slots` (required): an integer literal or the path of a `usize`
///   `const`. 0 and values above `admission_core::pool::MAX_CAPACITY` fail the
///   build; a `const` is checked when the crate is compiled.
/// * `name` (optional): the reservation's name in refusals, logs and metrics;
///   the type's name by default.
/// * `crate` (optional): the path of `admission-core` when the dependency is
///   renamed, e.g. `crate = "my_admission"`.
///
/// It goes on a struct or an enum without type or const parameters: the
/// reservation lives in a `static`, and a `static` in a generic impl would be
/// shared by every instantiation. Size a generic owner by hand with a
/// `Reservation` field.
///
/// # Examples
///
/// ```
/// use admission_core::{Class, LoopOwner, RequestPools, reserved};
///
/// #[reserved(slots = 2)]
/// struct RecoveryLoop;
///
/// const RECEIPT_SLOTS: usize = 3;
///
/// #[reserved(slots = RECEIPT_SLOTS, name = "provider-receipts")]
/// struct ReceiptLoop;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let requests = RequestPools::new(1, 1).unwrap();
/// let _every_work_slot = requests.try_lease(Class::Work).unwrap();
///
/// let scanned = RecoveryLoop
///     .execution(async {
///         requests.execute_pure(Class::Work, || Ok::<_, std::fmt::Error>("scanned")).await
///     })
///     .await;
/// assert_eq!(scanned, Ok("scanned"), "requests cannot starve the loop");
/// assert_eq!(RecoveryLoop.reservation().name(), "RecoveryLoop");
/// assert_eq!(ReceiptLoop.reservation().name(), "provider-receipts");
/// assert_eq!(ReceiptLoop.reservation().pool().capacity(), 3);
/// # }
/// ```
///
/// A reservation needs at least one slot:
///
/// ```compile_fail
/// use admission_core::reserved;
///
/// #[reserved(slots = 0)]
/// struct RecoveryLoop;
/// # fn main() {}
/// ```
///
/// and a `const` of 0 fails the build too, in const evaluation, with a
/// message of the attribute's own naming the `const`:
///
/// ```compile_fail,E0080
/// use admission_core::reserved;
///
/// const SLOTS: usize = 0;
///
/// #[reserved(slots = SLOTS)]
/// struct RecoveryLoop;
/// # fn main() {}
/// ```
#[proc_macro_attribute]
pub fn reserved(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(reserved::expand, args, item)
}

/// Takes a request lease of one class for an `async fn` axum handler and
/// runs the handler's body under it, failing fast with a `503` when the class
/// has no free slot. Use it as `admission_axum::admitted`.
///
/// ```text
/// #[admitted(class = control)]
/// async fn status_page(State(app): State<App>) -> impl IntoResponse { body }
/// ```
///
/// becomes a handler with the same attributes, visibility, generics and
/// arguments that returns
/// `Result<impl IntoResponse, admission_axum::Rejection>`: it takes the lease
/// (or returns the refusal, converted by `?` into a `Rejection`), then runs
/// `body` in `Lease::scope`, so pure work inside it
/// (`RequestPools::execute_pure`) runs under that lease and takes no second
/// slot. `Result<T, Rejection>` is a response in axum (`Rejection`
/// implements `IntoResponse`): a refusal is sent as `503 Service
/// Unavailable` (or the pools' refusal status) with `Retry-After` and a
/// problem body.
///
/// Under the `AdmissionLayer` of `admission-axum` built from the same pools,
/// the attribute shares the request's lease of its class instead of taking
/// a second slot: one request holds one slot per class, and an idle server
/// never refuses itself.
///
/// # Keys
///
/// * `class` (required): `work` (mutations) or `control` (reads and terminal
///   control).
/// * `pools` (optional): the path of pools that live for the whole program,
///   e.g. `POOLS` or `crate::state::POOLS` for a
///   `static POOLS: LazyLock<RequestPools>`. Anything else (a call such as
///   `make_pools()`, a method call, a block, a borrow of a handler's
///   argument) is refused by the attribute: it would be evaluated on every
///   request and build new pools, with new slots, each time. The path is
///   borrowed for `'static`, so a `const` or a local fails to compile too. By
///   default `RequestPools::global()`, which `RequestPools::install_global`
///   sets at startup.
/// * `wait = "250ms"` (or `"2s"`) / `wait_ms = 250` (optional): wait at most
///   that long for a lease, then refuse with `ADMISSION_WAIT_TIMEOUT`.
///   Without it the handler fails fast, which is what HTTP callers want.
/// * `flow = expr` (optional): who the request is for (a tenant, an API
///   key), an expression over the handler's arguments evaluated once per
///   request before the lease is taken, e.g. `flow = tenant` for
///   `Path(tenant): Path<String>`, or `flow = claims.tenant_id`; any
///   `Hash` value, hashed at once and never kept. The lease is then taken
///   for that flow, held to its fair share of the class while the class
///   is contended (refused `ADMISSION_FLOW_SHARE` while another flow that
///   asked is under its own). A literal is refused: it would make every
///   request one flow. Under a layer of the same pools that already took
///   the request's lease, the attribute shares it and the layer's flow
///   (its `.flow(..)`) is the one that counted.
/// * `cost = N` (optional, 1 to 255): how many slots of its class the
///   request holds, for a route that costs more than a point read (a
///   full walk: `cost = 4`); fair shares count it. A cost above the
///   class's capacity takes the whole class (the layers' `cost` checks it
///   where they are built; the attribute cannot see the pools' sizes at
///   compile time). Under a layer of the same pools that already took
///   the request's lease, the attribute tops that lease up to its cost,
///   all or nothing, and gives the difference back when the handler
///   returns.
/// * `crate` (optional): the path of `admission-axum` when the dependency is
///   renamed, e.g. `crate = "my_adapter"`. Generated code names only its
///   hidden `__private` module and `::core`.
///
/// The handler must be an `async fn` without `self` that names its response
/// type (`-> String`, `-> impl IntoResponse`, ...).
///
/// # When the lease ends
///
/// The attribute's lease ends when the handler returns, that is when the
/// response value exists, **before** its body is sent. The `AdmissionLayer`
/// of `admission-axum` holds its lease until the response body is done. For
/// a streaming response, or any body that does work while it is sent, use
/// the layer, not the attribute.
///
/// # Examples
///
/// Not compiled here (see the crate docs); the workspace's UI tests compile
/// and run the same handlers.
///
/// ```text
/// use std::sync::LazyLock;
/// use admission_axum::{admitted, AdmissionLayer};
/// use admission_core::{Class, Lease, RequestPools};
/// use axum::{routing::{get, post}, Router};
///
/// static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(2, 4).unwrap());
///
/// #[admitted(class = control, pools = POOLS)]
/// async fn status() -> String {
///     let class = Lease::current().map(|lease| lease.class());
///     format!("running under {class:?}")
/// }
///
/// #[admitted(class = work, pools = POOLS, wait = "250ms")]
/// async fn rotate() -> &'static str {
///     "rotated"
/// }
///
/// let app: Router = Router::new()
///     .route("/status", get(status))
///     .route("/rotate", post(rotate))
///     // Optional: the layer holds the lease until the body is sent; the
///     // attribute then shares it.
///     .layer(AdmissionLayer::new(POOLS.clone()));
/// ```
///
/// The class is `work` or `control`; anything else fails the build with a
/// message spanned on the class (the UI tests pin every message):
///
/// ```text
/// #[admitted(class = reads)]
/// //                 ^^^^^ unknown class `reads`: expected `work` or `control`
/// ```
#[proc_macro_attribute]
pub fn admitted_axum(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(
        |args, item| admitted::expand(args, item, admitted::Adapter::Axum),
        args,
        item,
    )
}

/// Takes a request lease of one class for an `async fn` actix-web handler and
/// runs the handler's body under it, failing fast with a `503` when the class
/// has no free slot. Use it as `admission_actix::admitted`.
///
/// ```text
/// #[admitted(class = control)]
/// async fn status_page(app: web::Data<App>) -> impl Responder { body }
/// ```
///
/// becomes a handler with the same attributes, visibility, generics and
/// arguments that returns
/// `Result<impl Responder, admission_actix::Rejection>`: it takes the lease
/// (or returns the refusal, converted by `?` into a `Rejection`), then runs
/// `body` in `Lease::scope`, so pure work inside it
/// (`RequestPools::execute_pure`) runs under that lease and takes no second
/// slot. `Result<T, Rejection>` is a response in actix-web (`Responder`,
/// through `Rejection`'s `ResponseError`): a refusal is sent as `503
/// Service Unavailable` (or the pools' refusal status) with `Retry-After`
/// and a problem body.
///
/// Under the `AdmissionControl` middleware of `admission-actix` built from
/// the same pools, the attribute shares the request's lease of its class
/// instead of taking a second slot: one request holds one slot per class,
/// and an idle server never refuses itself.
///
/// # Keys
///
/// * `class` (required): `work` (mutations) or `control` (reads and terminal
///   control).
/// * `pools` (optional): the path of pools that live for the whole program,
///   e.g. `POOLS` or `crate::state::POOLS` for a
///   `static POOLS: LazyLock<RequestPools>`. Anything else (a call such as
///   `make_pools()`, a method call, a block, a borrow of a handler's
///   argument) is refused by the attribute: it would be evaluated on every
///   request and build new pools, with new slots, each time. The path is
///   borrowed for `'static`, so a `const` or a local fails to compile too. By
///   default `RequestPools::global()`, which `RequestPools::install_global`
///   sets at startup.
/// * `wait = "250ms"` (or `"2s"`) / `wait_ms = 250` (optional): wait at most
///   that long for a lease, then refuse with `ADMISSION_WAIT_TIMEOUT`.
///   Without it the handler fails fast, which is what HTTP callers want.
/// * `flow = expr` (optional): who the request is for (a tenant, an API
///   key), an expression over the handler's arguments evaluated once per
///   request before the lease is taken, e.g. `flow = tenant` for
///   `Path(tenant): Path<String>`, or `flow = claims.tenant_id`; any
///   `Hash` value, hashed at once and never kept. The lease is then taken
///   for that flow, held to its fair share of the class while the class
///   is contended (refused `ADMISSION_FLOW_SHARE` while another flow that
///   asked is under its own). A literal is refused: it would make every
///   request one flow. Under a layer of the same pools that already took
///   the request's lease, the attribute shares it and the layer's flow
///   (its `.flow(..)`) is the one that counted.
/// * `cost = N` (optional, 1 to 255): how many slots of its class the
///   request holds, for a route that costs more than a point read (a
///   full walk: `cost = 4`); fair shares count it. A cost above the
///   class's capacity takes the whole class (the layers' `cost` checks it
///   where they are built; the attribute cannot see the pools' sizes at
///   compile time). Under a layer of the same pools that already took
///   the request's lease, the attribute tops that lease up to its cost,
///   all or nothing, and gives the difference back when the handler
///   returns.
/// * `crate` (optional): the path of `admission-actix` when the dependency is
///   renamed, e.g. `crate = "my_adapter"`. Generated code names only its
///   hidden `__private` module and `::core`.
///
/// The handler must be an `async fn` without `self` that names its response
/// type (`-> String`, `-> impl Responder`, ...).
///
/// # When the lease ends
///
/// The attribute's lease ends when the handler returns, that is when the
/// response value exists, **before** its body is sent. The
/// `AdmissionControl` middleware of `admission-actix` holds its lease until
/// the response body is done. For a streaming response, or any body that
/// does work while it is sent, use the middleware, not the attribute.
///
/// # Examples
///
/// Not compiled here (see the crate docs); the workspace's UI tests compile
/// and run the same handlers.
///
/// ```text
/// use std::sync::LazyLock;
/// use actix_web::{web, App};
/// use admission_actix::{admitted, AdmissionControl};
/// use admission_core::{Class, Lease, RequestPools};
///
/// static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(2, 4).unwrap());
///
/// #[admitted(class = control, pools = POOLS)]
/// async fn status() -> String {
///     let class = Lease::current().map(|lease| lease.class());
///     format!("running under {class:?}")
/// }
///
/// #[admitted(class = work, pools = POOLS, wait = "250ms")]
/// async fn rotate() -> &'static str {
///     "rotated"
/// }
///
/// let app = App::new()
///     // Optional: the middleware holds the lease until the body is sent;
///     // the attribute then shares it.
///     .wrap(AdmissionControl::new(POOLS.clone()))
///     .route("/status", web::get().to(status))
///     .route("/rotate", web::post().to(rotate));
/// ```
///
/// The class is `work` or `control`; anything else fails the build with a
/// message spanned on the class (the UI tests pin every message):
///
/// ```text
/// #[admitted(class = reads)]
/// //                 ^^^^^ unknown class `reads`: expected `work` or `control`
/// ```
#[proc_macro_attribute]
pub fn admitted_actix(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(
        |args, item| admitted::expand(args, item, admitted::Adapter::Actix),
        args,
        item,
    )
}

/// Runs one attribute's expansion. On error it emits every error found plus
/// the item unchanged, so the rest of the crate still sees the item and the
/// build reports the attribute's mistakes, not follow-on ones.
fn expand(
    expansion: fn(
        proc_macro2::TokenStream,
        proc_macro2::TokenStream,
    ) -> syn::Result<proc_macro2::TokenStream>,
    args: TokenStream,
    item: TokenStream,
) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match expansion(args.into(), item.clone()) {
        Ok(expanded) => expanded.into(),
        Err(err) => {
            let mut out = err.into_compile_error();
            out.extend(item);
            out.into()
        }
    }
}
