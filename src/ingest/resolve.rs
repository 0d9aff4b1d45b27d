//! Name resolution: the references of ingested code (a module path, a
//! called function, a base class, as written) turned into edges between
//! the nodes present. A name that matches no definition, or several
//! equally near ones, is left out, never guessed.

use std::collections::BTreeSet;

// Keyed by names and URIs, hundreds of thousands of them: a fast hash, not SipHash.
use rustc_hash::FxHashMap as HashMap;

/// An ingested node, as resolution needs it.
pub(crate) struct CodeNode {
    pub(crate) kind: String,
    /// The file it comes from (`project://...`).
    pub(crate) file: String,
}

/// An edge between ingested nodes: (source URI, relation, target URI).
pub(crate) type CodeEdge = (String, String, String);

/// Method names of the standard types and libraries of the languages read
/// (Python, Rust, JavaScript and TypeScript, Go): a call `x.f()` of one of
/// these on a receiver of unknown type is left out. Sorted (byte order), for
/// a binary search.
const COMMON_METHODS: &[&str] = &[
    "Add",
    "Bytes",
    "Cleanup",
    "Close",
    "Decode",
    "Del",
    "Done",
    "Encode",
    "Err",
    "Error",
    "Errorf",
    "Fatal",
    "Fatalf",
    "Flush",
    "Get",
    "Header",
    "Helper",
    "Len",
    "Less",
    "Load",
    "Lock",
    "Log",
    "Logf",
    "Next",
    "Parallel",
    "RLock",
    "RUnlock",
    "Read",
    "Reset",
    "Run",
    "Scan",
    "Set",
    "Skip",
    "Store",
    "String",
    "Swap",
    "Unlock",
    "Value",
    "Wait",
    "Write",
    "WriteString",
    "add",
    "append",
    "apply",
    "as_ref",
    "as_str",
    "assign",
    "at",
    "bind",
    "call",
    "catch",
    "clear",
    "clone",
    "close",
    "collect",
    "concat",
    "contains",
    "copy",
    "count",
    "debug",
    "decode",
    "delete",
    "emit",
    "encode",
    "end",
    "endsWith",
    "endswith",
    "entries",
    "err",
    "error",
    "every",
    "exec",
    "expect",
    "extend",
    "fill",
    "filter",
    "finally",
    "find",
    "findIndex",
    "flat",
    "flatMap",
    "flush",
    "forEach",
    "format",
    "get",
    "getItem",
    "get_mut",
    "has",
    "includes",
    "index",
    "indexOf",
    "info",
    "insert",
    "into",
    "is_empty",
    "is_none",
    "is_some",
    "items",
    "iter",
    "iter_mut",
    "join",
    "json",
    "keys",
    "len",
    "log",
    "lower",
    "map",
    "map_err",
    "match",
    "next",
    "off",
    "ok",
    "ok_or",
    "on",
    "once",
    "parse",
    "pop",
    "push",
    "push_str",
    "read",
    "reduce",
    "reject",
    "remove",
    "replace",
    "resolve",
    "reverse",
    "send",
    "set",
    "setItem",
    "shift",
    "slice",
    "some",
    "sort",
    "splice",
    "split",
    "startsWith",
    "startswith",
    "strip",
    "test",
    "then",
    "toFixed",
    "toLowerCase",
    "toString",
    "toUpperCase",
    "to_owned",
    "to_string",
    "trim",
    "unshift",
    "unwrap",
    "unwrap_or",
    "unwrap_or_default",
    "update",
    "upper",
    "valueOf",
    "values",
    "warn",
    "write",
];

/// The last part of a definition's URI: `function://a.B.run` is `run`.
fn short_name(uri: &str) -> &str {
    let path = uri.split_once("://").map_or(uri, |(_, p)| p);
    path.rsplit('.').next().unwrap_or(path)
}

/// The directory (`project://<dir>/`) of an `imports` name that stands for
/// a Go package: `project://<dir>/*.go` (`project://*.go` at the root).
fn go_package_dir(name: &str) -> Option<&str> {
    name.strip_suffix("*.go").filter(|d| d.starts_with("project://") && d.ends_with('/'))
}

/// The directory of a `.go` file that is not a test (`project://a/b.go` is
/// `project://a/`): the package its module belongs to.
fn go_package_of(file: &str) -> Option<&str> {
    if !file.ends_with(".go") || file.ends_with("_test.go") {
        return None;
    }
    let cut = file.rfind('/').filter(|&i| i >= "project://".len()).map_or("project://".len(), |i| i + 1);
    Some(&file[..cut])
}

