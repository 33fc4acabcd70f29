//! Issue 39's engine part: flows inside a class. While a class is
//! contended each active flow is held to its max-min fair share (by
//! weight); a flow under its share is admitted whenever a slot is free; a
//! flow alone gets the whole class; a flow refused while another held
//! every slot counts as active; callers without a flow are admitted as
//! before; shadow mode counts a would-be `ADMISSION_FLOW_SHARE` and serves.
//!
//! Slots are held with leases and slots, never with sleeps.

use std::time::Duration;

use admission_core::{Admission, Caller, Class, Code, Lease, Pool, RequestPools};

fn flow(key: &str) -> Caller {
    Caller::default().with_flow(key)
}

/// Leases `caller` asks for until refused; returns them and the refusal's code.
fn flood(requests: &RequestPools, caller: Caller, held: &mut Vec<Lease>) -> Code {
    loop {
        match requests.try_lease_for(Class::Work, caller) {
            Ok(lease) => held.push(lease),
            Err(refusal) => return refusal.code(),
        }
    }
}

#[test]
fn a_lone_flow_gets_the_whole_class() {
    let requests = RequestPools::new(4, 1).unwrap();
    let mut held = Vec::new();
    let code = flood(&requests, flow("batch"), &mut held);
    assert_eq!(held.len(), 4, "one tenant alone holds every slot");
    assert_eq!(
        code,
        Code::Saturated,
        "a lone flow at the capacity is refused for the capacity, not a share"
    );
}

/// One flow floods a class of 4 and another sends one request at a time:
/// the light flow is admitted whenever it is under its share (2), and the
/// flood, at its share, is refused `ADMISSION_FLOW_SHARE` meanwhile.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_light_flow_gets_its_share_beside_a_flood() {
    let requests = RequestPools::new(4, 1).unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let mut flood_held = Vec::new();
    flood(&requests, heavy, &mut flood_held);
    assert_eq!(flood_held.len(), 4);

    // alice arrives while the flood holds every slot: refused, and active.
    let first = requests.try_lease_for(Class::Work, light).unwrap_err();
    assert_eq!(first.code(), Code::Saturated, "the class is full");

    let mut light_held = Vec::new();
    for round in 0..2 {
        flood_held.pop();
        assert_eq!(
            requests
                .try_lease_for(Class::Work, heavy)
                .unwrap_err()
                .code(),
            Code::FlowShare,
            "round {round}: the flood is at its share while alice, who asked, is under hers"
        );
        light_held.push(
            requests
                .try_lease_for(Class::Work, light)
                .unwrap_or_else(|r| panic!("round {round}: alice is under her share: {r}")),
        );
        // alice asks again at once: the class is full; she asks.
        let again = requests.try_lease_for(Class::Work, light);
        if round == 0 {
            assert_eq!(again.unwrap_err().code(), Code::Saturated);
        } else {
            assert_eq!(
                again.unwrap_err().code(),
                Code::FlowShare,
                "at her share beside the flood: her own share refuses her"
            );
        }
    }
    assert_eq!((flood_held.len(), light_held.len()), (2, 2), "2:2");

    // The flood drops to 1: under its share, it gets the slot back.
    flood_held.pop();
    flood_held.push(
        requests
            .try_lease_for(Class::Work, heavy)
            .expect("under its share"),
    );

    // alice lets go of one. Her last refusal still asks (she is short):
    // the flood is refused the spare slot until her asking window ends.
    light_held.pop();
    assert_eq!(
        requests
            .try_lease_for(Class::Work, heavy)
            .unwrap_err()
            .code(),
        Code::FlowShare,
        "alice asked and holds less than her share"
    );
    // Twice her refusal's Retry-After (1 s) later, she asks no more: the
    // spare slot is lent to the flood (work-conserving).
    tokio::time::advance(Duration::from_millis(2001)).await;
    flood_held.push(
        requests
            .try_lease_for(Class::Work, heavy)
            .expect("nobody short asks: the spare slot is lent"),
    );
    assert_eq!((flood_held.len(), light_held.len()), (3, 1));
}

