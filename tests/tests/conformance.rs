//! The adapter conformance suite: every case is written once
//! ([`cases`]) and run over real HTTP against the axum adapter and the
//! actix-web adapter, and over real HTTP/2 with tonic's own client against
//! the tonic adapter ([`harness`]), so all three keep the same promises:
//!
//! 1. a scrape is refused at once (`503` + `Retry-After`; over gRPC
//!    `UNAVAILABLE` + `grpc-retry-pushback-ms`) while every registry worker
//!    is held;
//! 2. the status page is refused the same way;
//! 3. a client that hangs up mid-walk leaves the walk's slot held until the
//!    walk ends;
//! 4. a waiting background walker gets the next free slot while HTTP
//!    callers are refused;
//! 5. a streamed body (a server-streaming call) holds its request lease to
//!    its last chunk (message), and a client dropping it early (cancelling
//!    the call) releases the lease; a response its client stops reading,
//!    and a request body its client stops sending, give their lease back
//!    at the progress bound, as does a response to an HTTP/2 reader whose
//!    window never opens (axum and tonic: actix-web has no h2c);
//! 6. both HTTP adapters send the same refusal, byte for byte; tonic's
//!    refusal states the same facts (code, pool, retry hint) in gRPC's form;
//! 7. a panicking walk answers `500` (`INTERNAL`) and frees its slot;
//! 8. clients on separate connections share one pool, whichever way the
//!    middleware is mounted;
//! 9. scrapes that arrive while a walk runs share it (`registry_coalesced`);
//! 10. a panicking shared walk answers every caller `500` and the next
//!     caller walks afresh;
//! 11. a client claiming `x-admission-criticality: critical` (gRPC: the
//!     same metadata key) is admitted as `default`, and counted, unless the
//!     app trusts its peers (`trust_peers()`); `sheddable` is honoured
//!     either way;
//! 12. with half a class's slots held, `sheddable` is refused at once under
//!     either policy while a `critical` claim is admitted (as `default`
//!     unless peers are trusted);
//! 13. with the middleware queueing (`queue()`) and the class's only slot
//!     held, a budget of a minute waits only the queue's own limit and is
//!     refused `ADMISSION_WAIT_TIMEOUT`, unless peers are trusted: then it
//!     waits past that limit and is admitted when the slot frees;
//! 14. with every slot of the class held, a route the app bypasses is
//!     served with no lease;
//! 15. a refusal on a middleware with the app's own page answers that page;
//! 16. a refusal the app's code met three of its own error enums deep is
//!     answered as a refusal;
//! 17. a class in shadow mode serves what it would refuse, counted by
//!     code, and refuses again once switched back;
//! 18. with the app naming each request's flow (`.flow(..)`), a tenant
//!     flooding a class is held to its share once another tenant asks: the
//!     flood's next request is refused `ADMISSION_FLOW_SHARE` (even with a
//!     flow key of its own invention in `x-admission-flow`) and the other
//!     tenant's is admitted at once; no refusal echoes a flow key;
//! 19. a flow named by `x-admission-flow` counts only under
//!     `trust_peers()`: by default the header is set aside (and counted)
//!     and the second tenant is refused as one line with the first.
//!
//! Tests are `axum::<case>`, `actix::<case>` and `tonic::<case>` (every
//! case but 6, which compares adapters), plus the mount variants of case 8
//! and the cross-adapter cases 6 at the top level. A route is a `GET` over
//! HTTP, leasing *control*; over gRPC it is a method of one service
//! (`harness::grpc`), leasing *work* by the layer's default classification.

// A test crate's root resolves modules beside it, not in a folder named
// after it: the paths say where the suite's modules live.
#[path = "conformance/cases.rs"]
mod cases;
#[path = "conformance/client.rs"]
mod client;
#[path = "conformance/endpoints.rs"]
mod endpoints;
#[path = "conformance/harness.rs"]
mod harness;

use harness::{ActixMount, Adapter, AxumMount, TonicMount};

