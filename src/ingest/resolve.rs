//! Name resolution: the references of ingested code (a module path, a
//! called function, a base class, as written) turned into edges between
//! the nodes present. A name that matches no definition, or several
//! equally near ones, is left out, never guessed.

use std::collections::{BTreeSet, HashMap};

/// An ingested node, as resolution needs it.
pub(crate) struct CodeNode {
    pub(crate) kind: String,
    /// The file it comes from (`project://...`).
    pub(crate) file: String,
}

/// An edge between ingested nodes: (source URI, relation, target URI).
pub(crate) type CodeEdge = (String, String, String);

/// Method names of the standard types of both languages: a call `x.f()` of
/// one of these on a receiver of unknown type is left out.
const COMMON_METHODS: &[&str] = &[
    "add",
    "append",
    "as_ref",
    "as_str",
    "clear",
    "clone",
    "close",
    "collect",
    "contains",
    "copy",
    "count",
    "decode",
    "encode",
    "endswith",
    "err",
    "expect",
    "extend",
    "filter",
    "find",
    "flush",
    "format",
    "get",
    "get_mut",
    "index",
    "insert",
    "into",
    "is_empty",
    "is_none",
    "is_some",
    "items",
    "iter",
    "iter_mut",
    "join",
    "keys",
    "len",
    "lower",
    "map",
    "map_err",
    "next",
    "ok",
    "ok_or",
    "pop",
    "push",
    "push_str",
    "read",
    "remove",
    "replace",
    "reverse",
    "send",
    "sort",
    "split",
    "startswith",
    "strip",
    "to_owned",
    "to_string",
    "unwrap",
    "unwrap_or",
    "unwrap_or_default",
    "update",
    "upper",
    "values",
    "write",
];

/// The last part of a definition's URI: `function://a.B.run` is `run`.
fn short_name(uri: &str) -> &str {
    let path = uri.split_once("://").map_or(uri, |(_, p)| p);
    path.rsplit('.').next().unwrap_or(path)
}

/// The edges that `references` (file, from, relation, name) resolve to among `nodes`.
pub(crate) fn resolve<'a>(
    nodes: &HashMap<String, CodeNode>,
    references: impl IntoIterator<Item = (&'a str, &'a str, &'a str, &'a str)>,
) -> BTreeSet<CodeEdge> {
    // Definitions by short name.
    let mut by_name: HashMap<(&'static str, &str), Vec<&str>> = HashMap::new();
    for (uri, node) in nodes {
        let group = match node.kind.as_str() {
            "function" => "function",
            "class" => "class",
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
        let target = match relation {
            "contains" => nodes.contains_key(name).then(|| name.to_owned()),
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
                Some(method) if COMMON_METHODS.contains(&method) => None,
                Some(method) => pick("function", method, file),
                None => pick("function", name, file),
            },
            "inherits" | "implements" | "references" => pick("class", name, file),
            _ => None,
        };
        if let Some(t) = target.filter(|t| t != from) {
            wanted.insert((from.to_owned(), relation.to_owned(), t));
        }
    }
    wanted
}
