//! The future [`AdmissionMiddleware`](crate::AdmissionMiddleware) returns.
//!
//! This module owns [`ResponseFuture`]: `admission-http`'s shared admission
//! step ([`Admitting`]) with its outcome made an actix-web response whose
//! body holds the lease. It must never hold a share of the lease after it
//! has produced its response, so that the body is what keeps the slot.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use admission_http::body::ProgressTimeout;
use admission_http::middle::{Admitting, Outcome, Waited};
use bytes::Bytes;

use crate::body::LeasedBody;

/// A refusal's answer, ready to send.
type Answer = ServiceResponse<Bytes>;

/// A queued request's wait (an actix-web future need not be `Send`).
type Wait<F> = Pin<Box<dyn Future<Output = Waited<F, Answer>>>>;

pin_project_lite::pin_project! {
    /// The response of a request that went through
    /// [`AdmissionMiddleware`](crate::AdmissionMiddleware): the inner
    /// service's response with its body wrapped in a [`LeasedBody`], or the
    /// refusal answered at once (or when its queued wait ends).
    ///
    /// # Panics
    ///
    /// Polling it again after it completed panics.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner service's future and every share of the
    /// lease it holds; pure work the handler started keeps its own share
    /// until that work ends. A request dropped while it waits in the queue
    /// takes no slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::dev::{Service, Transform, fn_service};
    /// use actix_web::{HttpResponse, test};
    /// use admission_actix::AdmissionControl;
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let pools = RequestPools::new(1, 1).unwrap();
    /// let inner = fn_service(|req: actix_web::dev::ServiceRequest| async move {
    ///     Ok::<_, actix_web::Error>(req.into_response(HttpResponse::Ok().body("hi")))
    /// });
    /// let middleware = AdmissionControl::new(pools.clone()).new_transform(inner).await.unwrap();
    ///
    /// let future = middleware.call(test::TestRequest::get().to_srv_request());
    /// assert_eq!(pools.pool(Class::Control).stats().in_use, 1, "admitted when called");
    /// drop(future);
    /// assert_eq!(pools.pool(Class::Control).stats().in_use, 0, "dropping it releases the lease");
    /// # }
    /// ```
    #[must_use = "futures do nothing unless polled"]
    #[doc(hidden)]
    pub struct ResponseFuture<S, B>
    where
        S: Service<ServiceRequest>,
    {
        #[pin]
        admitting: Admitting<S::Future, Answer, Wait<S::Future>>,
        // How long the admitted response's body may let a chunk lie unread.
        progress: ProgressTimeout,
        _body: PhantomData<fn() -> B>,
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<ServiceRequest>,
{
    pub(crate) fn new(
        admitting: Admitting<S::Future, Answer, Wait<S::Future>>,
        progress: ProgressTimeout,
    ) -> Self {
        ResponseFuture {
            admitting,
            progress,
            _body: PhantomData,
        }
    }
}

impl<S, B> Future for ResponseFuture<S, B>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody,
{
    type Output = Result<ServiceResponse<LeasedBody<B>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let progress = *this.progress;
        Poll::Ready(match ready!(this.admitting.poll(cx)) {
            // An inner service that fails with an `Err` gives the lease up
            // here; actix-web renders the error afterwards.
            Outcome::Served(output, lease) => output.map(|response| {
                response.map_body(|_, body| match lease {
                    Some(lease) => LeasedBody::new(body, lease).progress_timeout(progress),
                    None => LeasedBody::unleased(body),
                })
            }),
            Outcome::Refused(answer) => Ok(answer.map_body(|_, body| LeasedBody::problem(body))),
        })
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<ServiceRequest>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("state", &self.admitting.state())
            .finish()
    }
}
