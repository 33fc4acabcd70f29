//! The binaries' command lines (clap), checked the same way for the example
//! services (`examples/tests/cli.rs`) and the lab's harnesses
//! (`lab/tests/cli.rs`, which includes this file by path): `--help` names
//! every flag with its meaning and default, `-h` works, and a bad value or
//! an unknown flag is a usage error with exit code 2.

use std::process::Output;

/// Every flag of a binary, with the default its help must show (`None`:
/// a switch, or a value that is off when not given).
pub(crate) type Flags = &'static [(&'static str, Option<&'static str>)];

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

/// A binary and its flags.
pub(crate) type Binary = (&'static str, Flags);

/// A usage error: the binary, its arguments and what its message says.
pub(crate) type UsageError = (&'static str, &'static [&'static str], &'static str);

/// Each binary's `--help` names exactly its flags (and `--help`), each
/// with at least a few words of meaning and, where given, its default.
pub(crate) fn assert_help_names_every_flag(binaries: &[Binary]) {
    for &(binary, flags) in binaries {
        assert_help_of(binary, flags);
    }
}

fn assert_help_of(binary: &str, flags: Flags) {
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

/// Each binary's `-h` prints a usage naming every flag.
pub(crate) fn assert_short_help(binaries: &[Binary]) {
    for &(binary, flags) in binaries {
        assert_short_help_of(binary, flags);
    }
}

fn assert_short_help_of(binary: &str, flags: Flags) {
    let output = run(binary, &["-h"]);
    assert!(output.status.success(), "{binary} -h exits 0");
    let help = text(&output.stdout);
    assert!(help.contains("Usage:"), "{binary} -h:\n{help}");
    for (flag, _) in flags {
        assert!(help.contains(flag), "{binary} -h names {flag}:\n{help}");
    }
}

/// Each `binary ARGS` is a usage error: exit code 2, `message` and a
/// pointer at the usage on stderr, nothing on stdout.
pub(crate) fn assert_usage_errors(cases: &[UsageError]) {
    for &(binary, args, message) in cases {
        assert_usage_error(binary, args, message);
    }
}

fn assert_usage_error(binary: &str, args: &[&str], message: &str) {
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