/// The edges that `references` (file, from, relation, name) resolve to among `nodes`.
///
/// A name is resolved by its kind:
/// - a URI (`function://a.B.f`, `class://a.T`, a `contains` child): that
///   node, when present (Go names what it calls and uses in full);
/// - an `imports` of a Go package (`project://<dir>/*.go`): the module of every
///   Go file of that directory but its tests;
/// - another `imports`: the module, class or function of that dotted path,
///   else its parent module;
/// - a bare name (`calls`, `inherits`, `implements`, `references`): the one
///   definition of that name, else the one in the referring file; `.f`
///   (a method on a receiver of unknown type) likewise, unless `f` is one
///   of [`COMMON_METHODS`].
pub(crate) fn resolve<'a>(
    nodes: &HashMap<String, CodeNode>,
    references: impl IntoIterator<Item = (&'a str, &'a str, &'a str, &'a str)>,
) -> BTreeSet<CodeEdge> {
    // Definitions by short name, and the modules of each Go package.
    let mut by_name: HashMap<(&'static str, &str), Vec<&str>> = HashMap::default();
    let mut go_packages: HashMap<&str, Vec<&str>> = HashMap::default();
    for (uri, node) in nodes {
        let group = match node.kind.as_str() {
            "function" => "function",
            "class" => "class",
            "module" => {
                if let Some(dir) = go_package_of(&node.file) {
                    go_packages.entry(dir).or_default().push(uri);
                }
                continue;
            }
            _ => continue,
        };
        by_name.entry((group, short_name(uri))).or_default().push(uri);
    }
    // By name: the one definition of that name, else the one in the referring file; else none.
    let pick = |group: &'static str, name: &str, file: &str| -> Option<String> {
        let all = by_name.get(&(group, name))?;
        if all.len() == 1 {
            return Some(all[0].to_owned());
        }
        let mut here = all.iter().filter(|u| nodes.get(**u).is_some_and(|n| n.file == file));
        match (here.next(), here.next()) {
            (Some(u), None) => Some((*u).to_owned()),
            _ => None,
        }
    };
    let mut wanted = BTreeSet::new();
    for (file, from, relation, name) in references {
        if !nodes.contains_key(from) {
            continue;
        }
        let targets: Vec<String> = if name.contains("://") {
            match go_package_dir(name).filter(|_| relation == "imports") {
                Some(dir) => go_packages.get(dir).into_iter().flatten().map(|u| (*u).to_owned()).collect(),
                None => nodes.contains_key(name).then(|| name.to_owned()).into_iter().collect(),
            }
        } else {
            let target = match relation {
                "imports" => {
                    let parent = name.rsplit_once('.').map(|(p, _)| format!("module://{p}"));
                    ["module", "class", "function"]
                        .iter()
                        .map(|s| format!("{s}://{name}"))
                        .chain(parent)
                        .find(|u| nodes.contains_key(u))
                }
                "calls" => match name.strip_prefix('.') {
                    // `x.f()`: the receiver's type is unknown, so a name every
                    // library has (`append`, `get`, `clone`) is not taken for ours.
                    Some(method) if COMMON_METHODS.binary_search(&method).is_ok() => None,
                    Some(method) => pick("function", method, file),
                    None => pick("function", name, file),
                },
                "inherits" | "implements" | "references" => pick("class", name, file),
                _ => None,
            };
            target.into_iter().collect()
        };
        for t in targets.into_iter().filter(|t| t != from) {
            wanted.insert((from.to_owned(), relation.to_owned(), t));
        }
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_methods_are_sorted_for_the_binary_search() {
        assert!(COMMON_METHODS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_go_package_is_the_directory_of_its_files() {
        assert_eq!(go_package_of("project://a/b/c.go"), Some("project://a/b/"));
        assert_eq!(go_package_of("project://main.go"), Some("project://"));
        assert_eq!(go_package_of("project://a/c_test.go"), None);
        assert_eq!(go_package_of("project://a/c.py"), None);
        assert_eq!(go_package_dir("project://a/b/*.go"), Some("project://a/b/"));
        assert_eq!(go_package_dir("project://*.go"), Some("project://"));
        assert_eq!(go_package_dir("project://a/b.go"), None);
    }
}
