//! The binaries' command lines (clap): `--help` names every flag with its
//! meaning and default, `-h` works, old spellings (`--name value`,
//! `--name=value`, a flag given twice) still parse, and a bad value or an
//! unknown flag is a usage error with exit code 2.

mod support;

use std::process::Output;

use support::Service;

/// Every flag of a binary, with the default its help must show (`None`:
/// a switch, or a value that is off when not given).
type Flags = &'static [(&'static str, Option<&'static str>)];

const STORM: Flags = &[
    ("--workers", Some("2; --retry-storm: 32")),
    ("--walk-delay-ms", Some("20; --retry-storm: 320")),
    ("--series", Some("10000")),
    ("--duration-ms", Some("4000; --rate: 5000")),
    ("--timeout-ms", Some("100; --retry-storm: 2000")),
    ("--seed", Some("1")),
    (
        "--svg",
        Some("docs/overload.svg; --retry-storm: docs/retry-storm.svg"),
    ),
    ("--clients", Some("64")),
    ("--give-up-ms", Some("5")),
    ("--refused-pause-ms", Some("10")),
    ("--max-requests", Some("10000")),
    ("--coalesce-ms", Some("1000")),
    ("--grpc", None),
    ("--url", None),
    ("--rate", None),
    ("--gate", Some("admission")),
    ("--mix", None),
    ("--budget-ms", None),
    ("--max-outstanding", Some("4096")),
    ("--overload", None),
    ("--point-ms", Some("3000")),
    ("--no-pin", None),
    ("--pinned-only", None),
    ("--retry-storm", None),
    ("--before-ms", Some("5000")),
    ("--trigger-ms", Some("10000")),
    ("--trigger-multiple", Some("3")),
    ("--after-ms", Some("20000")),
    ("--amplification-ms", Some("4000")),
];

const EXPORTER: Flags = &[
    ("--listen", Some("127.0.0.1:9464")),
    ("--workers", Some("2")),
    ("--series", Some("10000")),
    ("--walk-delay-ms", Some("0")),
    ("--shutdown-deadline-ms", Some("5000")),
    ("--cardinality-interval-ms", Some("10000")),
    ("--gate", Some("admission")),
    ("--coalesce-ms", Some("0")),
    // Counted from the descriptors open when the server starts listening:
    // no default to show (the help says how it is counted).
    ("--max-connections", None),
    ("--header-timeout-ms", Some("10000")),
    ("--idle-timeout-ms", Some("60000")),
    ("--write-timeout-ms", Some("10000")),
    ("--max-held-mb", Some("256")),
    ("--drain-delay-ms", Some("0")),
    ("--agent-check", None),
    ("--trust-peers", None),
    ("--metrics-backend", None),
    ("--trace-entries", Some("0")),
];

const GRPC_EXPORTER: Flags = &[
    ("--listen", Some("127.0.0.1:50051")),
    ("--workers", Some("2")),
    ("--series", Some("10000")),
    ("--walk-delay-ms", Some("0")),
    ("--shutdown-deadline-ms", Some("5000")),
    ("--work-slots", Some("16")),
    ("--control-slots", Some("4")),
    ("--progress-timeout-ms", Some("30000")),
    ("--max-connections", None),
    ("--preface-timeout-ms", Some("5000")),
    ("--gate", Some("admission")),
];

const WORKFLOW: Flags = &[
    ("--listen", Some("127.0.0.1:8080")),
    ("--work-slots", Some("2")),
    ("--control-slots", Some("4")),
    ("--cycle-ms", Some("200")),
    ("--native-capacities", Some("2,3")),
    ("--shutdown-deadline-ms", Some("5000")),
    ("--http-workers", Some("2")),
    ("--max-connections", None),
    ("--header-timeout-ms", Some("5000")),
    ("--idle-timeout-ms", Some("5000")),
    ("--drain-delay-ms", Some("0")),
    ("--agent-check", None),
];

