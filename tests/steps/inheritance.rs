//! Steps of plan context inheritance (`depth_breadth_projection.feature`).
//!
//! "Mock skeleton compressor" is a `SkeletonCompressor` of this module that
//! returns a fixed number of small fragments. "A fragment should contain X"
//! checks the fragment's content. Token counts use the cl100k tokenizer.

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use decision_store::inheritance::{
    extract_child_focus, AssembledContext, ChildContextResult, ContextRequest, InheritanceConfig,
    PlanContextInheritance, SkeletonCompressor,
};
use decision_store::projection::{ContextFragment, TokenCounter};
use decision_store::{ContextSnapshot, Decision, DecisionType, PlanId, ResourceRef};

use super::{ensure, parse_bool, StepResult, World};

/// Returns `n` fixed fragments whatever it is given.
struct MockCompressor(usize);

impl SkeletonCompressor for MockCompressor {
    fn compress(&self, _: &[ContextFragment], _: usize, counter: &dyn TokenCounter) -> Vec<ContextFragment> {
        (0..self.0)
            .map(|i| {
                let text = format!("mock skeleton {i}");
                ContextFragment::new(format!("mock://{i}"), text.clone(), counter.count(&text), 1)
            })
            .collect()
    }
}

#[given(regex = r"^a parent assembled context with (\d+) fragments at detail_depth (\d+)$")]
fn parent_context(w: &mut World, n: usize, depth: u32) {
    let fragments = (0..n)
        .map(|i| {
            ContextFragment::new(
                format!("class://Parent{i}"),
                format!("class Parent{i}:\n    def step_{i}(self): ..."),
                20,
                depth,
            )
            .with_domain("uko-code:")
            .with_score(1.0 - i as f64 / 10.0)
        })
        .collect();
    w.parent_context = Some(AssembledContext { fragments, detail_depth: depth, breadth: 3 });
}

#[given(regex = r"^a parent assembled context with the following inheritance fragments:$")]
fn parent_table(w: &mut World, step: &Step) -> StepResult {
    let table = step.table.as_ref().ok_or("no table")?;
    let header = &table.rows[0];
    let col = |row: &Vec<String>, name: &str| header.iter().position(|h| h == name).map(|i| row[i].trim().to_owned());
    let mut fragments = Vec::new();
    let mut depth = 0;
    for row in &table.rows[1..] {
        let need = |name: &str| col(row, name).ok_or_else(|| format!("no column {name}"));
        let d: u32 = need("depth")?.parse().map_err(|e| format!("depth: {e}"))?;
        depth = depth.max(d);
        let mut f = ContextFragment::new(
            need("uko_node")?,
            need("content")?,
            need("tokens")?.parse().map_err(|e| format!("tokens: {e}"))?,
            d,
        )
        .with_domain(need("domain")?)
        .with_resource_uri(need("resource_uri")?);
        if let Some(s) = col(row, "score") {
            f = f.with_score(s.parse().map_err(|e| format!("score: {e}"))?);
        }
        fragments.push(f);
    }
    w.parent_context = Some(AssembledContext { fragments, detail_depth: depth, breadth: 3 });
    Ok(())
}

#[given(regex = r"^a mock skeleton compressor that returns (\d+) fragments$")]
fn mock(w: &mut World, n: usize) {
    w.mock_fragments = Some(n);
}

#[given(
    regex = r"^a PlanContextInheritance service with (default config|the mock compressor)(?: and min_skeleton_tokens (\d+))?$"
)]
fn service(w: &mut World, which: String, min: String) -> StepResult {
    let mut config = InheritanceConfig::default();
    if !min.is_empty() {
        config.min_skeleton_tokens = min.parse().map_err(|e| format!("{e}"))?;
    }
    let mut service = PlanContextInheritance::new(config);
    if which == "the mock compressor" {
        service = service.with_compressor(MockCompressor(w.mock_fragments.ok_or("no mock compressor")?));
    }
    w.service = Some(service);
    Ok(())
}

