//! The operator kit against the code: every PromQL expression in the Grafana
//! dashboard (`ops/grafana/admission.json`) and the alert rules
//! (`ops/prometheus/alerts.yml`) is parsed with `promql-parser`, and every
//! metric and label it names must be one the real `exporter` binary exposes
//! on `/metrics`. The dashboard must chart every family in `METRICS`, and
//! `promtool check rules` and `promtool test rules` must pass (skipped with a
//! note when promtool is missing, unless `CI=true`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use admission_core::metrics::METRICS;
use promql_parser::label::METRIC_NAME;
use promql_parser::parser::{self, Expr, LabelModifier};
use reqwest::StatusCode;
use serde_json::Value as Json;
use serde_yaml_ng::Value as Yaml;
use support::{Service, client};

/// Labels Prometheus attaches to every scraped series.
const TARGET_LABELS: &[&str] = &["job", "instance"];

/// Grafana's variables and what the test substitutes for them before
/// parsing (longest names first, so `$__rate_interval` is not read as
/// `$__rate` + `_interval`).
const GRAFANA_VARIABLES: &[(&str, &str)] = &[
    ("$__rate_interval", "5m"),
    ("$__interval", "1m"),
    ("$__range", "1h"),
    ("${pool}", "registry"),
    ("$pool", "registry"),
];

fn repo_file(path: &str) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR"));
    examples.parent().unwrap_or(examples).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_file(path))
        .unwrap_or_else(|err| panic!("{path} is readable: {err}"))
}

fn dashboard() -> Json {
    serde_json::from_str(&read("ops/grafana/admission.json"))
        .expect("ops/grafana/admission.json is valid JSON")
}

fn rules() -> Yaml {
    serde_yaml_ng::from_str(&read("ops/prometheus/alerts.yml"))
        .expect("ops/prometheus/alerts.yml is valid YAML")
}

/// What one scrape exposed: each series name and the label names it carries.
#[derive(Debug, Default)]
struct Exposition {
    series: BTreeMap<String, BTreeSet<String>>,
}

impl Exposition {
    /// Parses a Prometheus or OpenMetrics text exposition.
    fn parse(text: &str) -> Exposition {
        let mut exposition = Exposition::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, labels) = parse_sample(line)
                .unwrap_or_else(|| panic!("an exposition sample line parses: {line:?}"));
            exposition.series.entry(name).or_default().extend(labels);
        }
        exposition
    }

    /// The labels a series may be selected or grouped by once scraped.
    fn labels(&self, series: &str) -> Option<BTreeSet<String>> {
        self.series.get(series).map(|labels| {
            labels
                .iter()
                .cloned()
                .chain(TARGET_LABELS.iter().map(|&l| l.to_owned()))
                .collect()
        })
    }
}

/// `name{a="x",b="y"} value ...` → the name and the label names.
fn parse_sample(line: &str) -> Option<(String, Vec<String>)> {
    let end = line.find(['{', ' '])?;
    let name = line[..end].to_owned();
    let mut labels = Vec::new();
    let mut rest = line[end..].chars().peekable();
    if rest.peek() == Some(&'{') {
        rest.next();
        loop {
            let mut label = String::new();
            loop {
                match rest.next()? {
                    '=' => break,
                    '}' if label.is_empty() => return Some((name, labels)),
                    ',' | ' ' => {}
                    c => label.push(c),
                }
            }
            if rest.next()? != '"' {
                return None;
            }
            loop {
                match rest.next()? {
                    '\\' => {
                        rest.next()?;
                    }
                    '"' => break,
                    _ => {}
                }
            }
            labels.push(label);
            match rest.next()? {
                ',' => {}
                '}' => break,
                _ => return None,
            }
        }
    }
    Some((name, labels))
}