const FLEET: Flags = &[
    ("--rate", None),
    ("--duration-ms", Some("4000")),
    ("--restart-duration-ms", Some("10000")),
    ("--timeout-ms", Some("5000")),
    ("--workers", Some("2")),
    ("--series", Some("1000")),
    ("--walk-delay-ms", Some("20")),
    ("--drain-delay-ms", Some("500")),
    ("--shutdown-deadline-ms", Some("2000")),
    ("--seed", Some("1")),
    ("--exporter", None),
    ("--only", None),
];

const ADAPTIVE: Flags = &[
    ("--capacity", Some("8")),
    ("--hold-ms", Some("50")),
    ("--timeout-ms", Some("250")),
    ("--phase-ms", Some("6000")),
    ("--warm-up-ms", Some("3000")),
    ("--sweep-ms", Some("4000")),
    ("--slice-ms", Some("500")),
    ("--loads", Some("0.5,1,2,5,10")),
    ("--no-step", None),
    ("--no-envoy", None),
    ("--min-rtt-interval-s", Some("5")),
    ("--out", Some("docs")),
    ("--seed", Some("1")),
];

const METRICS_REFERENCE: Flags = &[("--stdout", None)];

const BINARIES: [(&str, Flags); 7] = [
    (env!("CARGO_BIN_EXE_storm"), STORM),
    (env!("CARGO_BIN_EXE_exporter"), EXPORTER),
    (env!("CARGO_BIN_EXE_grpc-exporter"), GRPC_EXPORTER),
    (env!("CARGO_BIN_EXE_workflow"), WORKFLOW),
    (env!("CARGO_BIN_EXE_fleet"), FLEET),
    (env!("CARGO_BIN_EXE_adaptive"), ADAPTIVE),
    (env!("CARGO_BIN_EXE_metrics-reference"), METRICS_REFERENCE),
];

