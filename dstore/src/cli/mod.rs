//! The command line: the commands that read, write and exchange a store
//! (every one but the servers, which are faces of their own), and what
//! they share. Each parses its arguments, calls the library, and renders.

mod demo;
mod exchange;
mod inspect;
mod project;
mod render;
mod review;

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use decision_store::calibration::GroupBy;
use decision_store::decision::JSON_SCHEMA;
use decision_store::store::REDACTABLE;
use decision_store::Error;
use serde::Serialize;

use crate::app::errors::{CmdResult, Failure};

/// Output format of read commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned tables and trees for a person.
    #[default]
    Text,
    /// One stable JSON document for scripts.
    Json,
}

/// Output format of `tree`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TreeFormat {
    #[default]
    Text,
    /// One nested JSON document (`roots`, each node with its `children`).
    Json,
    /// One JSON object a line, depth first, each naming its `parent` in the
    /// view and its `level`: parseable however deep the plan is.
    Jsonl,
    /// Graphviz.
    Dot,
    /// Mermaid flowchart (renders in Markdown viewers).
    Mermaid,
}

/// When an import commits.
#[derive(Debug, clap::Args)]
pub struct CommitArgs {
    /// Commit every N lines (by default every 4,096 or 25 ms of lock, so
    /// that other writers never wait long; a first load into an empty file
    /// every 65,536 or 0.5 s).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "atomic")]
    batch: Option<u64>,
    /// One transaction for the whole input: a bad line leaves the store as
    /// it was. Other writers wait for the import meanwhile.
    #[arg(long)]
    atomic: bool,
}