fn compute(w: &mut World, focus: &str, budget: usize, parent_depth: u32, child_depth: u32) -> StepResult {
    let parent = w.parent_context.as_ref().ok_or("no parent context")?;
    let service = w.service.as_ref().ok_or("no service")?;
    match service.compute_child_context(parent, &[focus.to_owned()], budget, parent_depth, child_depth) {
        Ok(c) => w.child = Some(c),
        Err(e) => w.error = Some(e),
    }
    Ok(())
}

#[when(
    regex = r#"^I compute child context with focus "([^"]+)" and budget (\d+)(?: at depth_in_tree (\d+) to (\d+))?$"#
)]
fn compute_focus(w: &mut World, focus: String, budget: usize, from: String, to: String) -> StepResult {
    let (p, c) = if from.is_empty() { (0, 1) } else { (from.parse().unwrap_or(0), to.parse().unwrap_or(0)) };
    compute(w, &focus, budget, p, c)
}

#[when(regex = r"^I compute child context with parent_depth (\d+) and child_depth (\d+)$")]
fn compute_depths(w: &mut World, p: u32, c: u32) -> StepResult {
    compute(w, "class://Child", 1000, p, c)
}

fn child(w: &World) -> Result<&ChildContextResult, String> {
    match (&w.child, &w.error) {
        (Some(c), _) => Ok(c),
        (None, Some(e)) => Err(format!("no child context: {e}")),
        _ => Err("no child context".into()),
    }
}

#[then(regex = r"^the child result should contain a ContextRequest$")]
fn has_request(w: &mut World) -> StepResult {
    let c = child(w)?;
    ensure!(c.request().budget() == 1000 && !c.request().focus().is_empty(), "request {:?}", c.request());
    Ok(())
}

#[then(regex = r#"^the child request focus should contain "([^"]+)"$"#)]
fn request_focus(w: &mut World, uri: String) -> StepResult {
    ensure!(child(w)?.request().focus().contains(&uri), "focus {:?}", child(w)?.request().focus());
    Ok(())
}

#[then(regex = r"^the child request depth_gradient should be (True|False)$")]
fn request_gradient(w: &mut World, g: String) -> StepResult {
    ensure!(child(w)?.request().depth_gradient() == parse_bool(&g), "gradient differs");
    Ok(())
}

#[then(regex = r"^the child result depth_delta should be (\d+)$")]
fn depth_delta(w: &mut World, n: u32) -> StepResult {
    ensure!(child(w)?.depth_delta() == n, "depth_delta {}", child(w)?.depth_delta());
    Ok(())
}

#[then(regex = r"^the child request depth should be greater than (\d+)$")]
fn request_depth(w: &mut World, n: u32) -> StepResult {
    ensure!(child(w)?.request().depth() > n, "depth {}", child(w)?.request().depth());
    Ok(())
}

#[then(regex = r"^the child request breadth should be at most (\d+)$")]
fn request_breadth(w: &mut World, n: u32) -> StepResult {
    let parent = w.parent_context.as_ref().ok_or("no parent")?.breadth;
    let b = child(w)?.request().breadth();
    ensure!(b <= n && b < parent, "breadth {b} (parent {parent})");
    Ok(())
}

#[then(regex = r"^the child result skeleton_fragments should have (\d+) entries$")]
fn skeleton_count(w: &mut World, n: usize) -> StepResult {
    let c = child(w)?;
    ensure!(
        c.skeleton_fragments().len() == n,
        "{} skeleton fragments: {:?}",
        c.skeleton_fragments().len(),
        c.skeleton_fragments()
    );
    let budget = (c.request().budget() as f64 * 0.15).floor() as usize;
    ensure!(c.skeleton_tokens() <= budget, "skeleton takes {} tokens of {budget}", c.skeleton_tokens());
    Ok(())
}

#[then(regex = r"^all child skeleton fragments should have detail depth at most (\d+)$")]
fn skeleton_depth(w: &mut World, n: u32) -> StepResult {
    for f in child(w)?.skeleton_fragments() {
        ensure!(f.detail_depth() <= n, "{} at depth {}", f.uko_node(), f.detail_depth());
    }
    Ok(())
}

