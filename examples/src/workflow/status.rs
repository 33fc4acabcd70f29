//! `GET /status`, `GET /healthz` and `GET /readyz`: never behind admission,
//! never refused.
//!
//! This module owns the status document. It must never take a lease nor
//! run pure work: it reads counters only.
//!
//! `/status` shows the request pools' counters (slots in use, refusals):
//! operator information that tells an attacker when the service
//! saturates. Serve it to operators only (bind the service privately, or
//! put `/status` behind the proxy's access control); it is never a
//! balanced route.

use actix_web::{HttpResponse, web};
use admission_core::stats::PoolStats;
use serde_json::{Map, Value, json};

use super::serve::AppState;

/// `GET /healthz`: `200 ok`, touching nothing.
pub(crate) async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok\n")
}

/// `GET /readyz`: `200` while the service takes new work, `503` from the
/// stop signal on (through the drain delay, while `/healthz` stays `200`).
/// Saturated request pools never change it.
pub(crate) async fn readyz(app: web::Data<AppState>) -> HttpResponse {
    if app.readiness.is_ready() {
        HttpResponse::Ok()
            .content_type("text/plain")
            .body("ready\n")
    } else {
        HttpResponse::ServiceUnavailable()
            .content_type("text/plain")
            .body("draining\n")
    }
}

/// `GET /status`: every loop's counters and every pool's occupancy.
pub(crate) async fn status(app: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(document(&app))
}

/// The status document:
/// `{"loops": {name: {cycles, refusals, ...}}, "pools": {name: {capacity, in_use, refused, ...}}, "operations": n, "client_errors": n}`,
/// where `client_errors` counts the malformed requests and connection
/// errors the HTTP framework reported (logged at most once per 10 s).
pub(crate) fn document(app: &AppState) -> Value {
    let mut loops = Map::new();
    let mut pools = Map::new();
    for stats in app.requests.stats() {
        pools.insert(stats.name.clone(), pool(&stats));
    }
    for entry in app.loops.entries() {
        let stats = entry.reservation.stats();
        loops.insert(
            entry.name.to_owned(),
            json!({
                "cycles": entry.stats.cycles(),
                "refusals": entry.stats.refusals(),
                "failures": entry.stats.failures(),
                "reservation": stats.name,
            }),
        );
        pools.insert(stats.name.clone(), pool(&stats));
    }
    json!({
        "loops": loops,
        "pools": pools,
        "operations": app.store.len(),
        "client_errors": crate::cli::client_errors(),
    })
}

fn pool(stats: &PoolStats) -> Value {
    json!({
        "capacity": stats.capacity,
        "in_use": stats.in_use,
        "refused": stats.refused,
        "admitted": stats.admitted,
        "running": stats.running,
        "orphaned": stats.orphaned,
    })
}
