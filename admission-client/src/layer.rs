//! The tower layer: one call in, as many attempts out as the policy, the
//! budget, the throttle, the server's hints and the deadline allow.
//!
//! This module owns the attempt loop. It must never start an attempt that
//! cannot finish before the call's deadline, never wait less than the
//! server's hint, never retry what the policy does not allow, and never
//! replay a body it did not keep whole.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use admission_core::{Caller, Criticality};
use admission_http::wire::{
    BUDGET_HEADER, CRITICALITY_HEADER, GRPC_TIMEOUT_HEADER, budget_ms_value, grpc_timeout_value,
    parse_budget_ms, parse_grpc_timeout,
};
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Method, Request, Response};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep_until};
use tower_layer::Layer;
use tower_service::Service;

use crate::body::{ReplayBody, keep};
use crate::error::{ConfigError, Error};
use crate::hints::{Hint, Verdict, judge};
use crate::policy::RetryPolicy;
use crate::throttle::random_unit;

/// A request extension: this request may be retried though its method is
/// not idempotent (the app knows it is safe to repeat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryAnyway;

/// A response extension: the retries made before this response, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retries(pub Vec<Retry>);

/// One retry: what the server hinted and how long the layer waited, from
/// the previous answer's arrival to the retry's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// The server's hint, if it gave one.
    pub hint: Option<Duration>,
    /// The wait.
    pub waited: Duration,
}

/// The retry layer over any `Service<http::Request<B>>` client: hyper-util's
/// `Client`, tonic's `Channel`, a tower stack.
///
/// One layer retries a call. A `RetryService` that one of its attempts
/// calls (two layers stacked, say a shared client's and a route's) passes
/// the attempt through, so stacked layers do not multiply attempts (four
/// over three would be twelve); the outermost layer's policy, budget,
/// throttle and deadline apply. The mark is set while an attempt is made,
/// on its thread, so a layer under a `tower::buffer::Buffer` (whose calls
/// run on another task) is not seen as stacked.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use admission_client::{RetryLayer, RetryPolicy, Retries};
/// use bytes::Bytes;
/// use http::{Request, Response};
/// use http_body_util::Empty;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let layer = RetryLayer::new(RetryPolicy::default()).unwrap();
/// let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let seen = calls.clone();
/// let client = layer.layer(service_fn(move |_req: Request<Empty<Bytes>>| {
///     let first = seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
///     async move {
///         let mut response = Response::new(());
///         if first {
///             *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
///             response.headers_mut().insert("retry-after", "0".parse().unwrap());
///         }
///         Ok::<_, Infallible>(response)
///     }
/// }));
/// let response = client.oneshot(Request::get("/").body(Empty::new()).unwrap()).await.unwrap();
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.extensions().get::<Retries>().unwrap().0.len(), 1);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RetryLayer {
    policy: Arc<RetryPolicy>,
}

