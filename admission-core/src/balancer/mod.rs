//! What a replica tells the load balancer in front of it: readiness that
//! turns at shutdown, an HAProxy agent-check responder and a load figure for
//! balancers that read response headers (issue 18; being built).
