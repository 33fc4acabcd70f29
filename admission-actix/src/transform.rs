//! The middleware factory an app `.wrap(...)`s.
//!
//! This module owns [`AdmissionControl`]: the request pools and the
//! classifier, shared by every worker. It must never build pools itself:
//! pools are built (and their configuration errors reported) once, before
//! the server starts, and every worker gets a clone of the same ones.

use std::future::{Ready, ready};
use std::hash::Hash;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::HeaderValue;
use admission_core::{Caller, Class, Refusal, RequestPools};
use admission_http::body::ProgressTimeout;
use admission_http::{HttpRefusalStatus, RequestAdmission};
use bytes::Bytes;

use crate::body::LeasedBody;
use crate::classify::Classify;
use crate::middleware::{AdmissionMiddleware, Settings};

/// Request admission for an actix-web app or scope: every request takes a
/// lease of its class from [`RequestPools`] and holds it until its response
/// body has been sent or dropped.
///
/// * Admission fails fast ([`RequestPools::try_lease`]) unless told to
///   [`queue`](Self::queue): a request the class has no slot for is answered
///   at once with `admission-http`'s [`Problem`](admission_http::Problem)
///   for the refusal (`503`, or `429` with
///   [`refusal_status`](Self::refusal_status)), `Retry-After` and an
///   `application/problem+json` body. The handler never runs. The decision
///   is `admission-http`'s [`RequestAdmission`], the one every adapter
///   makes: the caller read from the headers under the same trust policy
///   ([`trust_peers`](Self::trust_peers)), the same pools, the same queue.
/// * An admitted request runs under its lease
///   ([`Lease::scope`](admission_core::Lease::scope)), so pure work it does
///   with [`RequestPools::execute_pure`] inherits the lease and takes no
///   second slot, and a nested `AdmissionControl` of the same pools (an
///   `App::wrap` and a `scope.wrap`) or `#[admitted]` shares the lease: one
///   slot per request and class.
/// * The response body is wrapped in a [`LeasedBody`] holding a share of the
///   lease until its last chunk is sent, it fails, it is dropped (for
///   example when the client goes away), or the client lets a chunk lie
///   unread past the [`progress_timeout`](Self::progress_timeout).
/// * An admitted request's payload is held to the same progress bound: a
///   client that stops sending a body it began ends its own request at the
///   bound instead of keeping the lease as long as it likes.
/// * An inner service that fails with an `Err` (rather than an error
///   response) releases the lease when it fails; actix-web renders the error
///   afterwards.
///
/// # A client that goes away
///
/// actix-web drops a response body, and so releases its lease, when it
/// notices the connection is gone. With its default
/// (`HttpServer::h1_allow_half_closed(true)`) that is when a write to the
/// client fails, so an idle stream to a vanished client keeps its slot until
/// it next sends a chunk. `h1_allow_half_closed(false)` makes a worker drop
/// the response as soon as the client closes its side of the connection.
///
/// # One pool per app
///
/// actix-web builds the app, and so this middleware, once per worker thread.
/// `AdmissionControl` holds only a clone of [`RequestPools`], which shares its
/// slots through an `Arc`: build the pools once, before the server starts,
/// and every worker and connection draws from the same slots. Building the
/// pools is where a configuration error is reported
/// ([`RequestPools::new`] returns a `Result`); this middleware cannot fail
/// afterwards, neither when it is built nor on a request.
///
/// Its counters ([`malformed_headers`](Self::malformed_headers),
/// [`lowered_claims`](Self::lowered_claims)) are shared by the clones of
/// one `AdmissionControl`: build it once, beside the pools, and clone it
/// into the factory (`let admission = AdmissionControl::new(pools);
/// HttpServer::new(move || App::new().wrap(admission.clone()))`); one built
/// inside the factory counts for its worker alone.
///
/// # Examples
///
/// ```
/// use actix_web::{App, HttpResponse, test, web};
/// use admission_actix::AdmissionControl;
/// use admission_core::{Class, RequestPools};
///
/// # #[actix_web::main]
/// # async fn main() {
/// let pools = RequestPools::new(2, 1).unwrap();
/// let app = test::init_service(
///     App::new()
///         .wrap(AdmissionControl::new(pools.clone()))
///         .route("/", web::get().to(HttpResponse::Ok)),
/// )
/// .await;
///
/// // The only control slot is taken: a read is refused without running.
/// let held = pools.try_lease(Class::Control).unwrap();
/// let res = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
/// assert_eq!(res.status(), 503);
/// assert!(res.headers().contains_key("retry-after"));
///
/// drop(held);
/// let res = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
/// assert_eq!(res.status(), 200);
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a middleware does nothing until it is passed to `.wrap(...)`"]
pub struct AdmissionControl {
    settings: Arc<Settings>,
}

