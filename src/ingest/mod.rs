//! Source trees into the UKO graph: files, modules, classes and functions
//! as nodes, with `contains`, `imports`, `calls`, `inherits`, `implements`
//! and `references` edges. [`Store::ingest`](crate::Store::ingest) walks a tree
//! and keeps the store in step with it; this module turns one file into its
//! part of the graph ([`parse_file`]) and decides which files a walk takes.
//!
//! Names a file refers to (an imported module, a called function, a base
//! class) are kept as written ([`Reference`]) and resolved against the
//! whole graph at every ingest: an edit in one file can then link a call
//! made in another without parsing that one again. A name that matches no
//! definition, or several equally near ones, is left out, never guessed.
//! `docs/ingest.md` lists the URIs and views of each language.

#[cfg(feature = "lang-go")]
mod go;
pub mod history;
pub mod lexical;
mod python;
pub(crate) mod resolve;
mod rust;
#[cfg(any(feature = "lang-typescript", feature = "lang-javascript"))]
mod tsconfig;
#[cfg(any(feature = "lang-typescript", feature = "lang-javascript"))]
mod typescript;
pub(crate) mod walk;

use std::path::Path;

use serde::Serialize;

use crate::uko::{NodeView, UkoNode};

/// The domain of every ingested node.
pub const DOMAIN: &str = "uko-code:";

/// Directories never walked: build output, dependencies (`vendor`: Go's and
/// Cargo's vendored copies), virtual environments, caches.
pub const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "vendor", ".venv", "venv", "__pycache__", ".git", ".tox"];

/// The languages `ingest` reads: Python and Rust always, the others with
/// their features (`lang-typescript`, `lang-javascript`, `lang-go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Language {
    Python,
    Rust,
    #[cfg(feature = "lang-typescript")]
    TypeScript,
    /// TypeScript with JSX (`.tsx`).
    #[cfg(feature = "lang-typescript")]
    Tsx,
    /// Read with the TSX grammar, which parses JavaScript and JSX.
    #[cfg(feature = "lang-javascript")]
    JavaScript,
    #[cfg(feature = "lang-go")]
    Go,
}

impl Language {
    /// By file extension: `.py`, `.rs`; `.ts`, `.mts`, `.cts`, `.tsx`;
    /// `.js`, `.jsx`, `.mjs`, `.cjs`; `.go` (each with its feature).
    pub fn of(path: &Path) -> Option<Language> {
        match path.extension()?.to_str()? {
            "py" => Some(Language::Python),
            "rs" => Some(Language::Rust),
            #[cfg(feature = "lang-typescript")]
            "ts" | "mts" | "cts" => Some(Language::TypeScript),
            #[cfg(feature = "lang-typescript")]
            "tsx" => Some(Language::Tsx),
            #[cfg(feature = "lang-javascript")]
            "js" | "jsx" | "mjs" | "cjs" => Some(Language::JavaScript),
            #[cfg(feature = "lang-go")]
            "go" => Some(Language::Go),
            _ => None,
        }
    }

    /// The file names that stand for their directory's module.
    fn stands_for_dir(self) -> &'static [&'static str] {
        match self {
            Language::Python => &["__init__"],
            Language::Rust => &["mod", "lib"],
            #[cfg(feature = "lang-typescript")]
            Language::TypeScript | Language::Tsx => &["index"],
            #[cfg(feature = "lang-javascript")]
            Language::JavaScript => &["index"],
            // A Go package is a directory of files, each a module of its own.
            #[cfg(feature = "lang-go")]
            Language::Go => &[],
        }
    }
}

/// The relations `ingest` derives (and so owns between ingested nodes).
pub const CODE_RELATIONS: [&str; 6] = ["contains", "imports", "calls", "inherits", "implements", "references"];

