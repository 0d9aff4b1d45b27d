//! Rust files: structs, enums, unions and traits (`class://module.Name`),
//! functions and methods (`function://module.name`, `module.Type.method`),
//! inline and file modules, `use` paths, calls and `impl Trait for Type`.

use tree_sitter::Node;

use super::{content_version, definition_views, first_line, header, text, Builder, MAX_NESTING};

/// Adds the definitions of a module; returns its top-level symbol names.
pub(super) fn extract(
    out: &mut Builder,
    module: &str,
    crate_prefix: &str,
    root_name: &str,
    crate_root: bool,
    source: &str,
    root: Node<'_>,
) -> Vec<String> {
    let mut m = Module {
        module: module.to_owned(),
        crate_prefix: crate_prefix.to_owned(),
        root_name: root_name.to_owned(),
        crate_root,
        nesting: 0,
        source,
    };
    m.items(out, root)
}

struct Module<'s> {
    /// Dotted path of the module being read.
    module: String,
    /// What `crate::` stands for: `""` for a crate at the root, `a.b.` for one under `a/b/src`.
    crate_prefix: String,
    /// The walked root's name: the module of a crate root at the top (`src/lib.rs`).
    root_name: String,
    /// The file is a crate's root (`src/lib.rs`, `src/main.rs`).
    crate_root: bool,
    /// Inline modules entered so far.
    nesting: usize,
    source: &'s str,
}

/// The last segment of a path or type, without generic arguments: `a::B<T>` is `B`.
fn last_name(written: &str) -> &str {
    let plain = written.split('<').next().unwrap_or(written).trim();
    let plain = plain.trim_start_matches('&').trim_start_matches("mut ").trim_start_matches("dyn ").trim();
    plain.rsplit("::").next().unwrap_or(plain).trim()
}

/// Where an item's text starts: at the first `///` comment or attribute
/// right above it, so that editing either changes the item's version.
fn item_start(item: Node<'_>, source: &str) -> usize {
    let mut start = item.start_byte();
    let mut cur = item.prev_named_sibling();
    while let Some(n) = cur {
        let doc = n.kind() == "line_comment" && text(n, source).starts_with("///");
        if !(doc || n.kind() == "attribute_item") {
            break;
        }
        start = n.start_byte();
        cur = n.prev_named_sibling();
    }
    start
}

/// The first line of the `///` comments above an item (attributes between are passed over).
fn doc_comment(item: Node<'_>, source: &str) -> Option<String> {
    let mut doc = None;
    let mut cur = item.prev_named_sibling();
    while let Some(n) = cur {
        match n.kind() {
            "attribute_item" => {}
            "line_comment" if text(n, source).starts_with("///") => doc = Some(text(n, source).to_owned()),
            _ => break,
        }
        cur = n.prev_named_sibling();
    }
    doc.and_then(|d| first_line(&d))
}

