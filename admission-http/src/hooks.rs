//! What the app tells the layer about its own routes: which requests pass
//! without a lease, which flow a request is for, and what body a refusal
//! carries on its pages.
//!
//! This module owns [`Bypass`], [`FlowOf`] and [`RefusalBody`], the
//! app-supplied closures the service consults. It must never decide admission itself
//! and never let an app's body change a refusal's status or its hints
//! (`Retry-After`, `x-admission-retry-after-ms`, `x-admission-refusal`).

use std::fmt;
use std::sync::Arc;

use std::hash::Hash;

use admission_core::{Caller, Refusal};
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderValue, Response};

/// Marks a request a layer let through: a layer under it (stacked layers,
/// a router-wide layer over a route's) lets it through too, whatever its
/// own bypass, so a health route never waits on load however the layers
/// are stacked. Set by the server only; nothing a client sends makes one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bypassed;

/// A predicate on the request head: `true` lets the request through with
/// no lease, never refused (health, readiness, reflection).
#[derive(Clone)]
pub(crate) struct Bypass(Arc<dyn Fn(&Parts) -> bool + Send + Sync>);

impl Bypass {
    pub(crate) fn new(predicate: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        Bypass(Arc::new(predicate))
    }

    /// Whether `parts` passes without a lease.
    pub(crate) fn passes(&self, parts: &Parts) -> bool {
        (self.0)(parts)
    }
}

impl fmt::Debug for Bypass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Bypass(..)")
    }
}

/// The app's flow for a request: the caller read from its headers, given
/// the flow (and weight) the app names from the request head, if any. The
/// key is hashed as the caller is made and dropped: nothing of it is kept.
#[derive(Clone)]
pub(crate) struct FlowOf(Arc<FlowFn>);

/// The closure behind [`FlowOf`]: the caller given its flow for a head.
type FlowFn = dyn Fn(&Parts, Caller) -> Caller + Send + Sync;

impl FlowOf {
    /// A flow from `flow`'s key and weight (1 when `None`).
    pub(crate) fn new<K: Hash>(
        flow: impl Fn(&Parts) -> Option<(K, Option<u8>)> + Send + Sync + 'static,
    ) -> Self {
        FlowOf(Arc::new(move |head, caller| match flow(head) {
            Some((key, None)) => caller.with_flow(key),
            Some((key, Some(weight))) => caller.with_flow(key).with_weight(weight),
            None => caller,
        }))
    }

    /// `caller` with the app's flow for `head`.
    pub(crate) fn apply(&self, head: &Parts, caller: Caller) -> Caller {
        (self.0)(head, caller)
    }
}

impl fmt::Debug for FlowOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FlowOf(..)")
    }
}

/// The app's own body for a refusal (an HTML page, its own JSON): its
/// content type and bytes, or `None` for the problem document.
pub(crate) type BodyFn = dyn Fn(&Refusal, &Parts) -> Option<(HeaderValue, Bytes)> + Send + Sync;

/// The app's refusal body, when it gave one.
#[derive(Clone)]
pub(crate) struct RefusalBody(Arc<BodyFn>);

impl RefusalBody {
    pub(crate) fn new(
        body: impl Fn(&Refusal, &Parts) -> Option<(HeaderValue, Bytes)> + Send + Sync + 'static,
    ) -> Self {
        RefusalBody(Arc::new(body))
    }

    /// `response` (our refusal) with the app's body and content type in
    /// place of the problem document, when the app gives one for this
    /// refusal and request; status and every other header stay ours.
    pub(crate) fn apply(
        &self,
        refusal: &Refusal,
        parts: &Parts,
        mut response: Response<Option<Bytes>>,
    ) -> Response<Option<Bytes>> {
        if let Some((content_type, body)) = (self.0)(refusal, parts) {
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, content_type);
            headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
            *response.body_mut() = Some(body);
        }
        response
    }
}

impl fmt::Debug for RefusalBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RefusalBody(..)")
    }
}
