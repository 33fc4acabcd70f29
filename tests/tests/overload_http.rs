//! Issue 17 over real HTTP on loopback, with the pieces combined as users
//! combine them: the criticality and budget headers read by the layer, the
//! middleware and `CallerLayer`, `#[admitted]` with a fixed criticality or
//! the queue, and a handler's own `Pool::run` under a layer's caller.
//!
//! Slots are held by leases or by real worker threads blocked on channels;
//! waits are observed through the pools' `waiting` count, never slept on.

use std::sync::LazyLock;
use std::time::Duration;

use admission_core::{Admission, Caller, Class, Lease, Pool, RequestPools};
use admission_http::{BUDGET_HEADER, CRITICALITY_HEADER};
use reqwest::{Response, StatusCode};

/// The problem body of a refusal, checked to be one.
async fn refusal_body(response: Response) -> serde_json::Value {
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    serde_json::from_str(&response.text().await.expect("a body")).expect("a problem body")
}

async fn get(url: &str, headers: &[(&str, &str)]) -> Response {
    let mut request = reqwest::Client::new().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("the server answers")
}

/// Waits until `n` callers wait on `pool`.
async fn until_waiting(pool: &Pool, n: usize) {
    while pool.stats().waiting != n {
        tokio::task::yield_now().await;
    }
}

/// One of the two work slots, held by the test (outside the server).
fn hold_one(pools: &RequestPools) -> Lease {
    let held = pools.try_lease(Class::Work).expect("a free work slot");
    assert_eq!(pools.pool(Class::Work).capacity(), 2);
    held
}

mod axum_app {
    use admission_axum::{AdmissionLayer, CallerLayer, Rejection, admitted};
    use axum::Router;
    use axum::routing::get;

    use super::*;

    pub(super) static SHED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    #[admitted(class = work, pools = SHED, criticality = sheddable)]
    async fn prefetch() -> &'static str {
        "prefetched"
    }

    #[admitted(class = work, pools = SHED)]
    async fn page() -> &'static str {
        "page"
    }

    pub(super) static QUEUED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

    #[admitted(class = work, pools = QUEUED, queue)]
    async fn queued() -> &'static str {
        "served"
    }

    pub(super) static LAYERED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    /// A registry pool the handler runs its work on, under `CallerLayer`.
    pub(super) static REGISTRY: LazyLock<Pool> =
        LazyLock::new(|| Pool::new("overload-registry", 2).expect("valid pool"));

    async fn walk() -> Result<String, Rejection> {
        // A clone (an `Arc`): a borrow of the static held across the await
        // would make the handler's future `Send` for one lifetime only.
        let pool = Pool::clone(&REGISTRY);
        Ok(pool
            .run(
                || Ok::<String, std::fmt::Error>("walked".to_owned()),
                Admission::FailFast,
            )
            .await?)
    }

    async fn ok() -> &'static str {
        "ok"
    }

    /// One work slot, a layer of the same pools around a handler whose
    /// route fixes its criticality.
    pub(super) static FIXED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

    #[admitted(class = work, pools = FIXED, criticality = critical)]
    async fn fixed() -> String {
        let lease = Lease::current().map(|lease| lease.class());
        format!("{} {lease:?}", Caller::current().criticality())
    }

    pub(super) async fn serve() -> (String, AdmissionLayer, CallerLayer) {
        let layer = AdmissionLayer::class(LAYERED.clone(), Class::Work);
        let caller = CallerLayer::new();
        let app = Router::new()
            .route("/prefetch", get(prefetch))
            .route("/page", get(page))
            .route("/queued", get(queued))
            .merge(
                Router::new()
                    .route("/layered", get(ok))
                    .layer(layer.clone()),
            )
            .merge(
                Router::new()
                    .route("/walk", get(walk))
                    .layer(caller.clone()),
            )
            .merge(
                Router::new()
                    .route("/fixed", get(fixed))
                    .layer(AdmissionLayer::class(FIXED.clone(), Class::Work)),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), layer, caller)
    }
}