impl RetryLayer {
    /// The layer for `policy`, checked here.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] as [`RetryPolicy::check`] says.
    pub fn new(policy: RetryPolicy) -> Result<RetryLayer, ConfigError> {
        policy.check()?;
        Ok(RetryLayer {
            policy: Arc::new(policy),
        })
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = RetryService<S>;

    fn layer(&self, inner: S) -> RetryService<S> {
        RetryService {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// The service [`RetryLayer`] makes.
#[derive(Debug, Clone)]
pub struct RetryService<S> {
    inner: S,
    policy: Arc<RetryPolicy>,
}

// The names the layer reads and writes on every call, made once (a name
// given as text is parsed and checked on each use).
static BUDGET: HeaderName = HeaderName::from_static(BUDGET_HEADER);
static GRPC_TIMEOUT: HeaderName = HeaderName::from_static(GRPC_TIMEOUT_HEADER);
static CRITICALITY: HeaderName = HeaderName::from_static(CRITICALITY_HEADER);

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> Service<Request<B>> for RetryService<S>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: ReplayBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    R: Send + 'static,
{
    type Response = Response<R>;
    type Error = Error<S::Error>;
    type Future = RetryFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Error::Inner)
    }

    /// Makes the first attempt at once when the body is at hand (the
    /// common case: a request that may not be retried, or one with an
    /// empty body), on the service made ready; the caller's `admission`
    /// scope is read here. A retryable request with a body to read is
    /// made by the future, once the body is read whole.
    fn call(&mut self, request: Request<B>) -> Self::Future {
        if MAKING_ATTEMPT.get() {
            // An attempt of a layer above: that one retries, books and
            // carries the deadline; this one passes the attempt through.
            return RetryFuture {
                state: State::Through {
                    attempt: self.inner.call(request),
                },
            };
        }
        let (parts, body) = request.into_parts();
        // The call's clock reading: the deadline, the books, the throttle
        // and the first attempt's time left are read from it, and so is
        // the answer's arrival when nothing was waited for in between.
        let now = Instant::now();
        let plan = Plan::of(&parts, &self.policy, now);
        let eligible = self.policy.max_attempts > 1
            && (plan.grpc
                || self.policy.any_method
                || parts.extensions.get::<RetryAnyway>().is_some()
                || idempotent(&parts.method));
        if eligible && !body.is_end_stream() {
            // The ready service goes to the loop; its clone stays here.
            let clone = self.inner.clone();
            let ready = std::mem::replace(&mut self.inner, clone);
            let kept = RetryInputs {
                service: ready,
                parts,
            };
            return RetryFuture::looping(run(kept, plan, Start::Body(body), None, now));
        }
        let left = match open(&self.policy, now)
            .and_then(|()| time_left(plan.deadline, now, self.policy.min_attempt))
        {
            Ok(left) => left,
            Err(error) => {
                return RetryFuture {
                    state: State::Refused { error: Some(error) },
                };
            }
        };
        // A retryable call keeps the caller's head and a clone of the
        // service for its retries; the first attempt takes the head itself.
        let (mut head, kept) = if eligible {
            let kept = RetryInputs {
                service: self.inner.clone(),
                parts: parts.clone(),
            };
            (parts, Some(Box::new(kept)))
        } else {
            (parts, None)
        };
        carry(&mut head.headers, left, plan.criticality, plan.grpc);
        let attempt = make_attempt(&mut self.inner, Request::from_parts(head, body));
        RetryFuture {
            state: State::First {
                attempt,
                plan,
                kept,
                timer: None,
                now,
                waited: false,
            },
        }
    }
}

/// What a call fixes when it is made: its policy, deadline, criticality
/// and whether it is a gRPC call.
#[derive(Clone)]
struct Plan {
    policy: Arc<RetryPolicy>,
    deadline: Option<Instant>,
    criticality: Criticality,
    grpc: bool,
}

impl Plan {
    /// The call's caller is a [`Caller`] request extension when it has
    /// one, else the `admission` caller scope's.
    fn of(parts: &http::request::Parts, policy: &Arc<RetryPolicy>, now: Instant) -> Plan {
        let caller = parts
            .extensions
            .get::<Caller>()
            .copied()
            .unwrap_or_else(Caller::current);
        Plan {
            deadline: deadline(parts, &caller, policy, now),
            criticality: caller.criticality(),
            grpc: parts
                .headers
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc")),
            policy: policy.clone(),
        }
    }
}

/// What a retryable call keeps to be made again: a clone of the service
/// (made ready before each retry) and the caller's head. The body's
/// bytes are the loop's own: none when the call came with an empty body.
struct RetryInputs<S> {
    service: S,
    parts: http::request::Parts,
}

/// Where the loop starts.
enum Start<B, A> {
    /// With a body to read whole before the first attempt.
    Body(B),
    /// With the first attempt's answer, judged.
    Answered(A, Verdict),
}

pin_project! {
    /// The future of a call through [`RetryService`]: the first attempt,
    /// polled in place, and the retries after it (boxed, off the path of
    /// a call that succeeds). It is `Unpin` when the inner service's future
    /// is (hyper-util's client's is); otherwise pin it (`std::pin::pin!`,
    /// `Box::pin`) to poll it by reference, as in `tokio::select!`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the attempt under way (or the wait) and
    /// makes no other.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use admission_client::{RetryFuture, RetryLayer, RetryPolicy};
    /// use bytes::Bytes;
    /// use http::{Request, Response};
    /// use http_body_util::Empty;
    /// use tower::{Layer, Service, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut client = RetryLayer::new(RetryPolicy::default()).unwrap().layer(service_fn(
    ///     |_: Request<Empty<Bytes>>| async { Ok::<_, Infallible>(Response::new(())) },
    /// ));
    /// let call: RetryFuture<_, Empty<Bytes>> =
    ///     client.ready().await.unwrap().call(Request::new(Empty::new()));
    /// assert_eq!(call.await.unwrap().status(), 200);
    /// # }
    /// ```
    #[doc(hidden)]
    pub struct RetryFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<Request<B>>,
    {
        // Refused before any attempt: throttled, or no time left.
        Refused { error: Option<Error<S::Error>> },
        // An attempt of a layer above, passed through.
        Through {
            #[pin]
            attempt: S::Future,
        },
        // The first attempt, made by `call`.
        First {
            #[pin]
            attempt: S::Future,
            plan: Plan,
            kept: Option<Box<RetryInputs<S>>>,
            timer: Option<Pin<Box<Sleep>>>,
            now: Instant,
            waited: bool,
        },
        // The loop: retries, or a body to read first.
        Loop { future: BoxFuture<Result<S::Response, Error<S::Error>>> },
    }
}

impl<S, B> RetryFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn looping(
        future: impl Future<Output = Result<S::Response, Error<S::Error>>> + Send + 'static,
    ) -> Self {
        RetryFuture {
            state: State::Loop {
                future: Box::pin(future),
            },
        }
    }
}

impl<S, B> std::fmt::Debug for RetryFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryFuture").finish_non_exhaustive()
    }
}