#[then(regex = r#"^a child skeleton fragment should contain "([^"]+)"$"#)]
fn some_skeleton_contains(w: &mut World, text: String) -> StepResult {
    let fs = child(w)?.skeleton_fragments();
    ensure!(fs.iter().any(|f| f.content().contains(&text)), "none contains {text:?}: {fs:?}");
    Ok(())
}

#[then(regex = r#"^the first child skeleton fragment should contain "([^"]+)"$"#)]
fn first_skeleton_contains(w: &mut World, text: String) -> StepResult {
    let first = child(w)?.skeleton_fragments().first().ok_or("no skeleton fragments")?;
    ensure!(first.content().contains(&text), "first is {first:?}");
    Ok(())
}

#[when(regex = r"^I create an InheritanceConfig with defaults$")]
fn config(w: &mut World) {
    w.config = Some(InheritanceConfig::default());
}

#[then(regex = r"^the inheritance config skeleton_ratio should be ([0-9.]+)$")]
fn ratio(w: &mut World, r: f64) -> StepResult {
    let c = w.config.as_ref().ok_or("no config")?;
    ensure!(c.skeleton_ratio == r, "ratio {}", c.skeleton_ratio);
    Ok(())
}

fn decision_with(plan: PlanId, seq: u32, uri: &str) -> Result<Decision, String> {
    let r = ResourceRef::new(uri, Some("class".into()), None).map_err(|e| e.to_string())?;
    Decision::builder(plan, DecisionType::ResourceSelection, seq)
        .context_snapshot(ContextSnapshot::new("h", vec![r], None))
        .build()
        .map_err(|e| e.to_string())
}

#[when(regex = r#"^I extract child focus from decisions "([^"]+)" and "([^"]+)"$"#)]
fn extract(w: &mut World, a: String, b: String) -> StepResult {
    let plan = w.plan();
    // The second names `a` again: focus keeps first occurrences only.
    let ds = vec![decision_with(plan, 0, &a)?, decision_with(plan, 1, &b)?, decision_with(plan, 2, &a)?];
    w.child_focus = extract_child_focus(&ds, &["class://Fallback".to_owned()]);
    Ok(())
}

#[when(regex = r#"^I extract child focus from empty decisions with fallback "([^"]+)"$"#)]
fn extract_fallback(w: &mut World, fallback: String) {
    w.child_focus = extract_child_focus(&[], &[fallback]);
}

#[then(regex = r#"^the child focus should include both "([^"]+)" and "([^"]+)"$"#)]
fn focus_both(w: &mut World, a: String, b: String) -> StepResult {
    ensure!(w.child_focus == vec![a, b], "focus {:?}", w.child_focus);
    Ok(())
}

#[then(regex = r#"^the child focus should contain "([^"]+)"$"#)]
fn focus_contains(w: &mut World, a: String) -> StepResult {
    ensure!(w.child_focus == vec![a], "focus {:?}", w.child_focus);
    Ok(())
}

#[when(regex = r"^I create a ChildContextResult with a request and skeleton data$")]
fn create_result(w: &mut World) {
    let request = ContextRequest::new(vec!["class://Child".into()], 2, 4, true, 500);
    let skeleton = vec![ContextFragment::new("class://Parent", "[MODULE_GRAPH]: symbols=Parent", 8, 1)];
    w.child = Some(ChildContextResult::new(request, skeleton, 1));
}

#[then(regex = r"^the child context result should be immutable$")]
fn result_immutable(w: &mut World) -> StepResult {
    let c = child(w)?;
    // Only shared access exists (see the compile_fail doc test on the type);
    // an equal value rebuilt from its parts proves nothing was hidden or changed.
    let rebuilt = ChildContextResult::new(c.request().clone(), c.skeleton_fragments().to_vec(), c.depth_delta());
    ensure!(&rebuilt == c, "the result differs from its own parts");
    Ok(())
}

#[then(regex = r"^the child context result should contain the request$")]
fn result_request(w: &mut World) -> StepResult {
    let r = child(w)?.request();
    ensure!(r.focus() == ["class://Child"] && r.breadth() == 2 && r.depth() == 4 && r.budget() == 500, "request {r:?}");
    Ok(())
}