/// A flow that asks and holds nothing blocks nobody once it is admitted:
/// the flood may take a slot a flow under its share does not ask for.
#[test]
fn a_class_lends_what_nobody_short_asks_for() {
    let requests = RequestPools::new(4, 1).unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let _alice = requests.try_lease_for(Class::Work, light).unwrap();
    let mut held = Vec::new();
    let code = flood(&requests, heavy, &mut held);
    assert_eq!(
        held.len(),
        3,
        "alice holds one and asks for no more: the flood gets the rest"
    );
    assert_eq!(code, Code::FlowShare, "over its share, beside another flow");
}

/// Weights 2 and 1 on a class of 6 settle at 4 and 2 under contention.
#[test]
fn weights_give_two_to_one() {
    let requests = RequestPools::new(6, 1).unwrap();
    let paying = flow("acme").with_weight(2);
    let free = flow("hobbyist");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    flood(&requests, paying, &mut a);
    assert_eq!(a.len(), 6);
    flood(&requests, free, &mut b);
    // Slots come back one at a time, both flows asking after each.
    for _ in 0..6 {
        a.pop();
        flood(&requests, free, &mut b);
        flood(&requests, paying, &mut a);
    }
    assert_eq!((a.len(), b.len()), (4, 2), "weight 2 holds twice weight 1");
    for _ in 0..6 {
        b.pop();
        flood(&requests, paying, &mut a);
        flood(&requests, free, &mut b);
    }
    assert_eq!((a.len(), b.len()), (4, 2), "however the slots come back");
}

/// Callers without a flow take any free slot, as before, beside flows.
#[test]
fn callers_without_a_flow_ignore_shares() {
    let requests = RequestPools::new(4, 1).unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let mut held = Vec::new();
    flood(&requests, heavy, &mut held);
    assert_eq!(
        requests
            .try_lease_for(Class::Work, light)
            .unwrap_err()
            .code(),
        Code::Saturated
    );
    held.pop();
    let plain = requests
        .try_lease_for(Class::Work, Caller::default())
        .expect("no flow: the capacity alone decides");
    assert_eq!(
        requests
            .try_lease_for(Class::Work, Caller::default())
            .unwrap_err()
            .code(),
        Code::Saturated,
        "a full class refuses a caller without a flow as before"
    );
    drop(plain);
}

/// `Pool::run` and the waits honour the caller's flow too: a flow at its
/// share is refused before it joins the line, and a waiter's slot counts
/// toward its flow once granted.
#[tokio::test(flavor = "current_thread")]
async fn pool_entry_points_honour_the_flow() {
    let pool = Pool::new("registry", 2).unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let a = heavy.scope(async { pool.try_admit() }).await.unwrap();
    let b = heavy.scope(async { pool.try_admit() }).await.unwrap();
    let refused = light
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast))
        .await
        .unwrap_err();
    assert_eq!(refused.refusal().unwrap().code(), Code::Saturated);
    drop(a);
    let queued = heavy
        .scope(pool.admit_with(Admission::Queue))
        .await
        .unwrap_err();
    assert_eq!(
        queued.code(),
        Code::FlowShare,
        "at its share while alice asks: refused before it joins the line"
    );
    let ran = light
        .scope(pool.run(|| Ok::<_, std::fmt::Error>(7), Admission::Queue))
        .await;
    assert_eq!(ran, Ok(7));
    drop(b);
    assert_eq!(pool.stats().in_use, 0);
}

