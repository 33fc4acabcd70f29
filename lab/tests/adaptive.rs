//! The adaptive-limit harness, short: one offered load behind every gate
//! (Envoy too, when it is installed; under `CI=true` it must be), a capacity
//! step behind this project's adaptive class, the tables and the pictures.
//! A smoke run: it checks that the harness measures what it says, not how
//! well each gate does (that is `cargo run --release --bin adaptive`).

use std::time::Duration;

use admission_lab::adaptive::{
    Bounds, Gate, Harness, Phase, PhaseFigures, Scenario, Setup, run_one,
};
use admission_lab::fleet::{self, Tool};

fn setup() -> Setup {
    let envoy = match Tool::Envoy.find() {
        Ok(path) => Some(path),
        Err(missing) if fleet::required() => panic!("CI=true and {missing}"),
        Err(missing) => {
            eprintln!("the Envoy row is left out: {missing}");
            None
        }
    };
    Setup {
        capacity: 4,
        hold: Duration::from_millis(20),
        bounds: Bounds {
            floor: 1,
            ceiling: 32,
            initial: 2,
            timeout: Duration::from_millis(100),
        },
        slice: Duration::from_millis(250),
        envoy,
        min_rtt_interval: Duration::from_secs(1),
        seed: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gate_is_measured_side_by_side_and_drawn() {
    let harness = Harness {
        setup: setup(),
        loads: vec![2.0],
        sweep: vec![1.0, 2.0],
        sweep_length: Duration::from_millis(500),
        phase: Duration::from_millis(1500),
        warm_up: Duration::from_millis(1000),
        step_and_plateau: false,
    };
    let results = harness.run().await.unwrap();
    let (_, scenario, series) = &results.loads[0];
    let gates: Vec<Gate> = series.iter().map(|s| s.gate).collect();
    assert!(matches!(gates[0], Gate::Fixed(4 | 8)), "{gates:?}");
    assert_eq!(gates[1..3], [Gate::Adaptive, Gate::Gradient2]);
    assert_eq!(gates.len(), 3 + usize::from(harness.setup.envoy.is_some()));
    for s in series {
        let f = PhaseFigures::of(s, scenario, 1);
        // 2x of 200/s for 1.5 s: about 600 offered, and a loaded machine
        // still answers some of them well.
        assert!((300..=900).contains(&f.offered), "{:?}: {f:?}", s.gate);
        assert!(f.goodput > 0.0, "{:?}: {f:?}", s.gate);
        let (_, _, max) = f
            .limit
            .unwrap_or_else(|| panic!("{:?} reports its limit", s.gate));
        assert!((1..=32).contains(&max), "{:?}: {f:?}", s.gate);
    }
    let tables = results.tables();
    for name in ["best fixed", "admission adaptive", "Gradient2"] {
        assert!(tables.contains(name), "{tables}");
    }
    let pictures = results.pictures().unwrap();
    assert_eq!(pictures.len(), 1);
    assert!(pictures[0].1.starts_with("<svg") && pictures[0].1.contains("limit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_class_follows_a_capacity_step_in_the_harness() {
    let at = |capacity| Phase {
        capacity,
        ..Phase::at(2.0, Duration::from_millis(2500))
    };
    let scenario = Scenario {
        name: "step".into(),
        phases: vec![at(2.0), at(0.5)],
    };
    let series = run_one(&setup(), &scenario, Gate::Adaptive).await.unwrap();
    let before = PhaseFigures::of(&series, &scenario, 0).limit.unwrap();
    let after = PhaseFigures::of(&series, &scenario, 1);
    let last = series.limits.last().unwrap().2;
    // 8 permits, then 2: the limit ends well below where it stood.
    assert!(
        (last as f64) < before.0,
        "limit {before:?} at 8 permits, {last} at 2: {:?}",
        series.limits
    );
    assert!(after.goodput > 0.0);
}