#[tokio::test]
async fn admitted_with_a_fixed_criticality_is_shed_first_while_default_routes_are_served() {
    let (base, ..) = axum_app::serve().await;
    let held = hold_one(&axum_app::SHED);

    let body = refusal_body(get(&format!("{base}/prefetch"), &[]).await).await;
    assert_eq!(body["code"], "ADMISSION_SATURATED");
    assert_eq!(body["criticality"], "sheddable");
    // A client cannot raise a route the service marked sheddable.
    let raised = get(
        &format!("{base}/prefetch"),
        &[(CRITICALITY_HEADER, "critical")],
    )
    .await;
    assert_eq!(raised.status(), StatusCode::SERVICE_UNAVAILABLE);

    let page = get(&format!("{base}/page"), &[]).await;
    assert_eq!(
        page.status(),
        StatusCode::OK,
        "default work takes the second slot"
    );
    assert_eq!(
        axum_app::SHED
            .pool(Class::Work)
            .stats()
            .refused_by_criticality,
        [0, 0, 2]
    );

    drop(held);
    let free = get(&format!("{base}/prefetch"), &[]).await;
    assert_eq!(
        free.text().await.unwrap(),
        "prefetched",
        "an idle pool serves it"
    );
}

#[tokio::test]
async fn admitted_with_the_queue_waits_for_a_slot_instead_of_refusing() {
    let (base, ..) = axum_app::serve().await;
    let pool = axum_app::QUEUED.pool(Class::Work).clone();
    let held = axum_app::QUEUED.try_lease(Class::Work).unwrap();

    let url = format!("{base}/queued");
    let waiting = tokio::spawn(async move { get(&url, &[]).await });
    until_waiting(&pool, 1).await;
    drop(held);
    let response = waiting.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "served");
    assert_eq!((pool.stats().refused, pool.stats().in_use), (0, 0));

    // A queue that does not move refuses at its limit with the same 503 and
    // Retry-After as a fail-fast refusal (the default limit is 100 ms).
    let _held = axum_app::QUEUED.try_lease(Class::Work).unwrap();
    let body = refusal_body(get(&format!("{base}/queued"), &[]).await).await;
    assert_eq!(body["code"], "ADMISSION_WAIT_TIMEOUT");
    assert_eq!(pool.stats().waiting, 0);
}

#[tokio::test]
async fn the_layer_admits_at_the_criticality_the_header_names_and_ignores_a_bad_budget() {
    let (base, layer, _) = axum_app::serve().await;
    let held = hold_one(&axum_app::LAYERED);
    let url = format!("{base}/layered");

    let body = refusal_body(get(&url, &[(CRITICALITY_HEADER, "Sheddable")]).await).await;
    assert_eq!(body["criticality"], "sheddable");
    for value in ["critical", "nonsense<script>"] {
        let served = get(&url, &[(CRITICALITY_HEADER, value)]).await;
        assert_eq!(
            served.status(),
            StatusCode::OK,
            "{value} takes the free slot"
        );
    }

    let served = get(
        &url,
        &[(BUDGET_HEADER, "-1"), (CRITICALITY_HEADER, "default")],
    )
    .await;
    assert_eq!(
        served.status(),
        StatusCode::OK,
        "a malformed budget is ignored"
    );
    assert_eq!(layer.malformed_headers(), 1, "and counted");
    drop(held);
}

#[tokio::test]
async fn a_handlers_own_work_under_caller_layer_is_refused_when_the_budget_cannot_cover_it() {
    let (base, _, caller) = axum_app::serve().await;
    // Teach the registry pool that a walk takes about 60 ms.
    for _ in 0..3 {
        axum_app::REGISTRY
            .run(
                || {
                    std::thread::sleep(Duration::from_millis(60));
                    Ok::<_, std::fmt::Error>(())
                },
                Admission::Wait,
            )
            .await
            .unwrap();
    }
    let url = format!("{base}/walk");
    let body = refusal_body(get(&url, &[(BUDGET_HEADER, "5")]).await).await;
    assert_eq!(body["code"], "ADMISSION_BUDGET_TOO_SHORT");
    assert_eq!(body["pool"], "overload-registry");
    assert_eq!(
        axum_app::REGISTRY.stats().in_use,
        0,
        "no slot was taken for it"
    );

    let walked = get(&url, &[(BUDGET_HEADER, "30000")]).await;
    assert_eq!(walked.text().await.unwrap(), "walked");
    let envoy = get(&url, &[("x-envoy-expected-rq-timeout-ms", "1")]).await;
    assert_eq!(
        refusal_body(envoy).await["code"],
        "ADMISSION_BUDGET_TOO_SHORT"
    );
    assert_eq!(caller.malformed_headers(), 0);
}

