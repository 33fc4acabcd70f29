//! `#[admitted]` handlers over real HTTP, in axum and in actix-web: refused
//! with `503`, `Retry-After` and a problem body when their class is full, run
//! when a slot is free, and pure work inside them takes no second slot. In
//! shadow mode a handler of a full class runs, and the refusal it would have
//! had is counted.
//! Under the adapter's layer (axum) or middleware (actix-web) built from the
//! same pools, a handler shares the request's lease: on a one-slot class an
//! idle server answers `200`, and the request holds one slot.
//!
//! Each test has its own request pools (a `static` named in `pools = ...`),
//! so tests running in parallel never share capacity. Handlers are held with
//! channels, never with sleeps.

use std::convert::Infallible;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use admission_core::{Class, Lease, RequestPools};
use reqwest::{Response, StatusCode};
use tokio::sync::{Mutex, mpsc};

/// Lets a test see a handler reach its middle and decide when it returns.
struct Gate {
    /// What the handler saw: the pool's `in_use` during its pure work, and
    /// the class of the lease it runs under.
    entered: mpsc::UnboundedSender<(usize, Option<Class>)>,
    /// The handler returns once the test sends on the other end.
    release: Mutex<mpsc::UnboundedReceiver<()>>,
}

/// The test's ends of a [`Gate`].
struct GateControl {
    entered: mpsc::UnboundedReceiver<(usize, Option<Class>)>,
    release: mpsc::UnboundedSender<()>,
}

fn gate() -> (Gate, GateControl) {
    let (entered_tx, entered_rx) = mpsc::unbounded_channel();
    let (release_tx, release_rx) = mpsc::unbounded_channel();
    (
        Gate {
            entered: entered_tx,
            release: Mutex::new(release_rx),
        },
        GateControl {
            entered: entered_rx,
            release: release_tx,
        },
    )
}

/// Runs pure work that reports its class's `in_use` from the worker thread,
/// then tells the test and waits to be released.
async fn held_handler(pools: &'static RequestPools, gate: &Gate) -> String {
    // The work owns a handle on the pool (a borrow captured by the closure
    // would make the handler's future `Send` for one lifetime only).
    let pool = pools.pool(Class::Work).clone();
    let in_use = pools
        .execute_pure(Class::Work, move || {
            Ok::<_, Infallible>(pool.stats().in_use)
        })
        .await
        .expect("pure work under the handler's lease must run");
    let class = Lease::current().map(|lease| lease.class());
    gate.entered
        .send((in_use, class))
        .expect("the test waits for the handler");
    gate.release.lock().await.recv().await;
    format!("in_use={in_use}")
}

/// Waits for the handler to report from its middle; a request that ends
/// first (refused by the layer or by the attribute itself) fails the test
/// instead of leaving it waiting forever.
async fn wait_for_handler(
    control: &mut GateControl,
    request: &mut tokio::task::JoinHandle<Response>,
) -> (usize, Option<Class>) {
    tokio::select! {
        entered = control.entered.recv() => entered.expect("the handler reports"),
        response = request => panic!(
            "an idle server must run the handler, but the request ended first with {}",
            response.expect("the request task ends").status()
        ),
    }
}

/// Takes every slot of `class`, as concurrent requests would.
fn hold_every_slot(pools: &RequestPools, class: Class) -> Vec<Lease> {
    let held: Vec<Lease> = std::iter::from_fn(|| pools.try_lease(class).ok()).collect();
    assert_eq!(
        held.len(),
        pools.pool(class).capacity(),
        "the test must hold every slot of `{class}`"
    );
    held
}

/// Checks a refusal: `503`, `Retry-After` of at least 1 s and a problem body
/// naming the code and the class's pool.
async fn assert_refused(response: Response, class: Class) {
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a full class refuses with 503"
    );
    let retry_after: u32 = response
        .headers()
        .get("retry-after")
        .expect("a refusal carries `retry-after`")
        .to_str()
        .expect("`retry-after` is ASCII")
        .parse()
        .expect("`retry-after` is whole seconds");
    assert!(retry_after >= 1, "`retry-after` is at least 1 s");
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .map(reqwest::header::HeaderValue::as_bytes),
        Some(admission_http::PROBLEM_JSON.as_bytes()),
        "a refusal is a problem document"
    );
    let body: serde_json::Value =
        serde_json::from_str(&response.text().await.expect("a refusal has a body"))
            .expect("the problem body is JSON");
    assert_eq!(body["status"], 503, "the body repeats the status");
    assert_eq!(
        body["code"], "ADMISSION_SATURATED",
        "the body names the code"
    );
    assert_eq!(
        body["pool"],
        class.as_str(),
        "the body names the class's pool"
    );
}