impl<S, B, R> Future for RetryFuture<S, B>
where
    S: Service<Request<B>, Response = Response<R>> + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: ReplayBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    R: Send + 'static,
{
    type Output = Result<Response<R>, Error<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let future = match state.as_mut().project() {
            StateProj::Through { attempt } => return attempt.poll(cx).map_err(Error::Inner),
            StateProj::Refused { error } => {
                return Poll::Ready(Err(error.take().expect("polled after it finished")));
            }
            StateProj::Loop { future } => return future.as_mut().poll(cx),
            StateProj::First {
                attempt,
                plan,
                kept,
                timer,
                now,
                waited,
            } => {
                let Poll::Ready(answer) = poll_attempt(attempt, plan.deadline, timer, cx) else {
                    *waited = true;
                    return Poll::Pending;
                };
                let Some(answer) = answer else {
                    record(&plan.policy, Instant::now(), false);
                    return Poll::Ready(Err(Error::DeadlineExceeded));
                };
                let arrived = if *waited { Instant::now() } else { *now };
                let verdict = verdict(&answer, &plan.policy);
                record(&plan.policy, arrived, verdict.accepted);
                match kept.take() {
                    Some(kept) if verdict.retryable => Box::pin(run(
                        *kept,
                        plan.clone(),
                        Start::Answered(answer, verdict),
                        timer.take(),
                        arrived,
                    )),
                    _ => return Poll::Ready(answer.map_err(Error::Inner)),
                }
            }
        };
        state.set(State::Loop { future });
        let StateProj::Loop { future } = state.project() else {
            unreachable!("just set")
        };
        future.as_mut().poll(cx)
    }
}

