//! tonic (gRPC) adapter for `admission`.
