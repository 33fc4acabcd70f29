//! Issue 40.3's engine part: a pool recorded into a trace writes each
//! admission when its slot is released (with its wait and its hold) and
//! each refusal when it is made, as JSON lines, from real blocked workers.

use std::sync::mpsc;
use std::time::Duration;

use admission_core::trace::Trace;
use admission_core::{Admission, Caller, Class, Code, Criticality, Pool, RequestPools};

fn entries(trace: &Trace) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let written = trace.write_json_lines(&mut out).unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is JSON"))
        .collect();
    assert_eq!(lines.len(), written);
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_on_a_blocked_worker_is_traced_with_its_hold_and_the_refusal_beside_it() {
    let pool = Pool::new("walks", 1).unwrap();
    let trace = Trace::new(64).unwrap();
    pool.trace_into(&trace).unwrap();

    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let running = tokio::spawn({
        let pool = pool.clone();
        async move {
            pool.run(
                move || {
                    started_tx.send(()).unwrap();
                    released.recv().unwrap();
                    Ok::<_, std::fmt::Error>(())
                },
                Admission::FailFast,
            )
            .await
        }
    });
    started.recv().unwrap(); // the one worker is held
    let refused = Caller::new(Criticality::Sheddable)
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast))
        .await
        .unwrap_err();
    assert_eq!(
        refused.refusal().map(admission_core::Refusal::code),
        Some(Code::Saturated)
    );
    assert_eq!(
        entries(&trace).len(),
        1,
        "the refusal is in at once; the held slot is not yet"
    );

    tokio::time::sleep(Duration::from_millis(30)).await; // a hold to measure
    release.send(()).unwrap();
    running.await.unwrap().unwrap();

    let lines = entries(&trace);
    assert_eq!(lines.len(), 2);
    let refusal = lines
        .iter()
        .find(|line| line["outcome"] == "refused")
        .unwrap();
    assert_eq!(refusal["code"], "ADMISSION_SATURATED");
    assert_eq!(refusal["criticality"], "sheddable");
    assert!(refusal["held_ms"].is_null());
    let admitted = lines
        .iter()
        .find(|line| line["outcome"] == "admitted")
        .unwrap();
    assert_eq!(admitted["pool"], "walks");
    assert_eq!(admitted["criticality"], "default");
    assert_eq!(admitted["waited_ms"], 0.0);
    assert!(
        admitted["held_ms"].as_f64().unwrap() >= 30.0,
        "held until the work ended: {admitted}"
    );
    assert!(
        admitted["at_ms"].as_f64() <= refusal["at_ms"].as_f64(),
        "oldest arrival first"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_caller_that_waited_is_traced_from_its_arrival_with_its_wait() {
    let pools = RequestPools::new(1, 1).unwrap();
    let trace = Trace::new(64).unwrap();
    pools.trace_into(&trace).unwrap();
    let held = pools.try_lease(Class::Work).unwrap();

    let (wait_started, waiting) = tokio::sync::oneshot::channel();
    let waiter = tokio::spawn({
        let pools = pools.clone();
        async move {
            let lease = pools.pool(Class::Work).admit_with(Admission::Wait);
            let _ = wait_started.send(());
            let slot = lease.await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            drop(slot);
        }
    });
    waiting.await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(held);
    waiter.await.unwrap();

    let lines = entries(&trace);
    assert_eq!(lines.len(), 2);
    let waited = lines
        .iter()
        .find(|line| line["waited_ms"].as_f64().unwrap() > 0.0)
        .expect("the waiter's entry");
    let waited_ms = waited["waited_ms"].as_f64().unwrap();
    assert!((20.0..21.0).contains(&waited_ms), "{waited}");
    assert_eq!(waited["held_ms"], 5.0);
    assert_eq!(
        lines[0]["at_ms"], 0.0,
        "the held lease and the waiter both arrived at the start"
    );
    assert_eq!(lines[1]["at_ms"], 0.0);
}

#[test]
fn a_shadow_pool_traces_what_it_would_have_refused() {
    let pool = Pool::new("registry", 1).unwrap();
    let trace = Trace::new(16).unwrap();
    pool.trace_into(&trace).unwrap();
    pool.set_shadow(true);
    let first = pool.try_admit().unwrap();
    let past = pool.try_admit().expect("shadow refuses nothing");
    let lines = entries(&trace);
    assert_eq!(lines.len(), 1, "the admitted slot is still held");
    assert_eq!(lines[0]["outcome"], "shadow");
    assert_eq!(lines[0]["code"], "ADMISSION_SATURATED");
    drop((first, past));
    assert_eq!(entries(&trace).len(), 2, "the overdraft is not timed");
}

#[test]
fn two_pools_share_a_trace_and_a_pool_keeps_its_own() {
    let trace = Trace::new(16).unwrap();
    let walks = Pool::new("walks", 1).unwrap();
    let scans = Pool::new("scans", 1).unwrap();
    walks.trace_into(&trace).unwrap();
    scans.trace_into(&trace).unwrap();
    drop(walks.try_admit().unwrap());
    drop(scans.try_admit().unwrap());
    let pools: Vec<String> = entries(&trace)
        .iter()
        .map(|line| line["pool"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(pools.len(), 2);
    assert!(pools.contains(&"walks".to_owned()) && pools.contains(&"scans".to_owned()));

    let other = Trace::new(16).unwrap();
    assert!(walks.trace_into(&other).is_err());
    drop(walks.try_admit().unwrap());
    assert_eq!(other.recorded(), 0, "walks still records into the first");
    assert_eq!(trace.recorded(), 3);
}

#[test]
fn a_flows_slot_on_a_traced_pool_is_traced_once_and_returns() {
    // Both a flow and the trace mark a slot; its return must do both jobs.
    let pool = Pool::new("tenants", 1).unwrap();
    let trace = Trace::new(16).unwrap();
    pool.trace_into(&trace).unwrap();
    let tenant = Caller::default().with_flow("tenant-a");
    let held = tenant.scope_sync(|| pool.try_admit()).unwrap();
    let refused = tenant.scope_sync(|| pool.try_admit()).unwrap_err();
    assert_eq!(
        refused.code(),
        Code::Saturated,
        "a lone flow is refused only when full"
    );
    drop(held);
    let lines = entries(&trace);
    assert_eq!(lines.len(), 2, "one refusal and one admission, each once");
    assert_eq!(
        lines
            .iter()
            .filter(|line| line["outcome"] == "admitted")
            .count(),
        1
    );
    let again = tenant.scope_sync(|| pool.try_admit());
    assert!(again.is_ok(), "the marked slot went back to the pool");
}

/// A flow's and a cost's decisions carry the flow's 32-bit hash (never its
/// key) and the cost; a caller with neither carries no such field.
#[test]
fn a_flow_and_a_cost_are_traced_as_a_hash_and_a_number() {
    use std::num::NonZeroU8;

    let trace = Trace::new(16).unwrap();
    let pool = Pool::new("walks-tagged", 3).unwrap();
    pool.trace_into(&trace).unwrap();
    let tenant = Caller::default()
        .with_flow("tenant-secret-key")
        .with_cost(NonZeroU8::new(2).unwrap());
    let held = tenant.scope_sync(|| pool.try_admit()).unwrap();
    assert!(tenant.scope_sync(|| pool.try_admit()).is_err(), "2 + 2 > 3");
    drop(held);
    drop(pool.try_admit().unwrap());
    let mut out = Vec::new();
    assert_eq!(trace.write_json_lines(&mut out).unwrap(), 3);
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("tenant-secret-key"), "never the key: {text}");
    let lines: Vec<&str> = text.lines().collect();
    let flow_of = |line: &str| -> Option<u64> {
        let at = line.find("\"flow\":")? + 7;
        let digits: String = line[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let tagged: Vec<&&str> = lines.iter().filter(|l| l.contains("\"cost\":2")).collect();
    assert_eq!(tagged.len(), 2, "the admission and the refusal: {text}");
    let flows: Vec<Option<u64>> = tagged.iter().map(|l| flow_of(l)).collect();
    assert!(
        flows[0].is_some_and(|f| f > 0 && f <= u64::from(u32::MAX)),
        "{text}"
    );
    assert_eq!(flows[0], flows[1], "one flow, one hash");
    let plain = lines.iter().find(|l| !l.contains("\"cost\"")).unwrap();
    assert!(!plain.contains("\"flow\""), "no flow, no field: {plain}");
}
