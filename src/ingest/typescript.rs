//! TypeScript, TSX and JavaScript files (JavaScript and JSX read with the
//! TSX grammar, a superset of both): classes, interfaces, type aliases and
//! enums (`class://module.Name`), functions, arrow functions and function
//! expressions bound to a top-level name, and methods (`function://module.name`,
//! `module.Class.method`), namespaces (`module://module.NS`), imports
//! (`import`, `export ... from`, `require()`, `import()`), calls, `new`,
//! JSX components, `extends` and `implements`.

use tree_sitter::Node;

use super::{
    comment_first_line, content_version, definition_views, dotted, just_above, text, Builder, Language, Root,
    MAX_NESTING,
};

/// Adds the definitions of the file at `path` (relative to the root), whose
/// module is `module`; returns its top-level symbol names.
pub(super) fn extract(
    out: &mut Builder,
    module: &str,
    path: &str,
    language: Language,
    root: &Root,
    source: &str,
    tree: Node<'_>,
) -> Vec<String> {
    let mut m = Module {
        module: module.to_owned(),
        file_module: format!("module://{module}"),
        path,
        language,
        root,
        this: None,
        nesting: 0,
        source,
    };
    m.items(out, tree)
}

struct Module<'a> {
    /// Dotted path of the module (or namespace) being read.
    module: String,
    /// The file's module: what its imports come from.
    file_module: String,
    /// The file, relative to the root.
    path: &'a str,
    language: Language,
    root: &'a Root,
    /// The dotted path of the class whose members are being read: what `this` is.
    this: Option<String>,
    /// Namespaces entered so far.
    nesting: usize,
    source: &'a str,
}

/// Where a definition's text starts (its JSDoc comment right above, else
/// its first decorator), and the first line of that comment. `outer` is
/// the statement that holds it: an `export` statement, a declaration, a
/// class member (whose decorators are its siblings).
fn doc_and_start(outer: Node<'_>, source: &str) -> (usize, Option<String>) {
    let mut first = outer;
    let mut cur = outer.prev_named_sibling();
    while let Some(n) = cur {
        match n.kind() {
            "decorator" => first = n,
            "comment" if text(n, source).starts_with("/**") && just_above(n, first) => {
                return (n.start_byte(), comment_first_line(text(n, source)));
            }
            _ => break,
        }
        cur = n.prev_named_sibling();
    }
    (first.start_byte(), None)
}

/// Where a definition's header starts: past the decorators, at `export`,
/// `class`, `function`, `const`...
fn head_start(outer: Node<'_>) -> usize {
    let mut cursor = outer.walk();
    let first = outer.children(&mut cursor).find(|c| !matches!(c.kind(), "decorator" | "comment"));
    first.unwrap_or(outer).start_byte()
}

/// A definition's header, from `start` to its body (`None`: all of it), on one line.
fn head_from(start: usize, def: Node<'_>, body: Option<Node<'_>>, source: &str) -> String {
    let end = body.map_or(def.end_byte(), |b| b.start_byte());
    let head = &source[start.min(end)..end];
    head.split_whitespace().collect::<Vec<_>>().join(" ").trim_end_matches(['{', ';']).trim_end().to_owned()
}

/// The type parameters a definition declares (`T` in `f<T>()`): not references.
fn type_parameters<'s>(def: Node<'_>, source: &'s str, into: &mut Vec<&'s str>) {
    if let Some(params) = def.child_by_field_name("type_parameters") {
        let mut cursor = params.walk();
        for p in params.named_children(&mut cursor) {
            if let Some(name) = p.child_by_field_name("name") {
                into.push(text(name, source));
            }
        }
    }
}

/// The name a type is written with, without its module or arguments: `ns.Other<X>` is `Other`.
fn type_name<'s>(ty: Node<'_>, source: &'s str) -> Option<&'s str> {
    match ty.kind() {
        "type_identifier" | "identifier" => Some(text(ty, source)),
        "nested_type_identifier" | "generic_type" => type_name(ty.child_by_field_name("name")?, source),
        "member_expression" => Some(text(ty.child_by_field_name("property")?, source)),
        _ => None,
    }
}

