//! Go files. A package is a directory, so its definitions are named in the
//! package's dotted path (its directory's), whichever of its files defines
//! them: types `class://<package>.Name`, functions `function://<package>.Name`,
//! methods `function://<package>.Type.Method` (also those of an interface);
//! `init`, which every file may have, is `function://<module>.init`. Each
//! file is a module of its own (`module://<dir>.<file>`), and an import of
//! a package is one of every (non-test) file of that directory: the
//! reference names them as `project://<dir>/*.go`, which the resolver
//! expands. Calls and types are named in full (`pkg.F()` through its
//! import), so a name from another package or a built-in links to nothing.

use std::collections::HashMap;

use tree_sitter::Node;

use super::{
    comment_first_line, content_version, definition_views, dotted, header, just_above, text, Builder, Language, Root,
};

/// The `go.mod` files of a tree: where each module's import paths start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct GoModules {
    /// (directory relative to the root, module path), in path order.
    modules: Vec<(String, String)>,
}

impl GoModules {
    /// Reads the `module` line of a `go.mod` (`relative` to the root).
    pub(super) fn add(&mut self, relative: &str, text: &str) {
        let module = text.lines().find_map(|line| {
            let line = line.split("//").next().unwrap_or_default().trim();
            let path = line.strip_prefix("module")?;
            path.starts_with([' ', '\t', '"']).then(|| path.trim().trim_matches(['"', '`']))
        });
        if let Some(path) = module.filter(|p| !p.is_empty()) {
            self.modules.push((parent(relative).to_owned(), path.to_owned()));
            self.modules.sort();
        }
    }

    /// The directory (relative to the root) of the package `import`, imported
    /// from a file in `dir`: under the go.mod whose module path is the
    /// longest prefix of it (of two with the same path, the nearest above
    /// `dir`); none for a package from outside the tree.
    fn package_dir(&self, dir: &str, import: &str) -> Option<String> {
        let (module_dir, path) = self
            .modules
            .iter()
            .filter(|(_, path)| {
                import == path || import.strip_prefix(path.as_str()).is_some_and(|r| r.starts_with('/'))
            })
            .max_by_key(|(module_dir, path)| (path.len(), within(dir, module_dir), module_dir.len()))?;
        let rest = import[path.len()..].trim_start_matches('/');
        Some(match (module_dir.is_empty(), rest.is_empty()) {
            (_, true) => module_dir.clone(),
            (true, false) => rest.to_owned(),
            (false, false) => format!("{module_dir}/{rest}"),
        })
    }
}

/// True when `dir` is `ancestor` or under it (paths relative to the root).
fn within(dir: &str, ancestor: &str) -> bool {
    ancestor.is_empty() || dir == ancestor || dir.strip_prefix(ancestor).is_some_and(|r| r.starts_with('/'))
}

/// The directory of a path relative to the root (`""` for the root).
fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// The name an import of the package in `dir` has: the Go files of that
/// directory, which the resolver expands to their modules.
fn package_glob(dir: &str) -> String {
    if dir.is_empty() {
        "project://*.go".to_owned()
    } else {
        format!("project://{dir}/*.go")
    }
}

/// The name a package is used by when its import does not name it: the
/// last element of its path, without a major version (`.../v2`, `yaml.v3`).
fn default_name(import: &str) -> &str {
    let mut elements = import.rsplit('/');
    let last = elements.next().unwrap_or(import);
    let is_version =
        |s: &str| s.strip_prefix('v').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let last = match elements.next() {
        Some(previous) if is_version(last) => previous,
        _ => last,
    };
    match last.rsplit_once('.') {
        Some((name, version)) if is_version(version) => name,
        _ => last,
    }
}

