//! What a request's headers say about its caller: its criticality and how
//! long it will wait, read under the app's [`Trust`] in its peers.
//!
//! This module owns the reading of the caller's headers (their names and
//! grammars are [`wire`](crate::wire)'s) and the trust boundary, shared by
//! every adapter so that each reads the same headers the same way. It must never fail a request: an unknown criticality is the
//! default, and a malformed or repeated budget is ignored and reported (for
//! a counter), never answered with an error; it never lets an untrusted
//! header raise a caller's priority or lengthen its wait; and it never keeps
//! a header's text.

use std::time::Duration;

use admission_core::{Caller, Criticality};
use tokio::time::Instant;

use crate::wire::{
    BUDGET_HEADER, CRITICALITY_HEADER, ENVOY_TIMEOUT_HEADER, GRPC_TIMEOUT_HEADER, parse_budget_ms,
    parse_grpc_timeout,
};

/// Whom the app trusts to say how important a request is and how long its
/// client will wait.
///
/// Under [`Trust::Nobody`] (the default), a request's headers can only
/// lower its own priority and shorten its own wait: `critical` is read as
/// `default` (and counted), `sheddable` is honoured, and a budget refuses
/// at once a call that could not be answered in time or shortens a wait,
/// but never lengthens a queued wait past the queue's own limit. An outside
/// client cannot claim the slots, the queue places or the patience the
/// server keeps for its own critical work.
///
/// [`Trust::Peers`] honours the headers as sent: for a service whose only
/// clients are its own peers, or behind a mesh or balancer that strips
/// these headers from outside requests at the edge (as Envoy strips its
/// `x-envoy-*` headers from untrusted clients).
///
/// # Examples
///
/// ```
/// use admission_core::Criticality;
/// use admission_http::CallerLayer;
///
/// let claim = [("x-admission-criticality", &b"critical"[..])];
/// let outsiders = CallerLayer::new();
/// assert_eq!(outsiders.caller(claim).criticality(), Criticality::Default);
/// assert_eq!(outsiders.lowered_claims(), 1);
///
/// let peers = CallerLayer::new().trust_peers();
/// assert_eq!(peers.caller(claim).criticality(), Criticality::Critical);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[doc(hidden)]
pub enum Trust {
    /// Headers may lower a request's priority and shorten its wait, never
    /// raise or lengthen them (the default).
    #[default]
    Nobody,
    /// Headers are honoured as sent: the app's peers are trusted.
    Peers,
}

/// The caller a request's headers describe, under the app's [`Trust`],
/// with what the adapters count about the reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestCaller {
    /// The criticality named (default when absent or unknown, and for a
    /// `critical` claim nobody trusts) with the shortest well-formed budget
    /// as its deadline.
    pub(crate) caller: Caller,
    /// A budget header was malformed or repeated (and ignored, but for
    /// `grpc-timeout`'s well-formed values); adapters count these.
    pub(crate) malformed: bool,
    /// The request claimed `critical` and was read as `default`, since the
    /// app trusts nobody to raise their own priority; adapters count these.
    pub(crate) lowered: bool,
}

