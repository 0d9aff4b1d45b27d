//! What every test of the `dstore` binary needs: run it, and check how it ended.
#![allow(dead_code)] // each test crate uses some of these

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn dstore(args: &[&str]) -> Run {
    dstore_with_stdin(args, None)
}

pub fn dstore_with_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dstore"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("dstore runs");
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let Output { status, stdout, stderr } = child.wait_with_output().unwrap();
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    };
    assert!(!run.stderr.contains("panicked"), "dstore {args:?} panicked: {}", run.stderr);
    run
}

pub fn ok(args: &[&str]) -> String {
    let r = dstore(args);
    assert_eq!(r.code, 0, "dstore {args:?} failed: {}", r.stderr);
    r.stdout
}

pub fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap_or_else(|e| panic!("dstore {args:?} printed no JSON: {e}"))
}

/// A failing run: its exit code and its one-line message.
pub fn fails(args: &[&str], code: i32, message: &str) {
    let r = dstore(args);
    assert_eq!(r.code, code, "dstore {args:?}: {}", r.stderr);
    assert!(r.stderr.contains(message), "dstore {args:?}: {:?} lacks {message:?}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "not one line: {:?}", r.stderr);
    assert!(r.stdout.is_empty(), "stdout on failure: {}", r.stdout);
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `dstore` once for each argument list, all at once, and waits for
/// every run; each must succeed.
pub fn all_at_once(runs: &[Vec<&str>]) {
    let children: Vec<_> = runs
        .iter()
        .map(|args| {
            let child = Command::new(env!("CARGO_BIN_EXE_dstore"))
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dstore runs");
            (args, child)
        })
        .collect();
    for (args, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "dstore {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
}
