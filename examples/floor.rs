//! The floor as a command, for whole-process comparisons with `dstore`
//! (`benches/cli.sh`): the same work, done by the fastest simple program.
//!
//! ```sh
//! floor gen                           # writes the standard workload once, prints its directory
//! floor import DB DECISIONS.jsonl
//! floor index DB                      # the plan index, outside the timed import
//! floor import-graph DB NODES.jsonl EDGES.jsonl
//! floor tree DB PLAN                   # every decision of the plan as a JSON line
//! floor project DB FOCUS BREADTH FULL  # a JSON line per node reached
//! ```

#[path = "../benches/baseline.rs"]
mod baseline;
#[path = "../benches/workload.rs"]
#[allow(dead_code)]
mod workload;

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

fn reader(path: &str) -> BufReader<File> {
    BufReader::with_capacity(1 << 16, File::open(path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match args.as_slice() {
        ["import", db, file] => {
            let mut conn = baseline::create(Path::new(db));
            let n = baseline::import(&mut conn, reader(file));
            eprintln!("floor: imported {n}");
        }
        // The benchmarks' standard workload (gen.py's shape), written once; prints its directory.
        ["gen"] => writeln!(out, "{}", workload::standard().dir.display()).unwrap(),
        ["index", db] => baseline::index_plans(&baseline::open(Path::new(db))),
        ["import-graph", db, nodes, edges] => {
            let mut conn = baseline::create(Path::new(db));
            let (n, e) = baseline::import_graph(&mut conn, reader(nodes), reader(edges));
            eprintln!("floor: imported {n} nodes, {e} edges");
        }
        ["tree", db, plan] => {
            baseline::write_plan(&baseline::open(Path::new(db)), plan, &mut out);
        }
        ["project", db, focus, breadth, full] => {
            let conn = baseline::open(Path::new(db));
            baseline::project(&conn, focus, breadth.parse().unwrap(), full.parse().unwrap(), &mut out);
        }
        _ => {
            eprintln!("usage: floor gen | import DB FILE | index DB | import-graph DB NODES EDGES | tree DB PLAN | project DB FOCUS BREADTH FULL");
            std::process::exit(2);
        }
    }
    out.flush().unwrap();
}
