//! Steps of the projection part of `depth_breadth_projection.feature`.
//!
//! Python wording mapped to Rust: "a frozen Pydantic model" / "immutable" is
//! a type with private fields and no `&mut self` methods, whose `with_*`
//! methods return new values (the `compile_fail` doc tests on
//! `ProjectionSpec` and `ChildContextResult` prove that assignment does not
//! compile); "ValidationError" and "ValueError" are `Error::Validation`,
//! whose message is checked where the seed names a text. Projections run
//! against the scenario's temp-file store.

use cucumber::{given, then, when};
use decision_store::projection::{
    Cl100k, Depth, DepthBreadthProjector, DetailLevelMap, DetailLevelRegistry, ProjectedNode, ProjectionSpec,
};
use decision_store::Error;

use super::{ensure, parse_bool, StepResult, World};

#[given(regex = r"^the depth/breadth projection modules are available$")]
fn modules(w: &mut World) -> StepResult {
    // The projector's default registry carries the three presets.
    let presets = DepthBreadthProjector::new();
    for domain in ["uko-code:", "uko-docs:", "uko-db:"] {
        ensure!(presets.registry().get(domain).is_some(), "no preset for {domain}");
    }
    w.registry = DetailLevelRegistry::empty();
    Ok(())
}

#[when(regex = r#"^I create a ProjectionSpec with focus "([^"]+)" and breadth (\d+) and depth (\d+)$"#)]
fn create_spec(w: &mut World, focus: String, breadth: u32, depth: u32) -> StepResult {
    w.spec = Some(ProjectionSpec::new([focus], breadth, depth).map_err(|e| e.to_string())?);
    Ok(())
}

#[when(regex = r#"^I create a ProjectionSpec with focus "([^"]+)" and named depth "(\w+)"$"#)]
fn create_named(w: &mut World, focus: String, name: String) -> StepResult {
    w.spec = Some(ProjectionSpec::new([focus], 1, Depth::named(name)).map_err(|e| e.to_string())?);
    Ok(())
}

#[when(regex = r"^I create a ProjectionSpec with empty focus$")]
fn empty_focus(w: &mut World) {
    w.error = ProjectionSpec::new(Vec::<String>::new(), 1, 9).err();
}

#[when(regex = r"^I create a ProjectionSpec with negative depth$")]
fn negative_depth(w: &mut World) {
    w.error = Depth::level(-1).and_then(|d| ProjectionSpec::new(["class://A"], 1, d)).err();
}

#[then(regex = r"^a projection ValidationError should be raised$")]
fn validation_error(w: &mut World) -> StepResult {
    ensure!(matches!(w.error()?, Error::Validation { .. }), "not a validation error: {:?}", w.error);
    Ok(())
}

#[then(regex = r#"^a projection ValueError should be raised mentioning "([^"]+)"$"#)]
fn value_error(w: &mut World, text: String) -> StepResult {
    let e = w.error()?;
    ensure!(matches!(e, Error::Validation { .. }), "not a validation error: {e:?}");
    ensure!(e.to_string().contains(&text), "{e} does not mention {text:?}");
    Ok(())
}

fn spec(w: &World) -> Result<&ProjectionSpec, String> {
    w.spec.as_ref().ok_or_else(|| "no spec".into())
}

#[then(regex = r#"^the projection spec focus should contain "([^"]+)"$"#)]
fn spec_focus(w: &mut World, uri: String) -> StepResult {
    ensure!(spec(w)?.focus().contains(&uri), "focus {:?}", spec(w)?.focus());
    Ok(())
}

#[then(regex = r"^the projection spec breadth should be (\d+)$")]
fn spec_breadth(w: &mut World, b: u32) -> StepResult {
    ensure!(spec(w)?.breadth() == b, "breadth {}", spec(w)?.breadth());
    Ok(())
}

#[then(regex = r#"^the projection spec depth should be "?(\w+)"?$"#)]
fn spec_depth(w: &mut World, d: String) -> StepResult {
    let expected: Depth = d.parse().map_err(|e: Error| e.to_string())?;
    ensure!(*spec(w)?.depth() == expected, "depth {:?}", spec(w)?.depth());
    Ok(())
}

