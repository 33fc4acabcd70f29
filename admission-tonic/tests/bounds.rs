//! Compile-time pins of the public types' auto traits, and of what tonic's
//! `Server::builder().layer(..)` asks of a layer.

use std::convert::Infallible;

use admission_http::future::ResponseFuture;
use admission_tonic::body::LeasedBody;
use admission_tonic::{AdmissionLayer, AdmissionService, Rejection};
use tonic::body::Body;
use tonic::service::Routes;

#[test]
fn bounds() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    fn clone<T: Clone>() {}
    fn unpin<T: Unpin>() {}
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    fn layer_for_a_tonic_server<L, B>()
    where
        L: tower::Layer<Routes> + Clone,
        L::Service: tower::Service<http::Request<Body>, Response = http::Response<B>, Error = Infallible>
            + Clone
            + Send
            + 'static,
        <L::Service as tower::Service<http::Request<Body>>>::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
    }

    send::<AdmissionLayer>();
    sync::<AdmissionLayer>();
    clone::<AdmissionLayer>();
    unpin::<AdmissionLayer>();

    send::<AdmissionService<Routes>>();
    sync::<AdmissionService<Routes>>();
    clone::<AdmissionService<Routes>>();
    unpin::<AdmissionService<Routes>>();

    send::<ResponseFuture<<Routes as tower::Service<http::Request<Body>>>::Future>>();
    send::<LeasedBody<Body>>();
    unpin::<LeasedBody<Body>>();
    error::<Rejection>();
    layer_for_a_tonic_server::<AdmissionLayer, LeasedBody<Body>>();
}
