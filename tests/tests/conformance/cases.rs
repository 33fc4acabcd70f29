//! Each conformance case, written once and run against every adapter.
//!
//! Workers are held by the test (a held walk blocks its worker thread on a
//! std channel until the test releases it), handlers by gates, and bodies by
//! feeds: nothing waits on a timer. Bounded polling on `pool.stats()` is
//! used only where a slot comes back on a server's thread with nothing to
//! signal it.

use std::time::{Duration, Instant};

use admission_core::{Admission, Class, Lease, Pool, RequestPools};
use admission_http::body::ProgressTimeout;
use admission_http::{BUDGET_HEADER, CRITICALITY_HEADER, FLOW_HEADER, Trust};
use admission_http::{HttpRefusalStatus, PROBLEM_JSON, Problem, WORK_PANICKED};
use admission_tonic::status::{Hint, pushback};
use bytes::Bytes;
use reqwest::StatusCode;
use tokio::sync::{mpsc, oneshot};

use super::client::{Answer, Headers, Reply, eventually, reply, within};
use super::endpoints::{
    Endpoint, Feeds, Gate, HTML, HandlerEnd, METRICS, READ, Release, Scrapes, Walk, Walks,
};
use super::harness::{Adapter, BYPASSED, Config, OWN_PAGE, Routes, Server, TENANT_HEADER};

/// The registry pool's name, as refusals name it.
const REGISTRY: &str = "registry";
/// A fail-fast refusal must arrive well within this, however long the
/// running walks take.
const FAIL_FAST: Duration = Duration::from_secs(2);

fn registry_pool(capacity: usize) -> Pool {
    Pool::new(REGISTRY, capacity).expect("a valid registry pool")
}

/// Request pools roomy enough that only the registry pool can refuse.
fn roomy_requests() -> RequestPools {
    RequestPools::new(8, 8).expect("valid request pools")
}

/// The code of a refusal by a full pool.
const SATURATED: &str = "ADMISSION_SATURATED";
/// The code of a refusal by a queue whose wait ran out.
const WAIT_TIMEOUT: &str = "ADMISSION_WAIT_TIMEOUT";

/// A refusal naming the code `ADMISSION_SATURATED` and `pool` (see
/// [`assert_refused_as`]).
#[track_caller]
fn assert_refused(answer: &Reply, pool: &str) {
    assert_refused_as(answer, pool, SATURATED);
}

/// A refusal naming `code` and `pool`, with a retry hint. Over HTTP:
/// `503`, `Retry-After` (whole seconds, at least 1) and the same hint in
/// `x-admission-retry-after-ms` (rounded up, it gives `Retry-After`), a
/// problem document that must not be cached. Over gRPC: `UNAVAILABLE`, the
/// code and the pool in the message, `grpc-retry-pushback-ms` (the
/// millisecond hint, at least 1).
#[track_caller]
fn assert_refused_as(answer: &Reply, pool: &str, code: &str) {
    match answer {
        Reply::Http(answer) => assert_http_refused(answer, pool, code),
        Reply::Grpc(answer) => {
            let status = answer.as_ref().expect_err("a refusal is an error status");
            assert_eq!(
                status.code(),
                tonic::Code::Unavailable,
                "a refusal is UNAVAILABLE: {status:?}"
            );
            let named = format!("{code}: pool `{pool}` refused the call");
            assert!(
                status.message().starts_with(&named),
                "the code and the refusing pool are named: {:?}",
                status.message()
            );
            match pushback(status.metadata()) {
                Hint::After(wait) => assert!(
                    wait.as_millis() >= 1,
                    "the pushback is the millisecond retry hint, at least 1 ms: {wait:?}"
                ),
                other => panic!("a refusal sends `grpc-retry-pushback-ms`, got {other:?}"),
            }
        }
    }
}

#[track_caller]
fn assert_http_refused(answer: &Answer, pool: &str, code: &str) {
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "a refusal is a 503"
    );
    let retry_after: u32 = answer
        .header("retry-after")
        .parse()
        .expect("`retry-after` is whole seconds");
    assert!(retry_after >= 1, "`retry-after` is at least 1 s");
    let millis: u32 = answer
        .header("x-admission-retry-after-ms")
        .parse()
        .expect("`x-admission-retry-after-ms` is whole milliseconds");
    assert!(
        millis >= 1 && millis.div_ceil(1000).max(1) == retry_after,
        "the millisecond hint ({millis}) rounds up to `retry-after` ({retry_after})"
    );
    assert_eq!(
        answer.header("content-type"),
        PROBLEM_JSON,
        "a refusal is a problem document"
    );
    assert_eq!(
        answer.header("cache-control"),
        "no-store",
        "a refusal is never cached"
    );
    let problem = answer.problem();
    assert_eq!(problem["code"], code, "the code is named");
    assert_eq!(problem["pool"], pool, "the refusing pool is named");
    assert_eq!(problem["status"], 503, "the body repeats the status");
}

/// Served with `body` (over HTTP a `200` served as `content_type`).
#[track_caller]
fn assert_ok(answer: &Reply, content_type: &str, body: &str) {
    if let Reply::Http(answer) = answer {
        assert_eq!(answer.header("content-type"), content_type);
    }
    assert_served(answer, body);
}

/// Served with `body`, whatever its content type: a `200`, or an OK call.
#[track_caller]
fn assert_served(answer: &Reply, body: &str) {
    match answer {
        Reply::Http(answer) => {
            assert_eq!(answer.status, StatusCode::OK, "admitted and answered");
            assert_eq!(answer.text(), body);
        }
        Reply::Grpc(answer) => {
            let bytes = answer.as_ref().expect("admitted and answered");
            assert_eq!(std::str::from_utf8(bytes).expect("UTF-8"), body);
        }
    }
}

/// Work that panicked: over HTTP a `500` problem naming
/// `ADMISSION_WORK_PANICKED`, over gRPC `INTERNAL` with that code as its
/// message; no retry hint, never the panic's message.
#[track_caller]
fn assert_panicked(answer: &Reply) {
    match answer {
        Reply::Http(answer) => {
            assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(answer.header("content-type"), PROBLEM_JSON);
            assert!(
                !answer.headers.contains_key("retry-after"),
                "a panic is no refusal"
            );
            assert_eq!(answer.problem()["code"], WORK_PANICKED);
            assert!(
                !answer.text().contains("exploded"),
                "the panic message is never sent"
            );
        }
        Reply::Grpc(answer) => {
            let status = answer.as_ref().expect_err("a panic is an error status");
            assert_eq!(status.code(), tonic::Code::Internal, "a panic is INTERNAL");
            assert_eq!(
                status.message(),
                WORK_PANICKED,
                "a code, never the panic message"
            );
            assert_eq!(
                pushback(status.metadata()),
                Hint::None,
                "a panic is no refusal"
            );
        }
    }
}

/// Waits until every request lease of `pools` is back.
async fn leases_back(pools: &RequestPools) {
    eventually("every request lease to come back", || {
        pools.stats().iter().all(|stats| stats.in_use == 0)
    })
    .await;
}