#[then(regex = r"^the projection spec depth_gradient should be (True|False)$")]
fn spec_gradient(w: &mut World, g: String) -> StepResult {
    ensure!(spec(w)?.depth_gradient() == parse_bool(&g), "gradient {}", spec(w)?.depth_gradient());
    Ok(())
}

#[then(regex = r#"^the projection spec domain should be "([^"]+)"$"#)]
fn spec_domain(w: &mut World, d: String) -> StepResult {
    ensure!(spec(w)?.domain() == d, "domain {}", spec(w)?.domain());
    Ok(())
}

#[then(regex = r"^the projection spec should be immutable$")]
fn spec_immutable(w: &mut World) -> StepResult {
    let s = spec(w)?.clone();
    let changed = s.with_breadth(s.breadth() + 1).with_depth_gradient(!s.depth_gradient()).with_domain("uko-docs:");
    ensure!(spec(w)? == &s, "deriving a spec changed the original");
    ensure!(
        changed.breadth() == s.breadth() + 1 && changed.domain() == "uko-docs:",
        "the derived spec lost the change"
    );
    Ok(())
}

#[when(regex = r#"^I create a ProjectedNode with uri "([^"]+)" and distance (\d+) and resolved_depth (\d+)$"#)]
fn create_node(w: &mut World, uri: String, distance: u32, depth: u32) {
    w.projected_node = Some(ProjectedNode::new(uri, distance, depth));
}

fn pnode(w: &World) -> Result<&ProjectedNode, String> {
    w.projected_node.as_ref().ok_or_else(|| "no projected node".into())
}

#[then(regex = r#"^the projected node uri should be "([^"]+)"$"#)]
fn node_uri(w: &mut World, uri: String) -> StepResult {
    ensure!(pnode(w)?.uri() == uri, "uri {}", pnode(w)?.uri());
    Ok(())
}

#[then(regex = r"^the projected node (distance|resolved_depth) should be (\d+)$")]
fn node_number(w: &mut World, which: String, n: u32) -> StepResult {
    let p = pnode(w)?;
    let got = if which == "distance" { p.distance() } else { p.resolved_depth() };
    ensure!(got == n, "{which} is {got}");
    Ok(())
}

#[then(regex = r"^the projected node should be immutable$")]
fn node_immutable(w: &mut World) -> StepResult {
    let p = pnode(w)?;
    // Assignment does not compile (compile_fail doc test on ProjectedNode); here the
    // read-only getters must give back exactly what the node was built from.
    let again = ProjectedNode::new(p.uri(), p.distance(), p.resolved_depth());
    ensure!(&again == p, "the node does not equal its own reconstruction");
    Ok(())
}

#[given(regex = r#"^a code DetailLevelMap is registered for domain "([^"]+)"$"#)]
fn register_code(w: &mut World, domain: String) {
    w.registry.register(domain, DetailLevelMap::code());
}

fn run_projection(w: &mut World, spec: decision_store::Result<ProjectionSpec>) -> StepResult {
    let projector = DepthBreadthProjector::with_registry(w.registry.clone());
    let store = &*w.store()?;
    let result = spec.and_then(|s| projector.project(store, &s));
    match result {
        Ok(p) => w.projection = Some(p),
        Err(e) => w.error = Some(e),
    }
    Ok(())
}

#[when(regex = r#"^I project with focus "(\w+)" and breadth (\d+) and depth (\d+)(?: and gradient (True|False))?$"#)]
fn project(w: &mut World, focus: String, breadth: u32, depth: u32, gradient: String) -> StepResult {
    let spec = ProjectionSpec::new([focus], breadth, depth).map(|s| {
        if gradient.is_empty() {
            s
        } else {
            s.with_depth_gradient(parse_bool(&gradient))
        }
    });
    run_projection(w, spec)
}

#[when(regex = r#"^I project with focus "(\w+)" and breadth (\d+) and named depth "(\w+)" in domain "([^"]+)"$"#)]
fn project_named(w: &mut World, focus: String, breadth: u32, name: String, domain: String) -> StepResult {
    let spec = ProjectionSpec::new([focus], breadth, Depth::named(name)).map(|s| s.with_domain(domain));
    run_projection(w, spec)
}

