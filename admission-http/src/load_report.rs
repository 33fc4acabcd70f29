//! The replica's load on the responses of the routes the app names, for
//! balancers that read it.
//!
//! This module owns [`ReportLoad`] (the tower layer), [`ReportLoadService`],
//! the routes they report on and the name of the header they write,
//! [`ORCA_HEADER`]:
//! core's ORCA text
//! ([`Load::orca_text`](crate::balancer::Load::orca_text)) on the
//! responses of the named routes, refusals included, and on no other. The
//! load is operator information (how busy the replica is, when it
//! saturates): name only the routes a balancer sends or probes, never
//! `/healthz` or a catch-all. They must never admit, refuse or delay a
//! request, and never read anything from it but its path. The actix adapter's
//! `load_report::ReportLoad` is this one under actix-web's `Transform`
//! (`ReportLoad::for_path`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::balancer::LoadReport;
use http::{HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

pub use crate::wire::ORCA_HEADER;

/// The request paths whose responses carry the load: exact paths
/// (`/readyz`), or a prefix ending in `/*` (`/operations/*` names
/// `/operations` and everything under it). The default names none.
#[derive(Debug, Clone, Default)]
struct ReportRoutes(Arc<[Box<str>]>);

impl ReportRoutes {
    /// The routes `routes` names.
    ///
    /// # Panics
    ///
    /// When a route does not start with `/`: it could never match, a
    /// mistake reported where the routes are built.
    fn new<I, R>(routes: I) -> ReportRoutes
    where
        I: IntoIterator<Item = R>,
        R: Into<String>,
    {
        let routes: Vec<Box<str>> = routes
            .into_iter()
            .map(|route| {
                let route: String = route.into();
                assert!(
                    route.starts_with('/'),
                    "a load-report route starts with `/`: {route:?}"
                );
                route.into_boxed_str()
            })
            .collect();
        ReportRoutes(routes.into())
    }

    /// Whether a response to `path` carries the load.
    fn matches(&self, path: &str) -> bool {
        self.0.iter().any(|route| match route.strip_suffix("/*") {
            Some(prefix) => {
                path == prefix
                    || path
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            None => path == &**route,
        })
    }
}

/// A tower [`Layer`] that adds the replica's load, in ORCA's `TEXT` form,
/// to the responses of the routes it names ([`ReportLoad::on_routes`];
/// none by default) as `endpoint-load-metrics`: Envoy's client-side
/// weighted round robin reads it to weigh this replica (see
/// [`Load::orca_text`](crate::balancer::Load::orca_text) for what
/// it says and which Envoy reads it).
///
/// The load is read when the response head is ready, so a refusal carries
/// the load that caused it. Put it outermost, so every answer on a named
/// route has it.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::balancer::LoadReport;
/// use admission_http::load_report::ReportLoad;
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let registry = Pool::new("registry", 2).unwrap();
/// let service = ReportLoad::new(LoadReport::new(&registry))
///     .on_routes(["/metrics"])
///     .layer(service_fn(|_req: Request<()>| async {
///         Ok::<_, std::convert::Infallible>(Response::new("# EOF\n"))
///     }));
///
/// let _slot = registry.try_admit().unwrap();
/// let response = service.clone().oneshot(Request::get("/metrics").body(()).unwrap()).await.unwrap();
/// assert_eq!(
///     response.headers()["endpoint-load-metrics"],
///     "TEXT application_utilization:0.500,rps_fractional:0.000,eps:0.000"
/// );
/// let health = service.oneshot(Request::get("/healthz").body(()).unwrap()).await.unwrap();
/// assert!(!health.headers().contains_key("endpoint-load-metrics"), "not named");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ReportLoad {
    report: LoadReport,
    routes: ReportRoutes,
}

impl ReportLoad {
    /// Reports the load of the pools `report` reads, on no route until
    /// [`ReportLoad::on_routes`] names some.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::load_report::ReportLoad;
    /// use admission_core::RequestPools;
    /// use admission_http::balancer::LoadReport;
    ///
    /// let layer = ReportLoad::new(LoadReport::new(&RequestPools::new(2, 4).unwrap()));
    /// # drop(layer);
    /// ```
    pub fn new(report: LoadReport) -> ReportLoad {
        ReportLoad {
            report,
            routes: ReportRoutes::default(),
        }
    }

    /// The same layer, reporting on `routes`: exact paths (`/readyz`), or
    /// a prefix ending in `/*` (`/operations/*` names `/operations` and
    /// everything under it).
    ///
    /// # Panics
    ///
    /// When a route does not start with `/`: it could never match, a
    /// mistake reported where the layer is built.
    #[must_use]
    pub fn on_routes<I, R>(self, routes: I) -> ReportLoad
    where
        I: IntoIterator<Item = R>,
        R: Into<String>,
    {
        ReportLoad {
            routes: ReportRoutes::new(routes),
            ..self
        }
    }

    /// The report a response to `path` carries, `None` when no named route
    /// matches it: read its load once the response head is ready, so a
    /// refusal carries the load that caused it. For the actix-web adapter's
    /// `ReportLoad`, which is this one under actix-web's `Transform`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    /// use admission_http::balancer::LoadReport;
    /// use admission_http::load_report::ReportLoad;
    ///
    /// let report = ReportLoad::new(LoadReport::new(&Pool::new("registry", 2).unwrap()))
    ///     .on_routes(["/metrics", "/operations/*"]);
    /// assert!(report.for_path("/metrics").is_some());
    /// assert!(report.for_path("/operations").is_some() && report.for_path("/operations/7").is_some());
    /// assert!(report.for_path("/metrics/x").is_none() && report.for_path("/healthz").is_none());
    /// assert!(ReportLoad::new(report.for_path("/metrics").unwrap().clone())
    ///     .for_path("/metrics")
    ///     .is_none(), "no route until named");
    /// ```
    #[must_use]
    #[doc(hidden)]
    pub fn for_path(&self, path: &str) -> Option<&LoadReport> {
        self.routes.matches(path).then_some(&self.report)
    }
}

impl<S> Layer<S> for ReportLoad {
    type Service = ReportLoadService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReportLoadService {
            inner,
            load: self.clone(),
        }
    }
}

