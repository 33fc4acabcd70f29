//! Integration tests live in `tests/`; this crate has no library code. Its
//! doctests are the code blocks of the README and of every page of the
//! guide (`docs/guide/`), so each one compiles (and those that do not serve
//! forever run) in `cargo test --workspace --doc`. `tests/links.rs` checks
//! their relative links, and that every guide page is listed here.
#![doc = include_str!("../../README.md")]
#![doc(test(attr(deny(warnings))))]

/// Includes each guide page as the documentation of an empty module, for
/// its doctests only.
macro_rules! guide {
    ($($module:ident = $page:literal;)*) => {$(
        #[cfg(doctest)]
        #[doc = include_str!(concat!("../../docs/guide/", $page))]
        mod $module {}
    )*};
}

guide! {
    guide_index = "README.md";
    guide_features = "features.md";
    guide_choosing = "choosing.md";
    guide_adapters = "adapters.md";
    guide_sizing = "sizing.md";
    guide_refusals = "refusals.md";
    guide_trust = "trust.md";
    guide_attributes = "attributes.md";
    guide_shared_walks = "shared-walks.md";
    guide_shutdown = "shutdown.md";
    guide_overload = "overload.md";
    guide_library_and_tests = "library-and-tests.md";
    guide_client = "client.md";
    guide_observability = "observability.md";
    guide_replicas = "replicas.md";
    guide_operating = "operating.md";
    guide_rolling_out = "rolling-out.md";
    guide_why_not_tower = "why-not-tower.md";
    guide_examples = "examples.md";
    guide_developing = "developing.md";
}