/// The loop over a retryable call: its body read whole (when it starts
/// with one), then attempts until one is final, as the policy, the
/// budget, the hints and the deadline allow. An `async` block, not an
/// `async fn`: the future then holds the head once (an `async fn` keeps
/// its arguments and their moved copies side by side).
fn run<S, B, R>(
    kept: RetryInputs<S>,
    plan: Plan,
    start: Start<B, Result<Response<R>, S::Error>>,
    mut timer: Option<Pin<Box<Sleep>>>,
    mut now: Instant,
) -> impl Future<Output = Result<Response<R>, Error<S::Error>>>
where
    S: Service<Request<B>, Response = Response<R>>,
    B: ReplayBody,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let RetryInputs {
        mut service,
        mut parts,
    } = kept;
    let mut kept = Bytes::new();
    let Plan {
        policy,
        deadline,
        criticality,
        grpc,
    } = plan;
    async move {
        let (mut attempt, mut answered) = match start {
            Start::Body(body) => {
                let (bytes, at_once) = keep(body, policy.replay_limit).await?;
                kept = bytes;
                if !at_once {
                    now = Instant::now();
                }
                open(&policy, now)?;
                (0u32, None)
            }
            Start::Answered(answer, verdict) => (1, Some((answer, verdict))),
        };
        let mut retries = Vec::new();
        loop {
            if let Some((last, verdict)) = answered.take() {
                let finish = |last: Result<Response<R>, S::Error>, retries: Vec<Retry>| {
                    last.map(|mut response| {
                        if !retries.is_empty() {
                            response.extensions_mut().insert(Retries(retries));
                        }
                        response
                    })
                    .map_err(Error::Inner)
                };
                if !verdict.retryable || attempt >= policy.max_attempts {
                    return finish(last, retries);
                }
                let (wait, hint) = match verdict.hint {
                    Hint::Stop => return finish(last, retries),
                    Hint::After(hint) if hint > policy.max_hint => return finish(last, retries),
                    Hint::After(hint) => (hint + lateness(hint), Some(hint)),
                    Hint::None => (backoff(&policy, attempt), None),
                };
                // A retry's wait counts from a fresh reading: never less than
                // the hint, whatever the attempt took.
                let arrived = Instant::now();
                if let Some(deadline) = deadline
                    && arrived + wait + policy.min_attempt > deadline
                {
                    return finish(last, retries);
                }
                if let Some(budget) = &policy.budget
                    && !budget.try_withdraw()
                {
                    return finish(last, retries);
                }
                drop(last);
                // Boxed: inline it would widen the loop's future by a timer.
                Box::pin(sleep_until(arrived + wait)).await;
                now = Instant::now();
                retries.push(Retry {
                    hint,
                    waited: now - arrived,
                });
            }
            // No attempt waits for the service when it could not finish.
            let mut left = time_left(deadline, now, policy.min_attempt)?;
            // Whether anything was waited for since `now` was read.
            let mut waited = false;
            std::future::poll_fn(|cx| {
                let ready = service.poll_ready(cx);
                waited |= ready.is_pending();
                ready
            })
            .await
            .map_err(Error::Inner)?;
            if waited {
                now = Instant::now();
                left = time_left(deadline, now, policy.min_attempt)?;
            }
            // The attempt is made only now, so that no copy of it is held
            // while the service gets ready.
            attempt += 1;
            // The caller's head, cloned for each attempt but the last,
            // which takes it; made in a block of its own, so that the
            // future holds no second head while the attempt is under way.
            let sent = {
                let mut head = if attempt >= policy.max_attempts {
                    std::mem::replace(&mut parts, Request::new(()).into_parts().0)
                } else {
                    parts.clone()
                };
                carry(&mut head.headers, left, criticality, grpc);
                make_attempt(&mut service, Request::from_parts(head, B::replay(&kept)))
            };
            let mut sent = std::pin::pin!(sent);
            let Some(answer) = std::future::poll_fn(|cx| {
                let answer = poll_attempt(sent.as_mut(), deadline, &mut timer, cx);
                waited |= answer.is_pending();
                answer
            })
            .await
            else {
                record(&policy, Instant::now(), false);
                return Err(Error::DeadlineExceeded);
            };
            let arrived = if waited { Instant::now() } else { now };
            let verdict = verdict(&answer, &policy);
            record(&policy, arrived, verdict.accepted);
            answered = Some((answer, verdict));
        }
    }
}

thread_local! {
    /// Set while a retry layer makes an attempt: a retry layer under it,
    /// called from that attempt, passes the call through.
    static MAKING_ATTEMPT: Cell<bool> = const { Cell::new(false) };
}

/// `service.call(request)`, marked as an attempt of a retry layer while
/// it is made (and unmarked after, even if the call panics).
fn make_attempt<S: Service<Q>, Q>(service: &mut S, request: Q) -> S::Future {
    struct Unmark(bool);
    impl Drop for Unmark {
        fn drop(&mut self) {
            MAKING_ATTEMPT.set(self.0);
        }
    }
    let _unmark = Unmark(MAKING_ATTEMPT.replace(true));
    service.call(request)
}

/// Polls an attempt against the call's deadline: its answer, or `None`
/// once the deadline has passed. The deadline's timer is made only when
/// the attempt does not answer at once, and then kept for the call's
/// later attempts.
fn poll_attempt<F: Future>(
    attempt: Pin<&mut F>,
    deadline: Option<Instant>,
    timer: &mut Option<Pin<Box<Sleep>>>,
    cx: &mut Context<'_>,
) -> Poll<Option<F::Output>> {
    if let Poll::Ready(answer) = attempt.poll(cx) {
        return Poll::Ready(Some(answer));
    }
    match deadline {
        Some(deadline) => timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)))
            .as_mut()
            .poll(cx)
            .map(|()| None),
        None => Poll::Pending,
    }
}

/// Books a call before its first attempt: a deposit in the budget, and
/// the throttle's say.
fn open<E>(policy: &RetryPolicy, now: Instant) -> Result<(), Error<E>> {
    if let Some(budget) = &policy.budget {
        budget.deposit_at(now);
    }
    if let Some(throttle) = &policy.throttle
        && !throttle.admit_at(now)
    {
        return Err(Error::Throttled);
    }
    Ok(())
}