/// In shadow mode a would-be `ADMISSION_FLOW_SHARE` is counted and served.
#[test]
fn shadow_counts_a_would_be_flow_share_refusal_and_serves_it() {
    let requests = RequestPools::new(2, 1).unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let mut held = Vec::new();
    flood(&requests, heavy, &mut held);
    requests.try_lease_for(Class::Work, light).unwrap_err();
    held.pop();
    requests.set_shadow(true);
    let served = requests
        .try_lease_for(Class::Work, heavy)
        .expect("shadow mode serves what it would refuse");
    let stats = requests.pool(Class::Work).stats();
    assert_eq!(stats.would_refuse_with(Code::FlowShare), 1);
    assert_eq!(
        stats.refused_by_code[7], [0; 3],
        "nothing refused for a share"
    );
    requests.set_shadow(false);
    drop(served);
    assert_eq!(
        requests
            .try_lease_for(Class::Work, heavy)
            .unwrap_err()
            .code(),
        Code::FlowShare,
        "enforced again: the decision shadow counted"
    );
}

#[test]
fn the_new_code_is_an_overload_refusal_with_a_stable_string() {
    assert_eq!(Code::FlowShare.as_str(), "ADMISSION_FLOW_SHARE");
    assert!(Code::FlowShare.is_overload());
    assert!(Code::ALL.contains(&Code::FlowShare));
}

#[test]
fn a_caller_stays_24_bytes_and_copy() {
    fn copy<T: Copy>() {}
    copy::<Caller>();
    assert_eq!(size_of::<Caller>(), 24);
}

