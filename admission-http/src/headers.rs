//! What a request's headers say about its caller: its criticality, how
//! long it will wait and the flow it is for, read under the app's [`Trust`]
//! in its peers, beside the app's own word on the flow.
//!
//! This module owns the reading of the caller's headers (their names and
//! grammars are [`wire`](crate::wire)'s) and the trust boundary, shared by
//! every adapter so that each reads the same headers the same way. It must never fail a request: an unknown criticality is the
//! default, and a malformed or repeated budget is ignored and reported (for
//! a counter), never answered with an error; it never lets an untrusted
//! header raise a caller's priority, lengthen its wait or name its flow;
//! and it never keeps a header's text (a flow key is hashed at once).

use std::time::Duration;

use admission_core::{Caller, Criticality};
use tokio::time::Instant;

use crate::wire::{
    BUDGET_HEADER, CRITICALITY_HEADER, ENVOY_TIMEOUT_HEADER, FLOW_HEADER, GRPC_TIMEOUT_HEADER,
    parse_budget_ms, parse_flow, parse_grpc_timeout,
};

/// Whom the app trusts to say how important a request is and how long its
/// client will wait.
///
/// Under [`Trust::Nobody`] (the default), a request's headers can only
/// lower its own priority and shorten its own wait: `critical` is read as
/// `default` (and counted), `sheddable` is honoured, and a budget refuses
/// at once a call that could not be answered in time or shortens a wait,
/// but never lengthens a queued wait past the queue's own limit; an
/// `x-admission-flow` is ignored (and counted), so the flow is the app's
/// word alone. An outside client cannot claim the slots, the queue places
/// or the patience the server keeps for its own critical work, nor pick
/// another tenant's share or escape its own by inventing flow keys.
///
/// [`Trust::Peers`] honours the headers as sent (a well-formed
/// `x-admission-flow` names the flow in place of the app's): for a service
/// whose only clients are its own peers, or behind a mesh or balancer that strips
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
    /// `grpc-timeout`'s well-formed values), or the flow header was;
    /// adapters count these.
    pub(crate) malformed: bool,
    /// The request claimed `critical` and was read as `default`, or named
    /// its own flow and was not heard, since the app trusts nobody to raise
    /// their own priority or pick their share; adapters count these.
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
    ///
    /// The flow: under [`Trust::Peers`] a well-formed [`FLOW_HEADER`] (one
    /// value, [`parse_flow`]'s grammar) names it, and `app_flow` is not
    /// called; otherwise `app_flow` (the app's word, from the request's
    /// head) gives the caller its flow, if any. Under [`Trust::Nobody`] a
    /// well-formed flow header is set aside and counted as `lowered`; a
    /// malformed or repeated one is ignored under either policy and counted
    /// as `malformed`.
    pub(crate) fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        trust: Trust,
        app_flow: impl FnOnce(Caller) -> Caller,
    ) -> Self {
        let mut criticality = None;
        let mut budgets: [Budget; 3] = [Budget::Absent; 3];
        let mut flow = Flow::Absent;
        let mut malformed = false;
        for (name, value) in headers {
            if name.eq_ignore_ascii_case(FLOW_HEADER) {
                flow = match (flow, parse_flow(value)) {
                    (Flow::Absent, Ok(key)) => Flow::Is(key),
                    _ => Flow::Malformed,
                };
                malformed |= flow == Flow::Malformed;
            } else if criticality.is_none() && name.eq_ignore_ascii_case(CRITICALITY_HEADER) {
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
        let mut lowered = trust == Trust::Nobody && claimed < Criticality::Default;
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
        caller = match (trust, flow) {
            (Trust::Peers, Flow::Is(key)) => caller.with_flow(key),
            (Trust::Nobody, Flow::Is(_)) => {
                lowered = true;
                app_flow(caller)
            }
            _ => app_flow(caller),
        };
        RequestCaller {
            caller,
            malformed,
            lowered,
        }
    }
}

/// What the flow header said: nothing, one well-formed key (borrowed for
/// the moment it takes to hash it), or something to ignore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow<'a> {
    Absent,
    Is(&'a str),
    Malformed,
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

    /// No flow of the app's: the caller as the headers made it.
    fn keep(caller: Caller) -> Caller {
        caller
    }

    #[test]
    fn an_untrusted_flow_header_is_set_aside_and_counted_and_the_apps_flow_holds() {
        let app = |caller: Caller| caller.with_flow("tenant-a");
        let read =
            RequestCaller::from_headers([(FLOW_HEADER, &b"tenant-b"[..])], Trust::Nobody, app);
        assert_eq!(
            read.caller,
            Caller::default().with_flow("tenant-a"),
            "the app's flow, not the header's"
        );
        assert!(
            read.lowered && !read.malformed,
            "counted as a claim set aside"
        );
        let alone =
            RequestCaller::from_headers([(FLOW_HEADER, &b"tenant-b"[..])], Trust::Nobody, keep);
        assert!(!alone.caller.has_flow(), "no flow without the app's word");
        assert!(alone.lowered);
    }

    #[test]
    fn a_trusted_flow_header_names_the_flow_in_place_of_the_apps() {
        let read = RequestCaller::from_headers(
            [("X-Admission-Flow", &b"tenant-b"[..])],
            Trust::Peers,
            |_| panic!("the app's flow is not asked for when a trusted peer named one"),
        );
        assert_eq!(read.caller, Caller::default().with_flow("tenant-b"));
        assert!(!read.lowered && !read.malformed);
        let none = RequestCaller::from_headers([], Trust::Peers, |caller| caller.with_flow(7_u64));
        assert_eq!(
            none.caller,
            Caller::default().with_flow(7_u64),
            "without a header, the app's"
        );
    }

    #[test]
    fn a_malformed_or_repeated_flow_header_is_ignored_and_counted_under_either_policy() {
        let long = vec![b'a'; 10 * 1024];
        for trust in [Trust::Nobody, Trust::Peers] {
            for headers in [
                vec![(FLOW_HEADER, &b"<script>alert(1)</script>"[..])],
                vec![(FLOW_HEADER, &long[..])],
                vec![(FLOW_HEADER, &b""[..])],
                vec![(FLOW_HEADER, &b"tenant-a"[..]), (FLOW_HEADER, b"tenant-b")],
            ] {
                let read = RequestCaller::from_headers(headers.iter().copied(), trust, |caller| {
                    caller.with_flow("app")
                });
                assert!(read.malformed, "{trust:?}: counted as malformed");
                assert!(!read.lowered, "{trust:?}: a malformed value is no claim");
                assert_eq!(
                    read.caller,
                    Caller::default().with_flow("app"),
                    "{trust:?}: ignored, the app's flow holds"
                );
            }
        }
    }

    #[test]
    fn a_repeated_budget_is_malformed_and_ignored_while_the_others_count() {
        let read = RequestCaller::from_headers(
            [
                ("X-Admission-Budget-Ms", &b"100"[..]),
                ("x-admission-budget-ms", b"100"),
                ("grpc-timeout", b"2S"),
            ],
            Trust::Peers,
            keep,
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
                keep,
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
            keep,
        );
        assert!(garbage.malformed && garbage.caller.deadline().is_none());
    }

    #[test]
    fn each_criticality_is_read_by_its_name_in_any_case() {
        for level in Criticality::ALL {
            let upper = level.as_str().to_ascii_uppercase();
            let read = RequestCaller::from_headers(
                [(CRITICALITY_HEADER, upper.as_bytes())],
                Trust::Peers,
                keep,
            );
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
            keep,
        );
        assert_eq!(
            read.caller.criticality(),
            Criticality::Default,
            "the first wins"
        );
        assert!(!read.malformed);
        let none = RequestCaller::from_headers([], Trust::Nobody, keep);
        assert_eq!(none.caller, Caller::default());
    }

    #[test]
    fn nobody_raises_their_own_priority_or_lengthens_their_own_wait_unless_trusted() {
        let claim = [
            (CRITICALITY_HEADER, &b"Critical"[..]),
            (BUDGET_HEADER, b"60000"),
        ];
        let outsider = RequestCaller::from_headers(claim, Trust::Nobody, keep);
        assert_eq!(outsider.caller.criticality(), Criticality::Default);
        assert!(outsider.lowered && !outsider.malformed);
        assert!(outsider.caller.deadline_is_asserted());
        assert!(outsider.caller.remaining().unwrap() > Duration::from_secs(59));

        let peer = RequestCaller::from_headers(claim, Trust::Peers, keep);
        assert_eq!(peer.caller.criticality(), Criticality::Critical);
        assert!(!peer.lowered);
        assert!(!peer.caller.deadline_is_asserted());

        for trust in [Trust::Nobody, Trust::Peers] {
            let shed =
                RequestCaller::from_headers([(CRITICALITY_HEADER, &b"sheddable"[..])], trust, keep);
            assert_eq!(
                shed.caller.criticality(),
                Criticality::Sheddable,
                "{trust:?}"
            );
            assert!(!shed.lowered);
        }
    }
}
