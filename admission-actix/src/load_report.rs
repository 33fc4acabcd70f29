//! The replica's load on every response, for balancers that read it.
//!
//! This module owns [`ReportLoad`] (the middleware factory an app
//! `.wrap(...)`s) and [`ReportLoadMiddleware`]: actix-web's `Transform`
//! and `Service` over the middle's
//! [`ReportLoad`](admission_http::load_report::ReportLoad), which decides
//! which responses carry the load and reads it. They must never admit,
//! refuse or delay a request, and never read anything from it but its path.

use std::future::{Future, Ready, ready};
use std::pin::Pin;

use actix_web::Error;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use actix_web::http::header::{HeaderName, HeaderValue};
use admission_http::balancer::LoadReport;
use admission_http::load_report::ORCA_HEADER;

/// An actix-web middleware factory that adds the replica's load, in ORCA's
/// `TEXT` form, to the responses of the routes it names
/// ([`ReportLoad::on_routes`]; none by default) as
/// `endpoint-load-metrics`: Envoy's
/// client-side weighted round robin reads it to weigh this replica (see
/// [`Load::orca_text`](admission_http::balancer::Load::orca_text)).
///
/// The load is read when the response head is ready, so a refusal carries
/// the load that caused it. `.wrap` it last (outermost), so every answer
/// has it.
///
/// # Examples
///
/// ```
/// use actix_web::{App, HttpResponse, test, web};
/// use admission_actix::load_report::ReportLoad;
/// use admission_core::Pool;
/// use admission_http::balancer::LoadReport;
///
/// # #[actix_web::main]
/// # async fn main() {
/// let registry = Pool::new("registry", 4).unwrap();
/// let app = test::init_service(
///     App::new()
///         .wrap(ReportLoad::new(LoadReport::new(&registry)).on_routes(["/"]))
///         .route("/", web::get().to(HttpResponse::Ok)),
/// )
/// .await;
/// let _slot = registry.try_admit().unwrap();
/// let res = test::call_service(&app, test::TestRequest::get().uri("/").to_request()).await;
/// assert_eq!(
///     res.headers().get("endpoint-load-metrics").unwrap(),
///     "TEXT application_utilization:0.250,rps_fractional:0.000,eps:0.000"
/// );
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a middleware does nothing until it is passed to `.wrap(...)`"]
pub struct ReportLoad(admission_http::load_report::ReportLoad);

impl ReportLoad {
    /// Reports the load of the pools `report` reads, on no route until
    /// [`ReportLoad::on_routes`] names some.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::load_report::ReportLoad;
    /// use admission_core::RequestPools;
    /// use admission_http::balancer::LoadReport;
    ///
    /// let wrap = ReportLoad::new(LoadReport::new(&RequestPools::new(2, 4).unwrap()));
    /// # drop(wrap);
    /// ```
    pub fn new(report: LoadReport) -> ReportLoad {
        ReportLoad(admission_http::load_report::ReportLoad::new(report))
    }

    /// The same middleware, reporting on `routes`, named as the middle's
    /// [`on_routes`](admission_http::load_report::ReportLoad::on_routes)
    /// names them (and refused there: a route not starting with `/` panics
    /// where the middleware is built).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::load_report::ReportLoad;
    /// use admission_core::RequestPools;
    /// use admission_http::balancer::LoadReport;
    ///
    /// let wrap = ReportLoad::new(LoadReport::new(&RequestPools::new(2, 4).unwrap()))
    ///     .on_routes(["/readyz", "/operations/*"]);
    /// # drop(wrap);
    /// ```
    pub fn on_routes<I, R>(self, routes: I) -> ReportLoad
    where
        I: IntoIterator<Item = R>,
        R: Into<String>,
    {
        ReportLoad(self.0.on_routes(routes))
    }
}

impl<S, B> Transform<S, ServiceRequest> for ReportLoad
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    S::Future: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = Error;
    type Transform = ReportLoadMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(ReportLoadMiddleware {
            service,
            load: self.0.clone(),
        }))
    }
}

/// The per-worker service [`ReportLoad`] wraps around the app's inner one.
///
/// # Examples
///
/// ```
/// use actix_web::dev::{Service, Transform};
/// use actix_web::{HttpResponse, test};
/// use admission_actix::load_report::ReportLoad;
/// use admission_core::Pool;
/// use admission_http::balancer::LoadReport;
///
/// # #[actix_web::main]
/// # async fn main() {
/// let inner = actix_web::dev::fn_service(|req: actix_web::dev::ServiceRequest| async move {
///     Ok::<_, actix_web::Error>(req.into_response(HttpResponse::Ok().finish()))
/// });
/// let middleware = ReportLoad::new(LoadReport::new(&Pool::new("registry", 1).unwrap()))
///     .on_routes(["/"])
///     .new_transform(inner)
///     .await
///     .unwrap();
/// let res = middleware.call(test::TestRequest::get().uri("/").to_srv_request()).await.unwrap();
/// assert!(res.headers().contains_key("endpoint-load-metrics"));
/// # }
/// ```
#[derive(Debug)]
#[doc(hidden)]
pub struct ReportLoadMiddleware<S> {
    service: S,
    load: admission_http::load_report::ReportLoad,
}

impl<S, B> Service<ServiceRequest> for ReportLoadMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    S::Future: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<ServiceResponse<B>, Error>>>>;

    forward_ready!(service);

    fn call(&self, request: ServiceRequest) -> Self::Future {
        let report = self.load.for_path(request.path()).cloned();
        let response = self.service.call(request);
        Box::pin(async move {
            let mut response = response.await?;
            if let Some(report) = report
                && let Ok(value) = HeaderValue::try_from(report.load().orca_text())
            {
                response
                    .headers_mut()
                    .insert(HeaderName::from_static(ORCA_HEADER), value);
            }
            Ok(response)
        })
    }
}