impl AdmissionControl {
    /// Admission with the default classification, [`Classify::method_class`](admission_http::Classify::method_class):
    /// `GET`, `HEAD` and `OPTIONS` take a *control* lease, every other method
    /// a *work* lease.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let app = test::init_service(
    ///     App::new()
    ///         .wrap(AdmissionControl::new(pools.clone()))
    ///         .route("/", web::to(HttpResponse::Ok)),
    /// )
    /// .await;
    ///
    /// let _writes_full = pools.try_lease(Class::Work).unwrap();
    /// let read = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
    /// assert_eq!(read.status(), 200, "reads take a control lease");
    /// let write = test::call_service(&app, test::TestRequest::post().uri("/").to_request()).await;
    /// assert_eq!(write.status(), 503, "writes take a work lease");
    /// # }
    /// ```
    pub fn new(pools: RequestPools) -> AdmissionControl {
        AdmissionControl::with_classify(pools, Classify::Method)
    }

    /// Admission where every request takes a lease of `class`, e.g. for a
    /// `web::scope` of terminal control endpoints.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let app = test::init_service(
    ///     App::new().service(
    ///         web::scope("/control")
    ///             .wrap(AdmissionControl::class(pools.clone(), Class::Control))
    ///             .route("/stop", web::post().to(HttpResponse::Accepted)),
    ///     ),
    /// )
    /// .await;
    ///
    /// let _writes_full = pools.try_lease(Class::Work).unwrap();
    /// let req = test::TestRequest::post().uri("/control/stop").to_request();
    /// assert_eq!(test::call_service(&app, req).await.status(), 202);
    /// # }
    /// ```
    pub fn class(pools: RequestPools, class: Class) -> AdmissionControl {
        AdmissionControl::with_classify(pools, Classify::Fixed(class))
    }

    /// Admission where `classifier` picks each request's class. It runs once
    /// per request, before admission, on the worker's thread; keep it cheap.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let admission = AdmissionControl::classify(pools.clone(), |req| {
    ///     if req.path().starts_with("/admin") { Class::Control } else { Class::Work }
    /// });
    /// let app = test::init_service(
    ///     App::new().wrap(admission).default_service(web::to(HttpResponse::Ok)),
    /// )
    /// .await;
    ///
    /// let _work_full = pools.try_lease(Class::Work).unwrap();
    /// let admin = test::call_service(&app, test::TestRequest::get().uri("/admin").to_request()).await;
    /// assert_eq!(admin.status(), 200);
    /// let other = test::call_service(&app, test::TestRequest::get().uri("/items").to_request()).await;
    /// assert_eq!(other.status(), 503);
    /// # }
    /// ```
    pub fn classify<F>(pools: RequestPools, classifier: F) -> AdmissionControl
    where
        F: Fn(&ServiceRequest) -> Class + Send + Sync + 'static,
    {
        AdmissionControl::with_classify(pools, Classify::custom(classifier))
    }

    /// The request pools leases are taken from.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let pools = RequestPools::new(2, 4).unwrap();
    /// let admission = AdmissionControl::new(pools.clone());
    /// assert!(admission.pools().pool(Class::Work).same_pool(pools.pool(Class::Work)));
    /// ```
    pub fn pools(&self) -> &RequestPools {
        self.settings.admission.pools()
    }

    /// Lets a request whose class is full wait in the class pool's bounded
    /// queue ([`Admission::Queue`](admission_core::Admission::Queue))
    /// instead of being refused at once: ordinary bursts are served, and
    /// under overload a request is refused with the same `503` and
    /// `Retry-After` when the queue is full or it has waited the queue's
    /// limit, never answered late.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let app = test::init_service(
    ///     App::new()
    ///         .wrap(AdmissionControl::class(pools.clone(), Class::Work).queue())
    ///         .default_service(web::to(HttpResponse::Ok)),
    /// )
    /// .await;
    /// // The only slot is held (by another thread) past the queue's limit:
    /// // refused when the wait runs out (100 ms by default), with a 503.
    /// let holder = pools.clone();
    /// let _held = std::thread::spawn(move || holder.try_lease(Class::Work).unwrap()).join().unwrap();
    /// let res = test::call_service(&app, test::TestRequest::get().to_request()).await;
    /// assert_eq!(res.status(), 503);
    /// # }
    /// ```
    pub fn queue(self) -> AdmissionControl {
        self.with(|settings| settings.admission = settings.admission.clone().queue())
    }

