//! The open-loop generator's contract, against loopback servers written
//! here: arrivals do not wait for answers, the criticality mix sends the
//! right headers in the right shares, and goodput counts only `2xx`
//! answers that ended within the client's timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use admission_lab::storm::Target;
use admission_lab::storm::open_loop::{
    BUDGET_HEADER, CRITICALITY_HEADER, Criticality, Mix, OpenLoop,
};
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Five standard deviations of a Poisson count with mean `mean`.
fn five_sigma(mean: f64) -> f64 {
    5.0 * mean.sqrt()
}

/// A server that accepts every connection and never reads or answers;
/// it notes when each connection arrived and keeps them open until
/// dropped.
async fn silent_server() -> (
    Target,
    Arc<Mutex<Vec<Instant>>>,
    tokio::task::JoinHandle<()>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = Target::local(listener.local_addr().unwrap(), "/walk");
    let accepted: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let arrivals = Arc::clone(&accepted);
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            arrivals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Instant::now());
            held.push(socket);
        }
    });
    (target, accepted, server)
}

fn count(accepted: &Mutex<Vec<Instant>>) -> u64 {
    accepted
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len() as u64
}

async fn serve(router: Router) -> (Target, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = Target::local(listener.local_addr().unwrap(), "/walk");
    let server = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    (target, server)
}

#[tokio::test]
async fn arrivals_keep_their_rate_when_the_server_never_answers() {
    let (target, accepted, server) = silent_server().await;
    let mut load = OpenLoop::new(target, 300.0);
    load.duration = Duration::from_secs(1);
    load.timeout = Duration::from_millis(500);
    load.seed = 7;
    let started = Instant::now();
    let report = tokio::time::timeout(Duration::from_secs(30), load.run())
        .await
        .expect("the run ends by itself");
    let took = started.elapsed();
    let total = report.total();

    let mean = 300.0;
    assert!(
        (total.offered as f64 - mean).abs() < five_sigma(mean),
        "about 300 arrivals in 1 s at 300/s, got {}",
        total.offered
    );
    assert_eq!(total.dropped, 0, "far below the outstanding bound");
    assert_eq!(total.timed_out, total.sent(), "nothing was answered");
    assert!(total.good.is_empty() && total.refused.is_empty());
    assert!(
        took < Duration::from_secs(5),
        "duration + timeout, give or take, not one timeout per request: {took:?}"
    );
    // Every request reached the server as a connection of its own.
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&accepted) < total.sent() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(count(&accepted), total.sent());
    // And they came on schedule, not after the previous one gave up: in
    // the first 450 ms (before any 500 ms timeout) about 135 arrived. A
    // closed-loop client would have sent one and waited.
    let early = accepted
        .lock()
        .unwrap()
        .iter()
        .filter(|at| at.duration_since(started) < Duration::from_millis(450))
        .count();
    assert!(early >= 60, "{early} connections in the first 450 ms");
    assert!(
        report.max_lag < Duration::from_millis(400),
        "no arrival waited for an answer: lag {:?}",
        report.max_lag
    );
    server.abort();
}

#[tokio::test]
async fn arrivals_past_the_outstanding_bound_are_counted_as_dropped() {
    let (target, accepted, server) = silent_server().await;
    let mut load = OpenLoop::new(target, 400.0);
    load.duration = Duration::from_millis(500);
    load.timeout = Duration::from_secs(2);
    load.max_outstanding = 10;
    let report = tokio::time::timeout(Duration::from_secs(30), load.run())
        .await
        .expect("the run ends by itself");
    let total = report.total();
    assert_eq!(
        total.sent(),
        10,
        "ten wait at once, none ends in the window"
    );
    assert_eq!(total.dropped, total.offered - 10);
    assert!(
        total.offered > 100,
        "the schedule went on: {}",
        total.offered
    );
    assert_eq!(total.timed_out, 10);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&accepted) < 10 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(count(&accepted), 10);
    server.abort();
}