mod actix_app {
    use actix_web::dev::ServerHandle;
    use actix_web::{App, HttpResponse, HttpServer, web};
    use admission_actix::AdmissionControl;

    use super::*;

    pub(super) static POOLS: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(2, 1).expect("valid pools"));

    pub(super) fn serve() -> (String, ServerHandle, AdmissionControl) {
        let control = AdmissionControl::class(POOLS.clone(), Class::Work);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        let wrap = control.clone();
        let server = HttpServer::new(move || {
            App::new()
                .wrap(wrap.clone())
                .default_service(web::to(HttpResponse::Ok))
        })
        .workers(1)
        .listen(listener)
        .expect("listen on the bound socket")
        .run();
        let handle = server.handle();
        actix_rt::spawn(server);
        (format!("http://{addr}"), handle, control)
    }
}

#[actix_web::test]
async fn the_actix_middleware_sheds_by_the_header_and_counts_a_bad_budget() {
    let (base, server, control) = actix_app::serve();
    let held = hold_one(&actix_app::POOLS);

    let body = refusal_body(get(&base, &[(CRITICALITY_HEADER, "sheddable")]).await).await;
    assert_eq!(body["criticality"], "sheddable");
    assert_eq!(body["code"], "ADMISSION_SATURATED");
    let served = get(&base, &[(BUDGET_HEADER, "12ms")]).await;
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(control.malformed_headers(), 1);
    drop(held);
    server.stop(false).await;
}

mod queued_layers {
    use actix_web::dev::ServerHandle;
    use actix_web::{App, HttpResponse, HttpServer, web};
    use admission_actix::AdmissionControl;
    use admission_axum::AdmissionLayer;
    use axum::Router;
    use axum::routing::get;

    use super::*;

    pub(super) static AXUM: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));
    pub(super) static ACTIX: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

    /// One work slot for a queued layer (or middleware) around a handler
    /// with `#[admitted(queue)]` of the same pools, one per framework.
    pub(super) static AXUM_STACKED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));
    pub(super) static ACTIX_STACKED: LazyLock<RequestPools> =
        LazyLock::new(|| RequestPools::new(1, 1).expect("valid pools"));

    #[admission_axum::admitted(class = work, pools = AXUM_STACKED, queue)]
    async fn axum_stacked() -> &'static str {
        "stacked"
    }

    #[admission_actix::admitted(class = work, pools = ACTIX_STACKED, queue)]
    async fn actix_stacked() -> String {
        String::from("stacked")
    }

    pub(super) async fn serve_axum() -> String {
        let app = Router::new()
            .route("/", get(|| async { "served" }))
            .layer(AdmissionLayer::class(AXUM.clone(), Class::Work).queue())
            .merge(
                Router::new()
                    .route("/stacked", get(axum_stacked))
                    .layer(AdmissionLayer::class(AXUM_STACKED.clone(), Class::Work).queue()),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/")
    }

    /// Serves `routes` on 127.0.0.1 under a queued middleware of `pools`,
    /// with one worker, and returns the base URL and the server's handle.
    fn serve_actix_queued(
        pools: &'static LazyLock<RequestPools>,
        routes: fn(&mut web::ServiceConfig),
    ) -> (String, ServerHandle) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        let server = HttpServer::new(move || {
            App::new()
                .wrap(AdmissionControl::class(RequestPools::clone(pools), Class::Work).queue())
                .configure(routes)
        })
        .workers(1)
        .listen(listener)
        .expect("listen on the bound socket")
        .run();
        let handle = server.handle();
        actix_rt::spawn(server);
        (format!("http://{addr}/"), handle)
    }

    pub(super) fn serve_actix() -> (String, ServerHandle) {
        serve_actix_queued(&ACTIX, |routes| {
            routes.default_service(web::to(|| async { HttpResponse::Ok().body("served") }));
        })
    }

    /// `actix_stacked` under a queued middleware of the same pools.
    pub(super) fn serve_actix_stacked() -> (String, ServerHandle) {
        serve_actix_queued(&ACTIX_STACKED, |routes| {
            routes.route("/stacked", web::get().to(actix_stacked));
        })
    }
}