async fn get(url: &str) -> Response {
    reqwest::get(url).await.expect("the server answers")
}

async fn post(url: String) -> Response {
    reqwest::Client::new()
        .post(url)
        .send()
        .await
        .expect("the server answers")
}

/// Serves `app` on a fresh loopback port; its base URL.
async fn spawn_axum(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind port 0");
    let addr = listener.local_addr().expect("bound address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Serves the app `factory` builds with one worker on a fresh loopback
/// port; its base URL and the server's handle. (A macro: `HttpServer::new`
/// takes any app factory, whose type a function could not name.)
macro_rules! spawn_actix {
    ($factory:expr) => {{
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        let server = HttpServer::new($factory)
            .workers(1)
            .listen(listener)
            .expect("listen on the bound socket")
            .run();
        let handle = server.handle();
        actix_rt::spawn(server);
        (format!("http://{addr}"), handle)
    }};
}

/// The cost tests' pools and handlers, declared in each framework's module
/// (its own `admitted`, and pools of its own: the tests run in parallel):
/// `walk` costs two of `COSTLY`'s three work slots, `full_walk` (failing
/// fast) and `queued_full_walk` (queued) all three of `LAYERED_COSTLY`'s,
/// whose lease a layer takes first. Each answers the work class's `in_use`
/// while it runs.
macro_rules! costly_handlers {
    () => {
        pub(super) static COSTLY: LazyLock<RequestPools> =
            LazyLock::new(|| RequestPools::new(3, 1).expect("valid pools"));

        #[admitted(class = work, pools = COSTLY, cost = 2)]
        async fn walk() -> String {
            COSTLY.pool(Class::Work).stats().in_use.to_string()
        }

        pub(super) static LAYERED_COSTLY: LazyLock<RequestPools> =
            LazyLock::new(|| RequestPools::new(3, 1).expect("valid pools"));

        #[admitted(class = work, pools = LAYERED_COSTLY, cost = 3)]
        async fn full_walk() -> String {
            LAYERED_COSTLY.pool(Class::Work).stats().in_use.to_string()
        }

        #[admitted(class = work, pools = LAYERED_COSTLY, cost = 3, queue)]
        async fn queued_full_walk() -> String {
            LAYERED_COSTLY.pool(Class::Work).stats().in_use.to_string()
        }
    };
}

/// The handler of the shadow-mode tests, for each framework's module (its
/// own `admitted`, and pools of its own): `shadowed` leases a *control*
/// slot of `SHADOWED`'s one.
macro_rules! shadowed_handler {
    () => {
        pub(super) static SHADOWED: LazyLock<RequestPools> =
            LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

        #[admitted(class = control, pools = SHADOWED)]
        async fn shadowed() -> String {
            String::from("ok")
        }
    };
}

mod axum_handlers {
    use std::sync::Arc;

    use admission_axum::{AdmissionLayer, admitted};
    use axum::Router;
    use axum::extract::State;
    use axum::routing::{get, post};

    use super::*;

    pub(super) static FULL: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 2).expect("valid pools"));
    pub(super) static FULL_RAN: AtomicUsize = AtomicUsize::new(0);

    #[admitted(class = control, pools = FULL)]
    async fn status() -> String {
        FULL_RAN.fetch_add(1, Ordering::SeqCst);
        String::from("ok")
    }

    shadowed_handler!();

    pub(super) static HELD: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    #[admitted(class = work, pools = HELD)]
    async fn rotate(State(gate): State<Arc<Gate>>) -> String {
        held_handler(&HELD, &gate).await
    }

    /// Serves the handlers on 127.0.0.1 and returns the base URL.
    pub(super) async fn serve(gate: Gate) -> String {
        let app = Router::new()
            .route("/status", get(status))
            .route("/shadowed", get(shadowed))
            .route("/rotate", post(rotate))
            .with_state(Arc::new(gate));
        spawn_axum(app).await
    }

    /// Two work slots, shared by tenants: the route names each request's
    /// flow from its path.
    pub(super) static FLOWS: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    #[admitted(class = work, pools = FLOWS, flow = tenant)]
    async fn job(axum::extract::Path(tenant): axum::extract::Path<String>) -> String {
        format!("{tenant}: {}", admission_core::Caller::current().has_flow())
    }

    /// Serves `job` at `/jobs/{tenant}` and returns the base URL.
    pub(super) async fn serve_flows() -> String {
        let app = Router::new().route("/jobs/{tenant}", post(job));
        spawn_axum(app).await
    }

    /// One work slot, taken by the layer and shared by the attribute.
    pub(super) static LAYERED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

    #[admitted(class = work, pools = LAYERED)]
    async fn layered(State(gate): State<Arc<Gate>>) -> String {
        held_handler(&LAYERED, &gate).await
    }

    /// Serves `layered` under an `AdmissionLayer` of the same pools and
    /// returns the base URL.
    pub(super) async fn serve_layered(gate: Gate) -> String {
        let app = Router::new()
            .route("/layered", post(layered))
            .layer(AdmissionLayer::new(LAYERED.clone()))
            .with_state(Arc::new(gate));
        spawn_axum(app).await
    }

    costly_handlers!();

    /// Serves `walk` at `/walk`, and `full_walk` and `queued_full_walk`
    /// at `/full-walk` and `/queued-full-walk` under an `AdmissionLayer` of
    /// their pools; returns the base URL.
    pub(super) async fn serve_costly() -> String {
        let app = Router::new().route("/walk", post(walk)).merge(
            Router::new()
                .route("/full-walk", post(full_walk))
                .route("/queued-full-walk", post(queued_full_walk))
                .layer(AdmissionLayer::new(LAYERED_COSTLY.clone())),
        );
        spawn_axum(app).await
    }
}