/// Fair order in the line: a release serves the waiting flow that holds
/// least of the pool for its weight, whatever the line's order; between
/// flows that hold alike, the one with fewer waiting. Criticality still
/// comes first: a critical caller without a flow is served before both.
#[tokio::test(flavor = "current_thread")]
async fn a_release_serves_waiting_flows_in_fair_order() {
    let pool = Pool::new("fair", 4).unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let mut held: Vec<_> = (0..4)
        .map(|_| heavy.scope_sync(|| pool.try_admit()).unwrap())
        .collect();
    let wait = |caller: Caller| {
        let pool = pool.clone();
        tokio::spawn(caller.scope(async move { pool.admit().await }))
    };
    let waiting = |n: usize| {
        let pool = pool.clone();
        async move {
            for _ in 0..64 {
                if pool.stats().waiting == n {
                    return true;
                }
                tokio::task::yield_now().await;
            }
            false
        }
    };
    // The flood queues three waiters first, alice one after them.
    let mut floods: Vec<_> = (0..3).map(|_| wait(heavy)).collect();
    assert!(waiting(3).await);
    let alice = wait(light);
    assert!(waiting(4).await);

    // The flood lets go of one slot: alice (holding 0) is served before
    // the flood's waiters, who were in line before her (it holds 3).
    held.pop();
    assert!(waiting(3).await, "one waiter served");
    for _ in 0..64 {
        if alice.is_finished() || floods.iter().any(tokio::task::JoinHandle::is_finished) {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        alice.is_finished(),
        "alice, holding nothing, is served first"
    );
    assert!(floods.iter().all(|f| !f.is_finished()));
    let alice_slot = alice.await.unwrap().unwrap();

    // Next, the flood's first waiter (alice waits no more).
    held.pop();
    assert!(waiting(2).await);
    let first = floods.remove(0).await.unwrap().unwrap();

    // A tenant with one request waiting beside one with many, both holding
    // the same: the one with one is served first. A caller without a flow
    // holds the slots here; bob and carol hold nothing.
    drop((held, alice_slot, first, floods));
    let pool = Pool::new("fair-ties", 2).unwrap();
    let blocker: Vec<_> = (0..2).map(|_| pool.try_admit().unwrap()).collect();
    let wait = |caller: Caller| {
        let pool = pool.clone();
        tokio::spawn(caller.scope(async move { pool.admit().await }))
    };
    let waiting = |n: usize| {
        let pool = pool.clone();
        async move {
            for _ in 0..64 {
                if pool.stats().waiting == n {
                    return true;
                }
                tokio::task::yield_now().await;
            }
            false
        }
    };
    let (many, one) = (flow("bob"), flow("carol"));
    let bobs: Vec<_> = (0..4).map(|_| wait(many)).collect();
    assert!(waiting(4).await);
    let carol = wait(one);
    assert!(waiting(5).await);
    let critical = wait(Caller::new(admission_core::Criticality::Critical));
    assert!(waiting(6).await);
    let mut blocker = blocker;
    blocker.pop();
    assert!(waiting(5).await);
    for _ in 0..64 {
        if critical.is_finished()
            || carol.is_finished()
            || bobs.iter().any(tokio::task::JoinHandle::is_finished)
        {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        critical.is_finished(),
        "criticality comes before fair order"
    );
    drop(critical.await.unwrap().unwrap());
    assert!(waiting(4).await, "the critical caller's slot went on");
    for _ in 0..64 {
        if carol.is_finished() || bobs.iter().any(tokio::task::JoinHandle::is_finished) {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        carol.is_finished(),
        "one waiting is served before four, holding alike"
    );
    assert!(bobs.iter().all(|b| !b.is_finished()));
    drop((carol, bobs, blocker));
}

/// The stats show how many flows are active and the share of a weight-1
/// flow, one number per pool; a flow stops counting once it holds nothing
/// and its asking window has passed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn stats_show_active_flows_and_the_share() {
    let requests = RequestPools::new(4, 1).unwrap();
    let pool = requests.pool(Class::Work);
    assert_eq!(
        (pool.stats().active_flows, pool.stats().flow_share()),
        (0, 4.0)
    );
    let heavy = flow("batch-job").with_weight(2);
    let mut held = Vec::new();
    flood(&requests, heavy, &mut held);
    let stats = pool.stats();
    assert_eq!((stats.active_flows, stats.flow_weights), (1, 2));
    // alice asks and is refused: active too.
    assert!(requests.try_lease_for(Class::Work, flow("alice")).is_err());
    let stats = pool.stats();
    assert_eq!((stats.active_flows, stats.flow_weights), (2, 3));
    assert!(
        (stats.flow_share() - 4.0 / 3.0).abs() < 1e-9,
        "{}",
        stats.flow_share()
    );
    drop(held);
    tokio::time::advance(Duration::from_secs(3)).await;
    let stats = pool.stats();
    assert_eq!(
        (stats.active_flows, stats.flow_weights),
        (0, 0),
        "holding nothing, asking no more"
    );
}

/// A queued flow that is not the flood makes room for itself in a full
/// queue (the flood's newest waiter goes, refused `ADMISSION_FLOW_SHARE`)
/// and outlasts the flood's waiters, who leave at the queue's wait: it is
/// served by the next release instead. Seen failing with the displacement
/// switched off (alice refused `ADMISSION_SATURATED` at the full queue)
/// and with a favoured waiter's wait left at the queue's own (alice timed
/// out with the flood).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_queued_light_flow_makes_room_in_a_full_queue_and_outlasts_the_flood() {
    use admission_core::pool::QueuePolicy;

    let pool = Pool::builder("fair-queue")
        .capacity(2)
        .queue(QueuePolicy {
            bound: 2,
            target: Duration::from_millis(1),
            interval: Duration::from_millis(50),
        })
        .build()
        .unwrap();
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let mut held: Vec<_> = (0..2)
        .map(|_| heavy.scope_sync(|| pool.try_admit()).unwrap())
        .collect();
    let queue = |caller: Caller| {
        let pool = pool.clone();
        tokio::spawn(caller.scope(async move { pool.admit_with(Admission::Queue).await }))
    };
    let settle = || async {
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
    };
    let floods: Vec<_> = (0..2).map(|_| queue(heavy)).collect();
    settle().await;
    assert_eq!(pool.stats().waiting, 2, "the flood fills the queue");

    let alice = queue(light);
    settle().await;
    assert_eq!(
        pool.stats().waiting,
        2,
        "alice took a place in the full queue"
    );
    let displaced: Vec<_> = floods.iter().filter(|f| f.is_finished()).collect();
    assert_eq!(displaced.len(), 1, "one of the flood's waiters made room");
    assert!(!alice.is_finished(), "alice waits");

    // Past the queue's wait: the flood's last waiter leaves, alice stays.
    tokio::time::advance(Duration::from_millis(60)).await;
    settle().await;
    assert!(!alice.is_finished(), "alice outlasts the flood's waiters");
    let mut codes = Vec::new();
    for flood in floods {
        codes.push(flood.await.unwrap().unwrap_err().code());
    }
    codes.sort_by_key(|code| code.as_str());
    assert_eq!(codes, [Code::FlowShare, Code::WaitTimedOut]);

    // The next release is hers.
    held.pop();
    let slot = alice
        .await
        .unwrap()
        .expect("alice is served by the release");
    drop((slot, held));
}

/// A pool of `capacity` whose queue holds `bound` waiters, waits the
/// `interval` (a favoured waiter twice that) and stands after it.
fn queued_pool(capacity: usize, bound: usize, interval: Duration) -> Pool {
    Pool::builder("fair-queue")
        .capacity(capacity)
        .queue(admission_core::pool::QueuePolicy {
            bound,
            target: Duration::from_millis(1),
            interval,
        })
        .build()
        .unwrap()
}

/// `caller` asks `pool` fail-fast `n` times (a flood's arrivals, each
/// refused or dropped at once): its pressure.
fn press(pool: &Pool, caller: Caller, n: usize) {
    for _ in 0..n {
        drop(caller.scope_sync(|| pool.try_admit()));
    }
}

/// Lets the spawned waiters run to their next await.
async fn settle() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

fn queue(
    pool: &Pool,
    caller: Caller,
) -> tokio::task::JoinHandle<Result<admission_core::pool::Slot, admission_core::Refusal>> {
    let pool = pool.clone();
    tokio::spawn(caller.scope(async move { pool.admit_with(Admission::Queue).await }))
}

/// Alice, holding `alices` beside the flood's `batch` (which has just
/// pressed), queues one more request: it waits its turn instead of being
/// refused at once, and her own next release serves it.
async fn alice_waits_her_turn(
    pool: &Pool,
    alice: Caller,
    mut alices: Vec<admission_core::pool::Slot>,
    batch: admission_core::pool::Slot,
) {
    let third = queue(pool, alice);
    settle().await;
    assert!(!third.is_finished(), "alice waits her turn");
    assert_eq!(pool.stats().waiting, 1);
    alices.pop();
    let slot = third.await.unwrap().expect("served by her own release");
    drop((slot, alices, batch));
}

/// A tenant whose few requests overlap holds more of a queued class than
/// the flood for a moment: in a queue it is not the flood (it presses far
/// less), so its next request waits its turn instead of being refused
/// `ADMISSION_FLOW_SHARE` at once. Seen failing with the old rule (refused
/// at arrival whenever it held more than every other flow).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_tenant_holding_more_than_the_flood_for_a_moment_waits_in_a_queue() {
    let pool = queued_pool(3, 4, Duration::from_millis(50));
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let alices: Vec<_> = (0..2)
        .map(|_| light.scope_sync(|| pool.try_admit()).unwrap())
        .collect();
    let batch = heavy.scope_sync(|| pool.try_admit()).unwrap();
    press(&pool, heavy, 20);
    alice_waits_her_turn(&pool, light, alices, batch).await;
}