impl RequestCaller {
    /// Reads the criticality from [`CRITICALITY_HEADER`] (its first value)
    /// and the deadline from the shortest of [`BUDGET_HEADER`],
    /// [`ENVOY_TIMEOUT_HEADER`] and [`GRPC_TIMEOUT_HEADER`], counted from
    /// now, under `trust`. `headers` are (name, value) pairs, names in any
    /// case. A millisecond budget header that appears twice is ignored as
    /// malformed; a repeated or partly malformed `grpc-timeout` is counted
    /// as malformed, and its shortest well-formed value is the budget:
    /// gRPC's transport (tonic's server) acts on a value of a repeated
    /// header too, so ignoring them would leave an expired deadline to its
    /// timer (`CANCELLED`) instead of refusing it here
    /// (`DEADLINE_EXCEEDED`), and the shortest covers whichever it takes.
    pub(crate) fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        trust: Trust,
    ) -> Self {
        let mut criticality = None;
        let mut budgets: [Budget; 3] = [Budget::Absent; 3];
        let mut malformed = false;
        for (name, value) in headers {
            if criticality.is_none() && name.eq_ignore_ascii_case(CRITICALITY_HEADER) {
                criticality = Some(
                    std::str::from_utf8(value)
                        .ok()
                        .and_then(Criticality::parse)
                        .unwrap_or_default(),
                );
            } else if let Some(i) = [BUDGET_HEADER, ENVOY_TIMEOUT_HEADER, GRPC_TIMEOUT_HEADER]
                .iter()
                .position(|budget| name.eq_ignore_ascii_case(budget))
            {
                let grpc = i == 2;
                let parsed = if grpc {
                    parse_grpc_timeout(value)
                } else {
                    parse_budget_ms(value)
                };
                malformed |= parsed.is_err() || budgets[i] != Budget::Absent;
                budgets[i] = match (budgets[i], parsed) {
                    (Budget::Absent, Ok(budget)) => Budget::Is(budget),
                    (Budget::Is(seen), Ok(budget)) if grpc => Budget::Is(seen.min(budget)),
                    (Budget::Malformed, Ok(budget)) if grpc => Budget::Is(budget),
                    (Budget::Is(seen), Err(_)) if grpc => Budget::Is(seen),
                    _ => Budget::Malformed,
                };
            }
        }
        let claimed = criticality.unwrap_or_default();
        let lowered = trust == Trust::Nobody && claimed < Criticality::Default;
        let mut caller = Caller::new(if lowered {
            Criticality::Default
        } else {
            claimed
        });
        let shortest = budgets
            .iter()
            .filter_map(|budget| match budget {
                Budget::Is(budget) => Some(*budget),
                _ => None,
            })
            .min();
        if let Some(budget) = shortest {
            let now = Instant::now();
            let deadline = now.checked_add(budget).unwrap_or(now);
            caller = match trust {
                Trust::Nobody => caller.with_asserted_deadline(deadline),
                Trust::Peers => caller.with_deadline(deadline),
            };
        }
        RequestCaller {
            caller,
            malformed,
            lowered,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    Absent,
    Is(Duration),
    Malformed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_budget_is_malformed_and_ignored_while_the_others_count() {
        let read = RequestCaller::from_headers(
            [
                ("X-Admission-Budget-Ms", &b"100"[..]),
                ("x-admission-budget-ms", b"100"),
                ("grpc-timeout", b"2S"),
            ],
            Trust::Peers,
        );
        assert!(read.malformed);
        let left = read.caller.remaining().unwrap();
        assert!(left > Duration::from_millis(1500) && left <= Duration::from_secs(2));
    }

    #[test]
    fn a_repeated_grpc_timeout_is_counted_and_its_shortest_well_formed_value_counts() {
        for values in [
            [&b"1n"[..], b"20S", b"soon"],
            [b"20S", b"soon", b"1n"],
            [b"soon", b"20S", b"1n"],
        ] {
            let read = RequestCaller::from_headers(
                values.map(|value| (GRPC_TIMEOUT_HEADER, value)),
                Trust::Nobody,
            );
            assert!(read.malformed, "{values:?} is counted");
            assert!(
                read.caller.remaining().unwrap() < Duration::from_millis(1),
                "{values:?}: the expired one is the deadline"
            );
        }
        let garbage = RequestCaller::from_headers(
            [
                (GRPC_TIMEOUT_HEADER, &b"soon"[..]),
                (GRPC_TIMEOUT_HEADER, b"5s"),
            ],
            Trust::Nobody,
        );
        assert!(garbage.malformed && garbage.caller.deadline().is_none());
    }

    #[test]
    fn each_criticality_is_read_by_its_name_in_any_case() {
        for level in Criticality::ALL {
            let upper = level.as_str().to_ascii_uppercase();
            let read =
                RequestCaller::from_headers([(CRITICALITY_HEADER, upper.as_bytes())], Trust::Peers);
            assert_eq!(read.caller.criticality(), level);
            assert_eq!(Criticality::parse(level.as_str()), Some(level));
        }
        assert_eq!(Criticality::parse("critical "), None);
    }

    #[test]
    fn an_unknown_or_repeated_criticality_is_never_an_error() {
        let read = RequestCaller::from_headers(
            [
                (CRITICALITY_HEADER, &b"<script>"[..]),
                (CRITICALITY_HEADER, b"critical"),
            ],
            Trust::Peers,
        );
        assert_eq!(
            read.caller.criticality(),
            Criticality::Default,
            "the first wins"
        );
        assert!(!read.malformed);
        let none = RequestCaller::from_headers([], Trust::Nobody);
        assert_eq!(none.caller, Caller::default());
    }

    #[test]
    fn nobody_raises_their_own_priority_or_lengthens_their_own_wait_unless_trusted() {
        let claim = [
            (CRITICALITY_HEADER, &b"Critical"[..]),
            (BUDGET_HEADER, b"60000"),
        ];
        let outsider = RequestCaller::from_headers(claim, Trust::Nobody);
        assert_eq!(outsider.caller.criticality(), Criticality::Default);
        assert!(outsider.lowered && !outsider.malformed);
        assert!(outsider.caller.deadline_is_asserted());
        assert!(outsider.caller.remaining().unwrap() > Duration::from_secs(59));

        let peer = RequestCaller::from_headers(claim, Trust::Peers);
        assert_eq!(peer.caller.criticality(), Criticality::Critical);
        assert!(!peer.lowered);
        assert!(!peer.caller.deadline_is_asserted());

        for trust in [Trust::Nobody, Trust::Peers] {
            let shed =
                RequestCaller::from_headers([(CRITICALITY_HEADER, &b"sheddable"[..])], trust);
            assert_eq!(
                shed.caller.criticality(),
                Criticality::Sheddable,
                "{trust:?}"
            );
            assert!(!shed.lowered);
        }
    }
}
