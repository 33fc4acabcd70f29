//! The core's top-level modules depend on each other without a cycle, read
//! from the `crate::` paths in their code (comments and doc examples
//! excluded): `pool` knows nothing of requests, reservations, coalescing or
//! shutdown; those use the pool through its methods.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module and the top-level modules its code names.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).expect("under src");
            let first = relative.components().next().expect("a path");
            let module = first
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            if matches!(module.as_str(), "lib" | "loom_models") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            let deps = graph.entry(module.clone()).or_default();
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != module {
                        deps.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    for next in graph.get(path.last()?)? {
        if next == start {
            let mut cycle = path.clone();
            cycle.push(next.clone());
            return Some(cycle);
        }
        if !path.contains(next) {
            path.push(next.clone());
            if let Some(cycle) = cycle_from(graph, start, path) {
                return Some(cycle);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn top_level_modules_have_no_cycle() {
    let graph = dependencies();
    assert!(graph.contains_key("pool") && graph.contains_key("request"));
    for module in graph.keys() {
        let cycle = cycle_from(&graph, module, &mut vec![module.clone()]);
        assert!(
            cycle.is_none(),
            "module cycle: {}",
            cycle.unwrap().join(" -> ")
        );
    }
}

#[test]
fn the_pool_knows_nothing_above_it() {
    let graph = dependencies();
    let pool = &graph["pool"];
    for above in [
        "request", "reserve", "coalesce", "shutdown", "http", "metrics",
    ] {
        assert!(
            !pool.contains(above),
            "`pool` must not depend on `{above}` (it depends on {pool:?})"
        );
    }
}
