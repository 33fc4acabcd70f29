//! The two pieces a balancer reads, on their own: the load report's
//! utilization and rates (counted over its window from when it was made,
//! over every pool it names), and readiness (shared by every `Readiness` of
//! one shutdown, withdrawn for good, and held through the drain delay).
//! Time is tokio's paused clock, so windows end exactly where the test says.

use std::time::Duration;

use admission_core::{Class, RequestPools, Shutdown};
use admission_http::balancer::{Load, LoadReport, RATE_WINDOW, Readiness};
use tokio::time::{Instant, advance};

fn refused_lease(requests: &RequestPools, class: Class) {
    assert!(requests.try_lease(class).is_err(), "the class is full");
}

#[tokio::test(start_paused = true)]
async fn a_load_report_counts_every_pool_from_its_making_over_its_window() {
    let requests = RequestPools::new(2, 1).unwrap();
    // Before the report: not counted (2 slots, 1 refusal, over both pools).
    drop(requests.try_lease(Class::Work).unwrap());
    let control = requests.try_lease(Class::Control).unwrap();
    refused_lease(&requests, Class::Control);
    drop(control);
    let report = LoadReport::new(&requests);
    assert_eq!(report.load(), Load::new(0.0, 0.0, 0.0));

    let work = requests.try_lease(Class::Work).unwrap();
    assert_eq!(report.load().utilization, 0.5, "one work slot of two");
    let control = requests.try_lease(Class::Control).unwrap();
    assert_eq!(report.load().utilization, 1.0, "the fullest pool decides");
    refused_lease(&requests, Class::Control);
    refused_lease(&requests, Class::Control);
    drop(control);
    for _ in 0..3 {
        drop(requests.try_lease(Class::Control).unwrap());
    }
    assert_eq!(report.load().rps, 0.0, "no window has ended yet");

    advance(RATE_WINDOW).await;
    let load = report.load();
    assert_eq!(load.utilization, 0.5);
    assert_eq!(
        (load.rps, load.eps),
        (5.0, 2.0),
        "5 slots and 2 refusals in 1 s"
    );
    assert!(
        load.orca_text()
            .starts_with("TEXT application_utilization:0.500,rps_fractional:5.000,eps:2.000"),
        "{}",
        load.orca_text()
    );

    // A quiet window, then 4 slots over a window of 2 s.
    advance(RATE_WINDOW).await;
    assert_eq!((report.load().rps, report.load().eps), (0.0, 0.0));
    for _ in 0..3 {
        drop(requests.try_lease(Class::Control).unwrap());
    }
    let control = requests.try_lease(Class::Control).unwrap();
    refused_lease(&requests, Class::Control);
    refused_lease(&requests, Class::Control);
    drop(control);
    advance(RATE_WINDOW / 2).await;
    assert_eq!(report.load().rps, 0.0, "half a window shows the last one");
    advance(RATE_WINDOW * 3 / 2).await;
    let load = report.load();
    assert_eq!(
        (load.rps, load.eps),
        (2.0, 1.0),
        "4 slots and 2 refusals over 2 s"
    );
    drop(work);
}

#[tokio::test(start_paused = true)]
async fn readiness_is_one_switch_per_shutdown_and_withdraw_for_serves_on_through_the_delay() {
    let shutdown = Shutdown::default();
    let (one, other) = (Readiness::new(&shutdown), Readiness::new(&shutdown));
    let unrelated = Readiness::new(&Shutdown::default());
    assert!(one.is_ready() && other.is_ready());

    let started = Instant::now();
    let mut stopping = Box::pin(one.withdraw_for(Duration::from_millis(250)));
    tokio::select! {
        biased;
        () = &mut stopping => panic!("the delay is served, not skipped"),
        () = other.withdrawn() => {}
        () = tokio::time::sleep(Duration::from_secs(10)) => panic!("never withdrawn"),
    }
    assert!(
        !other.is_ready(),
        "withdrawn at the first poll, for every clone"
    );
    assert!(
        unrelated.is_ready(),
        "another shutdown's readiness is its own"
    );
    stopping.await;
    assert_eq!(started.elapsed(), Duration::from_millis(250));

    let quick = Instant::now();
    one.withdraw_for(Duration::ZERO).await;
    assert_eq!(quick.elapsed(), Duration::ZERO);
    unrelated.withdraw();
    assert!(!unrelated.is_ready());
}
