//! The `exporter` binary's contract, checked over HTTP against the real
//! binary on a free port: routes, refusals under saturation, and the SIGTERM
//! path with walks blocked on their worker threads.

mod support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use support::{Service, client};

/// A walk that never ends while a test runs.
const BLOCKED: &str = "600000";

/// Holds both worker slots with walks that never end: scrapes with a short
/// client timeout until one is refused. The scrapes that timed out left
/// orphaned walks that keep their slots.
async fn saturate(exporter: &Service) {
    let impatient = client(Duration::from_millis(300));
    for _ in 0..20 {
        match impatient.get(exporter.url("/metrics")).send().await {
            Ok(response) if response.status() == StatusCode::SERVICE_UNAVAILABLE => return,
            Ok(response) => panic!("a blocked walk cannot answer {}", response.status()),
            Err(err) => assert!(err.is_timeout(), "an admitted scrape waits: {err}"),
        }
    }
    panic!("two blocked walks saturate two workers");
}

#[tokio::test]
async fn healthz_answers_200() {
    let exporter = Service::exporter(&["--series", "100"]).await;
    let response = client(Duration::from_secs(5))
        .get(exporter.url("/healthz"))
        .send()
        .await
        .expect("healthz answers");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "ok\n");
}

#[tokio::test]
async fn metrics_serve_the_registry_and_admission_metrics() {
    let exporter = Service::exporter(&["--series", "100", "--workers", "3"]).await;
    let response = client(Duration::from_secs(10))
        .get(exporter.url("/metrics"))
        .send()
        .await
        .expect("metrics answer");
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()[CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "exposition content type, got {content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(
        text.contains(r#"admission_slots_capacity{pool="registry"} 3"#),
        "admission's own metrics are in the exposition:\n{text}"
    );
    assert!(
        text.contains("admission_refused_total"),
        "refusal counter present"
    );
    assert!(
        text.contains(r#"exporter_demo_events_total{series="series-99"} 99"#),
        "every demo series is exposed"
    );
    assert!(text.ends_with("# EOF\n"), "a whole exposition");
}

#[tokio::test]
async fn status_page_is_html_with_registry_statistics() {
    let exporter = Service::exporter(&["--series", "100"]).await;
    let response = client(Duration::from_secs(10))
        .get(exporter.url("/"))
        .send()
        .await
        .expect("status page answers");
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()[CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/html"), "got {content_type}");
    let html = response.text().await.unwrap();
    assert!(
        html.contains("<th>series</th>"),
        "series count shown:\n{html}"
    );
    assert!(html.contains("<th>bytes</th>"), "byte count shown");
}

#[tokio::test]
async fn saturated_walks_get_503_with_retry_after_while_healthz_stays_200() {
    let exporter = Service::exporter(&["--series", "100", "--walk-delay-ms", BLOCKED]).await;
    saturate(&exporter).await;

    let scraper = client(Duration::from_secs(5));
    let storm: Vec<_> = (0..16)
        .map(|i| {
            let path = if i % 4 == 0 { "/" } else { "/metrics" };
            let request = scraper.get(exporter.url(path)).send();
            tokio::spawn(async move {
                let started = Instant::now();
                (request.await, started.elapsed())
            })
        })
        .collect();
    for scrape in storm {
        let (response, took) = scrape.await.unwrap();
        let response = response.expect("a refusal is an answer, not a hang");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            took < Duration::from_secs(2),
            "a refusal is fast, took {took:?}"
        );
        let retry_after: u64 = response.headers()[RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .expect("Retry-After is whole seconds");
        assert!(retry_after >= 1, "Retry-After is at least 1 s");
        assert_eq!(
            response.headers()[CONTENT_TYPE],
            "application/problem+json",
            "refusals are problem documents"
        );
        assert!(
            response
                .text()
                .await
                .unwrap()
                .contains("ADMISSION_SATURATED")
        );
    }

    let health = client(Duration::from_secs(2))
        .get(exporter.url("/healthz"))
        .send()
        .await
        .expect("healthz answers while every walk is blocked");
    assert_eq!(health.status(), StatusCode::OK);
}

#[tokio::test]
async fn sigterm_with_blocked_walks_exits_0_within_the_deadline_and_logs_abandoned() {
    let deadline = Duration::from_millis(1500);
    let exporter = Service::exporter(&[
        "--series",
        "100",
        "--walk-delay-ms",
        BLOCKED,
        "--shutdown-deadline-ms",
        "1500",
    ])
    .await;
    // Two scrapers stay connected, waiting on walks that never end.
    let patient = client(Duration::from_secs(600));
    let connected: Vec<_> = (0..2)
        .map(|_| tokio::spawn(patient.get(exporter.url("/metrics")).send()))
        .collect();
    saturate(&exporter).await;
    let health = client(Duration::from_secs(2))
        .get(exporter.url("/healthz"))
        .send()
        .await
        .expect("healthz answers");
    assert_eq!(health.status(), StatusCode::OK);

    let signalled = Instant::now();
    exporter.terminate();
    let (status, output) = exporter
        .exit_within(deadline + Duration::from_millis(1500))
        .await;
    let took = signalled.elapsed();
    assert!(
        status.success(),
        "exit 0 after SIGTERM, got {status}:\n{output}"
    );
    assert!(
        took <= deadline + Duration::from_millis(1500),
        "exits within the deadline plus 1.5 s, took {took:?}"
    );
    assert!(
        output.contains("abandoned"),
        "the log says the blocked pool was abandoned:\n{output}"
    );
    assert!(
        output.lines().any(|line| line.contains("abandoned:")
            && line.contains(r#"pool="registry" running="#)),
        "the log says what was still running:\n{output}"
    );
    for scrape in connected {
        scrape.abort();
    }
}

#[tokio::test]
async fn cardinality_walk_runs_in_the_background() {
    let exporter = Service::exporter(&["--series", "100", "--cardinality-interval-ms", "50"]).await;
    let scraper = client(Duration::from_secs(10));
    // Bounded polling: the loop's first walk comes after one interval.
    for _ in 0..100 {
        let text = scraper
            .get(exporter.url("/metrics"))
            .send()
            .await
            .expect("metrics answer")
            .text()
            .await
            .unwrap();
        let counted = text
            .lines()
            .find_map(|l| l.strip_prefix("exporter_cardinality_series "))
            .expect("the cardinality gauge is exported");
        if counted != "0" {
            let series: u64 = counted.parse().expect("a count");
            assert!(
                series >= 100,
                "the walk counted every demo series: {series}"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the background cardinality walk ran within 5 s");
}

#[tokio::test]
async fn sigterm_when_idle_drains_and_exits_0() {
    let exporter = Service::exporter(&["--series", "100"]).await;
    let response = client(Duration::from_secs(10))
        .get(exporter.url("/metrics"))
        .send()
        .await
        .expect("metrics answer");
    assert_eq!(response.status(), StatusCode::OK);
    exporter.terminate();
    let (status, output) = exporter.exit_within(Duration::from_secs(7)).await;
    assert!(
        status.success(),
        "exit 0 after SIGTERM, got {status}:\n{output}"
    );
    assert!(
        output.contains("drained"),
        "the log says drained:\n{output}"
    );
    assert!(
        !output.contains("abandoned"),
        "nothing was abandoned:\n{output}"
    );
}

#[tokio::test]
async fn unknown_flag_is_a_usage_error() {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_exporter"))
        .arg("--no-such-flag")
        .output()
        .await
        .expect("the exporter binary runs");
    assert_eq!(output.status.code(), Some(2), "usage errors exit 2");
    assert!(String::from_utf8_lossy(&output.stderr).contains("Usage: exporter"));
}

/// The value of the first series in `text` whose line starts with `series`.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .unwrap_or_else(|| panic!("`{series}` is exported:\n{text}"))
        .trim()
        .parse()
        .expect("a whole number")
}

#[tokio::test]
async fn coalescing_serves_concurrent_scrapes_from_shared_walks() {
    let exporter = Service::exporter(&[
        "--series",
        "100",
        "--coalesce-ms",
        "5000",
        "--walk-delay-ms",
        "300",
    ])
    .await;
    // 8 scrapes of both walk routes at once, on 2 workers: without
    // coalescing most would be refused.
    let scraper = client(Duration::from_secs(10));
    let storm: Vec<_> = (0..8)
        .map(|i| {
            let path = if i % 4 == 0 { "/" } else { "/metrics" };
            tokio::spawn(scraper.get(exporter.url(path)).send())
        })
        .collect();
    for scrape in storm {
        let response = scrape.await.unwrap().expect("every scrape is answered");
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "a scrape that cannot get a slot shares a running walk instead"
        );
        assert!(!response.text().await.unwrap().is_empty());
    }

    let text = scraper
        .get(exporter.url("/metrics"))
        .send()
        .await
        .expect("metrics answer")
        .text()
        .await
        .unwrap();
    let coalesced = sample(&text, r#"admission_coalesced_total{pool="registry"} "#);
    assert!(
        coalesced >= 1,
        "admission counts the scrapes that shared a walk:\n{text}"
    );
    let walks = sample(&text, "exporter_walks_started_total ");
    assert!(
        walks < 9,
        "9 scrapes (this one included) cost fewer than 9 walks, got {walks}"
    );
}

/// The exporter run with `args` exits 2 with `message` on stderr.
async fn usage_error(args: &[&str], message: &str) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_exporter"))
        .args(args)
        .output()
        .await
        .expect("the exporter binary runs");
    assert_eq!(output.status.code(), Some(2), "usage errors exit 2");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(message), "{stderr}");
}

#[tokio::test]
async fn coalescing_without_the_admission_gate_is_a_usage_error() {
    usage_error(
        &["--gate", "queue", "--coalesce-ms", "100"],
        "`--coalesce-ms` needs `--gate admission`",
    )
    .await;
}

/// Finding 8 of issue 26: the load header rode on every response (`404`
/// and `/healthz` included). Now only the routes a balancer sees carry it.
#[tokio::test]
async fn the_load_header_rides_only_on_the_routes_a_balancer_sees() {
    let exporter = Service::exporter(&["--series", "100"]).await;
    let client = client(Duration::from_secs(10));
    for (path, carried) in [
        ("/metrics", true),
        ("/", true),
        ("/readyz", true),
        ("/healthz", false),
        ("/no/such/route", false),
        ("/metrics/x", false),
    ] {
        let response = client
            .get(exporter.url(path))
            .send()
            .await
            .unwrap_or_else(|err| panic!("GET {path}: {err}"));
        assert_eq!(
            response.headers().contains_key("endpoint-load-metrics"),
            carried,
            "GET {path} ({})",
            response.status()
        );
    }
}

/// Finding 7 of issue 26: at SIGTERM with a client that never reads its
/// scrape, the exporter logged "connections still waiting on walks"
/// although the pool had drained. Now the unread response is dropped at
/// the signal (its connection has no request in flight), a cut names its
/// real cause, and the exit comes within the deadline.
#[tokio::test]
async fn the_shutdown_log_names_unread_responses_as_the_cause_of_a_wait() {
    use tokio::io::AsyncWriteExt;
    let exporter = Service::exporter(&[
        "--series",
        "200000",
        "--shutdown-deadline-ms",
        "1000",
        "--cardinality-interval-ms",
        "600000",
    ])
    .await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut reader = socket.connect(exporter.addr).await.unwrap();
    reader
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The head has arrived (peeked, not read): the walk ended, the body
    // sits unread.
    let mut head = [0_u8; 12];
    tokio::time::timeout(Duration::from_secs(60), reader.peek(&mut head))
        .await
        .expect("the scrape's head arrives")
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    exporter.terminate();
    let (status, logs) = exporter.exit_within(Duration::from_secs(10)).await;
    assert!(status.success(), "{status}:\n{logs}");
    // The unread response's connection is closed at the signal (it has no
    // request in flight) or, if still open at the deadline, named for
    // what it is; never blamed on walks, which had ended.
    assert!(!logs.contains("waiting on walks"), "{logs}");
    if logs.contains("still open at the deadline") {
        assert!(
            logs.contains("responses not read by their clients"),
            "the cause is named:\n{logs}"
        );
    }
    assert!(
        logs.contains("shutdown drained"),
        "the pool drained:\n{logs}"
    );
    drop(reader);
}

/// An exporter with one worker whose walks take 300 ms, and `flags`: three
/// scrapes at once see one walk and two refusals (when enforcing).
async fn one_slow_worker(flags: &[&str]) -> Service {
    let base = [
        "--series",
        "100",
        "--workers",
        "1",
        "--walk-delay-ms",
        "300",
    ];
    Service::exporter(&[&base[..], flags].concat()).await
}

#[tokio::test]
async fn the_admission_trace_holds_decisions_and_nothing_a_client_sent() {
    let exporter = one_slow_worker(&["--trace-entries", "64"]).await;
    let http = client(Duration::from_secs(5));
    let scrape = || {
        http.get(exporter.url("/metrics?q=<script>secret-path-42</script>"))
            .header("x-admission-criticality", "<b>secret-header-42</b>")
            .header("x-tenant", "secret-tenant-42")
            .send()
    };
    let (a, b, c) = tokio::join!(scrape(), scrape(), scrape());
    let statuses: Vec<StatusCode> = [a, b, c]
        .into_iter()
        .map(|answer| answer.expect("answered").status())
        .collect();
    assert!(statuses.contains(&StatusCode::OK), "{statuses:?}");
    assert!(
        statuses.contains(&StatusCode::SERVICE_UNAVAILABLE),
        "one worker, three at once: {statuses:?}"
    );

    let response = http
        .get(exporter.url("/debug/admission/trace"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/x-ndjson");
    let text = response.text().await.unwrap();
    for leaked in ["secret", "script", "<", "tenant"] {
        assert!(!text.contains(leaked), "{leaked:?} in the trace:\n{text}");
    }
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON lines"))
        .collect();
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|line| line["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes.len(), 3, "{text}");
    assert_eq!(
        outcomes.iter().filter(|&&o| o == "refused").count(),
        statuses
            .iter()
            .filter(|&&s| s == StatusCode::SERVICE_UNAVAILABLE)
            .count()
    );
    assert!(
        lines.iter().all(|line| line["pool"] == "registry"),
        "{text}"
    );

    let untraced = Service::exporter(&["--series", "100"]).await;
    let response = http
        .get(untraced.url("/debug/admission/trace"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::NOT_FOUND,
        "no trace kept by default"
    );
}

#[tokio::test]
async fn in_shadow_mode_every_scrape_is_served_and_the_refusals_it_would_have_made_are_counted() {
    let exporter = one_slow_worker(&["--shadow"]).await;
    let http = client(Duration::from_secs(5));
    let scrape = || http.get(exporter.url("/metrics")).send();
    let (a, b, c) = tokio::join!(scrape(), scrape(), scrape());
    for answer in [a, b, c] {
        assert_eq!(answer.expect("answered").status(), StatusCode::OK);
    }
    let text = scrape().await.unwrap().text().await.unwrap();
    let would = text
        .lines()
        .find(|line| {
            line.starts_with("admission_would_refuse_total{")
                && line.contains("code=\"ADMISSION_SATURATED\"")
                && line.contains("criticality=\"default\"")
        })
        .unwrap_or_else(|| panic!("the would-refuse family:\n{text}"));
    let count: f64 = would.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 2.0, "one worker, three at once: {would}");

    usage_error(
        &["--gate", "tower", "--shadow"],
        "`--shadow` needs `--gate admission`",
    )
    .await;
}
