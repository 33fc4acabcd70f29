//! The fleet: the balancer configurations in `examples/fleet/` pass their
//! own tools' checks, the guide (docs/guide/replicas.md) shows them as they are, and three real
//! `exporter` replicas behind a real HAProxy (and a real Envoy) survive a
//! rolling restart under an open-loop storm with no connection error, no
//! 502 or 504 at the client and no replica past its pool.
//!
//! HAProxy and Envoy are looked up on `PATH` and in `target/fleet-tools/bin`
//! (where `.ci/run` installs them). Under `CI=true` a missing one fails the
//! test; elsewhere the test says it cannot run and passes.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use admission_lab::fleet::{
    self, EnvoySpec, FleetConfig, HaproxySpec, Row, Scenario, Tool, Workdir, free_port,
};

/// The balancer's binary, or `None` (with a note) outside CI.
fn tool(tool: Tool) -> Option<PathBuf> {
    match tool.find() {
        Ok(path) => Some(path),
        Err(missing) if fleet::required() => panic!("CI=true and {missing}"),
        Err(missing) => {
            eprintln!("cannot run this fleet test: {missing}");
            None
        }
    }
}

fn addr() -> std::net::SocketAddr {
    free_port().expect("a free loopback port")
}

#[tokio::test]
async fn haproxy_cfg_passes_haproxy_c_in_every_variant() {
    let Some(haproxy) = tool(Tool::Haproxy) else {
        return;
    };
    for variant in 0..8u8 {
        let (retries, maxconn, agent_weights) =
            (variant & 1 != 0, variant & 2 != 0, variant & 4 != 0);
        let spec = HaproxySpec {
            listen: addr(),
            stats: addr(),
            replicas: (0..3).map(|_| (addr(), addr())).collect(),
            retries,
            maxconn,
            agent_weights,
        };
        let out = spec.check(&haproxy).await.expect("haproxy runs");
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && text.contains("Configuration file is valid"),
            "haproxy -c (retries {retries}, maxconn {maxconn}, agent {agent_weights}): {}\n{text}",
            out.status
        );
    }
}

#[tokio::test]
async fn haproxy_c_fails_when_an_address_is_missing() {
    // The check above means something only if a broken environment fails:
    // without FLEET_LISTEN the `bind` line has no address.
    let Some(haproxy) = tool(Tool::Haproxy) else {
        return;
    };
    let out = tokio::process::Command::new(haproxy)
        .arg("-c")
        .arg("-f")
        .arg(Tool::Haproxy.config_file())
        .env_remove("FLEET_LISTEN")
        .output()
        .await
        .expect("haproxy runs");
    assert!(
        !out.status.success(),
        "haproxy -c passed a config with no bind address"
    );
}

#[tokio::test]
async fn envoy_yaml_passes_envoy_validate_once_rendered() {
    let Some(envoy) = tool(Tool::Envoy) else {
        return;
    };
    let dir = Workdir::new().unwrap();
    let spec = EnvoySpec {
        listen: addr(),
        admin: addr(),
        replicas: (0..3).map(|_| addr()).collect(),
    };
    let config = spec.write(dir.path()).expect("envoy.yaml renders");
    let out = fleet::envoy_validate(&envoy, &config)
        .await
        .expect("envoy runs");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("OK"),
        "envoy --mode validate: {}\n{text}",
        out.status
    );

    // A broken copy fails: the check is not a formality.
    let broken = dir.path().join("broken.yaml");
    let rendered = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &broken,
        rendered.replace("retriable_status_codes", "retriable_codes"),
    )
    .unwrap();
    let out = fleet::envoy_validate(&envoy, &broken)
        .await
        .expect("envoy runs");
    assert!(!out.status.success(), "envoy validated an unknown field");
}

/// The guide's "Deploying many replicas" section (docs/guide/replicas.md).
fn guide_section() -> String {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide/replicas.md"),
    )
    .unwrap();
    let start = readme
        .find("## Deploying many replicas")
        .expect("the guide has the section");
    let rest = &readme[start + 3..];
    let end = rest.find("\n## ").map_or(rest.len(), |i| i);
    rest[..end].to_owned()
}

/// Every fenced block of `section` whose info string is `lang`.
fn blocks(section: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in section.lines() {
        match &mut current {
            None if line.trim_start() == format!("```{lang}") => current = Some(Vec::new()),
            Some(lines) if line.trim_start() == "```" => {
                out.push(lines.join("\n"));
                current = None;
            }
            Some(lines) => lines.push(line),
            None => {}
        }
    }
    out
}