/// An attempt's answer, judged; a failure to answer may be retried.
fn verdict<R, E>(answer: &Result<Response<R>, E>, policy: &RetryPolicy) -> Verdict {
    match answer {
        Ok(response) => {
            // The wall clock is read only for an HTTP-date to read, which
            // only a refusal's hint may be.
            let wall = if !response.status().is_success()
                && response.headers().contains_key(RETRY_AFTER)
            {
                SystemTime::now()
            } else {
                SystemTime::UNIX_EPOCH
            };
            judge(
                response.status(),
                response.headers(),
                &policy.grpc_codes,
                wall,
            )
        }
        Err(_) => Verdict {
            accepted: false,
            retryable: true,
            hint: Hint::None,
        },
    }
}

/// The time left before `deadline` at `now`, or no attempt at all when it
/// is less than one needs.
fn time_left<E>(
    deadline: Option<Instant>,
    now: Instant,
    min_attempt: Duration,
) -> Result<Option<Duration>, Error<E>> {
    match deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(now);
            if left < min_attempt {
                return Err(Error::DeadlineExceeded);
            }
            Ok(Some(left))
        }
        None => Ok(None),
    }
}

fn record(policy: &RetryPolicy, now: Instant, accepted: bool) {
    if let Some(throttle) = &policy.throttle {
        throttle.record_at(now, accepted);
    }
}

/// The earliest of the call's deadlines.
fn deadline(
    parts: &http::request::Parts,
    caller: &Caller,
    policy: &RetryPolicy,
    now: Instant,
) -> Option<Instant> {
    let from_header = |name: &HeaderName, parse: fn(&[u8]) -> Result<Duration, _>| {
        parts
            .headers
            .get(name)
            .and_then(|v| parse(v.as_bytes()).ok())
            .and_then(|d| now.checked_add(d))
    };
    [
        caller.deadline(),
        from_header(&BUDGET, parse_budget_ms),
        from_header(&GRPC_TIMEOUT, parse_grpc_timeout),
        policy.timeout.and_then(|t| now.checked_add(t)),
    ]
    .into_iter()
    .flatten()
    .min()
}

/// Sets the time left and the criticality on an attempt's headers.
fn carry(
    headers: &mut http::HeaderMap,
    left: Option<Duration>,
    criticality: Criticality,
    grpc: bool,
) {
    if let Some(left) = left {
        // Rounded down: the server never hears of time the client lacks.
        headers.insert(&BUDGET, HeaderValue::from(budget_ms_value(left)));
        if grpc && let Ok(value) = HeaderValue::try_from(grpc_timeout_value(left)) {
            headers.insert(&GRPC_TIMEOUT, value);
        }
    }
    if criticality != Criticality::Default && !headers.contains_key(&CRITICALITY) {
        headers.insert(&CRITICALITY, HeaderValue::from_static(criticality.as_str()));
    }
}

/// How much later than `hint` a retry goes: never earlier. A hint in whole
/// seconds (`Retry-After`) is coarse, and every caller refused in that
/// second was told the same: up to 5% later, so they do not return at one
/// instant. A hint to the millisecond (`x-admission-retry-after-ms`, gRPC
/// pushback) is the server's own spread (admission promises each refused
/// caller its own slot-turn): up to 1 ms later, since returning a turn
/// late collides with the next caller's turn.
fn lateness(hint: Duration) -> Duration {
    let spread = if hint.subsec_nanos() == 0 {
        hint.mul_f64(0.05)
    } else {
        Duration::from_millis(1)
    };
    spread.mul_f64(random_unit())
}

/// The jittered exponential back-off after `attempt` attempts.
fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let bound = policy
        .base_backoff
        .saturating_mul(1 << attempt.saturating_sub(1).min(20))
        .min(policy.max_backoff);
    bound / 2 + (bound / 2).mul_f64(random_unit())
}