/// How [`Store::ingest`](crate::Store::ingest) reads a tree.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct IngestOptions {
    /// Files larger than this are skipped (and reported).
    pub max_file_bytes: u64,
    /// Read the tree's git history (when it is in a git work tree) into
    /// `co_changed` edges between files that changed together ([`history`]).
    pub history: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions { max_file_bytes: 1 << 20, history: true }
    }
}

impl IngestOptions {
    /// Files larger than `bytes` are skipped.
    pub fn with_max_file_bytes(self, bytes: u64) -> Self {
        IngestOptions { max_file_bytes: bytes, ..self }
    }

    /// With `false`, the git history is not read (what was read before stays).
    pub fn with_history(self, history: bool) -> Self {
        IngestOptions { history, ..self }
    }
}

/// What [`Store::ingest`](crate::Store::ingest) read of the tree's git history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HistoryReport {
    /// The last commit read (HEAD), when there is a history.
    pub head: Option<String>,
    /// Commits read by this ingest (none when HEAD is the commit read last time).
    pub commits: u64,
    /// Of those, commits that linked no files: over [`history::MAX_COMMIT_FILES`]
    /// files, or fewer than two files of the tree.
    pub skipped: u64,
    /// `co_changed` edges made or strengthened.
    pub links: u64,
    /// The history was read afresh: the commit read last time is no longer
    /// an ancestor of HEAD.
    pub restarted: bool,
    /// Why no history was read, when none was (no git work tree, no git, `--no-history`).
    pub none: Option<String>,
}

/// A file `ingest` could not take, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Relative to the root, or the walker's path when it named one.
    pub path: String,
    pub reason: String,
}

/// What [`Store::ingest`](crate::Store::ingest) did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IngestReport {
    /// Source files found (of the languages read).
    pub files: u64,
    /// New or changed files, parsed.
    pub parsed: u64,
    pub unchanged: u64,
    /// Files stored before and gone from the tree now: their nodes went.
    pub removed_files: u64,
    pub nodes_added: u64,
    pub nodes_changed: u64,
    pub nodes_removed: u64,
    pub edges_added: u64,
    pub edges_removed: u64,
    /// The files parsed (new or changed), relative to the root.
    pub parsed_files: Vec<String>,
    /// The files gone from the tree whose nodes were removed, as `project://` URIs.
    pub removed: Vec<String>,
    /// Files parsed with syntax errors: what tree-sitter recovered is ingested.
    pub parse_errors: Vec<String>,
    /// Files not read: too large, unreadable, not UTF-8, a symlink loop. A
    /// skipped file that was ingested before keeps its nodes.
    pub skipped: Vec<SkippedFile>,
    /// Files whose terms were indexed (new, changed, or not indexed before).
    pub indexed: u64,
    /// The git history read (`co_changed` edges).
    pub history: HistoryReport,
    /// Write transactions that stored the changes (none when nothing changed).
    pub batches: u64,
}

impl IngestReport {
    /// True when the store was not changed.
    pub fn is_unchanged(&self) -> bool {
        self.parsed == 0
            && self.removed_files == 0
            && self.nodes_added + self.nodes_changed + self.nodes_removed == 0
            && self.edges_added + self.edges_removed == 0
            && self.indexed == 0
            && self.history.links == 0
    }
}

/// A name a definition refers to, resolved into an edge at each ingest.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    /// The node that refers.
    pub from: String,
    /// `contains` (the name is a URI), `imports` (a dotted path), `calls`,
    /// `inherits`, `implements`, `references` (a bare name).
    pub relation: &'static str,
    pub name: String,
}

/// One file's part of the graph.
#[derive(Clone, Debug, Default)]
pub struct FileGraph {
    /// The file, its module and its definitions; each with the file as `resource_uri`.
    pub nodes: Vec<UkoNode>,
    pub references: Vec<Reference>,
    /// The parser met syntax errors (and recovered: what parsed is here).
    pub has_errors: bool,
}