#[when(regex = r#"^I project with multi-focus "(\w+)" and "(\w+)" and breadth (\d+) and depth (\d+)$"#)]
fn project_multi(w: &mut World, a: String, b: String, breadth: u32, depth: u32) -> StepResult {
    run_projection(w, ProjectionSpec::new([a, b], breadth, depth))
}

#[when(regex = r#"^I project to fragments with focus "(\w+)" and breadth (\d+) and depth (\d+)$"#)]
fn project_fragments(w: &mut World, focus: String, breadth: u32, depth: u32) -> StepResult {
    let spec = ProjectionSpec::new([focus], breadth, depth).map_err(|e| e.to_string())?;
    let store = &*w.store()?;
    let set = DepthBreadthProjector::new().project_fragments(store, &spec, &Cl100k, None).map_err(|e| e.to_string())?;
    w.fragments = Some(set);
    Ok(())
}

fn projection(w: &World) -> Result<&decision_store::projection::Projection, String> {
    match (&w.projection, &w.error) {
        (Some(p), _) => Ok(p),
        (None, Some(e)) => Err(format!("the projection failed: {e}")),
        _ => Err("no projection".into()),
    }
}

#[then(regex = r"^the projection should contain exactly (\d+) nodes?$")]
fn node_count(w: &mut World, n: usize) -> StepResult {
    let p = projection(w)?;
    ensure!(p.nodes.len() == n, "{} nodes: {:?}", p.nodes.len(), p.nodes);
    Ok(())
}

#[then(regex = r#"^the projected nodes should include "(\w+)" at distance (\d+)$"#)]
fn includes(w: &mut World, uri: String, d: u32) -> StepResult {
    let p = projection(w)?;
    ensure!(p.nodes.iter().any(|n| n.uri() == uri && n.distance() == d), "{uri} not at {d}: {:?}", p.nodes);
    Ok(())
}

#[then(regex = r#"^the projected node "(\w+)" should have resolved_depth (greater than |less than )?(\d+)$"#)]
fn resolved(w: &mut World, uri: String, cmp: String, n: u32) -> StepResult {
    let p = projection(w)?;
    let node = p.nodes.iter().find(|x| x.uri() == uri).ok_or_else(|| format!("{uri} not projected"))?;
    let d = node.resolved_depth();
    let ok = match cmp.as_str() {
        "greater than " => d > n,
        "less than " => d < n,
        _ => d == n,
    };
    ensure!(ok, "{uri} has resolved_depth {d}");
    Ok(())
}

#[then(regex = r"^the result should contain (\d+) ContextFragments$")]
fn fragment_count(w: &mut World, n: usize) -> StepResult {
    let f = &w.fragments.as_ref().ok_or("no fragments")?.fragments;
    ensure!(f.len() == n, "{} fragments", f.len());
    Ok(())
}

#[then(regex = r#"^the first fragment uko_node should be "(\w+)"$"#)]
fn first_fragment(w: &mut World, uri: String) -> StepResult {
    let f = &w.fragments.as_ref().ok_or("no fragments")?.fragments;
    let first = f.first().ok_or("no fragments")?;
    ensure!(first.uko_node() == uri, "first is {}", first.uko_node());
    Ok(())
}

#[then(regex = r#"^all fragments should have metadata key "(\w+)" set to (True|False)$"#)]
fn fragment_metadata(w: &mut World, key: String, v: String) -> StepResult {
    let f = &w.fragments.as_ref().ok_or("no fragments")?.fragments;
    for frag in f {
        ensure!(
            frag.metadata().get(&key) == Some(&serde_json::Value::Bool(parse_bool(&v))),
            "{}: {:?}",
            frag.uko_node(),
            frag.metadata()
        );
    }
    Ok(())
}

#[when(regex = r"^I create the (code|docs|database) detail level map preset$")]
fn preset(w: &mut World, which: String) {
    w.code_map = Some(match which.as_str() {
        "code" => DetailLevelMap::code(),
        "docs" => DetailLevelMap::docs(),
        _ => DetailLevelMap::database(),
    });
}

#[then(regex = r#"^the (?:code|docs|database) map should resolve "(\w+)" to (\d+)$"#)]
fn preset_resolves(w: &mut World, name: String, n: u32) -> StepResult {
    let got = w.code_map.as_ref().ok_or("no map")?.resolve(&name);
    ensure!(got == Some(n), "{name} resolves to {got:?}");
    Ok(())
}