/// One `#[tokio::test]` per case for `$adapter`.
macro_rules! every_case {
    ($adapter:expr) => {
        every_case!(
            $adapter;
            third_scrape_is_refused_at_once_while_both_workers_are_held,
            status_page_is_refused_the_same_way,
            disconnected_client_keeps_its_slot_until_the_walk_ends,
            waiting_background_walker_is_admitted_when_a_slot_frees,
            streamed_body_holds_its_lease_until_the_last_chunk,
            client_dropping_the_body_early_releases_the_lease,
            panicking_walk_answers_500_and_frees_its_slot,
            concurrent_scrapes_share_exactly_one_walk,
            a_panicking_shared_walk_fails_every_caller_and_the_next_walks_afresh,
            a_critical_claim_is_served_as_default_unless_peers_are_trusted,
            sheddable_is_honoured_from_anyone,
            a_long_budget_does_not_lengthen_a_queued_wait_unless_peers_are_trusted,
            a_refusal_three_errors_deep_is_answered_as_a_refusal,
            a_stalled_request_body_gives_its_lease_back_at_the_progress_bound,
            a_class_in_shadow_mode_serves_what_it_would_refuse_until_switched_back,
            a_flooding_flow_is_held_to_its_share_and_another_flow_is_admitted,
            a_flow_header_counts_only_when_peers_are_trusted,
            a_costly_route_holds_its_whole_cost_and_a_cost_above_the_class_is_a_build_error,
            a_queued_flow_is_served_before_the_floods_waiter,
        );
    };
    ($adapter:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                crate::cases::$case($adapter).await;
            }
        )+
    };
}

/// Case 8 for one mount of the middleware.
macro_rules! shares_one_pool {
    ($($name:ident => $adapter:expr),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                crate::cases::separate_connections_share_one_pool($adapter).await;
            }
        )+
    };
}

mod axum {
    //! The cases against `admission-axum`, layer mounted router-wide unless
    //! the name says otherwise.

    use super::{Adapter, AxumMount};

    every_case!(Adapter::AXUM);
    every_case!(
        Adapter::AXUM;
        a_bypassed_route_is_served_through_a_saturated_layer,
        a_refusal_carries_the_apps_own_page,
    );
    every_case!(
        Adapter::AXUM;
        an_unread_response_gives_its_lease_back_at_the_progress_bound,
        a_reader_whose_window_never_opens_gives_its_lease_back_at_the_progress_bound,
    );

    shares_one_pool! {
        separate_connections_share_one_pool_with_a_router_layer => Adapter::Axum(AxumMount::Router),
        separate_connections_share_one_pool_with_a_route_layer => Adapter::Axum(AxumMount::Route),
        separate_connections_share_one_pool_with_route_service => Adapter::Axum(AxumMount::RouteService),
    }
}

mod actix {
    //! The cases against `admission-actix`, middleware on the `App` unless
    //! the name says otherwise.

    use super::{ActixMount, Adapter};

    every_case!(Adapter::ACTIX);
    every_case!(
        Adapter::ACTIX;
        a_bypassed_route_is_served_through_a_saturated_layer,
        a_refusal_carries_the_apps_own_page,
    );
    every_case!(Adapter::ACTIX; an_unread_response_gives_its_lease_back_at_the_progress_bound);

    shares_one_pool! {
        separate_connections_share_one_pool_with_app_wrap => Adapter::Actix(ActixMount::App),
        separate_connections_share_one_pool_with_scope_wrap => Adapter::Actix(ActixMount::Scope),
    }
}

mod tonic {
    //! The cases against `admission-tonic`, layer on the server
    //! (`Server::builder().layer(..)`) unless the name says otherwise.

    use super::{Adapter, TonicMount};

    every_case!(Adapter::TONIC);
    every_case!(
        Adapter::TONIC;
        a_bypassed_route_is_served_through_a_saturated_layer,
        an_unread_response_gives_its_lease_back_at_the_progress_bound,
        a_reader_whose_window_never_opens_gives_its_lease_back_at_the_progress_bound,
    );

    shares_one_pool! {
        separate_connections_share_one_pool_with_a_server_layer => Adapter::Tonic(TonicMount::Server),
        separate_connections_share_one_pool_with_a_service_layer => Adapter::Tonic(TonicMount::Service),
    }
}

#[tokio::test]
async fn both_adapters_answer_byte_for_byte_alike() {
    cases::both_adapters_answer_byte_for_byte_alike().await;
}

#[tokio::test]
async fn grpc_and_http_refusals_state_the_same_facts() {
    cases::grpc_and_http_refusals_state_the_same_facts().await;
}