/// `sha256:` and the hex SHA-256 of `bytes`: the version of a file or a definition.
pub fn content_version(bytes: &[u8]) -> String {
    crate::hash::version_of(bytes)
}

/// The file's URI: `project://` and its path relative to the root, with `/`.
pub fn file_uri(relative: &Path) -> String {
    let parts: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    format!("project://{}", parts.join("/"))
}

/// A file's path relative to the root, with `/`: its URI without `project://`.
#[cfg(any(feature = "lang-typescript", feature = "lang-javascript", feature = "lang-go"))]
fn file_path(uri: &str) -> &str {
    uri.strip_prefix("project://").unwrap_or(uri)
}

/// Where a walk starts: its directory's name, whether that directory is
/// itself a Python package (holds an `__init__.py`), whose modules are then
/// `name.module`, and the files of the tree that say where imports lead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    pub name: String,
    pub python_package: bool,
    pub imports: ImportConfig,
}

/// The files of a tree that map the imports of some languages to its
/// files: `tsconfig.json` and `jsconfig.json` (their `paths` and `baseUrl`,
/// with the `tsconfig*.json` they extend) and `go.mod` (the module path).
/// The walk reads them; a file parsed maps its imports with what they say
/// then, so an edit of one of them reaches a file when that file changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportConfig {
    #[cfg(any(feature = "lang-typescript", feature = "lang-javascript"))]
    tsconfigs: tsconfig::TsConfigs,
    #[cfg(feature = "lang-go")]
    go_modules: go::GoModules,
}

impl ImportConfig {
    /// Whether a file of this name is one of those read (with the features built).
    pub(crate) fn wants(name: &str) -> bool {
        let config = |prefix: &str| name.starts_with(prefix) && name.ends_with(".json");
        let typescript = cfg!(any(feature = "lang-typescript", feature = "lang-javascript"))
            && (config("tsconfig") || config("jsconfig"));
        typescript || (cfg!(feature = "lang-go") && name == "go.mod")
    }

    /// Takes one file that [`ImportConfig::wants`] (`relative` to the root).
    #[cfg_attr(not(any(feature = "lang-typescript", feature = "lang-javascript", feature = "lang-go")), allow(unused))]
    pub(crate) fn add(&mut self, relative: &str, text: &str) {
        let go_mod = relative == "go.mod" || relative.ends_with("/go.mod");
        #[cfg(feature = "lang-go")]
        if go_mod {
            self.go_modules.add(relative, text);
        }
        #[cfg(any(feature = "lang-typescript", feature = "lang-javascript"))]
        if !go_mod {
            self.tsconfigs.add(relative, text);
        }
    }
}

