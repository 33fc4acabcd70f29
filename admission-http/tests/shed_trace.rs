//! Issue 28: refusals recognisable in logs. tower-http's `TraceLayer`,
//! outside the admission layer, logs a handler's 500 as an `ERROR` failure
//! and, with `ShedAware`, a refusal as a response (not an `ERROR`); with
//! tower-http's default classifier the same refusal is an `ERROR`.

//!
//! Run against tower-http 0.7 (the feature `tower-http`, what a new project
//! gets) and 0.6 (`tower-http-06`): the workspace's test run turns both on
//! (admission-tests depends on admission-http with both).

#![cfg(any(feature = "tower-http", feature = "tower-http-06"))]

use std::sync::{Arc, Mutex, PoisonError};

use admission_core::{Class, RequestPools};
use admission_http::{AdmissionLayer, ShedAware};
use http::{Request, Response, StatusCode};
use tower::{Layer, ServiceExt, service_fn};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};

#[derive(Clone, Default)]
struct Levels(Arc<Mutex<Vec<Level>>>);

impl<S: Subscriber> tracing_subscriber::Layer<S> for Levels {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(*event.metadata().level());
    }
}

impl Levels {
    fn errors(&self) -> usize {
        let levels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        levels.iter().filter(|l| **l == Level::ERROR).count()
    }
}

/// The cases for one tower-http version: `$th` is its crate, `$http` the
/// `ShedAware` classifier made for it.
macro_rules! cases {
    ($version:ident, $th:ident, $http:expr) => {
        mod $version {
            use super::*;

            /// Sends `/work` once through `TraceLayer(classifier)` around the
            /// admission layer around a handler answering 500 when `fail`; with the
            /// *work* class full when `full`. Returns the status and ERROR events.
            async fn one<M>(classifier: M, full: bool, fail: bool) -> (StatusCode, usize)
            where
                M: ::$th::classify::MakeClassifier + Clone,
                M::Classifier: Clone,
                M::FailureClass: std::fmt::Display,
            {
                let levels = Levels::default();
                let _guard = tracing::subscriber::set_default(
                    tracing_subscriber::registry().with(levels.clone()),
                );
                let pools = RequestPools::new(1, 1).unwrap();
                let held = full.then(|| pools.try_lease(Class::Work).unwrap());
                let handler = service_fn(move |_req: Request<_>| async move {
                    let status = if fail { 500 } else { 200 };
                    Ok::<_, std::convert::Infallible>(
                        Response::builder()
                            .status(status)
                            .body(String::new())
                            .unwrap(),
                    )
                });
                let service = ::$th::trace::TraceLayer::new(classifier)
                    .layer(AdmissionLayer::new(pools).layer(handler));
                let response = service
                    .oneshot(Request::post("/work").body(String::new()).unwrap())
                    .await
                    .unwrap();
                drop(held);
                (response.status(), levels.errors())
            }

            #[tokio::test(flavor = "current_thread")]
            async fn a_refusal_is_not_an_error_with_shed_aware_and_a_failure_still_is() {
                assert_eq!(
                    one($http, true, false).await,
                    (StatusCode::SERVICE_UNAVAILABLE, 0),
                    "a refusal is load shedding"
                );
                assert_eq!(
                    one($http, false, true).await,
                    (StatusCode::INTERNAL_SERVER_ERROR, 1),
                    "the handler's 500 is still a failure"
                );
                assert_eq!(one($http, false, false).await, (StatusCode::OK, 0));
            }

            #[tokio::test(flavor = "current_thread")]
            async fn without_shed_aware_tower_http_logs_the_refusal_as_an_error() {
                let default = ::$th::classify::SharedClassifier::new(
                    ::$th::classify::ServerErrorsAsFailures::new(),
                );
                assert_eq!(
                    one(default, true, false).await,
                    (StatusCode::SERVICE_UNAVAILABLE, 1),
                    "what ShedAware is for"
                );
            }
        }
    };
}

#[cfg(feature = "tower-http")]
cases!(on_0_7, tower_http, ShedAware::http());
#[cfg(feature = "tower-http-06")]
cases!(
    on_0_6,
    tower_http_06,
    tower_http_06::classify::SharedClassifier::new(ShedAware(
        tower_http_06::classify::ServerErrorsAsFailures::new()
    ))
);