/// Case 1: with both registry workers held, a third scrape is refused with
/// `503` and `Retry-After` while they are still held, well under 2 s.
pub(crate) async fn third_scrape_is_refused_at_once_while_both_workers_are_held(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(2);
    let (walk, mut walks) = Walk::held("requests_total 1\n# EOF\n");
    let routes = Routes::new().route("/metrics", Endpoint::registry(&registry, walk, METRICS));
    let server = adapter.serve(&requests, routes).await;

    let first = server.spawn_get("/metrics");
    let second = server.spawn_get("/metrics");
    let held = [walks.started().await, walks.started().await];

    let asked = Instant::now();
    let refused = server.get("/metrics").await;
    let took = asked.elapsed();
    let stats = registry.stats();
    assert_eq!(
        (stats.in_use, stats.running),
        (2, 2),
        "the refusal arrived while both workers were still held"
    );
    assert_refused(&refused, REGISTRY);
    assert!(
        took < FAIL_FAST,
        "a refusal never waits for a worker (took {took:?})"
    );
    assert_eq!(stats.refused, 1, "the pool counted the refusal");
    assert!(
        !walks.more_started(),
        "the refused scrape never reached a worker"
    );

    held.into_iter().for_each(Release::release);
    for scrape in [first, second] {
        assert_ok(&reply(scrape).await, METRICS, "requests_total 1\n# EOF\n");
    }
    assert_eq!(registry.stats().in_use, 0, "both slots are back");
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 2: the HTML status page, a registry walk as well, is refused the
/// same way when the workers are busy, and served when they are not.
pub(crate) async fn status_page_is_refused_the_same_way(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(2);
    let (scrape_walk, mut scrapes) = Walk::held("# EOF\n");
    let (page_walk, mut pages) = Walk::held("<h1>ok</h1>");
    let routes = Routes::new()
        .route(
            "/metrics",
            Endpoint::registry(&registry, scrape_walk, METRICS),
        )
        .route("/", Endpoint::registry(&registry, page_walk, HTML));
    let server = adapter.serve(&requests, routes).await;

    let scrape = server.spawn_get("/metrics");
    let page = server.spawn_get("/");
    let held = [scrapes.started().await, pages.started().await];

    let asked = Instant::now();
    let refused = server.get("/").await;
    let took = asked.elapsed();
    assert_eq!(
        registry.stats().running,
        2,
        "the refusal arrived while both workers were still held"
    );
    assert_refused(&refused, REGISTRY);
    assert!(took < FAIL_FAST, "a refusal never waits (took {took:?})");
    assert!(!pages.more_started(), "the refused page never walked");

    held.into_iter().for_each(Release::release);
    assert_ok(&reply(page).await, HTML, "<h1>ok</h1>");
    assert_ok(&reply(scrape).await, METRICS, "# EOF\n");
    server.stop().await;
}

/// Case 3: a client that hangs up mid-walk: the server drops the handler,
/// the walk's slot stays in use and refuses a new scrape until the walk
/// ends, then the slot is back.
pub(crate) async fn disconnected_client_keeps_its_slot_until_the_walk_ends(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(1);
    let (walk, mut walks) = Walk::held("# EOF\n");
    let (watch, mut ends) = mpsc::unbounded_channel();
    let metrics = Endpoint::Registry {
        pool: registry.clone(),
        walk,
        content_type: METRICS,
        watch: Some(watch),
    };
    let server = adapter
        .serve(&requests, Routes::new().route("/metrics", metrics))
        .await;

    let hung_up = server.hang_up_later("/metrics").await;
    let walking = walks.started().await;
    drop(hung_up);
    let end = within("the server to drop the handler", ends.recv()).await;
    assert_eq!(
        end,
        Some(HandlerEnd::Dropped),
        "the server dropped the handler of the client that hung up"
    );

    let stats = registry.stats();
    assert_eq!(
        (stats.in_use, stats.running),
        (1, 1),
        "the orphaned walk keeps its slot"
    );
    assert_refused(&server.get("/metrics").await, REGISTRY);
    assert_eq!(
        within("the refused scrape's handler to end", ends.recv()).await,
        Some(HandlerEnd::Completed),
        "the refused scrape's handler ran to its end"
    );
    leases_back(&requests).await;

    walking.release();
    // The orphan's slot comes back on the worker thread: nothing to await.
    eventually("the orphaned walk to end and free its slot", || {
        registry.stats().in_use == 0
    })
    .await;
    let stats = registry.stats();
    assert_eq!(
        (stats.orphaned, stats.admitted, stats.released),
        (1, 1, 1),
        "the orphan released its slot exactly once"
    );

    let scrape = server.spawn_get("/metrics");
    walks.started().await.release();
    assert_ok(&reply(scrape).await, METRICS, "# EOF\n");
    server.stop().await;
}

/// Case 4: a background walker that waits (`Pool::run` with
/// `Admission::Wait`, outside HTTP) is queued while both slots are held,
/// HTTP scrapes are refused meanwhile, and the first slot freed goes to the
/// walker, not to a scrape.
pub(crate) async fn waiting_background_walker_is_admitted_when_a_slot_frees(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(2);
    let (walk, mut walks) = Walk::held("# EOF\n");
    let routes = Routes::new().route("/metrics", Endpoint::registry(&registry, walk, METRICS));
    let server = adapter.serve(&requests, routes).await;

    let first = server.spawn_get("/metrics");
    let second = server.spawn_get("/metrics");
    let (a, b) = (walks.started().await, walks.started().await);

    let (walker_walk, mut walker_walks) = Walk::held("walked");
    let (queued_tx, queued) = oneshot::channel();
    let walker = tokio::spawn({
        let registry = registry.clone();
        let work = walker_walk;
        async move {
            let mut run = std::pin::pin!(registry.run(work, Admission::Wait));
            // One poll queues the walker behind the held slots.
            let first = tokio::select! {
                biased;
                done = &mut run => Some(done),
                () = std::future::ready(()) => None,
            };
            let _ = queued_tx.send(first.is_none());
            match first {
                Some(done) => done,
                None => run.await,
            }
        }
    });
    assert!(
        within("the walker to ask for a slot", queued)
            .await
            .expect("the walker reports"),
        "with both slots held the walker waits"
    );

    assert_refused(&server.get("/metrics").await, REGISTRY);
    assert!(!walker.is_finished(), "the walker is still waiting");

    a.release();
    let walker_walking = walker_walks.started().await;
    assert_refused(&server.get("/metrics").await, REGISTRY);
    assert_eq!(
        registry.stats().in_use,
        2,
        "the freed slot went to the walker, not to a scrape"
    );
    assert!(!walks.more_started(), "no refused scrape walked");

    walker_walking.release();
    let walked = within("the walker to finish", walker)
        .await
        .expect("the walker task did not panic");
    assert_eq!(walked, Ok("walked".to_owned()), "the walker was admitted");
    b.release();
    for scrape in [first, second] {
        assert_ok(&reply(scrape).await, METRICS, "# EOF\n");
    }
    let stats = registry.stats();
    assert_eq!(
        (stats.in_use, stats.refused),
        (0, 2),
        "both slots are back; only the two scrapes were refused"
    );
    server.stop().await;
}

/// Case 5a: a streamed body (a server-streaming call) holds its request
/// lease until its last chunk (message).
pub(crate) async fn streamed_body_holds_its_lease_until_the_last_chunk(adapter: Adapter) {
    // One slot per class: the open stream holds all of its class.
    let requests = RequestPools::new(1, 1).expect("valid request pools");
    let class = adapter.class();
    let leases = || requests.pool(class).stats();
    let (events, mut feeds) = Feeds::endpoint();
    let server = adapter
        .serve(&requests, Routes::new().route("/events", events))
        .await;

    let mut response = server.open_stream("/events").await;
    let feed = feeds.next().await;
    feed.chunks.send(Bytes::from_static(b"first\n")).unwrap();
    let chunk = response.next("the first chunk").await;
    assert_eq!(chunk.as_deref(), Some(&b"first\n"[..]));
    assert_eq!(
        leases().in_use,
        1,
        "the open body holds the request's lease"
    );
    assert_refused(&server.get("/events").await, class.as_str());

    feed.chunks.send(Bytes::from_static(b"last\n")).unwrap();
    let chunk = response.next("the last chunk").await;
    assert_eq!(chunk.as_deref(), Some(&b"last\n"[..]));
    assert_eq!(leases().in_use, 1, "the stream has not ended yet");

    drop(feed.chunks); // the stream ends
    let end = response.next("the end of the body").await;
    assert_eq!(end, None, "the client saw the end");
    // The lease goes when the body reports its end (over gRPC, when it
    // yields its trailers), before the server writes the end the client
    // just read.
    let stats = leases();
    assert_eq!(stats.in_use, 0, "the lease is back once the body ended");
    assert_eq!(stats.admitted, stats.released, "released exactly once");
    server.stop().await;
}

/// Case 5b: a client that drops a streamed body early (cancels its call)
/// releases its lease, with no further chunk written.
pub(crate) async fn client_dropping_the_body_early_releases_the_lease(adapter: Adapter) {
    let requests = RequestPools::new(1, 1).expect("valid request pools");
    let leases = || requests.pool(adapter.class()).stats();
    let (events, mut feeds) = Feeds::endpoint();
    let server = adapter
        .serve(&requests, Routes::new().route("/events", events))
        .await;

    let mut response = server.open_stream("/events").await;
    let feed = feeds.next().await;
    feed.chunks.send(Bytes::from_static(b"first\n")).unwrap();
    let chunk = response.next("the first chunk").await;
    assert_eq!(chunk.as_deref(), Some(&b"first\n"[..]));
    assert_eq!(
        leases().in_use,
        1,
        "the open body holds the request's lease"
    );

    drop(response); // the client goes away mid-stream; the stream stays idle
    within("the server to drop the abandoned body", feed.dropped)
        .await
        .expect("the body says when it is dropped");
    // axum's and tonic's bodies drop their lease before their stream,
    // actix-web's after it, on the server's thread: poll for it.
    eventually("the dropped body's lease to come back", || {
        leases().in_use == 0
    })
    .await;
    let stats = leases();
    assert_eq!(stats.admitted, stats.released, "released exactly once");

    let again = server.spawn_get("/events");
    drop(feeds.next().await); // an empty stream
    assert_served(&reply(again).await, "");
    drop(feed.chunks);
    server.stop().await;
}

/// The middleware's settings with a progress bound of 200 ms (cases 5c
/// to 5e).
fn bounded_at_200_ms() -> Config {
    Config {
        progress: Some(ProgressTimeout::new(Duration::from_millis(200)).expect("a non-zero bound")),
        ..Config::default()
    }
}

/// Case 5c: a response its client stops reading gives its lease back at
/// the middleware's progress bound, with the client still connected and
/// the stream still open; the next request takes the slot. On all three:
/// over tonic's HTTP/2 the server asked a body handed over in one 32 MiB
/// frame for more while h2 still buffered it, so the reader's stop looked
/// like a slow producer; a leased body now hands large frames over in
/// 16 KiB pieces.
pub(crate) async fn an_unread_response_gives_its_lease_back_at_the_progress_bound(
    adapter: Adapter,
) {
    // More than loopback's socket buffers (or HTTP/2's flow-control
    // window) hold: the server cannot hand it all over, so it stops asking
    // the body for more.
    const FLOOD: usize = 32 << 20;
    let requests = RequestPools::new(1, 1).expect("valid request pools");
    let leases = || requests.pool(adapter.class()).stats();
    let (events, mut feeds) = Feeds::endpoint();
    let config = bounded_at_200_ms();
    let server = adapter
        .serve_with(&requests, Routes::new().route("/events", events), config)
        .await;

    let response = server.open_stream("/events").await;
    let feed = feeds.next().await;
    assert_eq!(
        leases().in_use,
        1,
        "the open body holds the request's lease"
    );
    feed.chunks.send(Bytes::from(vec![b'x'; FLOOD])).unwrap();
    // The client never reads; the stream stays open (`feed.chunks` lives).
    eventually("the unread response's lease to come back", || {
        leases().in_use == 0
    })
    .await;
    let stats = leases();
    assert_eq!(stats.admitted, stats.released, "released exactly once");

    let again = server.spawn_get("/events");
    drop(feeds.next().await); // an empty stream
    assert_served(&reply(again).await, "");
    drop((response, feed.chunks));
    server.stop().await;
}

/// Case 5d: a client that stops sending a request body it began (the
/// head and one byte of ten; over gRPC, HEADERS and one byte of a
/// message) holds its lease only until the progress bound: the handler's
/// read ends, the request is answered, the lease comes back once, and an
/// honest request is served on the one-slot class. Both ways of admitting
/// (at once, and through the queue) hand the handler the bounded body.
pub(crate) async fn a_stalled_request_body_gives_its_lease_back_at_the_progress_bound(
    adapter: Adapter,
) {
    for queue in [false, true] {
        let requests = RequestPools::new(1, 1).expect("valid request pools");
        let leases = || requests.pool(adapter.class()).stats();
        let config = Config {
            queue,
            ..bounded_at_200_ms()
        };
        let server = adapter
            .serve_with(
                &requests,
                Routes::new().route("/upload", Endpoint::Upload),
                config,
            )
            .await;

        let stalled = server.stall_body("/upload").await;
        eventually("the stalled request to take the lease", || {
            leases().admitted == 1
        })
        .await;
        eventually("the stalled request's lease to come back", || {
            leases().in_use == 0
        })
        .await;
        let stats = leases();
        assert_eq!(
            stats.admitted, stats.released,
            "released exactly once (queue: {queue})"
        );

        assert_served(&server.get("/upload").await, READ);
        drop(stalled);
        server.stop().await;
    }
}

/// Case 5e: a reader whose HTTP/2 window never opens (an initial stream
/// window of 0) gets the head and never a byte of the body: the server
/// holds the first chunk it took, waiting for a window that never comes,
/// and the lease still comes back at the progress bound, once; the next
/// request is served. HTTP/2 only: axum (h2c) and tonic (actix-web speaks
/// HTTP/2 only over TLS).
pub(crate) async fn a_reader_whose_window_never_opens_gives_its_lease_back_at_the_progress_bound(
    adapter: Adapter,
) {
    let requests = RequestPools::new(1, 1).expect("valid request pools");
    let leases = || requests.pool(adapter.class()).stats();
    let (events, mut feeds) = Feeds::endpoint();
    let config = bounded_at_200_ms();
    let server = adapter
        .serve_with(&requests, Routes::new().route("/events", events), config)
        .await;

    let reader = server.shut_window("/events").await;
    let feed = feeds.next().await;
    feed.chunks.send(Bytes::from_static(b"event\n")).unwrap();
    // The stream stays open (`feed.chunks` lives); its window stays shut.
    eventually("the shut reader's lease to come back", || {
        leases().in_use == 0
    })
    .await;
    let stats = leases();
    assert_eq!(
        (stats.admitted, stats.released),
        (1, 1),
        "released exactly once"
    );

    let again = server.spawn_get("/events");
    drop(feeds.next().await); // an empty stream
    assert_served(&reply(again).await, "");
    drop((reader, feed.chunks));
    server.stop().await;
}

/// Case 17: a class in shadow mode (`RequestPools::set_shadow`) serves a
/// request its full class would refuse and counts it as
/// `ADMISSION_SATURATED` it would have refused (through a queueing
/// middleware, as a wait it would have made); switched back to enforcing
/// while the class is still full, the next request is refused.
pub(crate) async fn a_class_in_shadow_mode_serves_what_it_would_refuse_until_switched_back(
    adapter: Adapter,
) {
    for queue in [false, true] {
        let requests = RequestPools::new(1, 1).expect("valid request pools");
        let class = adapter.class();
        let config = Config {
            queue,
            ..Config::default()
        };
        let server = adapter
            .serve_with(
                &requests,
                Routes::new().route("/level", Endpoint::Criticality),
                config,
            )
            .await;
        let held = requests.try_lease(class).expect("the class's one slot");

        requests.set_shadow(true);
        assert_served(&server.get("/level").await, "default");
        let stats = requests.pool(class).stats();
        let (would_refuse, would_wait) = if queue { (0, 1) } else { (1, 0) };
        assert_eq!(
            stats.would_refuse_with(admission_core::Code::Saturated),
            would_refuse,
            "queue: {queue}"
        );
        assert_eq!(stats.would_wait, would_wait, "queue: {queue}");
        assert_eq!(stats.refused, 0, "nothing refused in shadow mode");

        requests.set_shadow(false);
        let code = if queue { WAIT_TIMEOUT } else { SATURATED };
        assert_refused_as(&server.get("/level").await, class.as_str(), code);
        drop(held);
        leases_back(&requests).await;
        server.stop().await;
    }
}

/// Case 7: a panicking walk answers `500` with a problem naming
/// `ADMISSION_WORK_PANICKED` (over gRPC `INTERNAL` with that code), never
/// the panic message; its slot is back, and the next scrape on the same
/// one-slot pool succeeds.
pub(crate) async fn panicking_walk_answers_500_and_frees_its_slot(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(1);
    let routes = Routes::new()
        .route(
            "/boom",
            Endpoint::registry(&registry, Walk::Panics, METRICS),
        )
        .route(
            "/metrics",
            Endpoint::registry(&registry, Walk::Instant("# EOF\n"), METRICS),
        );
    let server = adapter.serve(&requests, routes).await;

    assert_panicked(&server.get("/boom").await);
    let stats = registry.stats();
    assert_eq!(
        (stats.panicked, stats.in_use, stats.released),
        (1, 0, 1),
        "the panic released its slot"
    );

    assert_ok(&server.get("/metrics").await, METRICS, "# EOF\n");
    leases_back(&requests).await;
    server.stop().await;
}

/// Concurrent scrapes in the coalescing cases.
const SCRAPES: usize = 8;

/// `SCRAPES` scrapes of `path` on one held walk: the first starts it, the
/// others join it (no slot taken); then the walk is released.
async fn coalesced_storm(
    server: &Server,
    registry: &Pool,
    walks: &mut Walks,
    path: &str,
) -> Vec<Reply> {
    let coalesced = registry.stats().coalesced;
    let mut scrapes = vec![server.spawn_get(path)];
    let walk = walks.started().await;
    scrapes.extend((1..SCRAPES).map(|_| server.spawn_get(path)));
    eventually("every other scrape joined the held walk", || {
        registry.stats().coalesced == coalesced + (SCRAPES as u64 - 1)
    })
    .await;
    assert_eq!(registry.stats().in_use, 1, "joining takes no slot");
    walk.release();
    let mut answers = Vec::new();
    for scrape in scrapes {
        answers.push(reply(scrape).await);
    }
    answers
}

fn scrapes(registry: &Pool) -> Scrapes {
    Scrapes::new(registry, Duration::from_secs(60)).expect("a valid staleness bound")
}

/// Case 9: scrapes that arrive while a walk runs share that one walk (issue
/// 10): one walk, identical bodies, no refusal.
pub(crate) async fn concurrent_scrapes_share_exactly_one_walk(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(1);
    let (walk, mut walks) = Walk::held("walk 1\n");
    let scrapes = scrapes(&registry);
    let routes = Routes::new().route("/metrics", Endpoint::Coalesced { scrapes, walk });
    let server = adapter.serve(&requests, routes).await;

    for answer in coalesced_storm(&server, &registry, &mut walks, "/metrics").await {
        assert_ok(&answer, METRICS, "walk 1\n");
    }
    assert!(!walks.more_started(), "exactly one walk ran");
    let stats = registry.stats();
    assert_eq!(
        (stats.coalesced, stats.admitted, stats.refused),
        (SCRAPES as u64 - 1, 1, 0),
        "one caller admitted, the others coalesced, none refused"
    );
    eventually("the walk's slot is back", || registry.stats().in_use == 0).await;
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 10: a panicking shared walk answers every caller `500` once, and
/// the next caller starts a fresh walk.
pub(crate) async fn a_panicking_shared_walk_fails_every_caller_and_the_next_walks_afresh(
    adapter: Adapter,
) {
    let requests = roomy_requests();
    let registry = registry_pool(1);
    let (explodes, mut exploding) = Walk::held_panicking();
    let (fresh, mut fresh_walks) = Walk::held("walk 2\n");
    let scrapes = scrapes(&registry);
    let routes = Routes::new()
        .route(
            "/explode",
            Endpoint::Coalesced {
                scrapes: scrapes.clone(),
                walk: explodes,
            },
        )
        .route(
            "/metrics",
            Endpoint::Coalesced {
                scrapes,
                walk: fresh,
            },
        );
    let server = adapter.serve(&requests, routes).await;

    // Every caller of the panicked walk gets its own 500 (INTERNAL).
    for answer in coalesced_storm(&server, &registry, &mut exploding, "/explode").await {
        assert_panicked(&answer);
    }
    let stats = registry.stats();
    assert_eq!(
        (stats.panicked, stats.coalesced),
        (1, SCRAPES as u64 - 1),
        "one panic, counted once, shared by the joined callers"
    );

    let next = server.spawn_get("/metrics");
    fresh_walks.started().await.release();
    assert_ok(&reply(next).await, METRICS, "walk 2\n");
    assert_eq!(
        registry.stats().coalesced,
        SCRAPES as u64 - 1,
        "a fresh walk, not a join"
    );
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 8: many clients, each on its own connection, share one pool:
/// with both slots of a class held by blocked handlers, of 8 clients sent
/// at once exactly 2 are admitted and 6 refused.
pub(crate) async fn separate_connections_share_one_pool(adapter: Adapter) {
    const SLOTS: usize = 2;
    const CLIENTS: usize = 8;
    let requests = RequestPools::new(SLOTS, SLOTS).expect("valid request pools");
    let (held, mut gate) = Gate::endpoint();
    let server = adapter
        .serve(&requests, Routes::new().route("/held", held))
        .await;

    let class = adapter.class();
    let (answers_tx, mut answers) = mpsc::unbounded_channel();
    for _ in 0..CLIENTS {
        // `spawn_get` opens a connection of its own for each client.
        let call = server.spawn_get("/held");
        let answers_tx = answers_tx.clone();
        tokio::spawn(async move { answers_tx.send(reply(call).await) });
    }
    gate.arrivals(SLOTS).await;
    for _ in SLOTS..CLIENTS {
        let refused = within("a refusal", answers.recv())
            .await
            .expect("an answer");
        assert_refused(&refused, class.as_str());
    }
    assert_eq!(gate.more_arrived(), 0, "exactly two reached the handler");
    let stats = requests.pool(class).stats();
    assert_eq!(stats.in_use, SLOTS, "the two admitted hold both slots");
    assert_eq!(
        stats.refused,
        (CLIENTS - SLOTS) as u64,
        "one pool counted every refusal"
    );

    gate.open(SLOTS);
    for _ in 0..SLOTS {
        let done = within("an admitted answer", answers.recv())
            .await
            .expect("an answer");
        assert_served(&done, "done");
    }
    leases_back(&requests).await;
    server.stop().await;
}

/// The headers a problem answer is compared on.
const PROBLEM_HEADERS: [&str; 4] = [
    "content-type",
    "cache-control",
    "retry-after",
    "content-length",
];

/// Asserts that two adapters' answers are the same, byte for byte.
#[track_caller]
fn assert_same(what: &str, axum: &Answer, actix: &Answer) {
    assert_eq!(axum.status, actix.status, "{what}: the same status");
    for name in PROBLEM_HEADERS {
        let values = |answer: &Answer| -> Vec<Vec<u8>> {
            let values = answer.headers.get_all(name).iter();
            values.map(|value| value.as_bytes().to_vec()).collect()
        };
        assert_eq!(values(axum), values(actix), "{what}: the same `{name}`");
    }
    assert_eq!(axum.body, actix.body, "{what}: the same body bytes");
}

/// Case 6: the same refusal (and the same failure) run against both HTTP
/// adapters gives the same status, headers and body bytes, which are
/// core's [`Problem`].
pub(crate) async fn both_adapters_answer_byte_for_byte_alike() {
    let requests = RequestPools::new(2, 2).expect("valid request pools");
    let registry = registry_pool(1);
    let routes = Routes::new()
        .route(
            "/metrics",
            Endpoint::registry(&registry, Walk::Instant("# EOF\n"), METRICS),
        )
        .route(
            "/boom",
            Endpoint::registry(&registry, Walk::Panics, METRICS),
        );
    let axum = Adapter::AXUM.serve(&requests, routes.clone()).await;
    let actix = Adapter::ACTIX.serve(&requests, routes).await;
    let both = |path: &'static str| {
        let (axum, actix) = (&axum, &actix);
        async move { (axum.get(path).await, actix.get(path).await) }
    };

    // The registry refuses: its one slot is taken.
    let walking = registry.try_admit().expect("the slot is free");
    let (a, b) = both("/metrics").await;
    assert_refused(&a, REGISTRY);
    assert_same("a registry refusal", a.http(), b.http());
    let core = Problem::refusal(
        &registry.try_admit().expect_err("the slot is taken"),
        HttpRefusalStatus::default(),
    );
    assert_eq!(a.http().text(), core.body(), "the body is core's problem");
    drop(walking);

    // The middleware refuses: every control lease is taken.
    let held: Vec<Lease> = (0..2)
        .map(|_| requests.try_lease(Class::Control).expect("a free lease"))
        .collect();
    let (a, b) = both("/metrics").await;
    assert_refused(&a, "control");
    assert_same("a request-class refusal", a.http(), b.http());
    let core = Problem::refusal(
        &requests.try_lease(Class::Control).expect_err("all taken"),
        HttpRefusalStatus::default(),
    );
    assert_eq!(a.http().text(), core.body(), "the body is core's problem");
    drop(held);

    // A panicking walk.
    let (a, b) = both("/boom").await;
    assert_eq!(a.http().status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_same("a panicked walk", a.http(), b.http());

    leases_back(&requests).await;
    axum.stop().await;
    actix.stop().await;
}

/// The facts a problem document states: its code, its pool and its retry
/// hint in whole seconds.
fn problem_facts(answer: &Answer) -> (String, Option<String>, Option<u64>) {
    let problem = answer.problem();
    let text = |key: &str| problem[key].as_str().map(str::to_owned);
    (
        text("code").expect("a code"),
        text("pool"),
        problem["retry_after"].as_u64(),
    )
}

/// The same facts, read from a gRPC status: the code and the pool from the
/// message, the retry hint from `grpc-retry-pushback-ms`.
fn status_facts(answer: &Reply) -> (String, Option<String>, Option<u64>) {
    let Reply::Grpc(answer) = answer else {
        panic!("a gRPC answer was expected")
    };
    let status = answer.as_ref().expect_err("an error status");
    let message = status.message();
    let code = message.split(':').next().expect("a code first").to_owned();
    let pool = message
        .split_once("pool `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(pool, _)| pool.to_owned());
    let retry = match pushback(status.metadata()) {
        // In the seconds `Retry-After` rounds the same hint up to.
        Hint::After(wait) => {
            Some(u64::try_from(wait.as_millis().div_ceil(1000).max(1)).unwrap_or(u64::MAX))
        }
        _ => None,
    };
    (code, pool, retry)
}

/// Case 6 for gRPC: the same refusal (and the same failure) against axum
/// and tonic state the same facts, core's [`Problem`]'s, in each
/// protocol's form: the code and the pool (the problem body, the status
/// message) and the retry hint (`Retry-After`, `grpc-retry-pushback-ms`).
pub(crate) async fn grpc_and_http_refusals_state_the_same_facts() {
    let requests = RequestPools::new(2, 2).expect("valid request pools");
    let registry = registry_pool(1);
    let routes = Routes::new()
        .route(
            "/metrics",
            Endpoint::registry(&registry, Walk::Instant("# EOF\n"), METRICS),
        )
        .route(
            "/boom",
            Endpoint::registry(&registry, Walk::Panics, METRICS),
        );
    let axum = Adapter::AXUM.serve(&requests, routes.clone()).await;
    let tonic = Adapter::TONIC.serve(&requests, routes).await;

    // The registry refuses: its one slot is taken.
    let walking = registry.try_admit().expect("the slot is free");
    let (http, grpc) = (axum.get("/metrics").await, tonic.get("/metrics").await);
    assert_refused(&grpc, REGISTRY);
    assert_eq!(
        status_facts(&grpc),
        problem_facts(http.http()),
        "a registry refusal"
    );
    drop(walking);

    // The layer refuses: every lease of the class each protocol uses.
    let held: Vec<Lease> = [Class::Control, Class::Control, Class::Work, Class::Work]
        .into_iter()
        .map(|class| requests.try_lease(class).expect("a free lease"))
        .collect();
    let (http, grpc) = (axum.get("/metrics").await, tonic.get("/metrics").await);
    assert_refused(&grpc, Adapter::TONIC.class().as_str());
    let (code, pool, retry) = problem_facts(http.http());
    assert_eq!(
        status_facts(&grpc),
        (code, pool.map(|_| "work".to_owned()), retry),
        "a request-class refusal: the same code and hint, the class gRPC calls lease from"
    );
    drop(held);

    // A panicking walk: no pool, no hint, the same code.
    let (http, grpc) = (axum.get("/boom").await, tonic.get("/boom").await);
    assert_panicked(&grpc);
    assert_eq!(
        status_facts(&grpc),
        problem_facts(http.http()),
        "a panicked walk"
    );

    leases_back(&requests).await;
    axum.stop().await;
    tonic.stop().await;
}

/// A claim of `x-admission-criticality: critical` (over gRPC, the same
/// metadata key).
const CLAIMS_CRITICAL: Headers = &[(CRITICALITY_HEADER, "critical")];
/// `x-admission-criticality: sheddable`.
const SHEDDABLE: Headers = &[(CRITICALITY_HEADER, "sheddable")];
/// A budget of a minute, far past the queue's own limit (100 ms).
const LONG_BUDGET: Headers = &[(BUDGET_HEADER, "60000")];
/// The route that answers the criticality its request was admitted for.
const LEVEL: &str = "/criticality";
/// Both trust policies, the default first.
const TRUSTS: [Trust; 2] = [Trust::Nobody, Trust::Peers];

/// What a `critical` claim is admitted as under `trust`.
fn critical_claim_under(trust: Trust) -> &'static str {
    match trust {
        Trust::Nobody => "default",
        Trust::Peers => "critical",
    }
}

/// A server of [`LEVEL`] configured as `config`, over request pools of
/// `slots` per class, with one slot of the adapter's class held by the
/// test (from its own task: the server's tasks are others).
async fn serve_one_slot_held(
    adapter: Adapter,
    config: Config,
    slots: usize,
) -> (RequestPools, Lease, Server) {
    let requests = RequestPools::new(slots, slots).expect("valid request pools");
    let held = requests.try_lease(adapter.class()).expect("a free slot");
    let routes = Routes::new().route(LEVEL, Endpoint::Criticality);
    let server = adapter.serve_with(&requests, routes, config).await;
    (requests, held, server)
}

/// Case 11: a client claiming `critical` is admitted as `default` (and
/// counted) unless the app trusts its peers; `sheddable` from the same
/// client is honoured either way. Read inside the handler:
/// `Caller::current()`.
pub(crate) async fn a_critical_claim_is_served_as_default_unless_peers_are_trusted(
    adapter: Adapter,
) {
    for trust in TRUSTS {
        let requests = roomy_requests();
        let routes = Routes::new().route(LEVEL, Endpoint::Criticality);
        let config = Config {
            trust,
            ..Config::default()
        };
        let server = adapter.serve_with(&requests, routes, config).await;

        let claim = server.get_with(LEVEL, CLAIMS_CRITICAL).await;
        assert_served(&claim, critical_claim_under(trust));
        assert_served(&server.get_with(LEVEL, SHEDDABLE).await, "sheddable");
        assert_served(&server.get(LEVEL).await, "default");
        assert_eq!(
            server.lowered_claims(),
            u64::from(trust == Trust::Nobody),
            "under {trust:?} the middleware counts each claim it lowered"
        );
        leases_back(&requests).await;
        server.stop().await;
    }
}

/// Case 12: with half the class's slots held, a `sheddable` request is
/// refused at once under either policy (lowering one's own priority is
/// always honoured), while a `critical` claim is admitted: as `default`
/// unless peers are trusted, since the claim gains an outsider nothing.
pub(crate) async fn sheddable_is_honoured_from_anyone(adapter: Adapter) {
    let class = adapter.class();
    for trust in TRUSTS {
        let config = Config {
            trust,
            ..Config::default()
        };
        let (requests, held, server) = serve_one_slot_held(adapter, config, 2).await;

        let asked = Instant::now();
        let shed = server.get_with(LEVEL, SHEDDABLE).await;
        let took = asked.elapsed();
        assert_refused(&shed, class.as_str());
        if let Reply::Http(answer) = &shed {
            assert_eq!(answer.problem()["criticality"], "sheddable");
        }
        assert!(
            took < FAIL_FAST,
            "a shed request never waits (took {took:?})"
        );
        let claim = server.get_with(LEVEL, CLAIMS_CRITICAL).await;
        assert_served(&claim, critical_claim_under(trust));
        drop(held);
        leases_back(&requests).await;
        server.stop().await;
    }
}

/// Within this, an untrusted budget's request is refused by the queue
/// (whose own limit is 100 ms), however long the budget.
const QUEUE_LIMIT_BOUND: Duration = Duration::from_secs(5);
/// How long the test holds the slot a trusted request waits for: five
/// times the queue's own limit.
const HELD_PAST_THE_LIMIT: Duration = Duration::from_millis(500);

/// Case 13: with the class's only slot held and the middleware queueing, a
/// request with a budget of a minute waits the queue's own limit and is
/// refused `ADMISSION_WAIT_TIMEOUT` under the default policy; when peers
/// are trusted it waits as long as its budget allows and is admitted once
/// the slot frees.
pub(crate) async fn a_long_budget_does_not_lengthen_a_queued_wait_unless_peers_are_trusted(
    adapter: Adapter,
) {
    let class = adapter.class();
    let queue = |trust| Config {
        queue: true,
        trust,
        ..Config::default()
    };

    let (requests, held, server) = serve_one_slot_held(adapter, queue(Trust::Nobody), 1).await;
    let asked = server.get_with(LEVEL, LONG_BUDGET);
    let refused = tokio::time::timeout(QUEUE_LIMIT_BOUND, asked)
        .await
        .expect("an untrusted budget never lengthens a queued wait past the queue's limit");
    assert_refused_as(&refused, class.as_str(), WAIT_TIMEOUT);
    assert_eq!(
        requests.pool(class).stats().waiting,
        0,
        "nobody is left queued"
    );
    drop(held);
    server.stop().await;

    let (requests, held, server) = serve_one_slot_held(adapter, queue(Trust::Peers), 1).await;
    let waiting = || requests.pool(class).stats().waiting;
    let release = async move {
        eventually("the request to queue for the held slot", || waiting() == 1).await;
        // The scenario, not a synchronisation: the slot stays held well
        // past the queue's own limit.
        tokio::time::sleep(HELD_PAST_THE_LIMIT).await;
        assert_eq!(
            waiting(),
            1,
            "a trusted budget waits past the queue's limit"
        );
        drop(held);
    };
    let (admitted, ()) = tokio::join!(server.get_with(LEVEL, LONG_BUDGET), release);
    assert_served(&admitted, "default");
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 14: with every slot of the class held, a route the app bypasses
/// (health, readiness) is served, takes no lease and is never refused,
/// while any other route of the same middleware is refused.
pub(crate) async fn a_bypassed_route_is_served_through_a_saturated_layer(adapter: Adapter) {
    let config = Config {
        bypass: true,
        ..Config::default()
    };
    let requests = RequestPools::new(1, 1).expect("valid request pools");
    let held = requests.try_lease(adapter.class()).expect("a free slot");
    let routes = Routes::new()
        .route(LEVEL, Endpoint::Criticality)
        .route(BYPASSED, Endpoint::Criticality);
    let server = adapter.serve_with(&requests, routes, config).await;

    assert_served(&server.get(BYPASSED).await, "default");
    assert_refused(&server.get(LEVEL).await, adapter.class().as_str());
    let stats = requests.stats();
    assert_eq!(
        stats.iter().map(|s| s.admitted).sum::<u64>(),
        1,
        "the bypassed request took no lease (only the test's own): {stats:?}"
    );
    drop(held);
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 16: a refusal the app's library code met, three of its own error
/// enums deep (`thiserror`, `#[source]`), goes out through the adapter's
/// `Rejection::from_error` as the refusal it is: `503` with `Retry-After`
/// (gRPC `UNAVAILABLE` with pushback), naming the pool, never the app's
/// words; the same route answers once the pool has room.
pub(crate) async fn a_refusal_three_errors_deep_is_answered_as_a_refusal(adapter: Adapter) {
    let requests = roomy_requests();
    let registry = registry_pool(1);
    let routes = Routes::new().route("/derive", Endpoint::Deep(registry.clone()));
    let server = adapter.serve(&requests, routes).await;

    let held = registry.try_admit().expect("the only slot");
    let refused = server.get("/derive").await;
    assert_refused(&refused, REGISTRY);
    if let Reply::Http(answer) = &refused {
        let body = answer.text();
        assert!(
            !body.contains("store") && !body.contains("derivation"),
            "the app's error words stay in the app: {body}"
        );
    }
    drop(held);
    assert_served(&server.get("/derive").await, "derived");
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 15: a refusal on a middleware with the app's own page answers
/// `503`, `Retry-After` and the millisecond hint as ever, with the app's
/// HTML instead of the problem document. (gRPC has no body to replace:
/// the case is HTTP's.)
pub(crate) async fn a_refusal_carries_the_apps_own_page(adapter: Adapter) {
    let config = Config {
        own_page: true,
        ..Config::default()
    };
    let (requests, held, server) = serve_one_slot_held(adapter, config, 1).await;
    let reply = server.get(LEVEL).await;
    let answer = reply.http();
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(answer.header("retry-after").parse::<u32>().unwrap() >= 1);
    assert!(
        answer
            .header("x-admission-retry-after-ms")
            .parse::<u32>()
            .unwrap()
            >= 1
    );
    assert_eq!(answer.header("x-admission-refusal"), SATURATED);
    assert_eq!(answer.header("content-type"), super::endpoints::HTML);
    assert_eq!(answer.text(), OWN_PAGE);
    assert_eq!(answer.header("content-length"), OWN_PAGE.len().to_string());
    drop(held);
    leases_back(&requests).await;
    server.stop().await;
}

/// The code of a refusal of a flow at its fair share of a contended class.
const FLOW_SHARE: &str = "ADMISSION_FLOW_SHARE";

/// The flooding tenant, as the app names it (its [`TENANT_HEADER`]).
const FLOODER: Headers = &[(TENANT_HEADER, "tenant-a")];
/// The flooding tenant, trying to escape its own share with a flow key of
/// its own invention.
const FLOODER_INVENTING: Headers = &[(TENANT_HEADER, "tenant-a"), (FLOW_HEADER, "invented-1")];
/// The other tenant, as the app names it.
const OTHER: Headers = &[(TENANT_HEADER, "tenant-b")];
/// The flooding tenant, naming its own flow by header.
const FLOODER_BY_HEADER: Headers = &[(FLOW_HEADER, "tenant-a")];
/// The other tenant, naming its own flow by header.
const OTHER_BY_HEADER: Headers = &[(FLOW_HEADER, "tenant-b")];
/// The gated route the tenants call: each request holds its lease until
/// the test lets it through.
const GATED: &str = "/gated";

/// The routes of the flow cases: [`GATED`], and [`LEVEL`] (answered at
/// once, in the same class) for the requests that must be refused, so that
/// one wrongly admitted answers `200` at once instead of waiting at the
/// gate.
fn routes(gated: Endpoint) -> Routes {
    Routes::new()
        .route(GATED, gated)
        .route(LEVEL, Endpoint::Criticality)
}

/// Nothing of what the client sent as its flow comes back in a refusal:
/// not in the status line, a header, the body or (gRPC) the message and
/// metadata.
#[track_caller]
fn assert_no_echo(answer: &Reply, sent: Headers) {
    let echoed = |text: &str| {
        sent.iter()
            .find(|(_, value)| text.contains(value))
            .map(|(name, _)| *name)
    };
    match answer {
        Reply::Http(answer) => {
            for (name, value) in &answer.headers {
                let value = String::from_utf8_lossy(value.as_bytes());
                assert_eq!(echoed(&value), None, "header `{name}` echoes the flow");
            }
            assert_eq!(echoed(answer.text()), None, "the body echoes the flow");
        }
        Reply::Grpc(answer) => {
            let status = answer.as_ref().expect_err("a refusal");
            assert_eq!(
                echoed(status.message()),
                None,
                "the message echoes the flow"
            );
            let metadata = format!("{:?}", status.metadata());
            assert_eq!(echoed(&metadata), None, "the metadata echoes the flow");
        }
    }
}

/// Waits for a held request's answer, which must be served.
async fn served(request: tokio::task::JoinHandle<Reply>) {
    let reply = within("a gated request's answer", request)
        .await
        .expect("the request task did not panic");
    assert_served(&reply, "done");
}

/// Waits for the first of `held` to be answered (the one the gate let
/// through, whichever it was), which must be served; the others stay.
async fn first_served(
    held: Vec<tokio::task::JoinHandle<Reply>>,
) -> Vec<tokio::task::JoinHandle<Reply>> {
    let (reply, _, rest) = within(
        "a gated request's answer",
        futures_util::future::select_all(held),
    )
    .await;
    assert_served(&reply.expect("the request task did not panic"), "done");
    rest
}

/// Case 18: with the app naming each request's flow (`.flow(..)`), one
/// tenant flooding a class holds every slot while alone; a second tenant
/// asking then is refused (no slot is free), and from then on the first
/// slot to free is its: the flooding tenant's next request is refused
/// `ADMISSION_FLOW_SHARE` with that slot free, even when it invents a flow
/// key of its own by header (nobody's headers are trusted, and the attempt
/// is counted), the second tenant's request is admitted at once, and the
/// flood's next is refused again. No refusal echoes a flow key.
pub(crate) async fn a_flooding_flow_is_held_to_its_share_and_another_flow_is_admitted(
    adapter: Adapter,
) {
    let class = adapter.class();
    let requests = RequestPools::new(2, 2).expect("valid request pools");
    let (gated, mut gate) = Gate::endpoint();
    let config = Config {
        flow: true,
        ..Config::default()
    };
    let server = adapter.serve_with(&requests, routes(gated), config).await;

    // The flood: alone, a flow gets the whole class.
    let flood = vec![
        server.spawn_get_with(GATED, FLOODER),
        server.spawn_get_with(GATED, FLOODER),
    ];
    gate.arrivals(2).await;
    assert_eq!(
        requests.pool(class).stats().in_use,
        2,
        "the flood holds every slot"
    );

    let asked = Instant::now();
    let refused = server.get_with(LEVEL, OTHER).await;
    assert!(asked.elapsed() < FAIL_FAST, "a refusal never waits");
    assert_refused_as(&refused, class.as_str(), SATURATED);

    // One of the flood's requests ends: one slot is free.
    gate.open(1);
    let flood = first_served(flood).await;
    eventually("the flood's first slot to come back", || {
        requests.pool(class).stats().in_use == 1
    })
    .await;

    let over = server.get_with(LEVEL, FLOODER_INVENTING).await;
    assert_refused_as(&over, class.as_str(), FLOW_SHARE);
    assert_no_echo(&over, FLOODER_INVENTING);
    assert_eq!(
        requests.pool(class).stats().in_use,
        1,
        "the free slot is left for the tenant under its share"
    );

    let asked = Instant::now();
    let other = server.spawn_get_with(GATED, OTHER);
    gate.arrivals(1).await;
    assert!(
        asked.elapsed() < FAIL_FAST,
        "the other tenant is admitted at once"
    );
    let over = server.get_with(LEVEL, FLOODER).await;
    assert_refused_as(&over, class.as_str(), FLOW_SHARE);
    assert_no_echo(&over, FLOODER);
    assert_eq!(
        server.lowered_claims(),
        1,
        "the invented flow key was set aside, and counted"
    );

    gate.open(2);
    served(other).await;
    for request in flood {
        served(request).await;
    }
    assert_eq!(
        gate.more_arrived(),
        0,
        "no refused request reached its handler"
    );
    leases_back(&requests).await;
    server.stop().await;
}

/// Case 19: a flow named by the client's own `x-admission-flow` header
/// counts only when the app trusts its peers. With one tenant (by header)
/// holding every slot of a class and another (by header) refused, a slot
/// then freed goes: under the default policy to whoever asks first (the
/// headers are set aside and counted, so both tenants are one line with no
/// flow: the flood's next request is admitted and the other tenant refused
/// again); under `trust_peers()` to the other tenant (the flood's next is
/// refused `ADMISSION_FLOW_SHARE`, the other tenant admitted at once).
pub(crate) async fn a_flow_header_counts_only_when_peers_are_trusted(adapter: Adapter) {
    let class = adapter.class();
    for trust in TRUSTS {
        let requests = RequestPools::new(2, 2).expect("valid request pools");
        let (gated, mut gate) = Gate::endpoint();
        let config = Config {
            trust,
            ..Config::default()
        };
        let server = adapter.serve_with(&requests, routes(gated), config).await;

        let held = vec![
            server.spawn_get_with(GATED, FLOODER_BY_HEADER),
            server.spawn_get_with(GATED, FLOODER_BY_HEADER),
        ];
        gate.arrivals(2).await;
        let refused = server.get_with(LEVEL, OTHER_BY_HEADER).await;
        assert_refused_as(&refused, class.as_str(), SATURATED);
        assert_no_echo(&refused, OTHER_BY_HEADER);

        gate.open(1);
        let mut held = first_served(held).await;
        eventually("the flood's first slot to come back", || {
            requests.pool(class).stats().in_use == 1
        })
        .await;

        match trust {
            Trust::Nobody => {
                let mut next = server.spawn_get_with(GATED, FLOODER_BY_HEADER);
                tokio::select! {
                    answer = &mut next => panic!(
                        "with no flow, the flood's next request takes the free slot: {answer:?}"
                    ),
                    () = gate.arrivals(1) => held.push(next),
                }
                let other = server.get_with(LEVEL, OTHER_BY_HEADER).await;
                assert_refused_as(&other, class.as_str(), SATURATED);
                assert_eq!(
                    server.lowered_claims(),
                    5,
                    "each flow header nobody trusts is set aside, and counted"
                );
            }
            Trust::Peers => {
                let over = server.get_with(LEVEL, FLOODER_BY_HEADER).await;
                assert_refused_as(&over, class.as_str(), FLOW_SHARE);
                assert_no_echo(&over, FLOODER_BY_HEADER);
                let asked = Instant::now();
                held.push(server.spawn_get_with(GATED, OTHER_BY_HEADER));
                gate.arrivals(1).await;
                assert!(
                    asked.elapsed() < FAIL_FAST,
                    "the other tenant is admitted at once"
                );
                assert_eq!(server.lowered_claims(), 0, "{trust:?}");
            }
        }

        gate.open(2);
        for request in held {
            served(request).await;
        }
        assert_eq!(gate.more_arrived(), 0, "{trust:?}: no refused request ran");
        leases_back(&requests).await;
        server.stop().await;
    }
}

/// Case 20: a route declared to cost 4 (`.cost(4)`) on a class of 4
/// holds all four slots with one request, so the next request of the class
/// is refused at once, and gives all four back when its response ends; a
/// cost of 5 is refused where the layer is built, never a wait forever.
pub(crate) async fn a_costly_route_holds_its_whole_cost_and_a_cost_above_the_class_is_a_build_error(
    adapter: Adapter,
) {
    let class = adapter.class();
    let requests = RequestPools::new(4, 4).expect("valid request pools");
    let five = std::num::NonZeroU8::new(5).unwrap();
    assert!(
        adapter.refuses_cost_at_build(&requests, five),
        "a cost above the class is a construction error"
    );
    let (gated, mut gate) = Gate::endpoint();
    let config = Config {
        cost: std::num::NonZeroU8::new(4),
        ..Config::default()
    };
    let server = adapter.serve_with(&requests, routes(gated), config).await;

    let walk = server.spawn_get(GATED);
    gate.arrivals(1).await;
    assert_eq!(
        requests.pool(class).stats().in_use,
        4,
        "one request of cost 4 holds the whole class"
    );
    let asked = Instant::now();
    let refused = server.get(LEVEL).await;
    assert!(asked.elapsed() < FAIL_FAST, "a refusal never waits");
    assert_refused_as(&refused, class.as_str(), SATURATED);

    gate.open(1);
    served(walk).await;
    leases_back(&requests).await;
    assert_eq!(
        gate.more_arrived(),
        0,
        "no refused request reached its handler"
    );
    server.stop().await;
}

/// The second gated route of the queued flow case (the other tenant's), in
/// the same class as [`GATED`].
const GATED_OTHER: &str = "/gated-other";

/// Case 21: in a queued class (`.queue()`) with the app naming flows, one
/// tenant holds every slot and has a request waiting; another tenant's
/// request, queued after it, is served by the next slot that comes back,
/// before the flood's waiter (fair order in the line: the other tenant
/// holds nothing, the flood everything).
pub(crate) async fn a_queued_flow_is_served_before_the_floods_waiter(adapter: Adapter) {
    let class = adapter.class();
    let requests = RequestPools::new(2, 2).expect("valid request pools");
    let (flood_gate, mut flood_arrivals) = Gate::endpoint();
    let (other_gate, mut other_arrivals) = Gate::endpoint();
    let routes = Routes::new()
        .route(GATED, flood_gate)
        .route(GATED_OTHER, other_gate);
    let config = Config {
        flow: true,
        queue: true,
        ..Config::default()
    };
    let server = adapter.serve_with(&requests, routes, config).await;

    let mut flood = vec![
        server.spawn_get_with(GATED, FLOODER),
        server.spawn_get_with(GATED, FLOODER),
    ];
    flood_arrivals.arrivals(2).await;
    flood.push(server.spawn_get_with(GATED, FLOODER));
    eventually("the flood's third request to wait", || {
        requests.pool(class).stats().waiting == 1
    })
    .await;
    let other = server.spawn_get_with(GATED_OTHER, OTHER);
    eventually("the other tenant's request to wait", || {
        requests.pool(class).stats().waiting == 2
    })
    .await;

    // One of the flood's slots comes back: it is the other tenant's.
    flood_arrivals.open(1);
    other_arrivals.arrivals(1).await;
    assert_eq!(
        flood_arrivals.more_arrived(),
        0,
        "the flood's waiter is still waiting"
    );
    assert_eq!(requests.pool(class).stats().waiting, 1);

    flood_arrivals.open(2);
    other_arrivals.open(1);
    served(other).await;
    for request in flood {
        served(request).await;
    }
    leases_back(&requests).await;
    server.stop().await;
}