#[tokio::test]
async fn axum_handler_is_refused_when_its_class_is_full_and_runs_when_a_slot_is_free() {
    use axum_handlers::{FULL, FULL_RAN};
    let (gate, _control) = gate();
    let base = axum_handlers::serve(gate).await;

    let held = hold_every_slot(&FULL, Class::Control);
    assert_refused(get(&format!("{base}/status")).await, Class::Control).await;
    assert_eq!(
        FULL_RAN.load(Ordering::SeqCst),
        0,
        "a refused handler never runs"
    );

    drop(held);
    let response = get(&format!("{base}/status")).await;
    assert_eq!(response.status(), StatusCode::OK, "a free slot admits");
    assert_eq!(response.text().await.expect("body"), "ok");
    assert_eq!(
        FULL_RAN.load(Ordering::SeqCst),
        1,
        "the admitted handler ran once"
    );
    assert_eq!(
        FULL.pool(Class::Control).stats().in_use,
        0,
        "the lease ends when the handler returns"
    );
}

#[tokio::test]
async fn axum_handler_holds_one_slot_and_its_pure_work_takes_no_second() {
    use axum_handlers::HELD;
    let (gate, mut control) = gate();
    let base = axum_handlers::serve(gate).await;

    let first = tokio::spawn(post(format!("{base}/rotate")));
    let (in_use, class) = control.entered.recv().await.expect("the handler runs");
    assert_eq!(in_use, 1, "pure work runs under the handler's lease");
    assert_eq!(
        class,
        Some(Class::Work),
        "the body runs in the lease's scope"
    );

    // One of two work slots is held by the handler: the test takes the other,
    // and the class is full for the next request.
    let other = HELD
        .try_lease(Class::Work)
        .expect("the second slot is free");
    assert_refused(post(format!("{base}/rotate")).await, Class::Work).await;
    drop(other);

    control.release.send(()).expect("the handler waits");
    let response = first.await.expect("the request task ends");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.expect("body"), "in_use=1");
    assert_eq!(
        HELD.pool(Class::Work).stats().in_use,
        0,
        "every slot is back"
    );
}

mod actix_handlers {
    use actix_web::dev::ServerHandle;
    use actix_web::{App, HttpServer, web};
    use admission_actix::{AdmissionControl, admitted};

    use super::*;

