//! Attributes for `admission`; use them through `admission-core`.