/// Parses one file (`relative` to the walked `root`) into its nodes and references.
pub fn parse_file(root: &Root, relative: &Path, language: Language, source: &str) -> FileGraph {
    let root_name = root.name.as_str();
    let file = file_uri(relative);
    let mut module = module_path(root_name, relative, language);
    if language == Language::Python && root.python_package && module != root_name {
        module = format!("{root_name}.{module}");
    }
    let mut out = Builder { file: file.clone(), graph: FileGraph::default(), index: Default::default() };
    let mut parser = tree_sitter::Parser::new();
    let grammar: tree_sitter::Language = match language {
        Language::Python => tree_sitter_python::LANGUAGE.into(),
        Language::Rust => tree_sitter_rust::LANGUAGE.into(),
        #[cfg(feature = "lang-typescript")]
        Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        #[cfg(feature = "lang-typescript")]
        Language::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
        #[cfg(feature = "lang-javascript")]
        Language::JavaScript => tree_sitter_typescript::LANGUAGE_TSX.into(),
        #[cfg(feature = "lang-go")]
        Language::Go => tree_sitter_go::LANGUAGE.into(),
    };
    parser.set_language(&grammar).expect("the grammar crates match the tree-sitter version");
    // `parse` gives up only when cancelled or without a language: neither happens here.
    let tree = parser.parse(source, None).expect("a parser with a language parses");
    out.graph.has_errors = tree.root_node().has_error();
    let name = relative.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let symbols = match language {
        Language::Python => {
            let package = relative.file_name().is_some_and(|n| n == "__init__.py");
            python::extract(&mut out, &module, package, source, tree.root_node())
        }
        Language::Rust => {
            let crate_root = is_crate_root(relative);
            rust::extract(&mut out, &module, &crate_prefix(relative), root_name, crate_root, source, tree.root_node())
        }
        #[cfg(feature = "lang-typescript")]
        Language::TypeScript | Language::Tsx => {
            typescript::extract(&mut out, &module, file_path(&file), language, root, source, tree.root_node())
        }
        #[cfg(feature = "lang-javascript")]
        Language::JavaScript => {
            typescript::extract(&mut out, &module, file_path(&file), language, root, source, tree.root_node())
        }
        #[cfg(feature = "lang-go")]
        Language::Go => go::extract(&mut out, &module, file_path(&file), root, source, tree.root_node()),
    };
    let graph_line = format!("[MODULE_GRAPH]: symbols={}", symbols.join(","));
    let version = content_version(source.as_bytes());
    let module_uri = format!("module://{module}");
    out.node(&module_uri, "module", &module, &version, vec![(0, module.clone()), (1, graph_line.clone())]);
    let views = vec![(0, name.clone()), (1, graph_line), (4, head(source)), (9, source.to_owned())];
    out.node(&file, "file", &name, &version, views);
    out.contains(&file, &module_uri);
    out.graph
}

/// The dotted module path of a file: its path without the extension, `/`
/// as `.`, a `src` directory left out, and `__init__` (Python), `mod` and
/// `lib` (Rust) or `index` (TypeScript, JavaScript) standing for their
/// directory; the root's own name when nothing is left. A binary's
/// `src/main.rs` is module `main`; a declaration file `types.d.ts` is `types`.
pub fn module_path(root_name: &str, relative: &Path, language: Language) -> String {
    let mut parts: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if let Some(last) = parts.last_mut() {
        if let Some((stem, ext)) = last.rsplit_once('.') {
            let stem = if matches!(ext, "ts" | "mts" | "cts") { stem.strip_suffix(".d").unwrap_or(stem) } else { stem };
            *last = stem.to_owned();
        }
    }
    dotted(root_name, parts, language)
}

/// The dotted module path of a file's path `parts` without its extension
/// (or of a directory's): see [`module_path`].
fn dotted(root_name: &str, mut parts: Vec<String>, language: Language) -> String {
    parts.retain(|p| p != "src");
    if parts.last().is_some_and(|l| language.stands_for_dir().contains(&l.as_str())) {
        parts.pop();
    }
    if parts.is_empty() {
        root_name.to_owned()
    } else {
        parts.join(".")
    }
}

/// What `crate::` stands for in a Rust file: the directories above its
/// `src` (`a.b.` for `a/b/src/x.rs`), nothing for the top crate.
fn crate_prefix(relative: &Path) -> String {
    let parts: Vec<String> = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    match parts.iter().position(|p| p == "src") {
        Some(0) | None => String::new(),
        Some(i) => format!("{}.", parts[..i].join(".")),
    }
}

/// True for a Rust crate's root file: `src/lib.rs` or `src/main.rs` (at any depth).
fn is_crate_root(relative: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = relative.components().map(|c| c.as_os_str()).collect();
    matches!(parts.as_slice(), [.., src, file] if *src == "src" && (*file == "lib.rs" || *file == "main.rs"))
}

/// How deep definitions nest before the rest of a nest is left out: a file
/// of 20,000 nested modules must not overflow the stack, nor store each
/// level's whole text.
pub(crate) const MAX_NESTING: usize = 32;

