//! What the example services tell a balancer, over real HTTP and real agent
//! checks against the real binaries: `/readyz` turns `503` at SIGTERM while
//! `/healthz` stays `200` and an in-flight request completes during the
//! drain delay; saturation leaves `/readyz` at `200`; the ORCA load header
//! moves with load in the axum exporter and the actix workflow; the agent
//! says `drain` from the signal on.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use support::Service;

const BOUND: Duration = Duration::from_secs(20);

/// A loopback address nobody listens on right now, for `--agent-check`.
fn free_addr() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    probe.local_addr().expect("its address")
}

/// One agent check, as HAProxy makes it.
async fn agent_says(addr: SocketAddr) -> String {
    tokio::time::timeout(BOUND, async {
        let mut stream = TcpStream::connect(addr).await.expect("the agent accepts");
        let mut line = String::new();
        stream.read_to_string(&mut line).await.expect("a line");
        line
    })
    .await
    .expect("the agent answers in time")
}

/// Asks the agent until it says `want` (the state it reports changes when
/// another request's walk takes or frees its slot).
async fn until_agent_says(addr: SocketAddr, want: &str) {
    tokio::time::timeout(BOUND, async {
        while agent_says(addr).await != want {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the agent comes to say {want:?}"));
}

async fn get(client: &Client, service: &Service, path: &str) -> reqwest::Response {
    client
        .get(service.url(path))
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {path} answers: {err}"))
}

/// The `application_utilization` the load header reports.
fn utilization(response: &reqwest::Response) -> String {
    let value = response
        .headers()
        .get("endpoint-load-metrics")
        .expect("every response carries the load header")
        .to_str()
        .expect("ASCII");
    assert!(value.starts_with("TEXT "), "ORCA's TEXT form: {value}");
    value
        .split(',')
        .find_map(|pair| {
            pair.trim_start_matches("TEXT ")
                .strip_prefix("application_utilization:")
        })
        .unwrap_or_else(|| panic!("application_utilization in {value}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_turns_not_ready_at_sigterm_and_serves_through_the_drain_delay() {
    let agent = free_addr();
    let agent_arg = agent.to_string();
    let mut exporter = Service::exporter(&[
        "--workers",
        "1",
        "--series",
        "10",
        "--walk-delay-ms",
        "1500",
        "--drain-delay-ms",
        "6000",
        "--shutdown-deadline-ms",
        "5000",
        "--agent-check",
        &agent_arg,
    ])
    .await;
    let client = support::client(BOUND);

    // Idle: ready, live, zero load, full weight.
    let ready = get(&client, &exporter, "/readyz").await;
    assert_eq!(ready.status(), StatusCode::OK);
    assert_eq!(utilization(&ready), "0.000");
    assert_eq!(
        get(&client, &exporter, "/healthz").await.status(),
        StatusCode::OK
    );
    assert_eq!(agent_says(agent).await, "up ready 100%\n");

    // One scrape holds the only walk slot.
    let in_flight = tokio::spawn({
        let client = client.clone();
        let url = exporter.url("/metrics");
        async move { client.get(url).send().await.expect("the scrape answers") }
    });
    until_agent_says(agent, "up ready 1%\n").await;

    // Saturated: a second scrape is refused, and says why in its load
    // header, but the exporter stays ready.
    let refused = get(&client, &exporter, "/metrics").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(utilization(&refused), "1.000");
    let ready = get(&client, &exporter, "/readyz").await;
    assert_eq!(
        ready.status(),
        StatusCode::OK,
        "saturation never flips readiness"
    );

    // SIGTERM while the scrape is in flight.
    exporter.terminate();
    tokio::time::timeout(BOUND, async {
        while get(&client, &exporter, "/readyz").await.status() != StatusCode::SERVICE_UNAVAILABLE {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("/readyz turns 503 after SIGTERM");
    assert_eq!(agent_says(agent).await, "drain\n");
    assert_eq!(
        get(&client, &exporter, "/healthz").await.status(),
        StatusCode::OK,
        "liveness stays up through the drain delay"
    );

    // The in-flight scrape completes during the delay, and a late-routed
    // one is still served: the listener is open until the delay ends.
    let scraped = tokio::time::timeout(BOUND, in_flight)
        .await
        .expect("the in-flight scrape ends in time")
        .expect("its task did not panic");
    assert_eq!(scraped.status(), StatusCode::OK);
    exporter.assert_alive("the in-flight scrape completed inside the drain delay");
    let late = get(&client, &exporter, "/metrics").await;
    assert_eq!(
        late.status(),
        StatusCode::OK,
        "a late-routed scrape is served"
    );
    assert_eq!(agent_says(agent).await, "drain\n", "never up again");
    assert_eq!(
        get(&client, &exporter, "/readyz").await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    exporter.assert_alive("the late scrape was served inside the drain delay");

    let (status, logs) = exporter.exit_within(BOUND).await;
    assert!(
        status.success(),
        "exits 0 after the delay and the drain:\n{logs}"
    );
    assert!(logs.contains("readiness withdrawn"), "{logs}");
}

/// `GET /status`, parsed, with its load header's utilization.
async fn status(client: &Client, workflow: &Service) -> (Value, String) {
    let response = get(client, workflow, "/status").await;
    assert_eq!(response.status(), StatusCode::OK);
    let utilization = utilization(&response);
    let body = serde_json::from_str(&response.text().await.unwrap()).expect("JSON");
    (body, utilization)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_reports_its_load_and_turns_not_ready_at_sigterm() {
    let agent = free_addr();
    let agent_arg = agent.to_string();
    let workflow = Service::workflow(&[
        "--work-slots",
        "2",
        "--drain-delay-ms",
        "3000",
        "--agent-check",
        &agent_arg,
    ])
    .await;
    let client = support::client(BOUND);

    let (_, idle) = status(&client, &workflow).await;
    assert_eq!(idle, "0.000");
    assert_eq!(agent_says(agent).await, "up ready 100%\n");

    // One mutation holds one of the two work slots for 4 s.
    let in_flight = tokio::spawn({
        let client = client.clone();
        let url = workflow.url("/operations?work_ms=4000");
        async move { client.post(url).send().await.expect("the mutation answers") }
    });
    let loaded = tokio::time::timeout(BOUND, async {
        loop {
            let (body, utilization) = status(&client, &workflow).await;
            if body["pools"]["work"]["in_use"] == 1 {
                return utilization;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the mutation takes its lease");
    assert_eq!(loaded, "0.500", "one of two work slots held");
    until_agent_says(agent, "up ready 50%\n").await;
    assert_eq!(
        get(&client, &workflow, "/readyz").await.status(),
        StatusCode::OK
    );

    workflow.terminate();
    tokio::time::timeout(BOUND, async {
        while get(&client, &workflow, "/readyz").await.status() != StatusCode::SERVICE_UNAVAILABLE {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("/readyz turns 503 after SIGTERM");
    assert_eq!(agent_says(agent).await, "drain\n");
    assert_eq!(
        get(&client, &workflow, "/healthz").await.status(),
        StatusCode::OK
    );
    let created = tokio::time::timeout(BOUND, in_flight)
        .await
        .unwrap()
        .unwrap();
    assert!(
        created.status().is_success(),
        "the in-flight mutation completes: {}",
        created.status()
    );

    let (status, logs) = workflow.exit_within(BOUND).await;
    assert!(status.success(), "{logs}");
}
