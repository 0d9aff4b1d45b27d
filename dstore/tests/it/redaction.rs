//! `dstore redact`: content removed, the log still whole (the library's
//! suite is tests/common's, on a file and on a server).

use std::path::{Path, PathBuf};

use decision_store::store::ProblemKind;
use decision_store::Store;
use rusqlite::Connection;

use crate::common::{dstore, json, ok, s};

const WORDS: &str = "product team talks";

/// The demo store in `dir`, and its digests as `dstore digest` printed them.
fn demo(dir: &Path) -> (PathBuf, String) {
    let path = dir.join("demo.db");
    ok(&["demo", s(&path)]);
    let digest = ok(&["digest", s(&path)]);
    (path, digest)
}

/// The bytes of the store file and its write-ahead log.
fn bytes_of(path: &Path) -> Vec<u8> {
    let mut all = std::fs::read(path).unwrap();
    all.extend(std::fs::read(path.with_extension("db-wal")).unwrap_or_default());
    all
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn dstore_redact_empties_the_fields_and_check_and_every_old_digest_still_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = demo(dir.path());
    assert!(holds(&bytes_of(&path), WORDS));

    let said = ok(&[
        "redact",
        s(&path),
        "01M6DQS9M0#2",
        "--fields",
        "rationale,alternatives",
        "--reason",
        "a key was pasted in",
        "--by",
        "alice",
    ]);
    assert!(said.contains("01M6DQYSD0VS00000000000003") && said.contains("rationale, alternatives"), "{said}");
    // Gone from the file and its log, not only from what the store shows.
    assert!(!holds(&bytes_of(&path), WORDS), "the old text is still in the file");

    let shown = json(&["show", s(&path), "01M6DQS9M0#2", "--format", "json"]);
    assert_eq!(shown["decision"]["rationale"], "[redacted]");
    assert_eq!(shown["decision"]["alternatives"][0]["option"], "[redacted]");
    assert_eq!(shown["decision"]["chosen_option"], "Token bucket per user");
    let r = &shown["redactions"][0];
    assert_eq!((r["actor"].as_str(), r["reason"].as_str()), (Some("alice"), Some("a key was pasted in")));
    assert!(ok(&["show", s(&path), "01M6DQS9M0#2"]).contains("redacted      rationale, alternatives by alice"));

    assert!(ok(&["check", s(&path)]).starts_with("ok"));
    for anchor in digest.lines() {
        assert_eq!(dstore(&["check", s(&path), "--expect", anchor]).code, 0, "{anchor}");
    }
    let export = ok(&["export", s(&path)]);
    assert!(export.contains("[redacted]") && !export.contains(WORDS));

    // A file copy: same digest, and it checks clean.
    let copy = dir.path().join("copy.db");
    ok(&["copy", s(&path), s(&copy)]);
    assert_eq!(ok(&["digest", s(&copy)]), ok(&["digest", s(&path)]));
    assert!(ok(&["check", s(&copy)]).starts_with("ok"));

    // Bad input names the field and changes nothing.
    let now = ok(&["digest", s(&path)]);
    for (args, says) in [
        (vec!["--fields", "decision_type", "--reason", "x"], "decision_type"),
        (vec!["--fields", "rationale", "--reason", "x"], "redacted already"),
        (vec!["--fields", "chosen_option", "--reason", " "], "reason"),
    ] {
        let mut all = vec!["redact", s(&path), "01M6DQS9M0#2", "--by", "alice"];
        all.extend(args);
        let r = dstore(&all);
        assert_eq!(r.code, 2, "{all:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{all:?}: {}", r.stderr);
    }
    assert_eq!(ok(&["digest", s(&path)]), now);
    // A path that holds no store is not made one.
    let none = dir.path().join("none.db");
    assert_ne!(
        dstore(&["redact", s(&none), "01M6DQS9M0#2", "--fields", "rationale", "--reason", "x", "--by", "a"]).code,
        0
    );
    assert!(!none.exists());
}

fn problems_of(path: &Path) -> Vec<ProblemKind> {
    Store::open_read_only(path).unwrap().check().unwrap().into_iter().map(|p| p.kind).collect()
}

#[test]
fn a_redaction_is_the_only_way_to_change_a_row_and_tampering_with_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = demo(dir.path());
    ok(&["redact", s(&path), "01M6DQS9M0#2", "--fields", "rationale", "--reason", "pasted key", "--by", "alice"]);
    let conn = Connection::open(&path).unwrap();
    // Without a redaction of its own transaction, an UPDATE is refused; a
    // redaction row is append-only.
    for sql in [
        "UPDATE decisions SET rationale = 'x' WHERE sequence = 3",
        "UPDATE decisions SET rationale = 'x' WHERE decision_id = '01M6DQYSD0VS00000000000003'",
        "UPDATE redactions SET reason = 'nothing happened'",
        "DELETE FROM redactions",
    ] {
        let e = conn.execute(sql, []).expect_err(sql);
        assert!(e.to_string().contains("append-only"), "{sql}: {e}");
    }
    drop(conn);
    assert_eq!(problems_of(&path), vec![]);

    // A redaction entry rewritten around its trigger: its hash tells.
    let copy = dir.path().join("entry.db");
    std::fs::copy(&path, &copy).unwrap();
    let conn = Connection::open(&copy).unwrap();
    conn.execute_batch("DROP TRIGGER redactions_no_update; UPDATE redactions SET actor = 'mallory';").unwrap();
    drop(conn);
    assert!(problems_of(&copy).contains(&ProblemKind::HashMismatch), "{:?}", problems_of(&copy));
    let r = dstore(&["check", s(&copy)]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("redaction"), "{}", r.stdout);

    // The redacted row changed again around the trigger: it no longer
    // matches the redaction's hash of it.
    let copy = dir.path().join("row.db");
    std::fs::copy(&path, &copy).unwrap();
    let conn = Connection::open(&copy).unwrap();
    conn.execute_batch(
        "DROP TRIGGER decisions_no_update; \
         UPDATE decisions SET chosen_option = 'something else' WHERE decision_id = '01M6DQYSD0VS00000000000003';",
    )
    .unwrap();
    drop(conn);
    assert_eq!(problems_of(&copy), vec![ProblemKind::HashMismatch]);

    // A redaction entry removed: the chain has a gap.
    let copy = dir.path().join("gone.db");
    std::fs::copy(&path, &copy).unwrap();
    let conn = Connection::open(&copy).unwrap();
    conn.execute_batch("DROP TRIGGER redactions_no_delete; DELETE FROM redactions;").unwrap();
    drop(conn);
    let kinds = problems_of(&copy);
    assert!(kinds.contains(&ProblemKind::ChainBroken), "{kinds:?}");
}