    pub(super) static FULL: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 2).expect("valid pools"));
    pub(super) static FULL_RAN: AtomicUsize = AtomicUsize::new(0);

    #[admitted(class = control, pools = FULL)]
    async fn status() -> String {
        FULL_RAN.fetch_add(1, Ordering::SeqCst);
        String::from("ok")
    }

    shadowed_handler!();

    pub(super) static HELD: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    #[admitted(class = work, pools = HELD)]
    async fn rotate(gate: web::Data<Gate>) -> String {
        held_handler(&HELD, &gate).await
    }

    /// Serves the handlers on 127.0.0.1 with one worker and returns the base
    /// URL and the server's handle.
    pub(super) fn serve(gate: Gate) -> (String, ServerHandle) {
        let gate = web::Data::new(gate);
        spawn_actix!(move || {
            App::new()
                .app_data(gate.clone())
                .route("/status", web::get().to(status))
                .route("/shadowed", web::get().to(shadowed))
                .route("/rotate", web::post().to(rotate))
        })
    }

    /// Two work slots, shared by tenants: the route names each request's
    /// flow from its path.
    pub(super) static FLOWS: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    #[admitted(class = work, pools = FLOWS, flow = tenant.as_str())]
    async fn job(tenant: web::Path<String>) -> String {
        format!("{tenant}: {}", admission_core::Caller::current().has_flow())
    }

    /// Serves `job` at `/jobs/{tenant}` with one worker and returns the
    /// base URL and the server's handle.
    pub(super) fn serve_flows() -> (String, ServerHandle) {
        spawn_actix!(|| App::new().route("/jobs/{tenant}", web::post().to(job)))
    }

    /// One work slot, taken by the middleware and shared by the attribute.
    pub(super) static LAYERED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

    #[admitted(class = work, pools = LAYERED)]
    async fn layered(gate: web::Data<Gate>) -> String {
        held_handler(&LAYERED, &gate).await
    }

    /// Serves `layered` under an `AdmissionControl` of the same pools with
    /// one worker and returns the base URL and the server's handle.
    pub(super) fn serve_layered(gate: Gate) -> (String, ServerHandle) {
        let gate = web::Data::new(gate);
        spawn_actix!(move || {
            App::new()
                .wrap(AdmissionControl::new(LAYERED.clone()))
                .app_data(gate.clone())
                .route("/layered", web::post().to(layered))
        })
    }

    costly_handlers!();

    /// Serves `walk` at `/walk`, and `full_walk` and `queued_full_walk`
    /// at `/full-walk` and `/queued-full-walk` in a scope under an
    /// `AdmissionControl` of their pools, with one worker; returns the base
    /// URL and the server's handle.
    pub(super) fn serve_costly() -> (String, ServerHandle) {
        spawn_actix!(|| {
            App::new().route("/walk", web::post().to(walk)).service(
                web::scope("")
                    .wrap(AdmissionControl::new(LAYERED_COSTLY.clone()))
                    .route("/full-walk", web::post().to(full_walk))
                    .route("/queued-full-walk", web::post().to(queued_full_walk)),
            )
        })
    }
}

#[actix_web::test]
async fn actix_handler_is_refused_when_its_class_is_full_and_runs_when_a_slot_is_free() {
    use actix_handlers::{FULL, FULL_RAN};
    let (gate, _control) = gate();
    let (base, server) = actix_handlers::serve(gate);

    let held = hold_every_slot(&FULL, Class::Control);
    assert_refused(get(&format!("{base}/status")).await, Class::Control).await;
    assert_eq!(
        FULL_RAN.load(Ordering::SeqCst),
        0,
        "a refused handler never runs"
    );

    drop(held);
    let response = get(&format!("{base}/status")).await;
    assert_eq!(response.status(), StatusCode::OK, "a free slot admits");
    assert_eq!(response.text().await.expect("body"), "ok");
    assert_eq!(
        FULL_RAN.load(Ordering::SeqCst),
        1,
        "the admitted handler ran once"
    );
    assert_eq!(
        FULL.pool(Class::Control).stats().in_use,
        0,
        "the lease ends when the handler returns"
    );
    server.stop(false).await;
}

#[actix_web::test]
async fn actix_handler_holds_one_slot_and_its_pure_work_takes_no_second() {
    use actix_handlers::HELD;
    let (gate, mut control) = gate();
    let (base, server) = actix_handlers::serve(gate);

    let first = actix_rt::spawn(post(format!("{base}/rotate")));
    let (in_use, class) = control.entered.recv().await.expect("the handler runs");
    assert_eq!(in_use, 1, "pure work runs under the handler's lease");
    assert_eq!(
        class,
        Some(Class::Work),
        "the body runs in the lease's scope"
    );

    let other = HELD
        .try_lease(Class::Work)
        .expect("the second slot is free");
    assert_refused(post(format!("{base}/rotate")).await, Class::Work).await;
    drop(other);

    control.release.send(()).expect("the handler waits");
    let response = first.await.expect("the request task ends");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.expect("body"), "in_use=1");
    assert_eq!(
        HELD.pool(Class::Work).stats().in_use,
        0,
        "every slot is back"
    );
    server.stop(false).await;
}