/// Adds the definitions of the file at `path` (relative to the root), whose
/// module is `module`; returns its top-level symbol names.
pub(super) fn extract(
    out: &mut Builder,
    module: &str,
    path: &str,
    root: &Root,
    source: &str,
    tree: Node<'_>,
) -> Vec<String> {
    let dir = parent(path);
    let mut file = File {
        module: module.to_owned(),
        module_uri: format!("module://{module}"),
        package: package_path(&root.name, dir),
        imports: HashMap::new(),
        source,
    };
    // The methods of each type, for its outline (a type's methods in other files are not known here).
    let mut methods: HashMap<String, Vec<String>> = HashMap::new();
    let mut cursor = tree.walk();
    for item in tree.named_children(&mut cursor).filter(|i| i.kind() == "method_declaration") {
        if let (Some((_, ty)), Some(name)) = (receiver(item, source), item.child_by_field_name("name")) {
            methods.entry(ty.to_owned()).or_default().push(text(name, source).to_owned());
        }
    }
    let mut symbols = Vec::new();
    let mut later = Vec::new();
    let mut cursor = tree.walk();
    for item in tree.named_children(&mut cursor) {
        match item.kind() {
            "import_declaration" => file.imports(out, item, &root.imports.go_modules, dir, &root.name),
            "type_declaration" => symbols.extend(file.types(out, item, &methods)),
            "function_declaration" => symbols.extend(file.function(out, item)),
            // After the types: a method belongs to its type when the type is defined here.
            "method_declaration" => later.push(item),
            "package_clause" | "comment" => {}
            _ => file.uses(out, &file.module_uri, item, &[], None),
        }
    }
    for item in later {
        file.method(out, item);
    }
    symbols
}

/// The dotted path of the package in `dir` (the root's name for the root).
fn package_path(root_name: &str, dir: &str) -> String {
    dotted(root_name, dir.split('/').filter(|p| !p.is_empty()).map(str::to_owned).collect(), Language::Go)
}

/// A method's receiver: its name (none in `func (Store) f()`) and its type's
/// name, without pointer or type arguments (`*List[T]` is `List`).
fn receiver<'s>(method: Node<'_>, source: &'s str) -> Option<(Option<&'s str>, &'s str)> {
    let list = method.child_by_field_name("receiver")?;
    let mut cursor = list.walk();
    let parameter = list.named_children(&mut cursor).find(|p| p.kind() == "parameter_declaration")?;
    let name = parameter.child_by_field_name("name").map(|n| text(n, source));
    let mut ty = parameter.child_by_field_name("type")?;
    loop {
        match ty.kind() {
            "type_identifier" => return Some((name, text(ty, source))),
            "pointer_type" => ty = ty.named_child(0)?,
            "generic_type" => ty = ty.child_by_field_name("type")?,
            _ => return None,
        }
    }
}

/// Where a declaration's text starts (its comment lines right above), and
/// the first line of that comment, compiler directives (`//go:...`) aside.
fn doc_and_start(outer: Node<'_>, source: &str) -> (usize, Option<String>) {
    let mut run = Vec::new();
    let mut next = outer;
    let mut cur = outer.prev_named_sibling();
    while let Some(n) = cur.filter(|n| n.kind() == "comment" && just_above(*n, next)) {
        // A comment at the end of the line of code above belongs to that code.
        if n.prev_sibling().is_some_and(|p| p.end_position().row == n.start_position().row) {
            break;
        }
        run.push(n);
        next = n;
        cur = n.prev_named_sibling();
    }
    let directive = |c: &str| c.starts_with("//go:") || c.starts_with("//+build") || c.starts_with("//nolint");
    let doc = run.iter().rev().map(|c| text(*c, source)).find(|c| !directive(c)).and_then(comment_first_line);
    (run.last().map_or(outer.start_byte(), |c| c.start_byte()), doc)
}

/// The names a definition's type parameters declare (`T` in `[T any]`).
fn type_parameters<'s>(def: Node<'_>, source: &'s str, into: &mut Vec<&'s str>) {
    let Some(list) = def.child_by_field_name("type_parameters") else { return };
    let mut cursor = list.walk();
    for declaration in list.named_children(&mut cursor) {
        let mut inner = declaration.walk();
        into.extend(declaration.children_by_field_name("name", &mut inner).map(|n| text(n, source)));
    }
}

struct File<'s> {
    /// The file's dotted module path.
    module: String,
    module_uri: String,
    /// The package's dotted path: the namespace of its definitions.
    package: String,
    /// Each imported package by the name the file uses: its dotted path when
    /// it is in the tree, none when it comes from outside.
    imports: HashMap<&'s str, Option<String>>,
    source: &'s str,
}

