//! trybuild UI tests for `#[reserved]` and `#[admitted]`.
//!
//! `#[reserved]` is used through `admission-core`; `#[admitted]` through an
//! adapter (`admission_axum::admitted`, `admission_actix::admitted`). The
//! `admitted` fail cases all use the axum one: the messages they pin are the
//! macro's own, the same for both adapters but for the framework's words.
//!
//! Each `ui/*/fail/*.rs` has a sibling `.stderr` snapshot of the errors the
//! macros emit; each `ui/*/pass/*.rs` must compile (and its `main` run).
//! Re-bless the snapshots, after reading every changed `.stderr`, with
//!
//! ```text
//! TRYBUILD=overwrite cargo test -p admission-tests --test ui
//! ```
//!
//! The snapshots belong to the toolchain pinned in `rust-toolchain.toml`:
//! another rustc may word its own diagnostics differently. Update them in a
//! commit of their own.

#[test]
fn ui() {
    // One `TestCases` for both attributes: trybuild builds every case in one
    // project when it is dropped, at the end of this test.
    let cases = trybuild::TestCases::new();
    cases.pass("ui/reserved/pass/*.rs");
    cases.compile_fail("ui/reserved/fail/*.rs");
    cases.pass("ui/admitted/pass/*.rs");
    cases.compile_fail("ui/admitted/fail/*.rs");
}