impl Module<'_> {
    fn uri(&self, scheme: &str, name: &str) -> String {
        format!("{scheme}://{}.{name}", self.module)
    }

    /// A child module's dotted path (the crate root's children are top-level).
    fn child(&self, name: &str, at_crate_root: bool) -> String {
        if at_crate_root {
            format!("{}{name}", self.crate_prefix)
        } else {
            format!("{}.{name}", self.module)
        }
    }

    fn items(&mut self, out: &mut Builder, list: Node<'_>) -> Vec<String> {
        let module_uri = format!("module://{}", self.module);
        // `mod x;` in a crate root is module `x` (under the crate's prefix); anywhere else `this.x`.
        let at_crate_root = self.crate_root && self.nesting == 0;
        let mut symbols = Vec::new();
        let mut impls = Vec::new();
        let mut cursor = list.walk();
        for item in list.named_children(&mut cursor) {
            match item.kind() {
                "struct_item" | "enum_item" | "union_item" | "trait_item" => {
                    if let Some(name) = self.class(out, &module_uri, item) {
                        symbols.push(name);
                    }
                }
                "function_item" => {
                    if let Some(name) = self.function(out, &module_uri, "", item) {
                        symbols.push(name);
                    }
                }
                "impl_item" => impls.push(item),
                "mod_item" => {
                    let Some(name) = item.child_by_field_name("name").map(|n| text(n, self.source)) else { continue };
                    let child = self.child(name, at_crate_root);
                    let child_uri = format!("module://{child}");
                    out.contains(&module_uri, &child_uri);
                    symbols.push(name.to_owned());
                    if let Some(body) = item.child_by_field_name("body").filter(|_| self.nesting < MAX_NESTING) {
                        // An inline module: its items are nodes of this file.
                        let outer = std::mem::replace(&mut self.module, child.clone());
                        self.nesting += 1;
                        let inner = self.items(out, body);
                        self.nesting -= 1;
                        self.module = outer;
                        let whole = text(item, self.source);
                        let line = format!("[MODULE_GRAPH]: symbols={}", inner.join(","));
                        out.node(
                            &child_uri,
                            "module",
                            &child,
                            &content_version(whole.as_bytes()),
                            vec![(0, child.clone()), (1, line)],
                        );
                    }
                }
                "use_declaration" => {
                    if let Some(arg) = item.child_by_field_name("argument") {
                        let mut paths = Vec::new();
                        flatten_use("", text(arg, self.source), 0, &mut paths);
                        for p in paths {
                            let dotted = self.resolve_path(&p);
                            out.reference(&module_uri, "imports", dotted);
                        }
                    }
                }
                _ => {}
            }
        }
        // After the types: an impl's methods belong to its type when the type is defined here.
        for item in impls {
            self.implementation(out, &module_uri, item);
        }
        symbols
    }

    /// `crate::a::b` (or `self::`, `super::`, a bare path) as a dotted path from the crate root.
    fn resolve_path(&self, path: &str) -> String {
        let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let mut base: Vec<String> = Vec::new();
        let at_crate_root = self.crate_root && self.nesting == 0;
        let first = segments.first().copied();
        match first {
            // In a crate root, `self::` is `crate::`.
            Some("crate") | Some("self") if first == Some("crate") || at_crate_root => {
                segments.remove(0);
                let prefix: Vec<String> = self
                    .crate_prefix
                    .trim_end_matches('.')
                    .split('.')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                if prefix.is_empty() && segments.len() == 1 {
                    // `crate::Error`: an item of the top crate's root itself.
                    base.push(self.root_name.clone());
                } else {
                    base.extend(prefix);
                }
            }
            Some("self") | Some("super") => {
                base.extend(self.module.split('.').map(String::from));
                while let Some(&s) = segments.first() {
                    match s {
                        "self" => {}
                        "super" => {
                            base.pop();
                        }
                        _ => break,
                    }
                    segments.remove(0);
                }
            }
            _ => {}
        }
        base.extend(segments.iter().map(|s| s.to_string()));
        base.join(".")
    }

    fn class(&mut self, out: &mut Builder, parent: &str, item: Node<'_>) -> Option<String> {
        let name = text(item.child_by_field_name("name")?, self.source).to_owned();
        let uri = self.uri("class", &name);
        let body = item.child_by_field_name("body");
        let mut methods = Vec::new();
        if item.kind() == "trait_item" {
            if let Some(body) = body {
                let mut cursor = body.walk();
                for m in body.named_children(&mut cursor) {
                    if matches!(m.kind(), "function_item" | "function_signature_item") {
                        if let Some(n) = self.function(out, &uri, &format!("{name}."), m) {
                            methods.push(n);
                        }
                    }
                }
            }
        }
        // A tuple struct's fields are its signature: `struct Square(pub f64)`.
        let cut = body.filter(|b| b.kind() != "ordered_field_declaration_list");
        let head = header(item, cut, self.source);
        types(out, &uri, item, &name, self.source);
        let outline = (!methods.is_empty()).then(|| format!("{head}: methods={}", methods.join(",")));
        let whole = &self.source[item_start(item, self.source)..item.end_byte()];
        let views = definition_views(&name, outline, &head, doc_comment(item, self.source), whole);
        out.node(&uri, "class", &name, &content_version(whole.as_bytes()), views);
        out.contains(parent, &uri);
        Some(name)
    }

    fn function(&mut self, out: &mut Builder, parent: &str, prefix: &str, item: Node<'_>) -> Option<String> {
        let name = text(item.child_by_field_name("name")?, self.source).to_owned();
        let uri = self.uri("function", &format!("{prefix}{name}"));
        let body = item.child_by_field_name("body");
        if let Some(body) = body {
            calls(out, &uri, body, self.source);
        }
        types(out, &uri, item, "", self.source);
        let head = header(item, body, self.source);
        let whole = &self.source[item_start(item, self.source)..item.end_byte()];
        let views = definition_views(&name, None, &head, doc_comment(item, self.source), whole);
        out.node(&uri, "function", &name, &content_version(whole.as_bytes()), views);
        out.contains(parent, &uri);
        Some(name)
    }

    /// `impl [Trait for] Type { fn ... }`: methods as `Type.method`.
    fn implementation(&mut self, out: &mut Builder, module_uri: &str, item: Node<'_>) {
        let Some(ty) = item.child_by_field_name("type") else { return };
        let ty = last_name(text(ty, self.source)).to_owned();
        let class_uri = self.uri("class", &ty);
        let defined_here = out.has_node(&class_uri);
        if let (Some(t), true) = (item.child_by_field_name("trait"), defined_here) {
            out.reference(&class_uri, "implements", last_name(text(t, self.source)));
        }
        let parent = if defined_here { class_uri } else { module_uri.to_owned() };
        if let Some(body) = item.child_by_field_name("body") {
            let mut cursor = body.walk();
            for m in body.named_children(&mut cursor) {
                if m.kind() == "function_item" {
                    self.function(out, &parent, &format!("{ty}."), m);
                }
            }
        }
    }
}