/// Collects one file's nodes and references.
pub(crate) struct Builder {
    file: String,
    graph: FileGraph,
    /// Position of each URI in `graph.nodes`.
    index: std::collections::HashMap<String, usize>,
}

impl Builder {
    /// Adds a node of this file; `version_of` is the text its version hashes.
    fn node(&mut self, uri: &str, kind: &str, label: &str, version: &str, views: Vec<(u32, String)>) {
        let mut node = UkoNode::new(uri, DOMAIN, kind, label).with_version(version);
        node.resource_uri = Some(self.file.clone());
        node.views = views.into_iter().map(|(depth, content)| NodeView { depth, content }).collect();
        // A name defined twice in one scope: the later definition wins, as at run time.
        match self.index.get(uri) {
            Some(&at) => self.graph.nodes[at] = node,
            None => {
                self.index.insert(uri.to_owned(), self.graph.nodes.len());
                self.graph.nodes.push(node);
            }
        }
    }

    fn has_node(&self, uri: &str) -> bool {
        self.index.contains_key(uri)
    }

    fn reference(&mut self, from: &str, relation: &'static str, name: impl Into<String>) {
        let name = name.into();
        if !name.is_empty() {
            self.graph.references.push(Reference { from: from.to_owned(), relation, name });
        }
    }

    fn contains(&mut self, parent: &str, child: &str) {
        self.reference(parent, "contains", child);
    }
}

/// The most lines, and bytes, of a file's head.
const HEAD_LINES: usize = 8;
const HEAD_BYTES: usize = 400;

/// A file's head, its signature-depth view: its first [`HEAD_LINES`]
/// lines that hold something (imports, a module's docstring, the first
/// declarations or test cases), at most [`HEAD_BYTES`] bytes, cut at a line.
/// What a file that defines nothing (a test of `describe` calls, an index
/// of re-exports) shows of itself in a map of signatures.
fn head(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).take(HEAD_LINES) {
        if !out.is_empty() && out.len() + line.len() + 1 > HEAD_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let mut end = line.len().min(HEAD_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&line[..end]);
    }
    out
}

/// The first line of a docstring or doc comment, trimmed of quotes and markers.
fn first_line(doc: &str) -> Option<String> {
    let line = doc
        .trim_start_matches(['r', 'b', 'u', 'R', 'B', 'U'])
        .trim_matches(|c| c == '"' || c == '\'')
        .lines()
        .map(|l| l.trim().trim_start_matches("///").trim_start_matches("//!").trim())
        .find(|l| !l.is_empty())?;
    Some(line.to_owned())
}

/// The first line of a comment (`/** ... */`, `/* ... */`, `//`, `///`),
/// trimmed of its markers and of a leading `*` on each line.
#[cfg(any(feature = "lang-typescript", feature = "lang-javascript", feature = "lang-go"))]
fn comment_first_line(comment: &str) -> Option<String> {
    let body = comment.trim().trim_end_matches("*/");
    let line = body
        .lines()
        .map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("/*").map_or(l, |l| l.trim_start_matches('*'));
            let l = l.strip_prefix("//").map_or(l, |l| l.trim_start_matches(['/', '!']));
            l.trim_start_matches('*').trim()
        })
        .find(|l| !l.is_empty())?;
    Some(line.to_owned())
}

/// True when `comment` ends on the line above `next` (or on its line):
/// a comment set apart by a blank line documents nothing in particular.
#[cfg(any(feature = "lang-typescript", feature = "lang-javascript", feature = "lang-go"))]
fn just_above(comment: tree_sitter::Node<'_>, next: tree_sitter::Node<'_>) -> bool {
    comment.end_position().row + 1 >= next.start_position().row
}

/// The text of a node, lossless for valid UTF-8 input.
fn text<'a>(node: tree_sitter::Node<'_>, source: &'a str) -> &'a str {
    &source[node.byte_range()]
}