/// Starts the real exporter on 127.0.0.1:0 and scrapes it once.
async fn scrape() -> Exposition {
    let exporter = Service::exporter(&["--series", "10", "--workers", "2"]).await;
    let http = client(Duration::from_secs(10));
    for _ in 0..20 {
        let response = http
            .get(exporter.url("/metrics"))
            .send()
            .await
            .expect("the exporter answers /metrics");
        if response.status() == StatusCode::SERVICE_UNAVAILABLE {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(response.status(), StatusCode::OK, "a scrape succeeds");
        let exposition = Exposition::parse(&response.text().await.expect("a whole body"));
        for metric in METRICS {
            for series in metric.series_names() {
                assert!(
                    exposition.series.contains_key(&series),
                    "the exporter exposes {series}, listed in METRICS"
                );
            }
        }
        return exposition;
    }
    panic!("a scrape with both workers idle is admitted within 20 tries");
}

/// The metrics and labels one expression names.
#[derive(Debug, Default)]
struct Names {
    /// Each selector's metric name (None when it has no literal name) and
    /// the labels its matchers name.
    selectors: Vec<(Option<String>, Vec<String>)>,
    /// Labels named by `by`, `without`, `on`, `ignoring`, `group_left`,
    /// `group_right` and label functions' source arguments.
    grouping: Vec<String>,
}

impl Names {
    fn of(expr: &Expr) -> Names {
        let mut names = Names::default();
        names.walk(expr);
        names
    }

    fn walk(&mut self, expr: &Expr) {
        match expr {
            Expr::Aggregate(agg) => {
                if let Some(modifier) = &agg.modifier {
                    self.modifier(modifier);
                }
                if let Some(param) = &agg.param {
                    self.walk(param);
                }
                self.walk(&agg.expr);
            }
            Expr::Unary(unary) => self.walk(&unary.expr),
            Expr::Binary(binary) => {
                if let Some(modifier) = &binary.modifier {
                    if let Some(matching) = &modifier.matching {
                        self.modifier(matching);
                    }
                    if let Some(labels) = modifier.card.labels() {
                        self.grouping.extend(labels.labels.iter().cloned());
                    }
                }
                self.walk(&binary.lhs);
                self.walk(&binary.rhs);
            }
            Expr::Paren(paren) => self.walk(&paren.expr),
            Expr::Subquery(subquery) => self.walk(&subquery.expr),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
            Expr::VectorSelector(vs) => self.selector(vs),
            Expr::MatrixSelector(ms) => self.selector(&ms.vs),
            Expr::Call(call) => {
                let source_labels = match call.func.name {
                    "label_replace" => 3..4,
                    "label_join" => 3..call.args.args.len(),
                    _ => 0..0,
                };
                for (i, arg) in call.args.args.iter().enumerate() {
                    match &**arg {
                        Expr::StringLiteral(s) if source_labels.contains(&i) => {
                            self.grouping.push(s.val.clone());
                        }
                        arg => self.walk(arg),
                    }
                }
            }
            Expr::Extension(_) => panic!("the parser never produces an extension node"),
        }
    }

    fn modifier(&mut self, modifier: &LabelModifier) {
        self.grouping
            .extend(modifier.labels().labels.iter().cloned());
    }

    fn selector(&mut self, vs: &parser::VectorSelector) {
        let literal_name = vs.matchers.matchers.iter().find_map(|m| {
            (m.name == METRIC_NAME && m.op == promql_parser::label::MatchOp::Equal)
                .then(|| m.value.clone())
        });
        let labels = vs
            .matchers
            .matchers
            .iter()
            .chain(vs.matchers.or_matchers.iter().flatten())
            .filter(|m| m.name != METRIC_NAME)
            .map(|m| m.name.clone())
            .collect();
        self.selectors
            .push((vs.name.clone().or(literal_name), labels));
    }
}

/// Replaces Grafana's variables; an unknown one is drift too.
fn substitute(expr: &str) -> String {
    let mut out = expr.to_owned();
    for (variable, value) in GRAFANA_VARIABLES {
        out = out.replace(variable, value);
    }
    assert!(
        !out.contains('$'),
        "every Grafana variable in {expr:?} is one the test knows ({GRAFANA_VARIABLES:?})"
    );
    out
}

/// What [`check`] learnt about one expression.
#[derive(Debug, Default)]
struct Checked {
    /// The labels its results may carry (for legend and annotation
    /// templates); `None` when it did not parse or names a missing metric,
    /// which is already reported.
    labels: Option<BTreeSet<String>>,
    /// The series it selects.
    series: BTreeSet<String>,
}

impl Checked {
    /// Whether `label` is known to be absent from the results.
    fn lacks(&self, label: &str) -> bool {
        self.labels.as_ref().is_some_and(|l| !l.contains(label))
    }
}

/// Checks one expression against the scrape. Every problem is pushed to
/// `errors`.
fn check(origin: &str, expr: &str, exposition: &Exposition, errors: &mut Vec<String>) -> Checked {
    let parsed = match parser::parse(expr) {
        Ok(parsed) => parsed,
        Err(err) => {
            errors.push(format!("{origin}: PromQL does not parse: {err}\n  {expr}"));
            return Checked::default();
        }
    };
    let names = Names::of(&parsed);
    let mut available = BTreeSet::new();
    let mut series = BTreeSet::new();
    for (name, matched) in &names.selectors {
        let Some(name) = name else {
            errors.push(format!(
                "{origin}: a selector without a metric name in {expr}"
            ));
            continue;
        };
        series.insert(name.clone());
        let Some(labels) = exposition.labels(name) else {
            errors.push(format!(
                "{origin}: `{name}` is not exposed by the exporter (renamed or removed?)\n  {expr}"
            ));
            continue;
        };
        for label in matched {
            if !labels.contains(label) {
                errors.push(format!(
                    "{origin}: `{name}` has no label `{label}` (it has {labels:?})\n  {expr}"
                ));
            }
        }
        available.extend(labels);
    }
    // A metric already reported missing would make every label look
    // missing too; report it alone.
    let all_known = names.selectors.iter().all(|(name, _)| {
        name.as_ref()
            .is_some_and(|n| exposition.series.contains_key(n))
    });
    for label in &names.grouping {
        if all_known && !available.contains(label) {
            errors.push(format!(
                "{origin}: label `{label}` is on none of the series it groups or matches ({available:?})\n  {expr}"
            ));
        }
    }
    Checked {
        labels: all_known.then_some(available),
        series,
    }
}

/// The `NAME` of every `{{NAME}}` / `{{ $labels.NAME }}` in a template.
fn template_labels(template: &str, prefix: &str) -> Vec<String> {
    template
        .split("{{")
        .skip(1)
        .filter_map(|part| part.split_once("}}"))
        .filter_map(|(inner, _)| {
            let inner = inner.trim();
            inner.strip_prefix(prefix).map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Json) -> Vec<&Json> {
    fn collect<'a>(list: &'a Json, out: &mut Vec<&'a Json>) {
        for panel in list.as_array().into_iter().flatten() {
            out.push(panel);
            collect(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    collect(&dashboard["panels"], &mut out);
    out
}

fn fail_on(errors: &[String], what: &str) {
    assert!(
        errors.is_empty(),
        "{what} drifted from what the exporter exposes:\n{}",
        errors.join("\n")
    );
}

#[tokio::test]
async fn dashboard_queries_name_only_exposed_metrics_and_labels() {
    let exposition = scrape().await;
    let dashboard = dashboard();
    let mut errors = Vec::new();
    let mut charted = BTreeSet::new();
    let mut exprs = 0;
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().unwrap_or("untitled");
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {title:?}: every target has an expr"));
            let origin = format!("panel {title:?} target {}", target["refId"]);
            let checked = check(&origin, &substitute(expr), &exposition, &mut errors);
            exprs += 1;
            charted.extend(checked.series.iter().cloned());
            let legend = target["legendFormat"].as_str().unwrap_or_default();
            for label in template_labels(legend, "") {
                if checked.lacks(&label) {
                    errors.push(format!(
                        "{origin}: legend names label `{label}` the query lacks"
                    ));
                }
            }
        }
    }
    assert!(exprs >= 10, "the dashboard has its queries, found {exprs}");
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] != "query" {
            continue;
        }
        let name = &variable["name"];
        let query = variable["query"]["query"]
            .as_str()
            .or_else(|| variable["query"].as_str())
            .unwrap_or_else(|| panic!("variable {name} has a query"));
        let Some((selector, label)) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
        else {
            errors.push(format!(
                "variable {name}: not a label_values(metric, label) query: {query}"
            ));
            continue;
        };
        let origin = format!("variable {name}");
        let checked = check(
            &origin,
            &substitute(selector.trim()),
            &exposition,
            &mut errors,
        );
        if checked.lacks(label.trim()) {
            errors.push(format!(
                "{origin}: label `{}` is not on {selector}",
                label.trim()
            ));
        }
    }
    fail_on(&errors, "ops/grafana/admission.json");
    for metric in METRICS {
        assert!(
            metric.series_names().iter().any(|s| charted.contains(s)),
            "a dashboard panel charts {} (one of {:?}): a family the dashboard misses is drift too",
            metric.exposed_name(),
            metric.series_names()
        );
    }
}

#[test]
fn dashboard_is_a_grafana_model_with_pool_and_datasource_variables() {
    let dashboard = dashboard();
    assert!(dashboard["uid"].is_string(), "the dashboard has a uid");
    assert!(dashboard["title"].is_string(), "the dashboard has a title");
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "a schemaVersion current Grafana imports as is"
    );
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("a `{name}` variable"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    let pool = variable("pool");
    assert_eq!(pool["type"], "query");
    assert_eq!(
        pool["definition"], "label_values(admission_slots_capacity, pool)",
        "the pool variable lists the pools that export a capacity"
    );
    for panel in panels(&dashboard) {
        if panel["type"] == "row" {
            continue;
        }
        let title = &panel["title"];
        assert_eq!(
            panel["type"], "timeseries",
            "panel {title} is a time series"
        );
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "panel {title} queries the chosen data source"
        );
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            assert!(
                expr.contains(r#"pool=~"$pool""#),
                "panel {title} filters by the pool variable: {expr}"
            );
        }
    }
}