    /// Honours the criticality, budget and flow headers as sent: for a service
    /// whose clients are its own peers, or behind a mesh or balancer that
    /// strips `x-admission-*` from outside requests. Without it (the
    /// default) a `critical` claim is admitted as `default` (and counted,
    /// [`lowered_claims`](Self::lowered_claims)) and a budget never
    /// lengthens a queued wait past the queue's limit; `sheddable` is
    /// honoured either way. The same trust policy as every adapter's.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Caller, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let level = || async { HttpResponse::Ok().body(Caller::current().criticality().as_str()) };
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let outside = AdmissionControl::new(pools.clone());
    /// let app = test::init_service(App::new().wrap(outside.clone()).route("/", web::get().to(level))).await;
    /// let claim = || test::TestRequest::get().uri("/").insert_header(("x-admission-criticality", "critical"));
    /// assert_eq!(test::call_and_read_body(&app, claim().to_request()).await, "default");
    /// assert_eq!(outside.lowered_claims(), 1);
    ///
    /// let peers = AdmissionControl::new(pools).trust_peers();
    /// let app = test::init_service(App::new().wrap(peers).route("/", web::get().to(level))).await;
    /// assert_eq!(test::call_and_read_body(&app, claim().to_request()).await, "critical");
    /// # }
    /// ```
    pub fn trust_peers(self) -> AdmissionControl {
        self.with(|settings| settings.admission = settings.admission.clone().trust_peers())
    }

    /// How many requests claimed `x-admission-criticality: critical` and
    /// were admitted as `default`, or named their own `x-admission-flow`
    /// and were not heard, since the middleware trusts nobody's headers
    /// (always 0 after [`trust_peers`](Self::trust_peers)).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::AdmissionControl;
    /// use admission_core::RequestPools;
    ///
    /// assert_eq!(AdmissionControl::new(RequestPools::new(1, 1).unwrap()).lowered_claims(), 0);
    /// ```
    pub fn lowered_claims(&self) -> u64 {
        self.settings.admission.lowered_claims()
    }