/// Pressure is of the last moments: a tenant that burst a second ago (four
/// half-lives) and a flood pressing now, the tenant presses less and is
/// not the flood, so its request waits in the queue though it holds more.
/// Seen failing with pressure that never halves (the old burst made it
/// the flood: refused `ADMISSION_FLOW_SHARE` at once).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_tenants_burst_a_second_ago_does_not_make_it_the_flood() {
    let pool = queued_pool(3, 4, Duration::from_millis(50));
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    // Alice holds a slot throughout, so her flow stays active.
    let mut alices = vec![light.scope_sync(|| pool.try_admit()).unwrap()];
    press(&pool, light, 40);
    tokio::time::advance(Duration::from_secs(1)).await;
    alices.push(light.scope_sync(|| pool.try_admit()).unwrap());
    let batch = heavy.scope_sync(|| pool.try_admit()).unwrap();
    press(&pool, heavy, 20);
    alice_waits_her_turn(&pool, light, alices, batch).await;
}

/// A full queue holds two tenants' waiters; the flood, under its share
/// (it holds nothing) but pressing hardest, cannot push them out: it is
/// refused, and both tenants keep their places. Seen failing with the old
/// rule (room made from the flow with most waiting: a tenant's waiter was
/// refused `ADMISSION_FLOW_SHARE`).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_flood_cannot_push_tenants_out_of_a_full_queue() {
    let pool = queued_pool(2, 2, Duration::from_millis(50));
    let (heavy, alice, bob) = (flow("batch-job"), flow("alice"), flow("bob"));
    let held = [alice, bob].map(|tenant| tenant.scope_sync(|| pool.try_admit()).unwrap());
    press(&pool, heavy, 20);
    let tenants = [queue(&pool, alice), queue(&pool, bob)];
    settle().await;
    assert_eq!(pool.stats().waiting, 2, "the tenants fill the queue");

    let refused = queue(&pool, heavy).await.unwrap().unwrap_err();
    assert_eq!(
        refused.code(),
        Code::Saturated,
        "no room made for the flood"
    );
    assert!(tenants.iter().all(|t| !t.is_finished()), "both still wait");
    drop(held);
    for tenant in tenants {
        drop(tenant.await.unwrap().expect("served"));
    }
}