fn run(binary: &str, args: &[&str]) -> Output {
    std::process::Command::new(binary)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|err| panic!("{binary} runs: {err}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The help of each flag: from its `--name` line to the next flag's.
fn blocks(help: &str) -> Vec<(String, String)> {
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        let flag = trimmed
            .strip_prefix("-h, ")
            .unwrap_or(trimmed)
            .strip_prefix("--")
            .filter(|_| line.starts_with("  "));
        match flag {
            Some(rest) => {
                let name = rest.split([' ', '\t']).next().unwrap_or(rest);
                blocks.push((format!("--{name}"), String::new()));
            }
            None if trimmed.ends_with(':') && !line.starts_with(' ') => {
                // A heading ("Options:", a mode's): the block before ends.
                blocks.push((String::new(), String::new()));
            }
            None => {}
        }
        if let Some((_, block)) = blocks.last_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks.retain(|(name, _)| !name.is_empty());
    blocks
}

#[test]
fn help_names_every_flag_with_its_meaning_and_default() {
    for (binary, flags) in BINARIES {
        let output = run(binary, &["--help"]);
        assert!(output.status.success(), "{binary} --help exits 0");
        let help = text(&output.stdout);
        let blocks = blocks(&help);
        let named: Vec<&str> = blocks.iter().map(|(name, _)| name.as_str()).collect();
        let mut expected: Vec<&str> = flags.iter().map(|(name, _)| *name).collect();
        expected.push("--help");
        let (mut named_sorted, mut expected_sorted) = (named.clone(), expected.clone());
        named_sorted.sort_unstable();
        expected_sorted.sort_unstable();
        assert_eq!(
            named_sorted, expected_sorted,
            "{binary}: the flags in --help\n{help}"
        );
        for (flag, default) in flags {
            let (_, block) = blocks.iter().find(|(name, _)| name == flag).unwrap();
            let words = block.split_whitespace().count();
            assert!(words >= 4, "{binary} {flag} says what it means:\n{block}");
            if let Some(default) = default {
                let block = block.split_whitespace().collect::<Vec<_>>().join(" ");
                assert!(
                    block.contains(&format!("[default: {default}")),
                    "{binary} {flag} shows its default `{default}`:\n{block}"
                );
            }
        }
    }
}

#[test]
fn short_help_works_too() {
    for (binary, flags) in BINARIES {
        let output = run(binary, &["-h"]);
        assert!(output.status.success(), "{binary} -h exits 0");
        let help = text(&output.stdout);
        assert!(help.contains("Usage:"), "{binary} -h:\n{help}");
        for (flag, _) in flags {
            assert!(help.contains(flag), "{binary} -h names {flag}:\n{help}");
        }
    }
}

#[test]
fn unknown_flags_and_bad_values_exit_2_with_a_precise_message() {
    let cases: [(&str, &[&str], &str); 11] = [
        (
            env!("CARGO_BIN_EXE_exporter"),
            &["--workers", "x"],
            "invalid value 'x' for '--workers <N>'",
        ),
        (
            env!("CARGO_BIN_EXE_exporter"),
            &["--workers=0"],
            "must be at least 1",
        ),
        (
            env!("CARGO_BIN_EXE_exporter"),
            &["--gate", "nginx"],
            "unknown gate `nginx`",
        ),
        (
            env!("CARGO_BIN_EXE_grpc-exporter"),
            &["--max-connections=0"],
            "must be at least 1",
        ),
        (
            env!("CARGO_BIN_EXE_workflow"),
            &["--native-capacities", "2,x"],
            "--native-capacities",
        ),
        (
            env!("CARGO_BIN_EXE_storm"),
            &["--overload", "--clients", "3"],
            "`--clients` does not go with `--overload`",
        ),
        (
            env!("CARGO_BIN_EXE_storm"),
            &["--rate", "10", "--clients", "3"],
            "`--clients` does not go with `--rate`",
        ),
        // Against `--url` there is no child exporter to set.
        (
            env!("CARGO_BIN_EXE_storm"),
            &[
                "--rate",
                "10",
                "--url",
                "http://127.0.0.1:1/metrics",
                "--workers",
                "3",
            ],
            "`--workers` does not go with `--rate` and `--url`",
        ),
        (
            env!("CARGO_BIN_EXE_storm"),
            &["--rate", "-1"],
            "invalid value '-1' for '--rate <R>': must be a positive number",
        ),
        (
            env!("CARGO_BIN_EXE_fleet"),
            &["--no-such-flag"],
            "unexpected argument '--no-such-flag'",
        ),
        (
            env!("CARGO_BIN_EXE_metrics-reference"),
            &["--stdout=yes"],
            "--stdout",
        ),
    ];
    for (binary, args, message) in cases {
        let output = run(binary, args);
        let stderr = text(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{binary} {args:?}: usage error\n{stderr}"
        );
        assert!(
            stderr.contains(message),
            "{binary} {args:?} says {message:?}:\n{stderr}"
        );
        assert!(
            stderr.contains("Usage:") || stderr.contains("try '--help'"),
            "{binary} {args:?} points at the usage:\n{stderr}"
        );
        assert!(
            output.stdout.is_empty(),
            "{binary} {args:?}: nothing on stdout"
        );
    }
}

/// `--listen` is given twice here (the helper passes `--listen
/// 127.0.0.1:0`): the last one wins, as it did before clap.
#[tokio::test]
async fn old_spellings_still_start_the_servers() {
    let old = [
        "--listen=127.0.0.1:0",
        "--series",
        "10",
        "--shutdown-deadline-ms=1000",
        "--workers",
        "1",
    ];
    for binary in [
        env!("CARGO_BIN_EXE_exporter"),
        env!("CARGO_BIN_EXE_grpc-exporter"),
    ] {
        let service = Service::start(binary, &old).await;
        assert_ne!(service.addr.port(), 0, "{binary} listens");
    }
    let workflow =
        Service::workflow(&["--listen=127.0.0.1:0", "--work-slots=1", "--cycle-ms", "50"]).await;
    assert_ne!(workflow.addr.port(), 0);
}
