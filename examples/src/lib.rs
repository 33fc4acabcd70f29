//! Shared pieces of the example services.
