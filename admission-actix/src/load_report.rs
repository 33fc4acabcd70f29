//! The replica's load on every response, for balancers that read it
//! (issue 18; being built).