/// In a standing queue the newest waiter is served first; between a
/// tenant's waiter and the flood's newer one that hold as much, the
/// tenant's goes first (it presses less). Seen failing with the old
/// order (the flood's newer waiter took the release).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_standing_queue_serves_the_tenant_before_the_floods_newer_waiter() {
    let pool = queued_pool(1, 4, Duration::from_millis(10));
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let held = pool.try_admit().unwrap();
    press(&pool, heavy, 20);
    let alice = queue(&pool, light);
    settle().await;
    // The queue has not emptied for longer than its interval: it stands.
    tokio::time::advance(Duration::from_millis(11)).await;
    let flood = queue(&pool, heavy);
    settle().await;
    assert_eq!(pool.stats().waiting, 2);

    drop(held);
    settle().await;
    assert!(alice.is_finished(), "the tenant took the release");
    assert!(!flood.is_finished(), "the flood's waiter still waits");
    drop(alice.await.unwrap().expect("served"));
    drop(flood.await.unwrap().expect("served next"));
}

/// A tenant at its share (it holds one slot of two, the flood the other)
/// queues a second request while nobody else waits: it is not the flood
/// (the flood presses harder), so it is favoured and waits past the
/// queue's own wait for the flood's slot. Seen failing with the old rule
/// (favoured only with fewer waiting than another flow: it timed out at
/// the queue's wait).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_tenant_at_its_share_outwaits_the_floods_hold() {
    let pool = queued_pool(2, 4, Duration::from_millis(10));
    let (heavy, light) = (flow("batch-job"), flow("alice"));
    let alice = light.scope_sync(|| pool.try_admit()).unwrap();
    let batch = heavy.scope_sync(|| pool.try_admit()).unwrap();
    press(&pool, heavy, 20);
    let second = queue(&pool, light);
    settle().await;
    tokio::time::advance(Duration::from_millis(15)).await;
    settle().await;
    assert!(!second.is_finished(), "still waiting past the queue's wait");
    drop(batch);
    let slot = second
        .await
        .unwrap()
        .expect("served by the flood's release");
    drop((slot, alice));
}