#[tokio::test]
async fn the_mix_sends_each_level_in_its_share_and_the_budget_on_every_request() {
    type Seen = Arc<Mutex<HashMap<String, u64>>>;
    let seen: Seen = Arc::default();
    let budgets: Seen = Arc::default();
    let (s, b) = (Arc::clone(&seen), Arc::clone(&budgets));
    let router = Router::new().route(
        "/walk",
        get(move |headers: HeaderMap| {
            let value = |name: &str| {
                headers
                    .get(name)
                    .map_or("(none)".to_owned(), |v| v.to_str().unwrap().to_owned())
            };
            let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
            *s.entry(value(CRITICALITY_HEADER)).or_default() += 1;
            let mut b = b.lock().unwrap_or_else(PoisonError::into_inner);
            *b.entry(value(BUDGET_HEADER)).or_default() += 1;
            async { "ok" }
        }),
    );
    let (target, server) = serve(router).await;
    let mut load = OpenLoop::new(target, 600.0);
    load.duration = Duration::from_secs(1);
    load.timeout = Duration::from_secs(2);
    load.mix = "critical=0.2,default=0.3,sheddable=0.5".parse().unwrap();
    load.budget = Some(Duration::from_millis(150));
    load.seed = 11;
    let report = tokio::time::timeout(Duration::from_secs(30), load.run())
        .await
        .expect("the run ends by itself");
    let total = report.total();
    assert_eq!(
        total.good.len() as u64,
        total.sent(),
        "every request answered"
    );

    let seen = seen.lock().unwrap().clone();
    for level in Criticality::ALL {
        let sent = report.level(level).sent();
        assert_eq!(
            seen.get(level.as_str()).copied().unwrap_or(0),
            sent,
            "the server saw `{level}` exactly as often as it was sent: {seen:?}"
        );
        // Each level's count is binomial around its share.
        let expected = total.sent() as f64 * load.mix.share(level);
        assert!(
            (sent as f64 - expected).abs() < five_sigma(expected),
            "`{level}`: {sent} sent, about {expected:.0} expected"
        );
    }
    assert_eq!(seen.len(), 3, "no request without the header: {seen:?}");
    // The budget on every request, in whole milliseconds: what is left of
    // 150 ms once the connection is open (loopback: a few ms at most).
    let budgets = budgets.lock().unwrap().clone();
    assert_eq!(budgets.values().sum::<u64>(), total.sent(), "{budgets:?}");
    for value in budgets.keys() {
        let ms: u64 = value
            .parse()
            .unwrap_or_else(|_| panic!("`{value}` is whole ms"));
        assert!((50..=150).contains(&ms), "{ms} ms left of 150: {budgets:?}");
    }

    // Without a mix, no criticality header at all.
    let plain_seen = Arc::new(AtomicU64::new(0));
    let p = Arc::clone(&plain_seen);
    let router = Router::new().route(
        "/walk",
        get(move |headers: HeaderMap| {
            if headers.contains_key(CRITICALITY_HEADER) || headers.contains_key(BUDGET_HEADER) {
                p.fetch_add(1, SeqCst);
            }
            async { "ok" }
        }),
    );
    let (target, plain_server) = serve(router).await;
    let mut plain = OpenLoop::new(target, 200.0);
    plain.duration = Duration::from_millis(300);
    plain.timeout = Duration::from_secs(2);
    assert_eq!(plain.mix, Mix::default());
    let plain_report = plain.run().await;
    assert!(plain_report.level(Criticality::Default).sent() > 0);
    assert_eq!(plain_seen.load(SeqCst), 0, "no header without a mix");
    server.abort();
    plain_server.abort();
}

#[tokio::test]
async fn goodput_counts_only_2xx_answers_within_the_timeout() {
    // critical: 200 at once; default: 200 after the client's timeout;
    // sheddable: 503 at once. A 404 for a request without the header.
    let router = Router::new().route(
        "/walk",
        get(|headers: HeaderMap| async move {
            match headers
                .get(CRITICALITY_HEADER)
                .map(axum::http::HeaderValue::as_bytes)
            {
                Some(b"critical") => StatusCode::OK,
                Some(b"default") => {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    StatusCode::OK
                }
                Some(b"sheddable") => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::NOT_FOUND,
            }
        }),
    );
    let (target, server) = serve(router).await;
    let mut load = OpenLoop::new(target.clone(), 300.0);
    load.duration = Duration::from_secs(1);
    load.timeout = Duration::from_millis(100);
    load.mix = "critical=1,default=1,sheddable=1".parse().unwrap();
    let report = tokio::time::timeout(Duration::from_secs(30), load.run())
        .await
        .expect("the run ends by itself");

    let critical = report.level(Criticality::Critical);
    assert!(critical.sent() > 0);
    assert_eq!(critical.good.len() as u64, critical.sent());
    let goodput = critical.goodput(report.window);
    assert!(
        (goodput - critical.sent() as f64).abs() < 1e-9,
        "per second of a 1 s window"
    );
    assert!(critical.good_p(99.0).unwrap() < Duration::from_millis(100));

    let late = report.level(Criticality::Default);
    assert!(late.sent() > 0);
    assert!(
        late.good.is_empty(),
        "a 200 after the timeout is no goodput"
    );
    assert_eq!(late.timed_out, late.sent());
    assert_eq!(late.goodput(report.window), 0.0);

    let refused = report.level(Criticality::Sheddable);
    assert!(refused.sent() > 0);
    assert!(refused.good.is_empty());
    assert_eq!(refused.refused.len() as u64, refused.sent());

    let total = report.total();
    assert_eq!(
        total.good.len(),
        critical.good.len(),
        "only critical counts"
    );
    assert_eq!(total.sent(), critical.sent() + late.sent() + refused.sent());

    // Another status within the timeout is an error, not goodput.
    let mut plain = OpenLoop::new(target, 100.0);
    plain.duration = Duration::from_millis(300);
    let report = plain.run().await;
    let total = report.total();
    assert!(total.sent() > 0);
    assert_eq!(total.errors, total.sent(), "404 answers are errors");
    assert!(total.good.is_empty());
    server.abort();
}

#[tokio::test]
async fn the_overload_command_prints_its_tables_and_goals_and_writes_the_svg() {
    let svg = std::env::temp_dir().join(format!("open-loop-overload-{}.svg", std::process::id()));
    let output = tokio::time::timeout(
        Duration::from_secs(110),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_storm"))
            .args([
                "--overload",
                "--point-ms",
                "150",
                "--series",
                "200",
                "--no-pin",
                "--svg",
            ])
            .arg(&svg)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the sweep ends by itself")
    .expect("the storm binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit 0:\n{stderr}");
    for needle in [
        "| offered | gate | goodput/s |",
        "(10x) | admission queue |",
        "| tower limit+shed |",
        "critical availability",
        "orphaned slot time",
        "| goal | measured | met |",
        "never more than N = 2 walks at once",
    ] {
        assert!(stdout.contains(needle), "`{needle}` in:\n{stdout}");
    }
    let text = std::fs::read_to_string(&svg).expect("the SVG was written");
    let _ = std::fs::remove_file(&svg);
    assert!(text.starts_with("<svg"), "an SVG document");
    assert!(text.contains("admission queue") && text.contains("goodput"));
}
