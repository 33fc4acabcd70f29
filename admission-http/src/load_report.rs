//! The replica's load on every response, for balancers that read it.
//!
//! This module owns [`ReportLoad`] (the tower layer), [`ReportLoadService`]
//! and the name of the header they write, [`ORCA_HEADER`]: core's ORCA text
//! ([`Load::orca_text`](admission_core::balancer::Load::orca_text)) on every
//! response, refusals included. They must never admit, refuse or delay a
//! request, and never read anything from it. The actix adapter's
//! `load_report::ReportLoad` is the same piece for actix-web.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use admission_core::balancer::LoadReport;
use http::{HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

/// The response header Envoy's client-side weighted round robin reads a
/// backend's load from (ORCA's `endpoint-load-metrics`).
pub const ORCA_HEADER: &str = "endpoint-load-metrics";

/// A tower [`Layer`] that adds the replica's load, in ORCA's `TEXT` form,
/// to every response as `endpoint-load-metrics`: Envoy's client-side
/// weighted round robin reads it to weigh this replica (see
/// [`Load::orca_text`](admission_core::balancer::Load::orca_text) for what
/// it says and which Envoy reads it).
///
/// The load is read when the response head is ready, so a refusal carries
/// the load that caused it. Put it outermost, so every answer has it.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_core::balancer::LoadReport;
/// use admission_http::load_report::ReportLoad;
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let registry = Pool::new("registry", 2).unwrap();
/// let service = ReportLoad::new(LoadReport::new(&registry)).layer(service_fn(|_req: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new("# EOF\n"))
/// }));
///
/// let _slot = registry.try_admit().unwrap();
/// let response = service.oneshot(Request::get("/metrics").body(()).unwrap()).await.unwrap();
/// assert_eq!(
///     response.headers()["endpoint-load-metrics"],
///     "TEXT application_utilization:0.500,rps_fractional:0.000,eps:0.000"
/// );
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ReportLoad {
    report: LoadReport,
}

impl ReportLoad {
    /// Reports the load of the pools `report` reads.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::load_report::ReportLoad;
    /// use admission_core::RequestPools;
    /// use admission_core::balancer::LoadReport;
    ///
    /// let layer = ReportLoad::new(LoadReport::new(&RequestPools::new(2, 4).unwrap()));
    /// # drop(layer);
    /// ```
    pub fn new(report: LoadReport) -> ReportLoad {
        ReportLoad { report }
    }
}

impl<S> Layer<S> for ReportLoad {
    type Service = ReportLoadService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReportLoadService {
            inner,
            report: self.report.clone(),
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
/// use admission_core::balancer::LoadReport;
/// use tower::Layer;
///
/// let layer = ReportLoad::new(LoadReport::new(&Pool::new("registry", 1).unwrap()));
/// let service = layer.layer(tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
/// }));
/// # drop(service);
/// ```
#[derive(Debug, Clone)]
pub struct ReportLoadService<S> {
    inner: S,
    report: LoadReport,
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
        ReportLoadFuture {
            inner: self.inner.call(request),
            report: Some(self.report.clone()),
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
