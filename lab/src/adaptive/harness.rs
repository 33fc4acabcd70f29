//! The whole comparison: the fixed sweep, then every scenario behind every
//! gate, one after another on fresh ports.
//!
//! This module owns [`Harness`] (what to run) and [`Results`] (the runs,
//! their tables and pictures). It never runs two gates at once: each run
//! has the machine to itself (but for whatever else the machine runs).

use std::io;
use std::time::Duration;

use super::gate::Gate;
use super::run::{Phase, Scenario, Series, Setup, run_one};
use super::table::{PhaseFigures, load_table, plateau_table, step_table};

/// What the harness runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Harness {
    /// The backend, the gates' bounds, Envoy.
    pub setup: Setup,
    /// Offered loads, in multiples of capacity.
    pub loads: Vec<f64>,
    /// The fixed limits the sweep tries, in multiples of `C`.
    pub sweep: Vec<f64>,
    /// How long each sweep point runs (at 2x capacity).
    pub sweep_length: Duration,
    /// How long each counted phase runs.
    pub phase: Duration,
    /// How long each gate warms up at 1x before a load phase.
    pub warm_up: Duration,
    /// Whether to run the capacity step and the timeout plateau.
    pub step_and_plateau: bool,
}

/// Every run, by scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    /// The fixed limit the sweep found best, and each point's goodput.
    pub best_fixed: (usize, Vec<(usize, f64)>),
    /// Per offered load: the scenario and its runs (best fixed first).
    pub loads: Vec<(f64, Scenario, Vec<Series>)>,
    /// The capacity step and its runs.
    pub step: Option<(Scenario, Vec<Series>)>,
    /// The timeout plateau and its runs.
    pub plateau: Option<(Scenario, Vec<Series>)>,
}

impl Harness {
    /// The gates in the order of the tables.
    fn gates(&self, fixed: usize) -> Vec<Gate> {
        let mut gates = vec![Gate::Fixed(fixed), Gate::Adaptive, Gate::Gradient2];
        if self.setup.envoy.is_some() {
            gates.push(Gate::Envoy);
        }
        gates
    }

    async fn all(&self, scenario: &Scenario, fixed: usize) -> io::Result<Vec<Series>> {
        let mut out = Vec::new();
        for gate in self.gates(fixed) {
            eprintln!("adaptive: {} behind {}", scenario.name, gate.name());
            out.push(run_one(&self.setup, scenario, gate).await?);
        }
        Ok(out)
    }

    /// Runs everything.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it stops the run under way.
    ///
    /// # Errors
    ///
    /// A server or Envoy could not start.
    pub async fn run(&self) -> io::Result<Results> {
        let c = self.setup.capacity as f64;
        let mut points = Vec::new();
        for &m in &self.sweep {
            let limit = ((c * m).round() as usize).max(1);
            let scenario = Scenario {
                name: format!("sweep-{limit}"),
                phases: vec![Phase::at(2.0, self.sweep_length)],
            };
            eprintln!("adaptive: sweep, fixed limit {limit}");
            let series = run_one(&self.setup, &scenario, Gate::Fixed(limit)).await?;
            points.push((limit, PhaseFigures::of(&series, &scenario, 0).goodput));
        }
        let top = points.iter().map(|p| p.1).fold(0.0, f64::max);
        // The smallest limit within 2% of the best goodput: more buys only
        // queueing.
        let fixed = points
            .iter()
            .find(|p| p.1 >= top * 0.98)
            .map_or(self.setup.capacity, |p| p.0);

        let mut loads = Vec::new();
        for &load in &self.loads {
            let scenario = Scenario {
                name: format!("load-{load}x"),
                phases: vec![
                    Phase::at(1.0, self.warm_up).warm_up(),
                    Phase::at(load, self.phase),
                ],
            };
            let series = self.all(&scenario, fixed).await?;
            loads.push((load, scenario, series));
        }
        let (mut step, mut plateau) = (None, None);
        if self.step_and_plateau {
            let at = |capacity| Phase {
                capacity,
                ..Phase::at(2.0, self.phase)
            };
            let scenario = Scenario {
                name: "capacity-step".into(),
                phases: vec![at(1.0), at(0.5), at(1.0)],
            };
            let series = self.all(&scenario, fixed).await?;
            step = Some((scenario, series));
            // Every request holds its permit for twice the timeout: each
            // one times out, at the same latency.
            let hold =
                2.0 * self.setup.bounds.timeout.as_secs_f64() / self.setup.hold.as_secs_f64();
            let scenario = Scenario {
                name: "timeout-plateau".into(),
                phases: vec![
                    Phase::at(2.0, self.warm_up),
                    Phase {
                        hold,
                        ..Phase::at(2.0, self.phase)
                    },
                    Phase::at(2.0, self.phase),
                ],
            };
            let series = self.all(&scenario, fixed).await?;
            plateau = Some((scenario, series));
        }
        Ok(Results {
            best_fixed: (fixed, points),
            loads,
            step,
            plateau,
        })
    }
}

impl Results {
    /// Every table, in Markdown.
    pub fn tables(&self) -> String {
        let mut out = String::from("Sweep (fixed limit: goodput /s at 2x): ");
        let points: Vec<String> = self
            .best_fixed
            .1
            .iter()
            .map(|(l, g)| format!("{l}: {g:.1}"))
            .collect();
        out.push_str(&points.join(", "));
        out.push_str(&format!("; best {}\n\n", self.best_fixed.0));
        out.push_str(&load_table(&self.loads));
        if let Some((scenario, series)) = &self.step {
            out.push('\n');
            out.push_str(&step_table(scenario, series));
        }
        if let Some((scenario, series)) = &self.plateau {
            out.push('\n');
            out.push_str(&plateau_table(scenario, series));
        }
        out
    }

    /// Each scenario's picture: (file stem, SVG).
    ///
    /// # Errors
    ///
    /// A picture could not be drawn.
    pub fn pictures(&self) -> io::Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        let all = self
            .loads
            .iter()
            .map(|(_, s, r)| (s, r))
            .chain(self.step.iter().map(|(s, r)| (s, r)))
            .chain(self.plateau.iter().map(|(s, r)| (s, r)));
        for (scenario, series) in all {
            out.push((
                format!("adaptive-{}", scenario.name),
                super::plot::svg(scenario, series)?,
            ));
        }
        Ok(out)
    }
}