/// A definition's header: its text up to its body, on one line.
fn header(node: tree_sitter::Node<'_>, body: Option<tree_sitter::Node<'_>>, source: &str) -> String {
    let end = body.map_or(node.end_byte(), |b| b.start_byte());
    let head = &source[node.start_byte()..end];
    head.split_whitespace().collect::<Vec<_>>().join(" ").trim_end_matches(['{', ':']).trim_end().to_owned()
}

/// Views of a class or function: 0 its name, 4 its header and the first
/// line of its documentation, 9 its whole text (and 1 an outline, when given).
fn definition_views(
    name: &str,
    outline: Option<String>,
    head: &str,
    doc: Option<String>,
    whole: &str,
) -> Vec<(u32, String)> {
    let mut views = vec![(0, name.to_owned())];
    if let Some(o) = outline {
        views.push((1, o));
    }
    let signature = match doc {
        Some(d) => format!("{head}\n    {d}"),
        None => head.to_owned(),
    };
    views.push((4, signature));
    views.push((9, whole.to_owned()));
    views
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths_follow_each_languages_layout() {
        let p = |s: &str, l| module_path("proj", Path::new(s), l);
        assert_eq!(p("pkg/models.py", Language::Python), "pkg.models");
        assert_eq!(p("src/pkg/__init__.py", Language::Python), "pkg");
        assert_eq!(p("__init__.py", Language::Python), "proj");
        assert_eq!(p("src/store/graph.rs", Language::Rust), "store.graph");
        assert_eq!(p("src/store/mod.rs", Language::Rust), "store");
        assert_eq!(p("src/lib.rs", Language::Rust), "proj");
        assert_eq!(p("src/main.rs", Language::Rust), "main");
        assert_eq!(p("crates/foo/src/lib.rs", Language::Rust), "crates.foo");
        #[cfg(feature = "lang-typescript")]
        {
            assert_eq!(p("src/app/index.ts", Language::TypeScript), "app");
            assert_eq!(p("src/types.d.ts", Language::TypeScript), "types");
            assert_eq!(p("ui/user.service.tsx", Language::Tsx), "ui.user.service");
        }
        #[cfg(feature = "lang-go")]
        assert_eq!(p("internal/store/store.go", Language::Go), "internal.store.store");
    }

    #[cfg(any(feature = "lang-typescript", feature = "lang-javascript", feature = "lang-go"))]
    #[test]
    fn first_lines_of_comments() {
        assert_eq!(comment_first_line("/** Adds two.\n * More. */").as_deref(), Some("Adds two."));
        assert_eq!(comment_first_line("/**\n * Adds two.\n */").as_deref(), Some("Adds two."));
        assert_eq!(comment_first_line("/** One line. */").as_deref(), Some("One line."));
        assert_eq!(comment_first_line("// New makes a Store.").as_deref(), Some("New makes a Store."));
        assert_eq!(comment_first_line("/* */"), None);
    }

    #[test]
    fn a_files_head_is_its_first_lines_that_hold_something() {
        assert_eq!(
            head("\n\nimport a\n\nfrom b import c   \n\ndef f():\n    pass\n"),
            "import a\nfrom b import c\ndef f():\n    pass"
        );
        let many: String = (0..20).map(|i| format!("line {i}\n")).collect();
        assert_eq!(head(&many).lines().count(), HEAD_LINES);
        let long = format!("{}\n{}", "é".repeat(300), "x".repeat(50));
        let h = head(&long);
        assert!(h.len() <= HEAD_BYTES && h.chars().all(|c| c == 'é'), "{h}");
    }

    #[test]
    fn first_lines_of_docs() {
        assert_eq!(first_line("\"\"\"\n  Adds two.\n  More.\"\"\"").as_deref(), Some("Adds two."));
        assert_eq!(first_line("/// Adds two.\n/// More.").as_deref(), Some("Adds two."));
        assert_eq!(first_line("\"\"\"\"\"\""), None);
    }
}