impl<'s> File<'s> {
    fn imports(&mut self, out: &mut Builder, declaration: Node<'_>, modules: &GoModules, dir: &str, root_name: &str) {
        let mut specs = Vec::new();
        let mut stack = vec![declaration];
        while let Some(n) = stack.pop() {
            match n.kind() {
                "import_spec" => specs.push(n),
                _ => {
                    let mut cursor = n.walk();
                    stack.extend(n.named_children(&mut cursor));
                }
            }
        }
        for spec in specs {
            let Some(path) = spec.child_by_field_name("path").and_then(|p| p.named_child(0)) else { continue };
            let import = text(path, self.source);
            let package_dir = modules.package_dir(dir, import);
            if let Some(d) = &package_dir {
                out.reference(&self.module_uri, "imports", package_glob(d));
            }
            let name = match spec.child_by_field_name("name") {
                Some(n) if n.kind() == "package_identifier" => text(n, self.source),
                Some(_) => continue, // `_` or `.`: no name to call it by
                None => default_name(import),
            };
            self.imports.insert(name, package_dir.map(|d| package_path(root_name, &d)));
        }
    }

    /// `type X ...` and each type of a group `type ( ... )`.
    fn types(&self, out: &mut Builder, declaration: Node<'_>, methods: &HashMap<String, Vec<String>>) -> Vec<String> {
        let mut cursor = declaration.walk();
        let grouped = declaration.children(&mut cursor).any(|c| c.kind() == "(");
        let mut cursor = declaration.walk();
        let specs: Vec<Node<'_>> = declaration
            .named_children(&mut cursor)
            .filter(|s| matches!(s.kind(), "type_spec" | "type_alias"))
            .collect();
        let mut names = Vec::new();
        for spec in specs {
            // A type of a group has its comment inside the group.
            let outer = if grouped { spec } else { declaration };
            names.extend(self.type_spec(out, spec, outer, methods));
        }
        names
    }

    /// A type: a struct (its embedded types `inherits`), an interface (its
    /// methods, its embedded interfaces `inherits`) or any other type.
    fn type_spec(
        &self,
        out: &mut Builder,
        spec: Node<'_>,
        outer: Node<'_>,
        methods: &HashMap<String, Vec<String>>,
    ) -> Option<String> {
        let name = text(spec.child_by_field_name("name")?, self.source);
        let uri = format!("class://{}.{name}", self.package);
        let mut hidden = vec![name];
        type_parameters(spec, self.source, &mut hidden);
        let ty = spec.child_by_field_name("type")?;
        let mut listed = methods.get(name).cloned().unwrap_or_default();
        let cut = match ty.kind() {
            "struct_type" => {
                let fields = ty.named_children(&mut ty.walk()).find(|c| c.kind() == "field_declaration_list");
                if let Some(fields) = fields {
                    let mut cursor = fields.walk();
                    for field in fields.named_children(&mut cursor).filter(|f| f.kind() == "field_declaration") {
                        if field.child_by_field_name("name").is_none() {
                            self.embedded(out, &uri, field.child_by_field_name("type"));
                        } else {
                            self.uses(out, &uri, field, &hidden, None);
                        }
                    }
                }
                fields
            }
            "interface_type" => {
                let mut cursor = ty.walk();
                for element in ty.named_children(&mut cursor) {
                    match element.kind() {
                        "method_elem" => listed.extend(self.interface_method(out, &uri, name, element, &hidden)),
                        "type_elem" if element.named_child_count() == 1 => {
                            self.embedded(out, &uri, element.named_child(0))
                        }
                        "type_elem" => self.uses(out, &uri, element, &hidden, None),
                        _ => {}
                    }
                }
                // The `{` opening the interface's elements ends its header.
                let mut cursor = ty.walk();
                let open = ty.children(&mut cursor).find(|c| c.kind() == "{");
                open
            }
            _ => {
                self.uses(out, &uri, ty, &hidden, None);
                None
            }
        };
        let head = format!("type {}", header(spec, cut, self.source));
        let outline = matches!(ty.kind(), "struct_type" | "interface_type")
            .then(|| format!("{head}: methods={}", listed.join(",")));
        self.definition(out, &self.module_uri, &uri, "class", name, outline, &head, outer);
        Some(name.to_owned())
    }

