//! The links of the README, the guide (`docs/guide/`) and the crate docs.
//!
//! Every relative markdown link of README.md and of each guide page names a
//! file that exists, and a `#anchor` into a markdown file names one of its
//! headings (as GitHub derives them). The crate docs (`//!` and `///` in
//! `admission-*/src`) link to no file by a relative path (rustdoc would
//! resolve it against the generated page, not the repository), and their
//! in-page anchors name a heading of the same file. Every guide page starts
//! with the question it answers, is listed in the guide's index and is
//! included for its doctests by `tests/src/lib.rs`. The README stays at
//! most 200 lines and no Rust block of it or the guide is `ignore`d.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// README.md and every markdown page of the guide.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![root().join("README.md")];
    docs.extend(guide_pages());
    docs
}

/// The guide's pages, sorted.
fn guide_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs/guide"))
        .expect("docs/guide exists")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    pages
}

/// `text` with fenced code blocks and inline code spans blanked out
/// (newlines kept, so line numbers hold): a link in code is not a link.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        match &fence {
            Some(open) if marker.len() >= open.len() && marker.starts_with(&open[..1]) => {
                fence = None;
                out.push('\n');
            }
            Some(_) => out.push_str(if line.ends_with('\n') { "\n" } else { "" }),
            None if marker.len() >= 3
                && marker.chars().all(|c| c == marker.as_bytes()[0] as char) =>
            {
                fence = Some(marker);
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    blank_code_spans(&out)
}

/// `text` with every inline code span's content (and its backticks)
/// replaced by spaces, newlines kept.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        // The closing run: exactly as many backticks.
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|&&c| c == '`').count();
                if other == run {
                    close = Some(j);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        let Some(close) = close else {
            i += run;
            continue;
        };
        for c in &mut out[i..close + run] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = close + run;
    }
    out.into_iter().collect()
}

/// Every link target in `text` (already [`prose`]), with its line: inline
/// links and images `[text](target "title")` and reference definitions
/// `[label]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut from = 0;
    while let Some(at) = text[from..].find("](") {
        let start = from + at + 2;
        let rest = &text[start..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(|c| c == '<' || c == '>');
        found.push((line_of(start), target.to_owned()));
        from = start;
    }
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix('[')
            && let Some((label, target)) = rest.split_once("]:")
            && !label.contains(']')
        {
            let target = target.split_whitespace().next().unwrap_or("");
            found.push((
                number + 1,
                target.trim_matches(|c| c == '<' || c == '>').to_owned(),
            ));
        }
    }
    found
}

/// Whether `target` leaves the repository (a URL, a mail address).
fn external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// The anchor GitHub (and, near enough, rustdoc) gives a heading: lower
/// case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's headings (outside fenced code), with
/// duplicates numbered as GitHub numbers them (`-1`, `-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !trimmed[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&trimmed[hashes..]);
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// The anchors of a markdown file's headings.
fn file_anchors(path: &Path) -> BTreeSet<String> {
    anchors(&std::fs::read_to_string(path).unwrap_or_default())
}