/// `a::{b, c::{d, e as f}, self}` into `a::b`, `a::c::d`, `a::c::e`, `a`.
fn flatten_use(prefix: &str, written: &str, nesting: usize, out: &mut Vec<String>) {
    if nesting >= MAX_NESTING {
        return; // lists nested this deep are left out
    }
    let written = written.trim();
    let join = |a: &str, b: &str| if a.is_empty() { b.to_owned() } else { format!("{a}::{b}") };
    if let (Some(open), true) = (written.find('{'), written.ends_with('}')) {
        let head = join(prefix, written[..open].trim().trim_end_matches("::"));
        let head = head.trim_end_matches("::").to_owned();
        let inner = &written[open + 1..written.len() - 1];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    flatten_use(&head, &inner[start..i], nesting + 1, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        flatten_use(&head, &inner[start..], nesting + 1, out);
        return;
    }
    let item = written.split(" as ").next().unwrap_or(written).trim();
    match item {
        "" => {}
        "self" | "*" => out.push(prefix.to_owned()),
        _ => out.push(join(prefix, item)),
    }
}

/// Every type named under `node` (fields, parameters, return types, paths
/// like `Square::new`), but its own name: `references` to classes.
fn types(out: &mut Builder, from: &str, node: Node<'_>, own: &str, source: &str) {
    let mut seen = std::collections::BTreeSet::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "type_identifier" {
            let name = text(n, source);
            if name != own && name != "Self" {
                seen.insert(name);
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    for name in seen {
        out.reference(from, "references", name);
    }
}

/// Every call under `node`, by the called name's last part (`f`, `x.f()`, `T::f`).
fn calls(out: &mut Builder, from: &str, node: Node<'_>, source: &str) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "call_expression" {
            let mut f = n.child_by_field_name("function");
            if let Some(g) = f.filter(|g| g.kind() == "generic_function") {
                f = g.child_by_field_name("function");
            }
            let name = f.and_then(|f| match f.kind() {
                "identifier" => Some(text(f, source).to_owned()),
                // `self.f()` is this type's; `x.f()` is marked, and resolved more warily.
                "field_expression" => f.child_by_field_name("field").map(|x| {
                    if f.child_by_field_name("value").is_some_and(|v| text(v, source) == "self") {
                        text(x, source).to_owned()
                    } else {
                        format!(".{}", text(x, source))
                    }
                }),
                "scoped_identifier" => f.child_by_field_name("name").map(|x| text(x, source).to_owned()),
                _ => None,
            });
            if let Some(name) = name {
                out.reference(from, "calls", name);
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_flatten() {
        let mut out = Vec::new();
        flatten_use("", "crate::a::{b, c::{d, e as f}, self}", 0, &mut out);
        assert_eq!(out, ["crate::a::b", "crate::a::c::d", "crate::a::c::e", "crate::a"]);
        let mut out = Vec::new();
        flatten_use("", "std::io::Write as _", 0, &mut out);
        assert_eq!(out, ["std::io::Write"]);
    }

    #[test]
    fn type_names_lose_paths_and_generics() {
        assert_eq!(last_name("crate::a::Store<'a, T>"), "Store");
        assert_eq!(last_name("&mut Foo"), "Foo");
    }
}
