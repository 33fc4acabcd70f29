//! Compile-time pins of the public types' auto traits.

use admission_axum::AdmissionLayer;
use admission_axum::AdmissionService;
use admission_axum::future::ResponseFuture;
use axum::routing::Route;

#[test]
fn bounds() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    fn clone<T: Clone>() {}
    fn unpin<T: Unpin>() {}
    fn layer_for_router<L>()
    where
        L: tower::Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Clone + Send + Sync + 'static,
    {
    }

    send::<AdmissionLayer>();
    sync::<AdmissionLayer>();
    clone::<AdmissionLayer>();
    unpin::<AdmissionLayer>();

    send::<AdmissionService<Route>>();
    sync::<AdmissionService<Route>>();
    clone::<AdmissionService<Route>>();
    unpin::<AdmissionService<Route>>();

    send::<ResponseFuture<<Route as tower::Service<axum::extract::Request>>::Future>>();
    layer_for_router::<AdmissionLayer>();
}