/// What is wrong with the relative links of the markdown document `path`
/// whose text is `text`: one line per broken link.
fn check_markdown(path: &Path, text: &str) -> Vec<String> {
    let dir = path.parent().expect("a document is in a directory");
    let mut problems = Vec::new();
    for (line, target) in links(&prose(text)) {
        if target.is_empty() || external(&target) {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if file.is_empty() {
            path.to_path_buf()
        } else {
            dir.join(file)
        };
        let at = format!("{}:{line}: `{target}`", path.display());
        if !resolved.exists() {
            problems.push(format!("{at}: no such file {}", resolved.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let is_markdown = resolved.extension().is_some_and(|ext| ext == "md");
            if !is_markdown {
                problems.push(format!("{at}: an anchor into a file that is not markdown"));
            } else if !file_anchors(&resolved).contains(anchor) {
                problems.push(format!(
                    "{at}: no heading `#{anchor}` in {}",
                    resolved.display()
                ));
            }
        }
    }
    problems
}

/// What is wrong with the links of one source file's doc comments.
fn check_doc_comments(path: &Path, source: &str) -> Vec<String> {
    let docs: String = source
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let doc = trimmed
                .strip_prefix("//!")
                .or_else(|| trimmed.strip_prefix("///"))
                .unwrap_or("");
            format!("{}\n", doc.strip_prefix(' ').unwrap_or(doc))
        })
        .collect();
    let headings = anchors(&docs);
    let mut problems = Vec::new();
    for (line, target) in links(&prose(&docs)) {
        let at = format!("{}:{line}: `{target}`", path.display());
        if external(&target) {
            continue;
        }
        if let Some(anchor) = target.strip_prefix('#') {
            if !headings.contains(anchor) {
                problems.push(format!("{at}: no heading `#{anchor}` in this file's docs"));
            }
        } else if target.starts_with("./")
            || target.starts_with("../")
            || target.split('#').next().is_some_and(|file| {
                Path::new(file).extension().is_some_and(|ext| {
                    ["md", "yml", "yaml", "json", "cfg", "svg"]
                        .contains(&ext.to_str().unwrap_or(""))
                })
            })
        {
            problems.push(format!(
                "{at}: a relative file link in API docs (it resolves against the generated page); name the file in prose or link a URL"
            ));
        }
    }
    problems
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn relative_links_in_the_readme_and_the_guide_resolve() {
    let mut problems = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("a readable document");
        problems.extend(check_markdown(&doc, &text));
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn crate_docs_link_no_file_by_a_relative_path_and_their_anchors_resolve() {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root()).expect("the workspace root") {
        let path = entry.expect("a directory entry").path();
        let is_crate = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with("admission-"));
        if is_crate && path.join("src").is_dir() {
            rust_files(&path.join("src"), &mut files);
        }
    }
    assert!(
        files.len() > 20,
        "found the crates' sources: {}",
        files.len()
    );
    let mut problems = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a readable source file");
        problems.extend(check_doc_comments(&file, &source));
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_guide_page_asks_its_question_is_listed_and_is_compiled() {
    let index = std::fs::read_to_string(root().join("docs/guide/README.md")).unwrap();
    let lib = std::fs::read_to_string(root().join("tests/src/lib.rs")).unwrap();
    let pages = guide_pages();
    assert!(pages.len() > 10, "the guide has its pages: {pages:?}");
    for page in pages {
        let name = page.file_name().unwrap().to_str().unwrap();
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(
            lib.contains(&format!("\"{name}\"")),
            "tests/src/lib.rs does not include {name}: its code blocks are never compiled"
        );
        if name == "README.md" {
            continue;
        }
        let title = text.lines().next().unwrap_or("");
        assert!(
            title.starts_with("# ") && title.ends_with('?'),
            "{name} does not start with the question it answers: {title:?}"
        );
        assert!(
            index.contains(&format!("({name})")),
            "the guide's index does not list {name}"
        );
    }
}

/// The rows of the fail-fast-or-queue table (the lines that start with
/// `| ` and a number) in `text`, after `prefix` is stripped from each line.
fn table_rows(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix(prefix))
        .filter(|row| row.starts_with("| ") && row[2..].starts_with(|c: char| c.is_ascii_digit()))
        .filter(|row| row.ends_with(" S |"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_guides_fail_fast_or_queue_table_is_the_one_the_core_checks() {
    let core = std::fs::read_to_string(root().join("admission-core/src/lib.rs")).unwrap();
    let guide = std::fs::read_to_string(root().join("docs/guide/overload.md")).unwrap();
    let checked = table_rows(&core, "//! ");
    assert_eq!(checked.len(), 16, "C = 1, 2, 4, 8 × four loads");
    assert_eq!(
        table_rows(&guide, ""),
        checked,
        "docs/guide/overload.md's table differs from admission-core's (which its test `fail_fast_or_queue` checks)"
    );
}

/// The checker finds what it is for: a missing file, a missing heading, a
/// relative file link in API docs and a missing in-page anchor; and it
/// passes what is right, links in code included.
#[test]
fn the_checker_fails_on_broken_links() {
    let page = root().join("docs/guide/a-page-under-test.md");
    let broken = "\
# A page?

See [the sizing page](sizing.md), [its shadow
mode](sizing.md#check-the-guess-before-it-refuses-anyone), [the README's
quickstart](../../README.md#quickstart-axum) and [metrics](../METRICS.md).
A [missing page](no-such-page.md) and [a missing
heading](sizing.md#no-such-heading); [a reference].

[a reference]: ../../NO-SUCH-FILE.md

`[in code](not-checked.md)`

```rust
// [in a block](not-checked-either.md)
```
";
    let problems = check_markdown(&page, broken);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("no-such-page.md"), "{problems:#?}");
    assert!(problems[1].contains("#no-such-heading"), "{problems:#?}");
    assert!(problems[2].contains("NO-SUCH-FILE.md"), "{problems:#?}");

    let source = "\
//! # Fail fast or queue
//!
//! See [below](#fail-fast-or-queue), [nowhere](#no-such-heading),
//! [RELIABILITY.md](../RELIABILITY.md) and [`Pool`](crate::Pool).
";
    let problems = check_doc_comments(Path::new("admission-core/src/lib.rs"), source);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("#no-such-heading"), "{problems:#?}");
    assert!(problems[1].contains("../RELIABILITY.md"), "{problems:#?}");
}

/// The info strings and line counts of the fenced code blocks in `text`.
fn fenced_blocks(text: &str) -> Vec<(String, usize)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, usize)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut open {
            None if trimmed.starts_with("```") => {
                open = Some((trimmed.trim_start_matches('`').trim().to_owned(), 0));
            }
            Some(_) if trimmed.starts_with("```") => blocks.extend(open.take()),
            Some((_, lines)) => *lines += 1,
            None => {}
        }
    }
    blocks
}

/// Issue 41: the README is at most 200 lines, its quickstarts at most 30
/// each, and no Rust block of the README or the guide is left out of the
/// doctests (`ignore`).
#[test]
fn the_readme_stays_short_and_every_rust_block_is_compiled() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines, at most 200");
    for (info, lines) in fenced_blocks(&readme) {
        if info.starts_with("rust") {
            assert!(
                lines <= 30,
                "a README quickstart of {lines} lines, at most 30"
            );
        }
    }
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (info, _) in fenced_blocks(&text) {
            let rust = info.is_empty() || info.split(',').any(|word| word.trim() == "rust");
            assert!(
                !(rust && info.split(',').any(|word| word.trim() == "ignore")),
                "{}: a Rust block marked `ignore` is never compiled: {info:?}",
                doc.display()
            );
        }
    }
}
