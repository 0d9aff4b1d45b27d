//! The floors of the `dstore` crate, read off its source: `app` imports
//! nothing of the crate but itself; the faces (`cli`, `mcp`, `web`) import
//! `app` and never one another; `serve` composes faces; `main` sits on top.
//! And the library (the root package) depends on no part of the command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floor of each top-level module of the crate; higher floors may
/// import lower ones, a floor never one beside or above it.
const FLOORS: &[(&str, u8)] = &[("app", 0), ("cli", 1), ("mcp", 1), ("web", 1), ("serve", 2), ("main", 3)];

fn floor(module: &str) -> u8 {
    FLOORS.iter().find(|(m, _)| *m == module).unwrap_or_else(|| panic!("{module}: a module no floor names")).1
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file before its tests, without comments.
fn code(text: &str) -> String {
    text.split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap()
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifiers that follow each `prefix` in `code` (`a` of `prefix a::b`,
/// and `a`, `b` of `prefix {a::x, b}`).
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let word = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                out.extend(group.split(',').map(|g| word(g.trim())));
            }
            None => {
                out.insert(word(rest));
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The top-level modules that each top-level module of `dstore/src` imports.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
        let top = parts[0].clone();
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let mut named = names_after(&code, "crate::");
        // `super::` of a top-level module's own file (`serve.rs`, `cli/mod.rs`) is the crate root.
        let at_top = parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod");
        if at_top {
            named.extend(names_after(&code, "super::"));
        }
        let modules: BTreeSet<String> = named.into_iter().filter(|n| FLOORS.iter().any(|(m, _)| m == n)).collect();
        let entry = edges.entry(top.clone()).or_default();
        entry.extend(modules.into_iter().filter(|m| *m != top));
    }
    edges
}

#[test]
fn faces_stand_side_by_side_over_the_application_floor() {
    let edges = imports();
    for (module, targets) in &edges {
        for target in targets {
            if module == "main" {
                continue;
            }
            assert!(
                floor(target) < floor(module),
                "dstore/src/{module} imports {target}: a floor {} its own",
                if floor(target) == floor(module) { "beside" } else { "above" }
            );
        }
    }
    // The walk saw the imports it checks.
    for (module, target) in [("cli", "app"), ("mcp", "app"), ("web", "app"), ("serve", "mcp"), ("serve", "web")] {
        assert!(edges[module].contains(target), "{module} should import {target}: {edges:?}");
    }
}

#[test]
fn the_walk_finds_an_import_of_a_face_by_another() {
    let code =
        code("use crate::app::open;\nuse crate::{mcp, web};\n// crate::cli in a comment\nlet x = super::cli::run;\n");
    assert_eq!(names_after(&code, "crate::"), ["app", "mcp", "web"].map(String::from).into());
    assert_eq!(names_after(&code, "super::"), ["cli"].map(String::from).into());
}

#[test]
fn the_library_depends_on_no_part_of_the_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let section = |name: &str| -> String {
        let start = manifest.find(&format!("\n[{name}]\n")).unwrap_or_else(|| panic!("no [{name}]"));
        let body = &manifest[start + name.len() + 4..];
        body[..body.find("\n[").unwrap_or(body.len())].to_owned()
    };
    let dependencies = section("dependencies");
    for face in ["dstore", "clap", "tokio", "axum", "hyper", "tower", "rmcp", "plotters", "mimalloc"] {
        let declared = dependencies.lines().any(|l| l.split(['=', ' ']).next() == Some(face));
        assert!(!declared, "the library depends on {face}");
    }
    let features = section("features");
    assert!(features.lines().any(|l| l.trim() == "default = []"), "the library's default is its lean core: {features}");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("dstore::"), "{} names the command's crate", file.display());
    }
}
