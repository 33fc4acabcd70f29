//! The lab's command lines (clap): `--help` names every flag with its
//! meaning and default, `-h` works, and a bad value or an unknown flag is a
//! usage error with exit code 2; checked as the example services' are
//! (`examples/tests/cli.rs`), by the same helpers.

#[path = "../../examples/tests/help/mod.rs"]
mod help;

use help::{
    Binary, Flags, UsageError, assert_help_names_every_flag, assert_short_help, assert_usage_errors,
};

const STORM: Flags = &[
    ("--workers", Some("2; --retry-storm: 32")),
    ("--walk-delay-ms", Some("20; --retry-storm: 320")),
    ("--series", Some("10000")),
    ("--duration-ms", Some("4000; --rate: 5000")),
    (
        "--timeout-ms",
        Some("100; --retry-storm: 2000; --tenants: 1000"),
    ),
    ("--seed", Some("1")),
    (
        "--svg",
        Some("docs/overload.svg; --retry-storm: docs/retry-storm.svg; --tenants: docs/tenants.svg"),
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
    ("--replay", None),
    ("--capacity", Some("2")),
    ("--queue", None),
    ("--sweep", None),
    ("--refusal-target", Some("1")),
    ("--pool", None),
    ("--tenants", None),
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

const BINARIES: [Binary; 4] = [
    (env!("CARGO_BIN_EXE_storm"), STORM),
    (env!("CARGO_BIN_EXE_fleet"), FLEET),
    (env!("CARGO_BIN_EXE_adaptive"), ADAPTIVE),
    (env!("CARGO_BIN_EXE_metrics-reference"), METRICS_REFERENCE),
];

#[test]
fn help_names_every_flag_with_its_meaning_and_default() {
    assert_help_names_every_flag(&BINARIES);
}

#[test]
fn short_help_works_too() {
    assert_short_help(&BINARIES);
}

#[test]
fn unknown_flags_and_bad_values_exit_2_with_a_precise_message() {
    let cases: [UsageError; 6] = [
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
    assert_usage_errors(&cases);
}