/// The service [`ReportLoad`] wraps around an inner one.
///
/// # Examples
///
/// ```
/// use admission_http::load_report::ReportLoad;
/// use admission_core::Pool;
/// use admission_http::balancer::LoadReport;
/// use tower::Layer;
///
/// let layer = ReportLoad::new(LoadReport::new(&Pool::new("registry", 1).unwrap()));
/// let service = layer.layer(tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
/// }));
/// # drop(service);
/// ```
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct ReportLoadService<S> {
    inner: S,
    load: ReportLoad,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ReportLoadService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ReportLoadFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let report = self.load.for_path(request.uri().path()).cloned();
        ReportLoadFuture {
            inner: self.inner.call(request),
            report,
        }
    }
}

pin_project! {
    /// The response future of [`ReportLoadService`]: the inner future's
    /// response with the load header added.
    ///
    /// # Cancel safety
    ///
    /// As the inner future's: dropping it drops the inner future.
    #[derive(Debug)]
    #[doc(hidden)]
    pub struct ReportLoadFuture<F> {
        #[pin]
        inner: F,
        report: Option<LoadReport>,
    }
}

impl<F, ResBody, E> Future for ReportLoadFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<ResBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = match this.inner.poll(cx) {
            Poll::Ready(Ok(response)) => response,
            other => return other,
        };
        if let Some(report) = this.report.take()
            && let Ok(value) = HeaderValue::try_from(report.load().orca_text())
        {
            response
                .headers_mut()
                .insert(HeaderName::from_static(ORCA_HEADER), value);
        }
        Poll::Ready(Ok(response))
    }
}
