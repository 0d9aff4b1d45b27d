//! A tour of the library: write a small plan with a correction and a
//! supersession to `./quickstart.db`, reopen it, and print the tree.
//!
//! Run with `cargo run --example quickstart [PATH]`.

use decision_store::{Alternative, ContextSnapshot, Decision, DecisionType, PlanId, ResourceRef, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "quickstart.db".into());
    let plan = PlanId::generate();
    {
        let mut store = Store::open(&path)?;
        let root = Decision::builder(plan, DecisionType::PromptDefinition, 0)
            .chosen_option("add rate limiting to the API")
            .build()?;
        let strategy = Decision::builder(plan, DecisionType::StrategyChoice, 1)
            .parent(root.decision_id())
            .chosen_option("token bucket per user")
            .rationale("Bursty clients are normal; a bucket allows bursts up to a limit.")
            .confidence_score(0.7)
            .alternative(Alternative::new("fixed window", Some("simpler, but spikes at window edges".into())))
            .context_snapshot(ContextSnapshot::new(
                "sha256:1f2e",
                vec![ResourceRef::new("class://RateLimiter", Some("class".into()), None)?],
                None,
            ))
            .build()?;
        let fix = Decision::builder(plan, DecisionType::StrategyChoice, 2)
            .parent(root.decision_id())
            .corrects(strategy.decision_id())
            .chosen_option("token bucket per API key")
            .rationale("Users share keys across services; limits belong to keys.")
            .confidence_score(0.85)
            .build()?;
        let try_redis = Decision::builder(plan, DecisionType::ToolInvocation, 3)
            .parent(fix.decision_id())
            .chosen_option("store buckets in Redis")
            .build()?;
        let in_process = Decision::builder(plan, DecisionType::ToolInvocation, 4)
            .parent(fix.decision_id())
            .chosen_option("store buckets in process memory")
            .build()?;
        store.insert_many([&root, &strategy, &fix, &try_redis, &in_process])?;
        store.supersede(try_redis.decision_id(), in_process.decision_id())?;
    }

    // Everything below is read back from the file.
    let store = Store::open_read_only(&path)?;
    let tree = store.decision_tree(plan)?;
    println!("plan {plan} in {path}: {} decisions", tree.len());
    for d in tree.decisions() {
        let depth = tree.depth(d.decision_id()).unwrap_or(0);
        let mut marks = Vec::new();
        if !tree.corrected_by(d.decision_id()).is_empty() {
            marks.push("corrected");
        }
        if d.is_superseded() {
            marks.push("superseded");
        }
        println!(
            "{}{} #{} {} {}",
            "  ".repeat(depth),
            d.decision_type(),
            d.sequence(),
            d.chosen_option(),
            if marks.is_empty() { String::new() } else { format!("[{}]", marks.join(", ")) }
        );
    }
    let effective: Vec<String> = tree.effective().iter().map(|d| d.chosen_option().to_owned()).collect();
    println!("effective: {}", effective.join("; "));
    Ok(())
}
