//! The docs' examples are what the command prints: every ```text block of
//! `docs/*.md` and the README whose lines start with `$ dstore` is run on
//! the demo store (whose ids are fixed), in a directory of its own, and
//! what it prints must be what the block shows under each command. A line
//! `...` stands for any lines; a block after a line `<!-- not run: WHY -->`
//! is not run. `DSTORE_UPDATE_DOCS=1` writes what the command printed into
//! the docs instead of failing (then read the diff).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pages whose examples are run.
const PAGES: &[&str] = &["README.md", "docs/cli.md", "docs/staleness.md", "docs/calibration.md", "docs/integrity.md"];

/// One command of a block and the lines the block shows for it.
struct Example {
    command: String,
    /// Where its output lines are in the page.
    lines: std::ops::Range<usize>,
}

/// The examples of a page, block by block.
fn examples(page: &str) -> Vec<Vec<Example>> {
    let lines: Vec<&str> = page.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let skipped = i > 0 && lines[i - 1].starts_with("<!-- not run");
        if lines[i] == "```text" && lines.get(i + 1).is_some_and(|l| l.starts_with("$ dstore")) && !skipped {
            let end = (i + 1..lines.len()).find(|&j| lines[j] == "```").expect("a block ends");
            let mut block: Vec<Example> = Vec::new();
            for (j, line) in lines.iter().enumerate().take(end).skip(i + 1) {
                if let Some(command) = line.strip_prefix("$ ") {
                    block.push(Example { command: command.to_owned(), lines: j + 1..j + 1 });
                } else if let Some(last) = block.last_mut() {
                    // Blank lines separate commands; they are not output.
                    if !line.trim().is_empty() {
                        last.lines.end = j + 1;
                    }
                }
            }
            blocks.push(block);
            i = end;
        }
        i += 1;
    }
    blocks
}

/// Whether `actual` is what `expected` shows, `...` standing for any lines.
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first.trim() == "..." => (0..=actual.len()).any(|k| matches(rest, &actual[k..])),
        Some((first, rest)) => {
            actual.first().is_some_and(|a| a.trim_end() == first.trim_end()) && matches(rest, &actual[1..])
        }
    }
}

/// What the doc should show for `actual` where it showed `expected`: the
/// lines before a `...` of the doc, then `...` (what follows it is elided).
fn shown(expected: &[&str], actual: &[&str]) -> Vec<String> {
    match expected.iter().position(|l| l.trim() == "...") {
        Some(at) => {
            // As many lines after the elision as the page showed, from the end.
            let after = (expected.len() - at - 1).min(actual.len().saturating_sub(at));
            let head = actual.iter().take(at.min(actual.len()));
            let tail = actual[actual.len() - after..].iter();
            head.map(|l| l.to_string())
                .chain(std::iter::once(expected[at].to_owned()))
                .chain(tail.map(|l| l.to_string()))
                .collect()
        }
        None => actual.iter().map(|l| l.to_string()).collect(),
    }
}

/// A directory with the demo store in it, and a PATH whose `dstore` is the one under test.
fn workspace() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_dstore"));
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let made = Command::new(&bin).args(["demo", "demo.db"]).current_dir(dir.path()).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    (dir, path)
}

/// What each of `commands` printed, run one after the other in one shell
/// (so that `echo $?` reports the command before it).
fn run(dir: &Path, path: &str, commands: &[&str]) -> Vec<String> {
    let mut script = String::from("__s=0\n");
    for (n, c) in commands.iter().enumerate() {
        script.push_str(&format!("printf '\\n@@dstore-docs {n}@@\\n'; (exit $__s); {c} 2>&1; __s=$?\n"));
    }
    let out = Command::new("sh").args(["-c", &script]).current_dir(dir).env("PATH", path).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut parts: Vec<String> = text
        .split("\n@@dstore-docs ")
        .skip(1)
        .map(|p| p.split_once("@@\n").map_or("", |(_, o)| o).to_owned())
        .collect();
    parts.resize(commands.len(), String::new());
    parts
}

#[test]
fn the_docs_examples_are_what_the_command_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let update = std::env::var_os("DSTORE_UPDATE_DOCS").is_some();
    let mut drift = Vec::new();
    let mut ran = 0;
    for page in PAGES {
        let file = root.join(page);
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        // Each page on a demo store of its own: one page's writes do not reach another's.
        let (dir, path) = workspace();
        let mut edits: Vec<(std::ops::Range<usize>, Vec<String>)> = Vec::new();
        for block in examples(&text) {
            let outputs = run(dir.path(), &path, &block.iter().map(|e| e.command.as_str()).collect::<Vec<_>>());
            for (ex, actual) in block.into_iter().zip(&outputs) {
                let actual: Vec<&str> = actual.lines().collect();
                let expected: Vec<&str> = lines[ex.lines.clone()].iter().map(String::as_str).collect();
                ran += 1;
                if !matches(&expected, &actual) {
                    drift.push(format!(
                        "{page}: $ {}\n--- the page shows\n{}\n--- the command printed\n{}",
                        ex.command,
                        expected.join("\n"),
                        actual.join("\n")
                    ));
                    edits.push((ex.lines.clone(), shown(&expected, &actual)));
                }
            }
        }
        if update && !edits.is_empty() {
            for (range, new) in edits.into_iter().rev() {
                lines.splice(range, new);
            }
            std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        }
    }
    assert!(ran >= 20, "only {ran} examples ran: are the pages' blocks found?");
    assert!(
        update || drift.is_empty(),
        "{} example(s) differ from what the command prints (DSTORE_UPDATE_DOCS=1 writes them):\n\n{}",
        drift.len(),
        drift.join("\n\n")
    );
}

#[test]
fn an_elision_stands_for_any_lines_and_nothing_else_matches_loosely() {
    assert!(matches(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(matches(&["a", "..."], &["a"]));
    assert!(!matches(&["a", "b"], &["a", "c"]));
    assert!(!matches(&["a"], &["a", "b"]));
    assert_eq!(shown(&["x", "..."], &["a", "b", "c"]), ["a", "..."]);
}
