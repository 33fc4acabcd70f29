//! Many clients on separate connections, spread over actix-web's worker
//! threads, share one pool: exactly its capacity is admitted.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use actix_web::web;
use admission_actix::AdmissionControl;
use admission_core::{Class, RequestPools};
use reqwest::StatusCode;
use tokio::sync::mpsc;

use common::{Gate, client, data, gate, serve, within};

async fn held(gate: web::Data<Gate>) -> &'static str {
    gate.pass().await;
    "done"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_connections_on_two_workers_share_two_slots() {
    let pools = RequestPools::new(2, 2).unwrap();
    let threads: Arc<Mutex<HashSet<ThreadId>>> = Arc::default();
    // The classifier runs on the actix-web worker that took the connection,
    // for admitted and refused requests alike.
    let admission = AdmissionControl::classify(pools.clone(), {
        let threads = Arc::clone(&threads);
        move |_req| {
            threads.lock().unwrap().insert(std::thread::current().id());
            Class::Control
        }
    });
    let (gate, mut control) = gate();
    let server = serve(admission, {
        let gate = data(gate);
        move |cfg| {
            cfg.app_data(gate.clone())
                .route("/held", web::get().to(held));
        }
    });

    let (done_tx, mut done) = mpsc::unbounded_channel();
    for _ in 0..5 {
        let (url, done_tx) = (server.url("/held"), done_tx.clone());
        tokio::spawn(async move {
            // A client of its own: a connection of its own.
            let res = client().get(url).send().await.unwrap();
            let status = res.status();
            let content_type = res.headers().get("content-type").cloned();
            let body = res.text().await.unwrap();
            done_tx.send((status, content_type, body)).unwrap();
        });
    }

    // Two handlers are held at the gate; the other three are refused at
    // once, while the two still hold their leases.
    control.arrivals(2).await;
    for _ in 0..3 {
        let (status, content_type, body) = within("a refusal", done.recv()).await.unwrap();
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "refused, got {body}"
        );
        assert_eq!(content_type.unwrap(), "application/problem+json");
        assert!(body.contains("ADMISSION_SATURATED"));
    }
    let stats = pools.pool(Class::Control).stats();
    assert_eq!(stats.in_use, 2, "the two held requests hold both slots");
    assert_eq!(stats.admitted, 2, "exactly two admitted");
    assert_eq!(stats.refused, 3, "exactly three refused");
    assert!(
        !control.more_arrived(),
        "no refused request reached its handler"
    );
    assert_eq!(
        threads.lock().unwrap().len(),
        2,
        "the connections were spread over both actix-web workers"
    );

    control.open();
    for _ in 0..2 {
        let (status, _, body) = within("a held response", done.recv()).await.unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "done"));
    }
    let stats = pools.pool(Class::Control).stats();
    assert_eq!(
        stats.in_use, 0,
        "every lease is back once the bodies are read"
    );
    assert_eq!(stats.released, 2);
    server.stop().await;
}
