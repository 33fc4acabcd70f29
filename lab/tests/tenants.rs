//! `storm --tenants`: every gate at every number of heavy tenants, each
//! point a server child of its own, the tables, the goals and the picture.
//! The fairness itself is asserted where it is made (`admission-core`'s
//! flow tests, the conformance suite); this checks the run end to end.

use std::time::Duration;

#[tokio::test]
async fn the_tenants_command_prints_every_gate_for_every_flood_and_writes_the_svg() {
    let svg = std::env::temp_dir().join(format!("tenants-{}.svg", std::process::id()));
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_storm"))
            .args([
                "--tenants",
                "--point-ms",
                "150",
                "--timeout-ms",
                "100",
                "--no-pin",
                "--svg",
            ])
            .arg(&svg)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the run ends by itself")
    .expect("the storm binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit 0:\n{stderr}");
    for heavy in [
        "0 heavy tenants:",
        "1 heavy tenant:",
        "2 heavy tenants:",
        "4 heavy tenants:",
    ] {
        assert!(stdout.contains(heavy), "`{heavy}` in:\n{stdout}");
    }
    for gate in [
        "| fair fail-fast |",
        "| fair queued |",
        "| class, no flows |",
        "| tower limit+shed |",
        "| tower_governor per tenant |",
    ] {
        assert_eq!(
            stdout.matches(gate).count(),
            4,
            "`{gate}` once per table in:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("fair queued with 4 heavy: light served"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&svg).expect("the SVG was written");
    let _ = std::fs::remove_file(&svg);
    assert!(text.starts_with("<svg") && text.contains("light tenants served"));
}
