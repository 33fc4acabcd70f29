//! Integration tests live in `tests/`; this crate has no library code. Its
//! doctests are the README's code blocks, so every one of them compiles (and
//! those that do not serve forever run) in `cargo test --workspace`.
#![doc = include_str!("../../README.md")]
#![doc(test(attr(deny(warnings))))]