    /// An embedded struct field or interface: `inherits` (when defined in the tree).
    fn embedded(&self, out: &mut Builder, from: &str, ty: Option<Node<'_>>) {
        let mut ty = ty;
        while let Some(t) = ty.filter(|t| matches!(t.kind(), "pointer_type" | "generic_type")) {
            ty = if t.kind() == "generic_type" { t.child_by_field_name("type") } else { t.named_child(0) };
        }
        if let Some(target) = ty.and_then(|t| self.type_uri(t)) {
            out.reference(from, "inherits", target);
        }
    }

    /// The class URI of a type name (`T`, `pkg.T`): none from outside the tree.
    fn type_uri(&self, ty: Node<'_>) -> Option<String> {
        match ty.kind() {
            "type_identifier" => Some(format!("class://{}.{}", self.package, text(ty, self.source))),
            "qualified_type" => {
                let package = text(ty.child_by_field_name("package")?, self.source);
                let name = text(ty.child_by_field_name("name")?, self.source);
                let dotted = self.imports.get(package)?.as_ref()?;
                Some(format!("class://{dotted}.{name}"))
            }
            _ => None,
        }
    }

    /// A method of an interface: `function://<package>.Interface.Method`.
    fn interface_method(
        &self,
        out: &mut Builder,
        interface: &str,
        interface_name: &str,
        element: Node<'_>,
        hidden: &[&str],
    ) -> Option<String> {
        let name = text(element.child_by_field_name("name")?, self.source);
        let uri = format!("function://{}.{interface_name}.{name}", self.package);
        self.uses(out, &uri, element, hidden, None);
        let head = header(element, None, self.source);
        self.definition(out, interface, &uri, "function", name, None, &head, element);
        Some(name.to_owned())
    }

    fn function(&self, out: &mut Builder, item: Node<'_>) -> Option<String> {
        let name = text(item.child_by_field_name("name")?, self.source);
        // Every file of a package may have its own `init`.
        let namespace = if name == "init" { &self.module } else { &self.package };
        let uri = format!("function://{namespace}.{name}");
        let mut hidden = Vec::new();
        type_parameters(item, self.source, &mut hidden);
        self.uses(out, &uri, item, &hidden, None);
        let head = header(item, item.child_by_field_name("body"), self.source);
        self.definition(out, &self.module_uri, &uri, "function", name, None, &head, item);
        Some(name.to_owned())
    }