#[test]
fn the_guide_shows_the_files_the_demo_runs() {
    let section = guide_section();
    for named in [
        "examples/fleet/haproxy.cfg",
        "examples/fleet/envoy.yaml",
        "cargo run --release -p admission-lab --bin fleet",
    ] {
        assert!(section.contains(named), "the section names `{named}`");
    }
    for (lang, tool) in [("haproxy", Tool::Haproxy), ("yaml", Tool::Envoy)] {
        let file = std::fs::read_to_string(tool.config_file()).unwrap();
        let shown = blocks(&section, lang);
        assert!(
            !shown.is_empty(),
            "the section quotes {}",
            tool.config_file().display()
        );
        for block in shown {
            assert!(
                file.contains(&block),
                "this guide block is not, line for line, in {}:\n{block}",
                tool.config_file().display()
            );
        }
    }
}

/// The `exporter` binary of `admission-examples` (another package's, so no
/// `CARGO_BIN_EXE_exporter` here): built once per test process into this
/// test's profile directory, `target/debug` above `deps/`.
fn exporter() -> PathBuf {
    static EXPORTER: OnceLock<PathBuf> = OnceLock::new();
    EXPORTER
        .get_or_init(|| {
            let me = std::env::current_exe().expect("the test's path");
            let deps = me.parent().expect("the test's directory");
            let dir = deps.parent().unwrap_or(Path::new("."));
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
            fleet::exporter_in(dir, Some(&cargo)).unwrap_or_else(|err| panic!("{err}"))
        })
        .clone()
}

/// A lighter storm than the demo's: about one replica's capacity (2
/// workers, 20 ms walks) spread over three, in a debug build.
fn light(haproxy: Option<PathBuf>, envoy: Option<PathBuf>) -> FleetConfig {
    FleetConfig {
        exporter: exporter(),
        haproxy,
        envoy,
        workers: 2,
        series: 200,
        walk_delay: Duration::from_millis(20),
        drain_delay: Duration::from_millis(500),
        shutdown_deadline: Duration::from_secs(2),
        duration: Duration::from_secs(4),
        restart_duration: Duration::from_secs(9),
        timeout: Duration::from_secs(5),
        rate: 60.0,
        seed: 7,
    }
}

fn assert_restart_was_clean(row: &Row, config: &FleetConfig) {
    let o = &row.outcomes;
    eprintln!("{}", fleet::render(std::slice::from_ref(row)));
    assert_eq!(row.restarts.len(), 3, "every replica was restarted");
    for (i, (took, ok)) in row.restarts.iter().enumerate() {
        assert!(*ok, "r{} exited 0 after SIGTERM (took {took:?})", i + 1);
    }
    let done = row.restarts_done.expect("the restarts ended");
    assert!(
        done < config.restart_duration,
        "the restarts ended ({done:?}) while the storm still ran ({:?})",
        config.restart_duration
    );
    assert!(o.sent() > 200, "the storm sent {} requests", o.sent());
    assert_eq!(o.dropped, 0, "the generator kept up");
    assert_eq!(
        o.errors, 0,
        "no connection error and no 502/504 (or other status) at the client"
    );
    assert_eq!(o.timed_out, 0, "no request went unanswered");
    // Without a restart this storm sees no 503 at all (about one replica's
    // capacity spread over three); the issue's bound is one percentage
    // point over that.
    assert!(
        row.refused_percent() <= 1.0,
        "{:.2} % of requests were refused during the restart",
        row.refused_percent()
    );
    for (i, peak) in row.peak_walks.iter().enumerate() {
        let peak = peak.unwrap_or_else(|| panic!("r{}'s peak of walks was read", i + 1));
        assert!(
            peak <= config.workers as u64,
            "r{} ran {peak} walks at once, past its pool of {}",
            i + 1,
            config.workers
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_behind_haproxy_shows_no_error_and_no_replica_past_its_pool() {
    let Some(haproxy) = tool(Tool::Haproxy) else {
        return;
    };
    let config = light(Some(haproxy), None);
    let row = fleet::run(&config, Scenario::HAPROXY_RESTART)
        .await
        .expect("the fleet ran");
    assert_restart_was_clean(&row, &config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_behind_envoy_shows_no_error_and_no_replica_past_its_pool() {
    let Some(envoy) = tool(Tool::Envoy) else {
        return;
    };
    let config = light(None, Some(envoy));
    let row = fleet::run(&config, Scenario::ENVOY_RESTART)
        .await
        .expect("the fleet ran");
    assert_restart_was_clean(&row, &config);
}