#[tokio::test]
async fn axum_handler_under_a_layer_of_the_same_pools_shares_its_one_slot() {
    use axum_handlers::LAYERED;
    let (gate, mut control) = gate();
    let base = axum_handlers::serve_layered(gate).await;

    let mut first = tokio::spawn(post(format!("{base}/layered")));
    let (in_use, class) = wait_for_handler(&mut control, &mut first).await;
    assert_eq!(
        LAYERED.pool(Class::Work).stats().in_use,
        1,
        "the layer and the attribute hold one slot for the request"
    );
    assert_eq!(in_use, 1, "pure work runs under the request's one lease");
    assert_eq!(
        class,
        Some(Class::Work),
        "the body runs in the lease's scope"
    );

    control.release.send(()).expect("the handler waits");
    let response = first.await.expect("the request task ends");
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "an idle server never refuses itself"
    );
    assert_eq!(response.text().await.expect("body"), "in_use=1");
}

#[actix_web::test]
async fn actix_handler_under_a_middleware_of_the_same_pools_shares_its_one_slot() {
    use actix_handlers::LAYERED;
    let (gate, mut control) = gate();
    let (base, server) = actix_handlers::serve_layered(gate);

    let mut first = actix_rt::spawn(post(format!("{base}/layered")));
    let (in_use, class) = wait_for_handler(&mut control, &mut first).await;
    assert_eq!(
        LAYERED.pool(Class::Work).stats().in_use,
        1,
        "the middleware and the attribute hold one slot for the request"
    );
    assert_eq!(in_use, 1, "pure work runs under the request's one lease");
    assert_eq!(
        class,
        Some(Class::Work),
        "the body runs in the lease's scope"
    );

    control.release.send(()).expect("the handler waits");
    let response = first.await.expect("the request task ends");
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "an idle server never refuses itself"
    );
    assert_eq!(response.text().await.expect("body"), "in_use=1");
    server.stop(false).await;
}

/// `#[admitted(class = control, pools = ..)]` at `base`'s `/shadowed`,
/// its class full: in shadow mode the handler runs and the refusal it
/// would have had is counted; switched back, the next request is refused.
async fn the_handler_in_shadow_is_served_and_counted(base: &str, pools: &RequestPools) {
    let held = hold_every_slot(pools, Class::Control);
    // `hold_every_slot` stops at its first refusal.
    let refused_before = pools.pool(Class::Control).stats().refused;
    pools.set_shadow(true);
    let response = get(&format!("{base}/shadowed")).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "shadow mode serves a full class"
    );
    assert_eq!(response.text().await.expect("body"), "ok");
    let stats = pools.pool(Class::Control).stats();
    assert_eq!(
        (
            stats.would_refuse_with(admission_core::Code::Saturated),
            stats.refused - refused_before
        ),
        (1, 0),
        "counted as the refusal it would have been, refused nothing"
    );
    assert_eq!(
        (stats.in_use, stats.overdraft),
        (1, 0),
        "the slot past the capacity went back with the handler"
    );

    pools.set_shadow(false);
    assert_refused(get(&format!("{base}/shadowed")).await, Class::Control).await;
    drop(held);
}

#[tokio::test]
async fn axum_handler_in_shadow_mode_is_served_and_counted() {
    let (gate, _control) = gate();
    let base = axum_handlers::serve(gate).await;
    the_handler_in_shadow_is_served_and_counted(&base, &axum_handlers::SHADOWED).await;
}

#[actix_web::test]
async fn actix_handler_in_shadow_mode_is_served_and_counted() {
    let (gate, _control) = gate();
    let (base, server) = actix_handlers::serve(gate);
    the_handler_in_shadow_is_served_and_counted(&base, &actix_handlers::SHADOWED).await;
    server.stop(false).await;
}

/// The code of a response that must be a refusal.
async fn refusal_code(response: Response) -> String {
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a refusal is a 503"
    );
    let body: serde_json::Value =
        serde_json::from_str(&response.text().await.expect("a refusal has a body"))
            .expect("the problem body is JSON");
    assert!(
        !body.to_string().contains("tenant-"),
        "a refusal never echoes the flow: {body}"
    );
    body["code"].as_str().expect("a code").to_owned()
}

