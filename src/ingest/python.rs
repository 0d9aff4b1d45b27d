//! Python files: classes (`class://module.Name`, nested `module.Outer.Inner`),
//! functions and methods (`function://module.name`, `module.Class.method`),
//! imports, calls and base classes.

use tree_sitter::Node;

use super::{content_version, definition_views, first_line, header, text, Builder, MAX_NESTING};

/// Adds the definitions of a module (a package's `__init__` when
/// `package`); returns its top-level symbol names.
pub(super) fn extract(out: &mut Builder, module: &str, package: bool, source: &str, root: Node<'_>) -> Vec<String> {
    let module_uri = format!("module://{module}");
    let mut symbols = Vec::new();
    let mut cursor = root.walk();
    for item in root.named_children(&mut cursor) {
        match definition(item) {
            Some(def) if def.kind() == "class_definition" => {
                if let Some(name) = class(out, module, "", &module_uri, def, item, source, 0) {
                    symbols.push(name);
                }
            }
            Some(def) => {
                if let Some(name) = function(out, module, "", &module_uri, def, item, source) {
                    symbols.push(name);
                }
            }
            None => match item.kind() {
                "import_statement" => imports(out, &module_uri, item, source),
                "import_from_statement" => from_imports(out, module, package, &module_uri, item, source),
                _ => calls(out, &module_uri, item, source),
            },
        }
    }
    symbols
}

