//! Attributes for `admission`; use them through `admission-core`, which
//! re-exports them behind its default `macros` feature:
//!
//! * [`macro@reserved`]: `#[reserved(slots = N)]` gives a loop-owner type its
//!   own reservation by implementing `LoopOwner`.
//! * [`macro@admitted`]: `#[admitted(class = work)]` takes a request lease for
//!   one handler and runs its body under it.
//!
//! Generated code names `::admission_core`; a crate that renamed the
//! dependency says so with `crate = "my_admission"`.
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
///   `const`. 0 and values above `admission_core::MAX_CAPACITY` fail the
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

/// Takes a request lease of one class for an `async fn` handler and runs the
/// handler's body under it, failing fast with a `Refusal` when the class has
/// no free slot.
///
/// ```text
/// #[admitted(class = control)]
/// async fn status_page(State(app): State<App>) -> Html<String> { body }
/// ```
///
/// becomes a handler with the same attributes, visibility, generics and
/// arguments that returns `Result<Html<String>, admission_core::Refusal>`:
/// it takes the lease (or returns the refusal), then runs `body` in
/// `Lease::scope`, so pure work inside it
/// (`RequestPools::execute_pure`) runs under that lease and takes no second
/// slot. `Result<T, Refusal>` is a response in axum (`IntoResponse`) and in
/// actix-web (`Responder`, through `ResponseError`): a refusal is sent as
/// `503 Service Unavailable` (or the pools' refusal status) with
/// `Retry-After` and a problem body.
///
/// # Keys
///
/// * `class` (required): `work` (mutations) or `control` (reads and terminal
///   control).
/// * `pools` (optional): an expression for the request pools, anything that
///   derefs to `RequestPools` (a `static LazyLock<RequestPools>`, a function
///   returning `&'static RequestPools`). By default
///   `RequestPools::global()`, which `RequestPools::install_global` sets at
///   startup.
/// * `crate` (optional): the path of `admission-core` when the dependency is
///   renamed.
/// * `wait = "250ms"` (or `"2s"`) / `wait_ms = 250` (optional): wait at most
///   that long for a lease, then refuse with `ADMISSION_WAIT_TIMEOUT`.
///   Without it the handler fails fast, which is what HTTP callers want.
///
/// The handler must be an `async fn` without `self` that names its response
/// type (`-> String`, `-> impl IntoResponse`, `-> impl Responder`, ...).
///
/// # When the lease ends
///
/// The attribute's lease ends when the handler returns, that is when the
/// response value exists, **before** its body is sent. The middleware layers
/// of `admission-axum` and `admission-actix` hold their lease until the
/// response body is done. For a streaming response, or any body that does
/// work while it is sent, use the layer, not the attribute.
///
/// # Examples
///
/// ```
/// use std::sync::LazyLock;
/// use admission_core::{admitted, current_lease, Class, Code, RequestPools};
///
/// static POOLS: LazyLock<RequestPools> = LazyLock::new(|| RequestPools::new(1, 1).unwrap());
///
/// #[admitted(class = control, pools = POOLS)]
/// async fn status() -> String {
///     let class = current_lease().map(|lease| lease.class());
///     format!("running under {class:?}")
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert_eq!(status().await.unwrap(), "running under Some(Control)");
///
/// let _every_control_slot = POOLS.try_lease(Class::Control).unwrap();
/// let refusal = status().await.unwrap_err();
/// assert_eq!(refusal.code(), Code::Saturated, "the class is full: fail fast");
/// assert_eq!(refusal.status(), 503);
/// # }
/// ```
///
/// The class is `work` or `control`:
///
/// ```compile_fail
/// use admission_core::admitted;
///
/// #[admitted(class = reads)]
/// async fn status() -> String {
///     String::new()
/// }
/// # fn main() {}
/// ```
#[proc_macro_attribute]
pub fn admitted(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(admitted::expand, args, item)
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