#[tokio::test]
async fn alert_rules_name_only_exposed_metrics_and_labels() {
    let exposition = scrape().await;
    let rules = rules();
    let mut errors = Vec::new();
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let alert = rule["alert"].as_str().expect("every rule is an alert");
            alerts.insert(alert.to_owned());
            let expr = rule["expr"].as_str().expect("expr");
            let checked = check(&format!("alert {alert}"), expr, &exposition, &mut errors);
            for field in ["summary", "description", "runbook"] {
                let text = rule["annotations"][field]
                    .as_str()
                    .unwrap_or_else(|| panic!("alert {alert} has annotations.{field}"));
                for label in template_labels(text, "$labels.") {
                    if checked.lacks(&label) {
                        errors.push(format!(
                            "alert {alert}: annotations.{field} names label `{label}` the expression lacks"
                        ));
                    }
                }
            }
            assert!(
                rule["for"].as_str().is_some_and(|f| !f.is_empty()),
                "alert {alert} has a `for:` duration"
            );
            assert!(
                rule["labels"]["severity"].is_string(),
                "alert {alert} has labels.severity"
            );
        }
    }
    fail_on(&errors, "ops/prometheus/alerts.yml");
    for expected in [
        "AdmissionRefusalsSustained",
        "AdmissionOrphanFailures",
        "AdmissionPoolAtCapacity",
        "AdmissionStandingQueue",
    ] {
        assert!(alerts.contains(expected), "the rules have {expected}");
    }
}