/// The commands of this face.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a realistic sample store (two plans and a code graph) and show it.
    Demo {
        /// Where to write it: a new file, or a store that holds the demo
        /// already (a store that holds anything else is left alone).
        #[arg(default_value = "demo.db")]
        db: PathBuf,
        /// Replace a store that holds other decisions or a graph.
        #[arg(long)]
        force: bool,
    },
    /// Create an empty store (an existing store is left as it is).
    Init { db: PathBuf },
    /// Import decisions from JSON Lines (a file, or - for stdin).
    Import {
        db: PathBuf,
        file: PathBuf,
        #[command(flatten)]
        commit: CommitArgs,
    },
    /// Import a UKO graph from two JSON Lines files.
    ImportGraph {
        db: PathBuf,
        nodes: PathBuf,
        edges: PathBuf,
        #[command(flatten)]
        commit: CommitArgs,
    },
    /// Write decisions as JSON Lines to stdout, by plan then sequence.
    Export {
        db: PathBuf,
        #[arg(long, value_name = "PLAN_ID")]
        plan: Option<String>,
    },
    /// Build (or bring up to date) the UKO graph of the Python, Rust, TypeScript, JavaScript and Go files under PATH.
    Ingest {
        db: PathBuf,
        path: PathBuf,
        /// Skip (and report) files larger than this.
        #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
        max_file_bytes: u64,
        /// Do not read the git history (files that change together); what was read before stays.
        #[arg(long)]
        no_history: bool,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Write the UKO graph as two JSON Lines files.
    ExportGraph { db: PathBuf, nodes: PathBuf, edges: PathBuf },
    /// Copy a whole store into an empty one: a file into PostgreSQL
    /// (`postgres://user@host:port/db`) and back. Same digest, or it fails.
    Copy {
        src: PathBuf,
        dst: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Sizes, versions and counts.
    Info {
        db: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// One row a plan, the most recently changed first: its goal, counts and times.
    Plans {
        db: PathBuf,
        /// Only the plans whose goal (or id) holds every one of these words.
        words: Vec<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// One decision in full, with its parent, children and history.
    Show {
        db: PathBuf,
        /// A decision: its id, the beginning of it, or PLAN#SEQ (as `tree` shows it).
        decision_id: String,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// A plan's decision tree.
    Tree {
        db: PathBuf,
        /// A plan: its id, or the beginning of it.
        plan_id: String,
        /// Only the decisions that stand now (a hidden decision's children move up).
        #[arg(long)]
        effective: bool,
        #[arg(long, value_enum, default_value_t)]
        format: TreeFormat,
    },
    /// A decision's correction chain and supersession path, and what stands now.
    Chain {
        db: PathBuf,
        /// A decision: its id, the beginning of it, or PLAN#SEQ (as `tree` shows it).
        decision_id: String,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Everything downstream of a decision: what to recheck when it changes.
    Impact {
        db: PathBuf,
        /// A decision: its id, the beginning of it, or PLAN#SEQ (as `tree` shows it).
        decision_id: String,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Remove content from a decision (a secret, personal data): the fields
    /// say "[redacted]" from now on, and the log records who, why and when
    /// as an entry of its own, so `check` and every earlier digest still verify.
    Redact {
        db: PathBuf,
        /// A decision: its id, the beginning of it, or PLAN#SEQ (as `tree` shows it).
        decision_id: String,
        /// The fields to empty, comma-separated: chosen_option, rationale, alternatives, artifacts_produced, metadata.
        #[arg(long, value_delimiter = ',', required = true, value_parser = clap::builder::PossibleValuesParser::new(REDACTABLE))]
        fields: Vec<String>,
        /// Why (kept in the log).
        #[arg(long)]
        reason: String,
        /// Who redacts (kept in the log); by default the login name ($USER).
        #[arg(long = "by", value_name = "NAME")]
        by: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// SQLite's checks, every hash of the log and the domain's invariants; exits 1 on any problem.
    Check {
        db: PathBuf,
        /// A digest printed earlier by `dstore digest` (store:N:HEX or PLAN_ID:N:HEX) that the store must extend; repeatable.
        #[arg(long, value_name = "DIGEST")]
        expect: Vec<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// The head hash of each plan's chain and of the whole log, to anchor elsewhere.
    Digest {
        db: PathBuf,
        /// Only this plan's digest.
        #[arg(long, value_name = "PLAN_ID")]
        plan: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Decisions made on context that has changed since, and what builds on them; exits 1 when any is stale.
    Stale {
        db: PathBuf,
        /// Check only this plan's decisions.
        #[arg(long, value_name = "PLAN_ID")]
        plan: Option<String>,
        /// Report overturned (corrected or superseded) decisions too.
        #[arg(long)]
        all: bool,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Confidence scores against outcomes: Brier score, calibration error and the reliability bins.
    Calibration {
        db: PathBuf,
        #[arg(long, value_name = "PLAN_ID")]
        plan: Option<String>,
        /// Figures per decision type, phase or plan beside the overall ones.
        #[arg(long, value_parser = one_of::<GroupBy>(&GroupBy::NAMES))]
        by: Option<GroupBy>,
        /// Count only decisions followed by at least N later decisions in their plan.
        #[arg(long, value_name = "N", default_value_t = 0)]
        settled_after: u32,
        #[arg(long, value_enum, default_value_t)]
        format: review::CalibrationFormat,
    },
    /// Project context from the graph.
    Project(project::ProjectArgs),
    /// The inherited context of a child of a plan.
    ChildContext(project::ChildArgs),
    /// Print the JSON Schema of the decision format.
    Schema,
}

/// Runs one command; returns the exit status.
pub fn run(command: Command) -> CmdResult {
    match command {
        Command::Demo { db, force } => demo::run(&db, force),
        Command::Init { db } => exchange::init(&db),
        Command::Import { db, file, commit } => exchange::import(&db, &file, &commit),
        Command::ImportGraph { db, nodes, edges, commit } => exchange::import_graph(&db, &nodes, &edges, &commit),
        Command::Export { db, plan } => exchange::export(&db, plan.as_deref()),
        Command::Ingest { db, path, max_file_bytes, no_history, format } => {
            exchange::ingest(&db, &path, max_file_bytes, !no_history, format)
        }
        Command::ExportGraph { db, nodes, edges } => exchange::export_graph(&db, &nodes, &edges),
        Command::Copy { src, dst, format } => exchange::copy(&src, &dst, format),
        Command::Info { db, format } => inspect::info(&db, format),
        Command::Plans { db, words, format } => inspect::plans(&db, &words.join(" "), format),
        Command::Show { db, decision_id, format } => inspect::show(&db, &decision_id, format),
        Command::Tree { db, plan_id, effective, format } => inspect::tree(&db, &plan_id, effective, format),
        Command::Chain { db, decision_id, format } => inspect::chain(&db, &decision_id, format),
        Command::Impact { db, decision_id, format } => inspect::impact(&db, &decision_id, format),
        Command::Redact { db, decision_id, fields, reason, by, format } => {
            exchange::redact(&db, &decision_id, &fields, &reason, by, format)
        }
        Command::Check { db, expect, format } => inspect::check(&db, &expect, format),
        Command::Digest { db, plan, format } => inspect::digest(&db, plan.as_deref(), format),
        Command::Stale { db, plan, all, format } => review::stale(&db, plan.as_deref(), all, format),
        Command::Calibration { db, plan, by, settled_after, format } => {
            review::calibration(&db, plan.as_deref(), by, settled_after, format)
        }
        Command::Project(args) => project::project(&args),
        Command::ChildContext(args) => project::child_context(&args),
        Command::Schema => {
            print_text(JSON_SCHEMA)?;
            Ok(0)
        }
    }
}

/// A clap parser of a library type that parses from one of `names`: the
/// help lists them, and clap refuses any other before the library sees it.
pub fn one_of<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = Error> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(names.iter().copied())
        .map(|s| s.parse::<T>().expect("clap lets only a listed name through"))
}

/// Stdout behind one 64 KiB buffer: Rust's stdout is line-buffered, which
/// costs a system call per line. Flush once at the end.
pub fn stdout() -> BufWriter<io::StdoutLock<'static>> {
    BufWriter::with_capacity(1 << 16, io::stdout().lock())
}

/// Prints a report as one pretty JSON document.
pub fn print_json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let mut out = stdout();
    serde_json::to_writer_pretty(&mut out, value).map_err(Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Prints text to stdout.
pub fn print_text(text: &str) -> Result<(), Failure> {
    let mut out = stdout();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// True when stderr is a terminal (progress is shown only then).
pub fn stderr_is_terminal() -> bool {
    io::stderr().is_terminal()
}
