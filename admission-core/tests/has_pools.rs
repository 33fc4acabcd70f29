//! `pool::HasPools`: one `Shutdown::register(&x)` and one
//! `AdmissionMetrics::add(&x)` for anything that owns pools (a `Pool`, the
//! `RequestPools`, a `Reservation`, a hand-written or `#[reserved]` loop
//! owner), and handing the same pool over twice is harmless.

use std::time::Duration;

use admission_core::pool::HasPools;
use admission_core::{LoopOwner, Pool, RequestPools, Reservation, Shutdown};

/// A loop owner sized by hand.
struct Dispatcher {
    reservation: Reservation,
}

impl LoopOwner for Dispatcher {
    fn reservation(&self) -> &Reservation {
        &self.reservation
    }
}

/// The names of the pools `owner` hands over.
fn names(owner: &(impl HasPools + ?Sized)) -> Vec<String> {
    let mut names = Vec::new();
    owner.each_pool(&mut |pool| names.push(pool.name().to_owned()));
    names
}

#[test]
fn each_owner_hands_over_exactly_its_own_pools() {
    let pool = Pool::new("has-pools-registry", 1).unwrap();
    let requests = RequestPools::new(2, 4).unwrap();
    let reservation = Reservation::new("has-pools-reservation", 2).unwrap();
    let dispatcher = Dispatcher {
        reservation: Reservation::new("has-pools-dispatcher", 3).unwrap(),
    };
    assert_eq!(names(&pool), ["has-pools-registry"]);
    assert_eq!(names(&requests), ["work", "control"]);
    assert_eq!(names(&reservation), ["has-pools-reservation"]);
    assert_eq!(names(&dispatcher), ["has-pools-dispatcher"]);
    let as_dyn: &dyn HasPools = &dispatcher;
    assert_eq!(names(as_dyn), ["has-pools-dispatcher"], "usable as dyn");
}

#[tokio::test(flavor = "current_thread")]
async fn shutdown_registers_every_kind_of_owner_once() {
    let shutdown = Shutdown::new(Duration::from_secs(5)).unwrap();
    let pool = Pool::new("has-pools-shutdown-registry", 1).unwrap();
    let requests = RequestPools::new(1, 1).unwrap();
    let reservation = Reservation::new("has-pools-shutdown-reservation", 2).unwrap();
    let dispatcher = Dispatcher {
        reservation: Reservation::new("has-pools-shutdown-dispatcher", 2).unwrap(),
    };
    let owners: [&dyn HasPools; 4] = [&pool, &requests, &reservation, &dispatcher];
    for owner in owners {
        shutdown.register(owner);
    }
    // Twice, through other handles to the same pools: harmless.
    shutdown.register(&pool.clone());
    shutdown.register(&requests.clone());
    shutdown.register(reservation.pool());
    shutdown.register(&dispatcher);

    let report = shutdown.shutdown().await;
    let pools: Vec<&str> = report.pools.iter().map(|p| p.pool.as_str()).collect();
    assert_eq!(
        pools,
        [
            "has-pools-shutdown-registry",
            "work",
            "control",
            "has-pools-shutdown-reservation",
            "has-pools-shutdown-dispatcher",
        ],
        "each pool once, in registration order"
    );
    assert!(report.pools.iter().all(|p| p.drained));
    for closed in [
        &pool,
        requests.pool(admission_core::Class::Work),
        requests.pool(admission_core::Class::Control),
        reservation.pool(),
        dispatcher.reservation().pool(),
    ] {
        assert!(closed.is_closed(), "{} was drained", closed.name());
    }
}

#[cfg(feature = "macros")]
#[tokio::test(flavor = "current_thread")]
async fn shutdown_registers_a_reserved_owner() {
    #[admission_core::reserved(slots = 2, name = "has-pools-reserved-shutdown")]
    struct RecoveryLoop;

    let shutdown = Shutdown::default();
    shutdown.register(&RecoveryLoop);
    shutdown.register(&RecoveryLoop);
    shutdown.register(RecoveryLoop.reservation());
    let report = shutdown.shutdown().await;
    assert_eq!(report.pools.len(), 1, "registered once: {report:?}");
    assert_eq!(report.pools[0].pool, "has-pools-reserved-shutdown");
    assert!(report.pools[0].drained);
    assert!(RecoveryLoop.reservation().pool().is_closed());
}

#[cfg(feature = "prometheus")]
mod metrics {
    use super::*;
    use admission_core::metrics::AdmissionMetrics;
    use prometheus_client::registry::Registry;
    use std::collections::BTreeSet;

    fn series(metrics: &AdmissionMetrics) -> BTreeSet<String> {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let capacity: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("admission_slots_capacity{"))
            .map(str::to_owned)
            .collect();
        let unique: BTreeSet<String> = capacity.iter().cloned().collect();
        assert_eq!(
            capacity.len(),
            unique.len(),
            "no pool is exposed twice:\n{text}"
        );
        unique
    }

    #[test]
    fn metrics_add_every_kind_of_owner_once() {
        let pool = Pool::new("has-pools-metrics-registry", 1).unwrap();
        let requests = RequestPools::new(2, 4).unwrap();
        let reservation = Reservation::new("has-pools-metrics-reservation", 2).unwrap();
        let dispatcher = Dispatcher {
            reservation: Reservation::new("has-pools-metrics-dispatcher", 3).unwrap(),
        };
        let metrics = AdmissionMetrics::new();
        let owners: [&dyn HasPools; 4] = [&pool, &requests, &reservation, &dispatcher];
        for owner in owners {
            metrics.add(owner);
            metrics.add(owner);
        }
        metrics.add(&requests.clone());
        assert_eq!(
            series(&metrics),
            BTreeSet::from(
                [
                    r#"admission_slots_capacity{pool="has-pools-metrics-registry"} 1"#,
                    r#"admission_slots_capacity{pool="work"} 2"#,
                    r#"admission_slots_capacity{pool="control"} 4"#,
                    r#"admission_slots_capacity{pool="has-pools-metrics-reservation"} 2"#,
                    r#"admission_slots_capacity{pool="has-pools-metrics-dispatcher"} 3"#,
                ]
                .map(str::to_owned)
            )
        );
    }

    #[cfg(feature = "macros")]
    #[test]
    fn metrics_add_a_reserved_owner() {
        #[admission_core::reserved(slots = 3, name = "has-pools-reserved-metrics")]
        struct ReceiptLoop;

        let metrics = AdmissionMetrics::new();
        metrics.add(&ReceiptLoop);
        metrics.add(&ReceiptLoop);
        metrics.add(ReceiptLoop.reservation());
        assert_eq!(
            series(&metrics),
            BTreeSet::from([
                r#"admission_slots_capacity{pool="has-pools-reserved-metrics"} 3"#.to_owned()
            ])
        );
    }
}