/// Runs `promtool ARGS FILE` (a real Prometheus rule engine) and asserts it
/// passes. Without promtool on `PATH` the check is skipped with a note,
/// unless `CI=true` (`.ci/run` installs it), where it fails.
async fn promtool(args: &[&str], file: &str) {
    let path = repo_file(file);
    let run = tokio::process::Command::new("promtool")
        .args(args)
        .arg(&path)
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(Ok(output)) => output,
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "promtool is not on PATH under CI=true (.ci/run installs Debian's prometheus)"
            );
            println!(
                "note: promtool is not on PATH; `promtool {}` skipped \
                 (Debian: apt-get install prometheus)",
                args.join(" ")
            );
            return;
        }
        Ok(Err(err)) => panic!("promtool could not run: {err}"),
        Err(_) => panic!("promtool {} finishes within 60 s", args.join(" ")),
    };
    assert!(
        output.status.success(),
        "promtool {} {} passes:\n{}{}",
        args.join(" "),
        path.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn promtool_checks_the_rules() {
    promtool(&["check", "rules"], "ops/prometheus/alerts.yml").await;
}

/// `ops/prometheus/alerts.test.yml`: the rules evaluated by Prometheus's
/// own engine over series shaped like the exporter's, each alert firing
/// (and not firing) when it should, with its annotations rendered.
#[tokio::test]
async fn promtool_evaluates_the_rules_over_exporter_shaped_series() {
    promtool(&["test", "rules"], "ops/prometheus/alerts.test.yml").await;
}

#[test]
fn exposition_parser_reads_names_and_labels() {
    let exposition = Exposition::parse(
        "# TYPE a counter\n\
         a_total{pool=\"x,\\\"y\\\"\",le=\"+Inf\"} 1\n\
         b 2\n\
         c{} 3 # {trace=\"1\"} 1\n\
         # EOF\n",
    );
    assert_eq!(
        exposition.series["a_total"],
        BTreeSet::from(["pool".to_owned(), "le".to_owned()]),
        "escaped quotes and commas inside values do not split labels"
    );
    assert!(exposition.series["b"].is_empty(), "a series without labels");
    assert!(exposition.series["c"].is_empty(), "empty braces");
}

#[test]
fn a_renamed_metric_or_unknown_label_is_reported() {
    let exposition = Exposition::parse("admission_refused_total{pool=\"registry\"} 0\n");
    let mut errors = Vec::new();
    check(
        "test",
        "sum by (pool) (rate(admission_rejected_total[5m]))",
        &exposition,
        &mut errors,
    );
    check(
        "test",
        r#"sum by (shard) (rate(admission_refused_total{tenant="a"}[5m]))"#,
        &exposition,
        &mut errors,
    );
    assert_eq!(errors.len(), 3, "one error each: {errors:#?}");
    assert!(
        errors[0].contains("admission_rejected_total"),
        "{errors:#?}"
    );
    assert!(errors[1].contains("`tenant`"), "{errors:#?}");
    assert!(errors[2].contains("`shard`"), "{errors:#?}");
}