/// A queued layer: a request waits while the class is full and is served
/// when the slot comes back; the next, with the slot held on, is refused at
/// the queue's limit with the fail-fast answer.
async fn a_queued_layer_serves_a_burst_and_refuses_at_the_limit(url: String, pools: &RequestPools) {
    let pool = pools.pool(Class::Work).clone();
    let held = pools.try_lease(Class::Work).unwrap();
    let waiting = tokio::spawn({
        let url = url.clone();
        async move { get(&url, &[]).await }
    });
    until_waiting(&pool, 1).await;
    drop(held);
    let response = waiting.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "served");
    assert_eq!(pool.stats().refused, 0);

    let _held = pools.try_lease(Class::Work).unwrap();
    // A client's `critical` claim is not trusted by default: it waits and is
    // refused as the `default` caller it is served as.
    let body = refusal_body(get(&url, &[(CRITICALITY_HEADER, "critical")]).await).await;
    assert_eq!(body["code"], "ADMISSION_WAIT_TIMEOUT");
    assert_eq!(body["criticality"], "default");
    assert_eq!(pool.stats().waiting, 0);
}

#[tokio::test]
async fn the_axum_layer_with_the_queue_serves_a_burst_and_refuses_at_the_limit() {
    let url = queued_layers::serve_axum().await;
    a_queued_layer_serves_a_burst_and_refuses_at_the_limit(url, &queued_layers::AXUM).await;
}

#[actix_web::test]
async fn the_actix_middleware_with_the_queue_serves_a_burst_and_refuses_at_the_limit() {
    let (url, server) = queued_layers::serve_actix();
    a_queued_layer_serves_a_burst_and_refuses_at_the_limit(url, &queued_layers::ACTIX).await;
    server.stop(false).await;
}

/// A queued layer (or middleware) around a handler with `#[admitted(queue)]`
/// of the same pools: the request waits once, in the layer, and the handler
/// shares the layer's lease instead of queueing behind its own request (which
/// would be refused as reentrant or time out in the queue).
async fn a_queued_layer_and_a_queued_attribute_wait_once_and_hold_one_slot(
    url: String,
    pools: &RequestPools,
) {
    let pool = pools.pool(Class::Work).clone();
    let held = pools.try_lease(Class::Work).unwrap();
    let waiting = tokio::spawn(async move { get(&url, &[]).await });
    until_waiting(&pool, 1).await;
    drop(held);
    let response = waiting.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "served after one wait");
    assert_eq!(response.text().await.unwrap(), "stacked");
    let stats = pool.stats();
    assert_eq!(
        (stats.admitted, stats.refused, stats.in_use, stats.waiting),
        (2, 0, 0, 0),
        "the test's lease and one slot for the request, layer and handler together"
    );
}

#[tokio::test]
async fn a_queued_axum_layer_around_a_queued_handler_of_the_same_pools_waits_once() {
    let url = queued_layers::serve_axum().await;
    a_queued_layer_and_a_queued_attribute_wait_once_and_hold_one_slot(
        format!("{url}stacked"),
        &queued_layers::AXUM_STACKED,
    )
    .await;
}

#[actix_web::test]
async fn a_queued_actix_middleware_around_a_queued_handler_of_the_same_pools_waits_once() {
    let (url, server) = queued_layers::serve_actix_stacked();
    a_queued_layer_and_a_queued_attribute_wait_once_and_hold_one_slot(
        format!("{url}stacked"),
        &queued_layers::ACTIX_STACKED,
    )
    .await;
    server.stop(false).await;
}

/// A layer that trusts nobody around `#[admitted(criticality = critical)]`
/// of the same pools: the client's claim is lowered by the layer, the
/// route's own word holds inside the handler, and the handler runs under
/// the layer's lease (one slot, so the one-slot class still answers).
#[tokio::test]
async fn a_route_fixed_criticality_holds_inside_a_layer_that_lowers_claims() {
    let (base, ..) = axum_app::serve().await;
    for claim in [
        &[][..],
        &[(CRITICALITY_HEADER, "sheddable")][..],
        &[(CRITICALITY_HEADER, "critical")],
    ] {
        let response = get(&format!("{base}/fixed"), claim).await;
        assert_eq!(response.status(), StatusCode::OK, "{claim:?}");
        assert_eq!(
            response.text().await.unwrap(),
            "critical Some(Work)",
            "{claim:?}"
        );
    }
    assert_eq!(axum_app::FIXED.pool(Class::Work).stats().refused, 0);
}
