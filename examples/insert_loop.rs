//! One client calling `Store::insert` in a loop, in process: the baseline
//! of the MCP benchmark (`benches/mcp.py`). Prints decisions per second.
//!
//! `cargo run --release --example insert_loop -- PATH N`

use std::time::Instant;

use decision_store::{Decision, DecisionType, PlanId, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: insert_loop PATH N")?;
    let n: u32 = args.next().ok_or("usage: insert_loop PATH N")?.parse()?;
    let mut store = Store::open(&path)?;
    let plan = PlanId::generate();
    let root = Decision::builder(plan, DecisionType::PromptDefinition, 0).chosen_option("bench").build()?;
    store.insert(&root)?;
    let started = Instant::now();
    for i in 1..=n {
        // Built inside the loop, as a caller that makes each decision when it happens.
        let d = Decision::builder(plan, DecisionType::StrategyChoice, i)
            .parent(root.decision_id())
            .chosen_option(format!("option {i}"))
            .confidence_score(0.5)
            .rationale("a rationale of a realistic length for a decision that an agent records")
            .build()?;
        store.insert(&d)?;
    }
    println!("{:.0} decisions/s", f64::from(n) / started.elapsed().as_secs_f64());
    Ok(())
}
