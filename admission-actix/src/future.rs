//! The future [`AdmissionMiddleware`](crate::AdmissionMiddleware) returns.
//!
//! This module owns [`ResponseFuture`]: it calls the inner service under the
//! request's lease and moves a share of the lease into the response body. It
//! must never hold a share of the lease after it has produced its response,
//! so that the body is what keeps the slot.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use admission_core::request::Scoped;
use admission_core::{Caller, Lease, Refusal};
use admission_http::body::ProgressTimeout;
use admission_http::{HttpRefusalStatus, Problem};
use bytes::Bytes;

use crate::body::LeasedBody;
use crate::rejection::actix_response;

pin_project_lite::pin_project! {
    /// The response of a request that went through
    /// [`AdmissionMiddleware`](crate::AdmissionMiddleware): the inner
    /// service's response with its body wrapped in a [`LeasedBody`], or the
    /// refusal answered at once.
    ///
    /// # Panics
    ///
    /// Polling it again after it completed panics.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the inner service's future and every share of the
    /// lease it holds; pure work the handler started keeps its own share
    /// until that work ends.
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
    pub struct ResponseFuture<S, B>
    where
        S: Service<ServiceRequest>,
    {
        #[pin]
        state: State<S>,
        // How long the admitted response's body may let a chunk lie unread.
        progress: ProgressTimeout,
        _body: PhantomData<fn() -> B>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<S>
    where
        S: Service<ServiceRequest>,
    {
        Admitted {
            // The scope runs the inner service for the caller with the lease
            // as the task's context (pure work inherits it), in one
            // task-local, and holds one share of the lease.
            #[pin]
            call: Scoped<Call<S>>,
            // The share that moves into the response body. After `call`,
            // the one drop order of every adapter: what the response owns
            // goes before the slot.
            lease: Option<Lease>,
        },
        Refused {
            response: Option<ServiceResponse<Bytes>>,
        },
        // Waiting in the class pool's queue; the inner service is called
        // once the lease comes, or the request refused if it does not.
        Queued {
            lease: Pin<Box<dyn Future<Output = Result<Lease, Refusal>>>>,
            service: Option<Rc<S>>,
            req: Option<ServiceRequest>,
            caller: Caller,
            status: HttpRefusalStatus,
        },
        Done,
    }
}

pin_project_lite::pin_project! {
    /// Calls the inner service on its first poll, so that the call itself
    /// (not only the future it returns) runs inside the lease's scope.
    #[project = CallProj]
    enum Call<S>
    where
        S: Service<ServiceRequest>,
    {
        Pending {
            service: Rc<S>,
            req: Option<ServiceRequest>,
        },
        Running {
            #[pin]
            future: S::Future,
        },
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<ServiceRequest>,
{
    pub(crate) fn admitted(
        service: Rc<S>,
        req: ServiceRequest,
        lease: Lease,
        caller: Caller,
        progress: ProgressTimeout,
    ) -> Self {
        let call = Call::Pending {
            service,
            req: Some(req),
        };
        ResponseFuture {
            state: State::Admitted {
                call: lease.clone().scope_for(caller, call),
                lease: Some(lease),
            },
            progress,
            _body: PhantomData,
        }
    }

    pub(crate) fn queued(
        service: Rc<S>,
        req: ServiceRequest,
        lease: Pin<Box<dyn Future<Output = Result<Lease, Refusal>>>>,
        caller: Caller,
        status: HttpRefusalStatus,
        progress: ProgressTimeout,
    ) -> Self {
        ResponseFuture {
            state: State::Queued {
                lease,
                service: Some(service),
                req: Some(req),
                caller,
                status,
            },
            progress,
            _body: PhantomData,
        }
    }

    pub(crate) fn refused(response: ServiceResponse<Bytes>) -> Self {
        ResponseFuture {
            state: State::Refused {
                response: Some(response),
            },
            progress: ProgressTimeout::DEFAULT,
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
        let mut state = this.state;
        if let StateProj::Queued {
            lease,
            service,
            req,
            caller,
            status,
        } = state.as_mut().project()
        {
            let waited = std::task::ready!(lease.as_mut().poll(cx));
            let (Some(service), Some(req)) = (service.take(), req.take()) else {
                panic!("`ResponseFuture` polled after completion");
            };
            let next = match waited {
                Ok(lease) => State::Admitted {
                    call: lease.clone().scope_for(
                        *caller,
                        Call::Pending {
                            service,
                            req: Some(req),
                        },
                    ),
                    lease: Some(lease),
                },
                Err(refusal) => {
                    let problem = Problem::refusal(&refusal, *status);
                    State::Refused {
                        response: Some(req.into_response(actix_response(problem.into_http(|b| b)))),
                    }
                }
            };
            state.set(next);
        }
        let output = match state.as_mut().project() {
            StateProj::Admitted { call, lease } => {
                let result = std::task::ready!(call.poll(cx));
                let lease = lease.take();
                match lease {
                    Some(lease) => result.map(|res| {
                        res.map_body(|_, body| {
                            LeasedBody::new(body, lease).progress_timeout(progress)
                        })
                    }),
                    None => panic!("`ResponseFuture` polled after completion"),
                }
            }
            StateProj::Refused { response } => match response.take() {
                Some(response) => Ok(response.map_body(|_, body| LeasedBody::problem(body))),
                None => panic!("`ResponseFuture` polled after completion"),
            },
            StateProj::Queued { .. } | StateProj::Done => {
                panic!("`ResponseFuture` polled after completion")
            }
        };
        // Drops the scope and its share of the lease now: from here on the
        // response body alone holds the request's slot.
        state.set(State::Done);
        Poll::Ready(output)
    }
}

impl<S> Future for Call<S>
where
    S: Service<ServiceRequest>,
{
    type Output = Result<S::Response, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                CallProj::Pending { service, req } => {
                    let req = req.take().expect("the request is taken only once");
                    let future = service.call(req);
                    self.set(Call::Running { future });
                }
                CallProj::Running { future } => return future.poll(cx),
            }
        }
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<ServiceRequest>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Admitted { .. } => "Admitted",
            State::Refused { .. } => "Refused",
            State::Queued { .. } => "Queued",
            State::Done => "Done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