    /// A method: its type's when the type is defined in this file, else the
    /// module's and (wherever in the package it is defined) its type's.
    fn method(&self, out: &mut Builder, item: Node<'_>) {
        let (Some((receiver_name, ty)), Some(name)) = (receiver(item, self.source), item.child_by_field_name("name"))
        else {
            return;
        };
        let name = text(name, self.source);
        let class_uri = format!("class://{}.{ty}", self.package);
        let uri = format!("function://{}.{ty}.{name}", self.package);
        // A generic receiver's parameters (`T` in `func (l List[T]) ...`) are not types of the package.
        let mut hidden = Vec::new();
        let mut stack: Vec<Node<'_>> = item.child_by_field_name("receiver").into_iter().collect();
        while let Some(n) = stack.pop() {
            if n.kind() == "type_identifier" && n.parent().is_some_and(|p| p.kind() == "type_elem") {
                hidden.push(text(n, self.source));
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        self.uses(out, &uri, item, &hidden, receiver_name.map(|r| (r, ty)));
        let head = header(item, item.child_by_field_name("body"), self.source);
        let parent = if out.has_node(&class_uri) {
            class_uri
        } else {
            out.contains(&class_uri, &uri);
            self.module_uri.clone()
        };
        self.definition(out, &parent, &uri, "function", name, None, &head, item);
    }

    /// Adds a class or function node: its views, its version (of its text
    /// with its comment), and `contains` from its parent.
    #[allow(clippy::too_many_arguments)]
    fn definition(
        &self,
        out: &mut Builder,
        parent: &str,
        uri: &str,
        kind: &str,
        name: &str,
        outline: Option<String>,
        head: &str,
        outer: Node<'_>,
    ) {
        let (start, doc) = doc_and_start(outer, self.source);
        let whole = &self.source[start..outer.end_byte()];
        let views = definition_views(name, outline, head, doc, whole);
        out.node(uri, kind, name, &content_version(whole.as_bytes()), views);
        out.contains(parent, uri);
    }

    /// The calls under `node` and the types it names (`references`, but
    /// those in `hidden`), as URIs: `f()` is this package's `f`, `pkg.F()`
    /// the imported package's (nothing when it is from outside the tree),
    /// `r.M()` on the method's `receiver` (name, type) that type's `M`; a
    /// method on another value is `.M`, resolved by name more warily.
    fn uses(&self, out: &mut Builder, from: &str, node: Node<'_>, hidden: &[&str], receiver: Option<(&str, &str)>) {
        let mut types = std::collections::BTreeSet::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            match n.kind() {
                "call_expression" => {
                    if let Some(called) = n.child_by_field_name("function").and_then(|f| self.called(f, receiver)) {
                        out.reference(from, "calls", called);
                    }
                }
                // `Generic[int](x)`: a call of an instantiated generic function.
                "type_conversion_expression" => {
                    let generic = n.child_by_field_name("type").filter(|t| t.kind() == "generic_type");
                    if let Some(function) = generic.and_then(|g| g.child_by_field_name("type")) {
                        if let Some(class) = self.type_uri(function) {
                            out.reference(from, "calls", class.replacen("class://", "function://", 1));
                        }
                    }
                }
                "type_identifier" if !hidden.contains(&text(n, self.source)) => {
                    types.extend(self.type_uri(n));
                }
                "qualified_type" => {
                    types.extend(self.type_uri(n));
                    continue;
                }
                _ => {}
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        for uri in types {
            out.reference(from, "references", uri);
        }
    }

    /// What a call's `function` names (see [`File::uses`]).
    fn called(&self, f: Node<'_>, receiver: Option<(&str, &str)>) -> Option<String> {
        match f.kind() {
            "identifier" => Some(format!("function://{}.{}", self.package, text(f, self.source))),
            "selector_expression" => {
                let field = text(f.child_by_field_name("field")?, self.source);
                let operand = f.child_by_field_name("operand").filter(|o| o.kind() == "identifier");
                let operand = operand.map(|o| text(o, self.source));
                match (operand, receiver) {
                    (Some(o), Some((r, ty))) if o == r => Some(format!("function://{}.{ty}.{field}", self.package)),
                    (Some(o), _) if self.imports.contains_key(o) => {
                        let dotted = self.imports[o].as_ref()?;
                        Some(format!("function://{dotted}.{field}"))
                    }
                    _ => Some(format!(".{field}")),
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_lead_to_package_directories_through_go_mod() {
        let mut m = GoModules::default();
        m.add("go.mod", "// the service\nmodule example.com/svc // main\n\ngo 1.22\n");
        m.add("tools/go.mod", "module \"example.com/svc/tools\"\n");
        assert_eq!(m.package_dir("cmd", "example.com/svc/internal/store").as_deref(), Some("internal/store"));
        assert_eq!(m.package_dir("cmd", "example.com/svc").as_deref(), Some(""));
        assert_eq!(m.package_dir("", "example.com/svc/tools/gen").as_deref(), Some("tools/gen"));
        assert_eq!(m.package_dir("", "example.com/svcx/a"), None);
        assert_eq!(m.package_dir("", "fmt"), None);
    }

    #[test]
    fn a_package_is_called_by_its_last_element_without_a_version() {
        assert_eq!(default_name("example.com/svc/internal/store"), "store");
        assert_eq!(default_name("github.com/x/lib/v2"), "lib");
        assert_eq!(default_name("gopkg.in/yaml.v3"), "yaml");
        assert_eq!(default_name("fmt"), "fmt");
        assert_eq!(package_glob("a/b"), "project://a/b/*.go");
        assert_eq!(package_glob(""), "project://*.go");
    }
}