/// `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` and `DELETE` (RFC 9110 9.2.2).
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service whose first answer is a refusal to retry at once when
    /// `refuse_first`, and whose every other attempt never answers.
    fn never_answering(
        refuse_first: bool,
    ) -> (
        impl Service<
            Request<http_body_util::Empty<Bytes>>,
            Response = Response<()>,
            Error = std::convert::Infallible,
            Future: Send,
        > + Clone
        + Send
        + 'static,
        Arc<std::sync::atomic::AtomicU32>,
    ) {
        let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let seen = attempts.clone();
        let service = tower::service_fn(move |_: Request<http_body_util::Empty<Bytes>>| {
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                if refuse_first && n == 0 {
                    let mut refused = Response::new(());
                    *refused.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                    refused
                        .headers_mut()
                        .insert(RETRY_AFTER, HeaderValue::from_static("0"));
                    return Ok(refused);
                }
                std::future::pending().await
            }
        });
        (service, attempts)
    }

    #[tokio::test]
    async fn an_attempt_that_outlasts_the_deadline_ends_at_it_first_or_retried() {
        use tower::ServiceExt as _;
        for refuse_first in [false, true] {
            let (service, attempts) = never_answering(refuse_first);
            let client = RetryLayer::new(RetryPolicy::default().timeout(Duration::from_millis(80)))
                .unwrap()
                .layer(service);
            let started = std::time::Instant::now();
            let answer = tokio::time::timeout(
                Duration::from_secs(5),
                client.oneshot(Request::new(http_body_util::Empty::new())),
            )
            .await
            .expect("ended at the deadline, not left hanging");
            assert!(matches!(answer, Err(Error::DeadlineExceeded)), "{answer:?}");
            let took = started.elapsed();
            assert!(took >= Duration::from_millis(80), "{took:?}");
            let expected = if refuse_first { 2 } else { 1 };
            assert_eq!(
                attempts.load(std::sync::atomic::Ordering::Relaxed),
                expected
            );
        }
    }

    #[tokio::test]
    async fn stacked_layers_retry_a_call_once_not_once_each() {
        use tower::ServiceExt as _;
        let attempts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let seen = attempts.clone();
        let refusing = tower::service_fn(move |request: Request<http_body_util::Empty<Bytes>>| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let budget = request.headers().get(BUDGET_HEADER).cloned();
            async move {
                let mut refused = Response::new(());
                *refused.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                refused
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("0"));
                assert!(budget.is_some(), "the outer layer's deadline is carried");
                Ok::<_, std::convert::Infallible>(refused)
            }
        });
        let policy = |attempts| {
            RetryPolicy::default()
                .max_attempts(attempts)
                .throttle(None)
                .timeout(Duration::from_secs(5))
        };
        let inner = RetryLayer::new(policy(3)).unwrap().layer(refusing);
        let outer = RetryLayer::new(policy(4)).unwrap().layer(inner);
        let response = outer
            .oneshot(Request::new(http_body_util::Empty::new()))
            .await
            .unwrap();
        assert_eq!(response.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.extensions().get::<Retries>().unwrap().0.len(), 3);
        assert_eq!(
            attempts.load(std::sync::atomic::Ordering::Relaxed),
            4,
            "the outer layer's four attempts, not four times the inner's three"
        );
    }

    #[test]
    fn the_future_over_hyper_utils_client_is_unpin() {
        type Client = hyper_util::client::legacy::Client<
            hyper_util::client::legacy::connect::HttpConnector,
            http_body_util::Empty<Bytes>,
        >;
        fn unpin<T: Unpin>() {}
        unpin::<RetryFuture<Client, http_body_util::Empty<Bytes>>>();
    }

    #[test]
    fn the_backoff_doubles_within_its_jitter_and_stops_at_its_maximum() {
        let policy =
            RetryPolicy::default().backoff(Duration::from_millis(10), Duration::from_millis(35));
        for _ in 0..200 {
            let first = backoff(&policy, 1);
            assert!(first >= Duration::from_millis(5) && first < Duration::from_millis(10));
            let second = backoff(&policy, 2);
            assert!(second >= Duration::from_millis(10) && second < Duration::from_millis(20));
            let capped = backoff(&policy, 9);
            assert!(capped >= Duration::from_millis(17) && capped < Duration::from_millis(35));
        }
    }

    #[test]
    fn the_time_left_goes_out_in_both_headers_rounded_down() {
        let mut headers = http::HeaderMap::new();
        carry(
            &mut headers,
            Some(Duration::from_micros(250_900)),
            Criticality::Sheddable,
            true,
        );
        assert_eq!(headers[BUDGET_HEADER], "250");
        assert_eq!(headers[GRPC_TIMEOUT_HEADER], "250m");
        assert_eq!(headers[CRITICALITY_HEADER], "sheddable");
        let mut plain = http::HeaderMap::new();
        carry(&mut plain, None, Criticality::Default, false);
        assert!(plain.is_empty(), "nothing to carry");
        assert!(idempotent(&Method::PUT) && !idempotent(&Method::POST));
    }
}
