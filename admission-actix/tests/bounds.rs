//! Compile-time pins of the public types' auto traits and of the helpers'
//! use as actix-web handler results.

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::{Error, ResponseError};
use admission_actix::body::LeasedBody;
use admission_actix::future::ResponseFuture;
use admission_actix::{AdmissionControl, AdmissionMiddleware};

/// An inner service of a nameable type.
struct Inner;

impl Service<ServiceRequest> for Inner {
    type Response = ServiceResponse<BoxBody>;
    type Error = Error;
    type Future = std::future::Ready<Result<ServiceResponse<BoxBody>, Error>>;

    actix_web::dev::always_ready!();

    fn call(&self, req: ServiceRequest) -> Self::Future {
        std::future::ready(Ok(req.into_response(actix_web::HttpResponse::Ok().finish())))
    }
}

#[test]
fn bounds() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    fn clone<T: Clone>() {}
    fn unpin<T: Unpin>() {}
    fn debug<T: std::fmt::Debug>() {}
    fn static_<T: 'static>() {}
    fn message_body<T: actix_web::body::MessageBody>() {}
    fn transform<T: Transform<Inner, ServiceRequest>>() {}
    fn response_error<T: ResponseError>() {}

    // Built once, cloned into every worker's app factory.
    send::<AdmissionControl>();
    sync::<AdmissionControl>();
    clone::<AdmissionControl>();
    unpin::<AdmissionControl>();
    debug::<AdmissionControl>();
    static_::<AdmissionControl>();
    transform::<AdmissionControl>();

    debug::<AdmissionMiddleware<Inner>>();
    unpin::<AdmissionMiddleware<Inner>>();
    debug::<ResponseFuture<Inner, BoxBody>>();

    unpin::<LeasedBody<BoxBody>>();
    unpin::<LeasedBody<String>>();
    debug::<LeasedBody<BoxBody>>();
    message_body::<LeasedBody<BoxBody>>();
    send::<LeasedBody<String>>();
    sync::<LeasedBody<String>>();

    // A handler returns a refusal or a work error with `?` as a `Rejection`.
    response_error::<admission_actix::Rejection>();
    send::<admission_actix::Rejection>();
    sync::<admission_actix::Rejection>();
}