    /// How many requests came with a malformed or repeated budget header
    /// (`x-admission-budget-ms`, `x-envoy-expected-rq-timeout-ms`,
    /// `grpc-timeout`); each was served as if it had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::AdmissionControl;
    /// use admission_core::RequestPools;
    ///
    /// let control = AdmissionControl::new(RequestPools::new(1, 1).unwrap());
    /// assert_eq!(control.malformed_headers(), 0);
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.settings.admission.malformed_headers()
    }

    /// Answers refusals with `status` instead of `503`: e.g.
    /// [`HttpRefusalStatus::TooManyRequests`] for clients that expect `429`.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_actix::HttpRefusalStatus;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let admission = AdmissionControl::new(pools.clone()).refusal_status(HttpRefusalStatus::TooManyRequests);
    /// let app = test::init_service(App::new().wrap(admission).route("/", web::get().to(HttpResponse::Ok))).await;
    ///
    /// let _held = pools.try_lease(Class::Control).unwrap();
    /// let res = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
    /// assert_eq!(res.status(), 429);
    /// # }
    /// ```
    pub fn refusal_status(self, status: HttpRefusalStatus) -> AdmissionControl {
        self.with(|settings| settings.status = status)
    }

    /// Sets how long an admitted response may let a chunk lie unread
    /// before its lease is taken back and the response ends
    /// ([`ProgressTimeout`], 30 s by default): the bound on the capacity a
    /// client that never reads can hold. A slow producer (the client is
    /// waiting for the next chunk) is not stalled. The same bound holds an
    /// admitted request's payload: a handler left waiting that long for the
    /// client's next bytes reads a `PayloadError::Io` of kind `TimedOut`
    /// (code `ADMISSION_STREAM_STALLED`, counted with stalled responses).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_actix::AdmissionControl;
    /// use admission_core::RequestPools;
    /// use admission_http::body::ProgressTimeout;
    ///
    /// let bound = ProgressTimeout::new(Duration::from_secs(5)).unwrap();
    /// let admission = AdmissionControl::new(RequestPools::new(1, 1).unwrap()).progress_timeout(bound);
    /// # drop(admission);
    /// ```
    pub fn progress_timeout(self, bound: ProgressTimeout) -> AdmissionControl {
        self.with(|settings| settings.progress = bound)
    }

    /// Lets every request `predicate` accepts through with no lease: never
    /// refused, never counted against a class, its response body never
    /// watched. For health and readiness routes, anything that must answer
    /// whatever the load. A request it lets through passes every
    /// `AdmissionControl` under this one as well (a scope's under the
    /// app's), whatever their own bypass; a handler's own `#[admitted]`
    /// still takes the lease it asks for. The predicate runs on every
    /// request, so keep it to a comparison (a path, a header's presence).
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let admission = AdmissionControl::new(pools.clone()).bypass(|req| req.path() == "/healthz");
    /// let app = test::init_service(App::new().wrap(admission).default_service(web::to(HttpResponse::Ok))).await;
    ///
    /// let _every_control_slot = pools.try_lease(Class::Control).unwrap();
    /// let health = test::call_service(&app, test::TestRequest::get().uri("/healthz").to_request()).await;
    /// assert_eq!(health.status(), 200);
    /// let other = test::call_service(&app, test::TestRequest::get().uri("/status").to_request()).await;
    /// assert_eq!(other.status(), 503);
    /// # }
    /// ```
    pub fn bypass<F>(self, predicate: F) -> AdmissionControl
    where
        F: Fn(&ServiceRequest) -> bool + Send + Sync + 'static,
    {
        self.with(|settings| settings.bypass = Some(Arc::new(predicate)))
    }

    /// Each request through this middleware takes `cost` slots of its
    /// class, not one (a route that walks the whole registry beside point
    /// reads of one), all or none, given back together when its response
    /// ends; fair shares count them. Checked here against every class the
    /// middleware may lease, as [`admission_http::AdmissionLayer::cost`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::CostAboveCapacity`](admission_core::ConfigError::CostAboveCapacity)
    /// when a class has fewer slots than `cost`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU8;
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let pools = RequestPools::new(4, 1).unwrap();
    /// let walk = AdmissionControl::class(pools.clone(), Class::Work).cost(NonZeroU8::new(4).unwrap());
    /// assert!(walk.is_ok());
    /// assert!(AdmissionControl::class(pools, Class::Work).cost(NonZeroU8::new(5).unwrap()).is_err());
    /// ```
    pub fn cost(
        self,
        cost: std::num::NonZeroU8,
    ) -> Result<AdmissionControl, admission_core::ConfigError> {
        let classes: &[Class] = match self.settings.classify {
            Classify::Fixed(class) => &[class],
            _ => &[Class::Work, Class::Control],
        };
        let admission = self.settings.admission.clone().costing(cost, classes)?;
        Ok(self.with(|settings| settings.admission = admission))
    }

    /// Names the flow each request is for (a tenant, an API key, a user):
    /// `flow` reads it from the request (what an authenticating middleware
    /// put in its extensions, a header your gateway sets); `None` leaves
    /// the request without a flow. While a class is contended each active
    /// flow is held to its fair share, and a flow at its share is refused
    /// (`503`, `ADMISSION_FLOW_SHARE`) while another flow that asked is
    /// under its own; a flow alone gets the whole class. It runs once per
    /// request on the worker's thread; keep it cheap (return a number, a
    /// `HeaderValue` or an `Arc<str>` clone: it is hashed at once and
    /// dropped, never sent, logged or counted by name).
    ///
    /// The same rule, read by the same code, as every adapter's
    /// (`admission-http`'s [`RequestAdmission::caller_for`]): a request's
    /// own `x-admission-flow` header names the flow only after
    /// [`trust_peers`](Self::trust_peers), and is otherwise ignored and
    /// counted in [`lowered_claims`](Self::lowered_claims); a malformed one
    /// is ignored and counted in [`malformed_headers`](Self::malformed_headers).
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Caller, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let admission = AdmissionControl::new(RequestPools::new(2, 4).unwrap())
    ///     .flow(|req| req.headers().get("x-authenticated-tenant").cloned());
    /// let flowing = || async { HttpResponse::Ok().body(Caller::current().has_flow().to_string()) };
    /// let app = test::init_service(App::new().wrap(admission).route("/", web::get().to(flowing))).await;
    /// let tenant = test::TestRequest::get().uri("/").insert_header(("x-authenticated-tenant", "acme"));
    /// assert_eq!(test::call_and_read_body(&app, tenant.to_request()).await, "true");
    /// let invented = test::TestRequest::get().uri("/").insert_header(("x-admission-flow", "acme"));
    /// assert_eq!(test::call_and_read_body(&app, invented.to_request()).await, "false");
    /// # }
    /// ```
    pub fn flow<F, K>(self, flow: F) -> AdmissionControl
    where
        F: Fn(&ServiceRequest) -> Option<K> + Send + Sync + 'static,
        K: Hash,
    {
        self.with(|settings| {
            settings.flow = Some(Arc::new(
                move |req: &ServiceRequest, caller: Caller| match flow(req) {
                    Some(key) => caller.with_flow(key),
                    None => caller,
                },
            ));
        })
    }

    /// [`flow`](Self::flow) with a weight per flow: a paying tier of
    /// weight 2 is held to twice the share of a flow of weight 1 (0 is
    /// read as 1; see [`Caller::with_weight`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Caller, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let admission = AdmissionControl::new(RequestPools::new(2, 4).unwrap()).weighted_flow(|req| {
    ///     let paying = req.path().starts_with("/pro/");
    ///     Some((req.headers().get("x-authenticated-tenant")?.clone(), if paying { 2 } else { 1 }))
    /// });
    /// let weight = || async { HttpResponse::Ok().body(Caller::current().weight().to_string()) };
    /// let app = test::init_service(App::new().wrap(admission).default_service(web::to(weight))).await;
    /// let pro = test::TestRequest::get().uri("/pro/report").insert_header(("x-authenticated-tenant", "acme"));
    /// assert_eq!(test::call_and_read_body(&app, pro.to_request()).await, "2");
    /// # }
    /// ```
    pub fn weighted_flow<F, K>(self, flow: F) -> AdmissionControl
    where
        F: Fn(&ServiceRequest) -> Option<(K, u8)> + Send + Sync + 'static,
        K: Hash,
    {
        self.with(|settings| {
            settings.flow = Some(Arc::new(
                move |req: &ServiceRequest, caller: Caller| match flow(req) {
                    Some((key, weight)) => caller.with_flow(key).with_weight(weight),
                    None => caller,
                },
            ));
        })
    }

    /// Answers a refusal with the app's own body (an HTML page in the
    /// site's theme, its own JSON shape) where `body` gives one for the
    /// refusal and the request: its content type and bytes replace the
    /// problem document, while the status, `Retry-After`,
    /// `x-admission-retry-after-ms`, `x-admission-refusal` and
    /// `cache-control: no-store` stay the middleware's. `None` keeps the
    /// problem document (`application/problem+json`, the default), so one
    /// middleware can serve pages and an API. The closure runs on refusals
    /// only.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::http::header::HeaderValue;
    /// use actix_web::{App, HttpResponse, test, web};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    /// use bytes::Bytes;
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let admission = AdmissionControl::new(pools.clone()).refusal_body(|_refusal, req| {
    ///     req.path().starts_with("/app/").then(|| {
    ///         (HeaderValue::from_static("text/html; charset=utf-8"), Bytes::from_static(b"<h1>Busy</h1>"))
    ///     })
    /// });
    /// let app = test::init_service(App::new().wrap(admission).default_service(web::to(HttpResponse::Ok))).await;
    ///
    /// let _every_control_slot = pools.try_lease(Class::Control).unwrap();
    /// let page = test::call_service(&app, test::TestRequest::get().uri("/app/home").to_request()).await;
    /// assert_eq!(page.status(), 503);
    /// assert_eq!(page.headers().get("content-type").unwrap(), "text/html; charset=utf-8");
    /// assert!(page.headers().contains_key("retry-after"));
    /// let api = test::call_service(&app, test::TestRequest::get().uri("/api/items").to_request()).await;
    /// assert_eq!(api.headers().get("content-type").unwrap(), "application/problem+json");
    /// # }
    /// ```
    pub fn refusal_body<F>(self, body: F) -> AdmissionControl
    where
        F: Fn(&Refusal, &ServiceRequest) -> Option<(HeaderValue, Bytes)> + Send + Sync + 'static,
    {
        self.with(|settings| settings.refusal_body = Some(Arc::new(body)))
    }

    fn with_classify(pools: RequestPools, classify: Classify) -> AdmissionControl {
        AdmissionControl {
            settings: Arc::new(Settings {
                admission: RequestAdmission::new(pools),
                classify,
                status: HttpRefusalStatus::default(),
                progress: ProgressTimeout::DEFAULT,
                bypass: None,
                flow: None,
                refusal_body: None,
            }),
        }
    }

    /// The same middleware with one setting changed (the counters stay
    /// shared).
    fn with(self, change: impl FnOnce(&mut Settings)) -> AdmissionControl {
        let mut settings = Settings::clone(&self.settings);
        change(&mut settings);
        AdmissionControl {
            settings: Arc::new(settings),
        }
    }
}

impl<S, B> Transform<S, ServiceRequest> for AdmissionControl
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    S::Future: 'static,
    B: MessageBody,
{
    type Response = ServiceResponse<LeasedBody<B>>;
    type Error = Error;
    type Transform = AdmissionMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<AdmissionMiddleware<S>, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(AdmissionMiddleware::new(
            Rc::new(service),
            Arc::clone(&self.settings),
        )))
    }
}
