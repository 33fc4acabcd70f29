//! Coalesced registry work over real HTTP (issue 10): scrapes that arrive
//! while a walk is held by the test share that one walk, and a panicking
//! shared walk answers every caller with a 500 and leaves no flight behind.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use admission_axum::{AdmissionLayer, registry_coalesced};
use admission_core::{Coalescing, Pool, RequestPools, WorkError};
use axum::extract::State;
use axum::{Router, routing::get};
use bytes::Bytes;
use reqwest::StatusCode;
use tokio::sync::mpsc as tokio_mpsc;

use common::{PATIENCE, client, eventually, problem, serve};

/// Concurrent scrapes in each test.
const N: usize = 8;

type Scrapes = Coalescing<&'static str, Bytes, String>;

/// The walks' side of the test: each walk counts itself, says it started
/// and blocks until the test releases one walk.
#[derive(Clone)]
struct App {
    scrapes: Scrapes,
    walks: Arc<AtomicUsize>,
    started: tokio_mpsc::UnboundedSender<usize>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl App {
    /// A walk for the test to hold: it returns `walk {n}`, or panics when
    /// `panic_on` says so for its number.
    fn walk(
        &self,
        panic_on: fn(usize) -> bool,
    ) -> impl FnOnce() -> Result<Bytes, String> + Send + 'static {
        let (walks, started, release) = (
            Arc::clone(&self.walks),
            self.started.clone(),
            Arc::clone(&self.release),
        );
        move || {
            let n = walks.fetch_add(1, Ordering::SeqCst) + 1;
            started.send(n).map_err(|_| "test gone".to_owned())?;
            let released = release
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recv();
            released.map_err(|_| "release dropped".to_owned())?;
            assert!(!panic_on(n), "registry walk {n} blew up");
            Ok(Bytes::from(format!("walk {n}\n")))
        }
    }
}

async fn metrics(State(app): State<App>) -> Result<Bytes, WorkError<String>> {
    registry_coalesced(&app.scrapes, "/metrics", app.walk(|_| false)).await
}

async fn explode(State(app): State<App>) -> Result<Bytes, WorkError<String>> {
    registry_coalesced(&app.scrapes, "/explode", app.walk(|n| n == 1)).await
}

struct Harness {
    pool: Pool,
    walks: Arc<AtomicUsize>,
    started: tokio_mpsc::UnboundedReceiver<usize>,
    release: mpsc::Sender<()>,
    base: String,
}

impl Harness {
    async fn start() -> Harness {
        let pool = Pool::new("registry", 1).unwrap();
        let (started_tx, started) = tokio_mpsc::unbounded_channel();
        let (release, held) = mpsc::channel();
        let app = App {
            scrapes: Coalescing::new(&pool, Duration::from_secs(60)).unwrap(),
            walks: Arc::new(AtomicUsize::new(0)),
            started: started_tx,
            release: Arc::new(Mutex::new(held)),
        };
        let walks = Arc::clone(&app.walks);
        let requests = RequestPools::new(1, N).unwrap();
        let router = Router::new()
            .route("/metrics", get(metrics))
            .route("/explode", get(explode))
            .layer(AdmissionLayer::new(requests))
            .with_state(app);
        let addr = serve(router).await;
        Harness {
            pool,
            walks,
            started,
            release,
            base: format!("http://{addr}"),
        }
    }

    fn get(&self, path: &str) -> tokio::task::JoinHandle<reqwest::Response> {
        let url = format!("{}{path}", self.base);
        tokio::spawn(async move { client().get(url).send().await.expect("an answer") })
    }

    /// Waits until walk `n` has started on its worker thread.
    async fn walk_started(&mut self, n: usize) {
        let started = tokio::time::timeout(PATIENCE, self.started.recv())
            .await
            .unwrap_or_else(|_| panic!("walk {n} did not start in time"));
        assert_eq!(started, Some(n), "walk {n} is the one that started");
    }

    /// `N` scrapes of `path` in flight on one held walk: the first starts
    /// it, the other `N - 1` join it.
    async fn storm(&mut self, path: &str, walk: usize) -> Vec<reqwest::Response> {
        let coalesced = self.pool.stats().coalesced;
        let mut scrapes = vec![self.get(path)];
        self.walk_started(walk).await;
        scrapes.extend((1..N).map(|_| self.get(path)));
        let pool = self.pool.clone();
        eventually("every other scrape joined the held walk", || {
            pool.stats().coalesced == coalesced + (N as u64 - 1)
        })
        .await;
        assert_eq!(self.pool.stats().in_use, 1, "joining takes no slot");
        self.release.send(()).expect("the walk waits");
        let mut responses = Vec::new();
        for scrape in scrapes {
            responses.push(scrape.await.expect("the request task"));
        }
        responses
    }
}

#[tokio::test]
async fn concurrent_scrapes_share_exactly_one_walk_and_get_identical_bodies() {
    let mut h = Harness::start().await;

    let responses = h.storm("/metrics", 1).await;
    let mut bodies = Vec::new();
    for response in responses {
        assert_eq!(response.status(), StatusCode::OK, "every scrape is served");
        bodies.push(response.text().await.unwrap());
    }
    assert!(
        bodies.iter().all(|b| b == "walk 1\n"),
        "N identical bodies from the one walk: {bodies:?}"
    );
    assert_eq!(h.walks.load(Ordering::SeqCst), 1, "exactly one walk ran");
    let stats = h.pool.stats();
    assert_eq!(
        (stats.coalesced, stats.admitted, stats.refused),
        (N as u64 - 1, 1, 0),
        "one caller admitted, N - 1 coalesced, none refused"
    );
    eventually("the walk's slot is back", || h.pool.stats().in_use == 0).await;
}

#[tokio::test]
async fn a_panicking_shared_walk_is_500_for_every_caller_and_the_next_starts_fresh() {
    let mut h = Harness::start().await;

    let responses = h.storm("/explode", 1).await;
    for response in responses {
        assert_eq!(
            response.status(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "every caller of the panicked walk gets its 500"
        );
        assert!(
            response.headers().get("retry-after").is_none(),
            "a panic is not a refusal"
        );
        let body = problem(response).await;
        assert_eq!(body["code"], "ADMISSION_WORK_PANICKED");
        assert!(
            !body.to_string().contains("blew up"),
            "the panic message never reaches a client"
        );
    }
    let stats = h.pool.stats();
    assert_eq!(
        (stats.panicked, stats.coalesced),
        (1, N as u64 - 1),
        "one panic, counted once, shared by N - 1 joined callers"
    );

    let next = h.get("/explode");
    h.walk_started(2).await;
    h.release.send(()).expect("the fresh walk waits");
    let next = next.await.expect("the request task");
    assert_eq!(
        next.status(),
        StatusCode::OK,
        "the next caller walks afresh"
    );
    assert_eq!(next.text().await.unwrap(), "walk 2\n");
    assert_eq!(
        h.walks.load(Ordering::SeqCst),
        2,
        "a fresh walk, not a join"
    );
    assert_eq!(h.pool.stats().coalesced, N as u64 - 1);
}