/// The module specifier of a string literal, without quotes; none for `""` or a template.
fn string_value<'s>(string: Node<'_>, source: &'s str) -> Option<&'s str> {
    if string.kind() != "string" {
        return None;
    }
    let mut cursor = string.walk();
    let fragment = string.named_children(&mut cursor).find(|c| c.kind() == "string_fragment");
    fragment.map(|f| text(f, source))
}

impl Module<'_> {
    fn uri(&self, scheme: &str, name: &str) -> String {
        format!("{scheme}://{}.{name}", self.module)
    }

    fn items(&mut self, out: &mut Builder, list: Node<'_>) -> Vec<String> {
        let module_uri = format!("module://{}", self.module);
        let mut symbols = Vec::new();
        let mut cursor = list.walk();
        for item in list.named_children(&mut cursor) {
            symbols.extend(self.statement(out, &module_uri, item, item));
        }
        symbols
    }

    /// One statement of a module or namespace; `outer` is the `export`
    /// statement around it, or itself. Returns the names it defines.
    fn statement(&mut self, out: &mut Builder, parent: &str, node: Node<'_>, outer: Node<'_>) -> Vec<String> {
        let mut names = Vec::new();
        match node.kind() {
            "import_statement" => self.import(out, node),
            "export_statement" => {
                if node.child_by_field_name("source").is_some() {
                    self.import(out, node);
                } else if let Some(declaration) = node.child_by_field_name("declaration") {
                    return self.statement(out, parent, declaration, node);
                } else {
                    self.uses(out, parent, node, &[]);
                }
            }
            "class_declaration" | "abstract_class_declaration" => {
                names.extend(self.class(out, parent, node, outer, None));
            }
            "interface_declaration" => names.extend(self.interface(out, parent, node, outer)),
            "type_alias_declaration" | "enum_declaration" => {
                names.extend(self.type_definition(out, parent, node, outer))
            }
            "function_declaration" | "generator_function_declaration" | "function_signature" => {
                names.extend(self.function(out, parent, "", node, outer, None, &[]));
            }
            "lexical_declaration" | "variable_declaration" => {
                let mut cursor = node.walk();
                for declarator in node.named_children(&mut cursor).filter(|d| d.kind() == "variable_declarator") {
                    // The declaration's header for its first declarator, the declarator's for the others.
                    let start = (node.named_child(0) != Some(declarator)).then(|| declarator.start_byte());
                    names.extend(self.declarator(out, parent, declarator, outer, start));
                }
            }
            "ambient_declaration" => {
                // `declare function f(): void;`, `declare namespace NS {}`; not `declare module "x"` or `global`.
                let mut cursor = node.walk();
                for inner in node.named_children(&mut cursor) {
                    names.extend(self.statement(out, parent, inner, outer));
                }
            }
            "internal_module" | "module" => names.extend(self.namespace(out, parent, node, outer)),
            "expression_statement" => match node.named_child(0) {
                Some(inner) if inner.kind() == "internal_module" => {
                    names.extend(self.namespace(out, parent, inner, outer));
                }
                Some(inner) if inner.kind() == "assignment_expression" => {
                    names.extend(self.commonjs_export(out, parent, inner, outer));
                }
                _ => self.uses(out, parent, node, &[]),
            },
            _ => self.uses(out, parent, node, &[]),
        }
        names
    }

    /// `const f = () => ...`, `const g = function () {}`, `const C = class {}`;
    /// any other value is code of the module.
    fn declarator(
        &mut self,
        out: &mut Builder,
        parent: &str,
        declarator: Node<'_>,
        outer: Node<'_>,
        start: Option<usize>,
    ) -> Option<String> {
        let value = declarator.child_by_field_name("value");
        let name = declarator.child_by_field_name("name").filter(|n| n.kind() == "identifier");
        match (name, value) {
            (Some(name), Some(v))
                if matches!(v.kind(), "arrow_function" | "function_expression" | "generator_function") =>
            {
                self.function(out, parent, "", v, outer, Some((text(name, self.source), start)), &[])
            }
            (Some(name), Some(v)) if v.kind() == "class" => {
                self.class(out, parent, v, outer, Some(text(name, self.source)))
            }
            _ => {
                if let Some(v) = value {
                    self.uses(out, parent, v, &[]);
                }
                None
            }
        }
    }

    /// CommonJS: `exports.f = function () {}`, `module.exports.f = () => ...`.
    fn commonjs_export(
        &mut self,
        out: &mut Builder,
        parent: &str,
        assignment: Node<'_>,
        outer: Node<'_>,
    ) -> Option<String> {
        let left = assignment.child_by_field_name("left").filter(|l| l.kind() == "member_expression");
        let right = assignment.child_by_field_name("right");
        let target = left.and_then(|l| Some((l.child_by_field_name("object")?, l.child_by_field_name("property")?)));
        match (target, right) {
            (Some((object, property)), Some(value))
                if matches!(text(object, self.source), "exports" | "module.exports")
                    && matches!(value.kind(), "arrow_function" | "function_expression") =>
            {
                let name = text(property, self.source);
                self.function(out, parent, "", value, outer, Some((name, None)), &[])
            }
            _ => {
                self.uses(out, parent, assignment, &[]);
                None
            }
        }
    }

    /// `namespace NS { ... }` (and `module NS`): a module of its own, whose nodes belong to the file.
    fn namespace(&mut self, out: &mut Builder, parent: &str, node: Node<'_>, outer: Node<'_>) -> Option<String> {
        let name = node.child_by_field_name("name").filter(|n| n.kind() != "string")?;
        let name = text(name, self.source).to_owned();
        let child = format!("{}.{name}", self.module);
        let child_uri = format!("module://{child}");
        out.contains(parent, &child_uri);
        // Namespaces nested deeper than MAX_NESTING are left out.
        if let Some(body) = node.child_by_field_name("body").filter(|_| self.nesting < MAX_NESTING) {
            let outer_module = std::mem::replace(&mut self.module, child.clone());
            self.nesting += 1;
            let inner = self.items(out, body);
            self.nesting -= 1;
            self.module = outer_module;
            let line = format!("[MODULE_GRAPH]: symbols={}", inner.join(","));
            let version = content_version(text(outer, self.source).as_bytes());
            out.node(&child_uri, "module", &child, &version, vec![(0, child.clone()), (1, line)]);
        }
        Some(name)
    }

    /// `import ... from "x"`, `import "x"`, `import x = require("x")`,
    /// `export ... from "x"`: `x`'s module, and `x`'s module `.Name` for
    /// each name imported (which resolves to that definition, or to the module).
    fn import(&self, out: &mut Builder, node: Node<'_>) {
        let mut whole = false;
        let mut names = Vec::new();
        let mut source = node.child_by_field_name("source");
        let mut cursor = node.walk();
        for part in node.named_children(&mut cursor) {
            match part.kind() {
                "import_clause" => {
                    let mut inner = part.walk();
                    for binding in part.named_children(&mut inner) {
                        match binding.kind() {
                            "named_imports" => names.extend(self.specifier_names(binding, "import_specifier")),
                            _ => whole = true, // a default or namespace import
                        }
                    }
                }
                "export_clause" => names.extend(self.specifier_names(part, "export_specifier")),
                "import_require_clause" => source = part.child_by_field_name("source"),
                _ => {}
            }
        }
        let Some(specifier) = source.and_then(|s| string_value(s, self.source)) else { return };
        if names.is_empty() {
            whole = true;
        }
        for module in self.modules_of(specifier) {
            if whole {
                out.reference(&self.file_module, "imports", module.clone());
            }
            for name in &names {
                out.reference(&self.file_module, "imports", format!("{module}.{name}"));
            }
        }
    }

    /// The names `{ a, b as c }` imports or re-exports: `a`, `b`.
    fn specifier_names(&self, list: Node<'_>, kind: &str) -> Vec<String> {
        let mut cursor = list.walk();
        let names = list.named_children(&mut cursor).filter(|s| s.kind() == kind);
        names
            .filter_map(|s| s.child_by_field_name("name"))
            .filter(|n| n.kind() == "identifier")
            .map(|n| text(n, self.source).to_owned())
            .collect()
    }

    /// The dotted paths of the modules a specifier may name (see `tsconfig.rs`).
    fn modules_of(&self, specifier: &str) -> Vec<String> {
        let targets = self.root.imports.tsconfigs.targets(self.path, specifier);
        targets
            .into_iter()
            .map(|t| {
                let parts = t.split('/').filter(|p| !p.is_empty()).map(str::to_owned).collect();
                dotted(&self.root.name, parts, self.language)
            })
            .collect()
    }

    /// A class (`name` given for `const C = class {}`), its methods and its
    /// `extends` (`inherits`) and `implements`.
    fn class(
        &mut self,
        out: &mut Builder,
        parent: &str,
        decl: Node<'_>,
        outer: Node<'_>,
        name: Option<&str>,
    ) -> Option<String> {
        let name = match name {
            Some(n) => n,
            None => text(decl.child_by_field_name("name")?, self.source),
        }
        .to_owned();
        let uri = self.uri("class", &name);
        let mut hidden = vec![name.as_str()];
        type_parameters(decl, self.source, &mut hidden);
        let mut cursor = decl.walk();
        let heritage = decl.named_children(&mut cursor).find(|c| c.kind() == "class_heritage");
        if let Some(heritage) = heritage {
            let mut cursor = heritage.walk();
            for clause in heritage.named_children(&mut cursor) {
                let mut inner = clause.walk();
                let (relation, types): (&'static str, Vec<Node<'_>>) = match clause.kind() {
                    "extends_clause" => ("inherits", clause.children_by_field_name("value", &mut inner).collect()),
                    "implements_clause" => ("implements", clause.named_children(&mut inner).collect()),
                    _ => continue,
                };
                for ty in types {
                    if let Some(base) = type_name(ty, self.source) {
                        out.reference(&uri, relation, base);
                    }
                }
            }
        }
        let body = decl.child_by_field_name("body");
        let prefix = format!("{name}.");
        let mut methods: Vec<String> = Vec::new();
        let mut fields = Vec::new();
        let enclosing = self.this.replace(format!("{}.{name}", self.module));
        if let Some(body) = body {
            let mut cursor = body.walk();
            for member in body.named_children(&mut cursor) {
                let method = match member.kind() {
                    "method_definition" | "method_signature" | "abstract_method_signature" => {
                        let key = member.child_by_field_name("name").map(|n| text(n, self.source));
                        key.and_then(|k| self.function(out, &uri, &prefix, member, member, Some((k, None)), &hidden))
                    }
                    "public_field_definition" | "field_definition" => {
                        let value = member.child_by_field_name("value");
                        let key = member.child_by_field_name("name").or_else(|| member.child_by_field_name("property"));
                        match (key, value) {
                            // `handler = () => { ... }`: a method.
                            (Some(key), Some(v)) if matches!(v.kind(), "arrow_function" | "function_expression") => {
                                let k = text(key, self.source);
                                self.function(out, &uri, &prefix, v, member, Some((k, None)), &hidden)
                            }
                            _ => {
                                fields.push(member);
                                None
                            }
                        }
                    }
                    "class_static_block" => {
                        self.uses(out, &uri, member, &hidden);
                        None
                    }
                    _ => None,
                };
                if let Some(m) = method.filter(|m| !methods.contains(m)) {
                    methods.push(m);
                }
            }
        }
        for field in fields {
            self.uses(out, &uri, field, &hidden);
        }
        self.this = enclosing;
        let start = if outer == decl { head_start(decl) } else { head_start(outer) };
        let head = head_from(start, decl, body, self.source);
        let outline = format!("{head}: methods={}", methods.join(","));
        self.definition(out, parent, &uri, "class", &name, Some(outline), &head, outer);
        Some(name)
    }

    /// An interface (a class node, like a Rust trait): its method signatures
    /// are methods, the interfaces it extends `inherits`.
    fn interface(&self, out: &mut Builder, parent: &str, decl: Node<'_>, outer: Node<'_>) -> Option<String> {
        let name = text(decl.child_by_field_name("name")?, self.source).to_owned();
        let uri = self.uri("class", &name);
        let mut hidden = vec![name.as_str()];
        type_parameters(decl, self.source, &mut hidden);
        let mut cursor = decl.walk();
        if let Some(extends) = decl.named_children(&mut cursor).find(|c| c.kind() == "extends_type_clause") {
            let mut inner = extends.walk();
            for ty in extends.children_by_field_name("type", &mut inner) {
                if let Some(base) = type_name(ty, self.source) {
                    out.reference(&uri, "inherits", base);
                }
            }
        }
        let body = decl.child_by_field_name("body");
        let prefix = format!("{name}.");
        let mut methods: Vec<String> = Vec::new();
        if let Some(body) = body {
            let mut cursor = body.walk();
            for member in body.named_children(&mut cursor) {
                if member.kind() == "method_signature" {
                    let Some(k) = member.child_by_field_name("name").map(|n| text(n, self.source)) else { continue };
                    if let Some(m) = self.function(out, &uri, &prefix, member, member, Some((k, None)), &hidden) {
                        if !methods.contains(&m) {
                            methods.push(m);
                        }
                    }
                } else if member.kind() != "comment" {
                    self.uses(out, &uri, member, &hidden);
                }
            }
        }
        let start = if outer == decl { head_start(decl) } else { head_start(outer) };
        let head = head_from(start, decl, body, self.source);
        let outline = format!("{head}: methods={}", methods.join(","));
        self.definition(out, parent, &uri, "class", &name, Some(outline), &head, outer);
        Some(name)
    }

    /// `type T = ...` and `enum E { ... }`: class nodes; the types they name are references.
    fn type_definition(&self, out: &mut Builder, parent: &str, decl: Node<'_>, outer: Node<'_>) -> Option<String> {
        let name = text(decl.child_by_field_name("name")?, self.source).to_owned();
        let uri = self.uri("class", &name);
        let mut hidden = vec![name.as_str()];
        type_parameters(decl, self.source, &mut hidden);
        if let Some(value) = decl.child_by_field_name("value") {
            self.uses(out, &uri, value, &hidden);
        }
        // An object type is a body: `type Props = { ... }` shows as `type Props`.
        let body = decl
            .child_by_field_name("body")
            .or_else(|| decl.child_by_field_name("value").filter(|v| v.kind() == "object_type"));
        let start = if outer == decl { head_start(decl) } else { head_start(outer) };
        let head = head_from(start, decl, body, self.source).trim_end_matches('=').trim_end().to_owned();
        self.definition(out, parent, &uri, "class", &name, None, &head, outer);
        Some(name)
    }

    /// A function, method, arrow function or function expression `def`,
    /// named by its own `name` or by `named` (with where its header starts
    /// when not at `outer`'s start); `hidden` are the enclosing class's type parameters.
    #[allow(clippy::too_many_arguments)]
    fn function(
        &self,
        out: &mut Builder,
        parent: &str,
        prefix: &str,
        def: Node<'_>,
        outer: Node<'_>,
        named: Option<(&str, Option<usize>)>,
        hidden: &[&str],
    ) -> Option<String> {
        let (name, start) = match named {
            Some((n, start)) => (n.to_owned(), start),
            None => (text(def.child_by_field_name("name")?, self.source).to_owned(), None),
        };
        let uri = self.uri("function", &format!("{prefix}{name}"));
        let mut hidden = hidden.to_vec();
        type_parameters(def, self.source, &mut hidden);
        let body = def.child_by_field_name("body");
        self.uses(out, &uri, def, &hidden);
        let start = start.unwrap_or_else(|| head_start(outer));
        let head = head_from(start, def, body, self.source);
        self.definition(out, parent, &uri, "function", &name, None, &head, outer);
        Some(name)
    }

    /// Adds a class or function node: its views, its version (of its text
    /// with its JSDoc and decorators), and `contains` from its parent.
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

    /// Every call, `new`, JSX component, `require()` and `import()` under
    /// `node`, and the types it names (`references`, but those in `hidden`).
    /// Calls are by the called name's last part (`f()`, `this.f()` as `f`;
    /// `x.f()` as `.f`, resolved more warily); `new C()` and `<C />` both
    /// call `C` (a function) and reference it (a class). Imports are the
    /// file module's.
    fn uses(&self, out: &mut Builder, from: &str, node: Node<'_>, hidden: &[&str]) {
        let mut types = std::collections::BTreeSet::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            match n.kind() {
                "call_expression" => self.call(out, from, n),
                "new_expression" => {
                    if let Some(class) = n.child_by_field_name("constructor").and_then(|c| type_name(c, self.source)) {
                        out.reference(from, "calls", class);
                        out.reference(from, "references", class);
                    }
                }
                "jsx_opening_element" | "jsx_self_closing_element" => {
                    let name = n.child_by_field_name("name").and_then(|c| type_name(c, self.source));
                    // A capitalised name is a component; a lower-case one an HTML element.
                    if let Some(component) = name.filter(|c| c.starts_with(|c: char| c.is_ascii_uppercase())) {
                        out.reference(from, "calls", component);
                        out.reference(from, "references", component);
                    }
                }
                "type_identifier" => {
                    types.insert(text(n, self.source));
                }
                "nested_type_identifier" => {
                    types.extend(type_name(n, self.source));
                    continue;
                }
                _ => {}
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        for name in types.into_iter().filter(|t| !hidden.contains(t)) {
            out.reference(from, "references", name);
        }
    }

    fn call(&self, out: &mut Builder, from: &str, call: Node<'_>) {
        let Some(f) = call.child_by_field_name("function") else { return };
        let argument = || {
            let arguments = call.child_by_field_name("arguments")?;
            string_value(arguments.named_child(0)?, self.source)
        };
        let dynamic = f.kind() == "import" || (f.kind() == "identifier" && text(f, self.source) == "require");
        match f.kind() {
            // `require("x")`, `import("x")`: imports of the file's module.
            _ if dynamic => {
                for module in argument().map(|s| self.modules_of(s)).unwrap_or_default() {
                    out.reference(&self.file_module, "imports", module);
                }
            }
            "identifier" => out.reference(from, "calls", text(f, self.source)),
            "member_expression" => {
                let Some(property) = f.child_by_field_name("property") else { return };
                let object = f.child_by_field_name("object").map(|o| o.kind());
                let name = text(property, self.source);
                match (object, &self.this) {
                    // `this.f()`: this class's `f` when it has one (a method of the
                    // same name elsewhere in the file cannot take it), else by name.
                    (Some("this"), Some(class)) => {
                        out.reference(from, "calls", format!("function://{class}.{name}"));
                        out.reference(from, "calls", name);
                    }
                    (Some("this" | "super"), _) => out.reference(from, "calls", name),
                    _ => out.reference(from, "calls", format!(".{name}")),
                }
            }
            _ => {}
        }
    }
}