/// `#[admitted(flow = tenant)]`, over `base`'s `/jobs/{tenant}` on `pools`:
/// with tenant-a holding both work slots, tenant-b is refused (nothing is
/// free) and asks; once a slot frees, tenant-a's next request is refused
/// `ADMISSION_FLOW_SHARE` with that slot free, and tenant-b's is admitted,
/// for its own flow.
async fn the_routes_flow_is_held_to_its_share(base: &str, pools: &RequestPools) {
    let flooding = admission_core::Caller::default().with_flow("tenant-a");
    let mut held = vec![
        pools
            .try_lease_for(Class::Work, flooding)
            .expect("a free slot"),
        pools
            .try_lease_for(Class::Work, flooding)
            .expect("alone, a flow gets every slot"),
    ];
    let refused = refusal_code(post(format!("{base}/jobs/tenant-b")).await).await;
    assert_eq!(refused, "ADMISSION_SATURATED", "no slot is free");
    held.pop();
    let over = refusal_code(post(format!("{base}/jobs/tenant-a")).await).await;
    assert_eq!(
        over, "ADMISSION_FLOW_SHARE",
        "the free slot is tenant-b's share: the route's flow is tenant-a's"
    );
    let admitted = post(format!("{base}/jobs/tenant-b")).await;
    assert_eq!(
        admitted.status(),
        StatusCode::OK,
        "tenant-b is under its share"
    );
    assert_eq!(admitted.text().await.expect("body"), "tenant-b: true");
    drop(held);
}

#[tokio::test]
async fn axum_handler_with_a_flow_is_held_to_its_share() {
    let base = axum_handlers::serve_flows().await;
    the_routes_flow_is_held_to_its_share(&base, &axum_handlers::FLOWS).await;
}

#[actix_web::test]
async fn actix_handler_with_a_flow_is_held_to_its_share() {
    let (base, server) = actix_handlers::serve_flows();
    the_routes_flow_is_held_to_its_share(&base, &actix_handlers::FLOWS).await;
    server.stop(false).await;
}

/// `#[admitted(cost = 2)]` and, under a layer of its pools,
/// `#[admitted(cost = 3)]` failing fast and queued, over `base`'s `/walk`,
/// `/full-walk` and `/queued-full-walk` on
/// classes of three: each handler runs holding its whole cost (the one
/// under the layer tops the layer's lease up: three, not one), a request
/// of cost 2 is refused at once with one slot free, and every slot is back
/// once each answer is in.
async fn a_routes_cost_is_held_whole(base: &str, costly: &RequestPools, layered: &RequestPools) {
    let walked = post(format!("{base}/walk")).await;
    assert_eq!(walked.status(), StatusCode::OK, "an idle class admits");
    assert_eq!(
        walked.text().await.expect("body"),
        "2",
        "the handler runs holding its cost"
    );
    let held: [Lease; 2] =
        std::array::from_fn(|_| costly.try_lease(Class::Work).expect("a free slot"));
    let refused = refusal_code(post(format!("{base}/walk")).await).await;
    assert_eq!(
        refused, "ADMISSION_SATURATED",
        "one slot free, and the route costs two"
    );
    drop(held);
    assert_eq!(costly.pool(Class::Work).stats().in_use, 0, "all back");

    for route in ["full-walk", "queued-full-walk"] {
        let walked = post(format!("{base}/{route}")).await;
        assert_eq!(walked.status(), StatusCode::OK, "an idle server admits");
        assert_eq!(
            walked.text().await.expect("body"),
            "3",
            "the layer's lease of one, topped up to the route's three ({route})"
        );
        // The layer's lease ends with the response body, on the server's
        // thread: nothing signals it, so it is polled for, within 5 s.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while layered.pool(Class::Work).stats().in_use != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "every slot back within 5 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

#[tokio::test]
async fn axum_handler_holds_its_cost_alone_and_under_the_layer() {
    let base = axum_handlers::serve_costly().await;
    a_routes_cost_is_held_whole(
        &base,
        &axum_handlers::COSTLY,
        &axum_handlers::LAYERED_COSTLY,
    )
    .await;
}

#[actix_web::test]
async fn actix_handler_holds_its_cost_alone_and_under_the_middleware() {
    let (base, server) = actix_handlers::serve_costly();
    a_routes_cost_is_held_whole(
        &base,
        &actix_handlers::COSTLY,
        &actix_handlers::LAYERED_COSTLY,
    )
    .await;
    server.stop(false).await;
}