/// The class or function an item defines (through its decorators).
fn definition(item: Node<'_>) -> Option<Node<'_>> {
    match item.kind() {
        "class_definition" | "function_definition" => Some(item),
        "decorated_definition" => item.child_by_field_name("definition"),
        _ => None,
    }
}

fn docstring(body: Option<Node<'_>>, source: &str) -> Option<String> {
    let first = body?.named_child(0)?;
    if first.kind() != "expression_statement" {
        return None;
    }
    let string = first.named_child(0).filter(|s| s.kind() == "string")?;
    first_line(text(string, source))
}

/// A class and its methods; `whole` is the item with its decorators;
/// classes nested deeper than [`MAX_NESTING`] are left out.
#[allow(clippy::too_many_arguments)]
fn class(
    out: &mut Builder,
    module: &str,
    prefix: &str,
    parent: &str,
    def: Node<'_>,
    whole: Node<'_>,
    source: &str,
    nesting: usize,
) -> Option<String> {
    if nesting >= MAX_NESTING {
        return None;
    }
    let name = text(def.child_by_field_name("name")?, source).to_owned();
    let qual = format!("{prefix}{name}");
    let uri = format!("class://{module}.{qual}");
    let body = def.child_by_field_name("body");
    if let Some(bases) = def.child_by_field_name("superclasses") {
        let mut cursor = bases.walk();
        for base in bases.named_children(&mut cursor) {
            if matches!(base.kind(), "identifier" | "attribute") {
                let written = text(base, source);
                out.reference(&uri, "inherits", written.rsplit('.').next().unwrap_or(written));
            }
        }
    }
    let mut methods = Vec::new();
    if let Some(body) = body {
        let mut cursor = body.walk();
        for item in body.named_children(&mut cursor) {
            match definition(item) {
                Some(d) if d.kind() == "class_definition" => {
                    class(out, module, &format!("{qual}."), &uri, d, item, source, nesting + 1);
                }
                Some(d) => {
                    if let Some(m) = function(out, module, &format!("{qual}."), &uri, d, item, source) {
                        methods.push(m);
                    }
                }
                None => calls(out, &uri, item, source),
            }
        }
    }
    let head = header(def, body, source);
    let outline = format!("{head}: methods={}", methods.join(","));
    let views = definition_views(&name, Some(outline), &head, docstring(body, source), text(whole, source));
    out.node(&uri, "class", &name, &content_version(text(whole, source).as_bytes()), views);
    out.contains(parent, &uri);
    Some(name)
}

/// A function or method; the calls of nested functions count as its own.
fn function(
    out: &mut Builder,
    module: &str,
    prefix: &str,
    parent: &str,
    def: Node<'_>,
    whole: Node<'_>,
    source: &str,
) -> Option<String> {
    let name = text(def.child_by_field_name("name")?, source).to_owned();
    let uri = format!("function://{module}.{prefix}{name}");
    let body = def.child_by_field_name("body");
    if let Some(body) = body {
        calls(out, &uri, body, source);
    }
    annotations(out, &uri, def, source);
    let head = header(def, body, source);
    let views = definition_views(&name, None, &head, docstring(body, source), text(whole, source));
    out.node(&uri, "function", &name, &content_version(text(whole, source).as_bytes()), views);
    out.contains(parent, &uri);
    Some(name)
}

/// `import a.b, c as d`.
fn imports(out: &mut Builder, from: &str, item: Node<'_>, source: &str) {
    let mut cursor = item.walk();
    for name in item.children_by_field_name("name", &mut cursor) {
        let dotted = if name.kind() == "aliased_import" { name.child_by_field_name("name") } else { Some(name) };
        if let Some(d) = dotted {
            out.reference(from, "imports", text(d, source));
        }
    }
}

/// `from a.b import c, d` (and relative `from ..x import y`): each name as
/// `a.b.c`, which resolves to a module, class or function, else to `a.b`.
fn from_imports(out: &mut Builder, module: &str, package: bool, from: &str, item: Node<'_>, source: &str) {
    let Some(target) = item.child_by_field_name("module_name") else { return };
    let written = text(target, source);
    let base = if target.kind() == "relative_import" {
        let dots = written.chars().take_while(|&c| c == '.').count();
        let rest = &written[dots..];
        // One dot is the importing module's package: the module itself for
        // an `__init__`, its parent otherwise.
        let mut parts: Vec<&str> = module.split('.').collect();
        let up = if package { dots.saturating_sub(1) } else { dots };
        if up > parts.len() {
            return; // above the tree: not ours to resolve
        }
        parts.truncate(parts.len() - up);
        if !rest.is_empty() {
            parts.push(rest);
        }
        parts.join(".")
    } else {
        written.to_owned()
    };
    let mut cursor = item.walk();
    let mut any = false;
    for name in item.children_by_field_name("name", &mut cursor) {
        let dotted = if name.kind() == "aliased_import" { name.child_by_field_name("name") } else { Some(name) };
        if let Some(d) = dotted {
            any = true;
            let joined =
                if base.is_empty() { text(d, source).to_owned() } else { format!("{base}.{}", text(d, source)) };
            out.reference(from, "imports", joined);
        }
    }
    if !any {
        out.reference(from, "imports", base); // `from a.b import *`
    }
}

/// The names in a function's type annotations (`x: User`, `-> list[Order]`):
/// `references` to classes.
fn annotations(out: &mut Builder, from: &str, def: Node<'_>, source: &str) {
    let mut names = std::collections::BTreeSet::new();
    let mut stack = vec![def];
    while let Some(n) = stack.pop() {
        if n.kind() == "type" {
            let mut inner = vec![n];
            while let Some(t) = inner.pop() {
                if t.kind() == "identifier" {
                    names.insert(text(t, source));
                }
                let mut cursor = t.walk();
                inner.extend(t.named_children(&mut cursor));
            }
            continue;
        }
        // Nested definitions annotate for themselves; bodies hold no annotations of this one.
        if n != def && matches!(n.kind(), "function_definition" | "class_definition" | "block") {
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    for name in names {
        out.reference(from, "references", name);
    }
}

/// Every call under `node`, by the called name's last part (`f`, `x.f`, `self.f`).
fn calls(out: &mut Builder, from: &str, node: Node<'_>, source: &str) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "call" {
            if let Some(f) = n.child_by_field_name("function") {
                match f.kind() {
                    "identifier" => out.reference(from, "calls", text(f, source)),
                    "attribute" => {
                        let receiver = f.child_by_field_name("object").map(|o| text(o, source));
                        if let Some(a) = f.child_by_field_name("attribute") {
                            // `self.f()` is this class's; `x.f()` is marked, and resolved more warily.
                            let own = matches!(receiver, Some("self" | "cls"));
                            out.reference(
                                from,
                                "calls",
                                if own { text(a, source).to_owned() } else { format!(".{}", text(a, source)) },
                            );
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
}
