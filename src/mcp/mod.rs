//! The store as Model Context Protocol tools (`docs/agent-tools.md`):
//! `dstore mcp` serves one agent over stdio, `dstore serve` many over
//! Streamable HTTP (`http`). Both run the same [`Server`] on the official
//! SDK (rmcp), which calls the tools of `tools`; they call the library.
//!
//! One process owns the store: its writes go through one connection, one
//! at a time (so an agent's write never fails because another agent is
//! writing, and two agents appending to a plan get distinct sequences:
//! `Store::insert_next` reads the next inside the write); its reads go
//! through a pool of read-only connections and run side by side.

pub mod args;
pub mod http;
mod lines;
mod tools;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, PoisonError};

use decision_store::store::Placement;
use decision_store::{Decision, DecisionId, PlanId, Store};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate, ServerCapabilities,
    ServerConfig, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use crate::cli::{open_read, open_write, CmdResult, Failure};
use args::{Outcome, Refusal};
use tools::Tool;

/// What an agent is told about the server when it connects.
const INSTRUCTIONS: &str = "A decision store: record each decision you make (record_decision, with your \
confidence and the graph nodes you looked at in `observed`), correct or supersede it when you change your \
mind, and ask for context (get_context) before you plan a change. stale_decisions tells which decisions \
rest on context that has changed since.";

/// The store's connections: one writer, owned by a thread of its own, and
/// read-only ones for the reads.
pub struct Stores {
    target: PathBuf,
    writer: Option<Writer>,
    readers: Mutex<Vec<Store>>,
}

/// The writer thread's handle: the queue of writes it takes in turn.
struct Writer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A write for the writer thread.
enum Job {
    /// A decision to store; the insertions that wait together are stored
    /// in one transaction (`Store::insert_each`), each with its own answer.
    Insert(Decision, Placement, mpsc::SyncSender<Outcome<Decision>>),
    /// Any other write, run alone (it answers through its own channel).
    Run(Box<dyn FnOnce(&mut Store) + Send>),
}

/// The most decisions stored in one transaction.
const GROUP: usize = 256;

impl Stores {
    /// Opens `target` (a path or a `postgres://` URL); a server that writes
    /// creates a missing store file, as `dstore init` does.
    pub fn open(target: &Path, read_only: bool) -> Result<Self, Failure> {
        let writer = if read_only { None } else { Some(Writer::start(open_write(target)?)?) };
        let reader = open_read(target)?;
        Ok(Stores { target: target.to_owned(), writer, readers: Mutex::new(vec![reader]) })
    }

    fn jobs(&self) -> Outcome<&mpsc::Sender<Job>> {
        let writer = self.writer.as_ref().ok_or_else(|| Refusal("this server is read-only (--read-only)".into()))?;
        Ok(writer.jobs.as_ref().expect("the queue stays open while the server runs"))
    }

    /// Stores `decision` after the writes queued before it, in one
    /// transaction with the other insertions that wait with it.
    fn insert(&self, decision: Decision, placement: Placement) -> Outcome<Decision> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.jobs()?.send(Job::Insert(decision, placement, reply)).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }

    /// Runs `f` on the writer, after the writes queued before it.
    fn write<T: Send + 'static>(&self, f: impl FnOnce(&mut Store) -> Outcome<T> + Send + 'static) -> Outcome<T> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job::Run(Box::new(move |store| {
            let _ = reply.send(f(store));
        }));
        self.jobs()?.send(job).map_err(|_| stopped())?;
        answer.recv().map_err(|_| stopped())?
    }

    /// Runs `f` on a read-only connection of the pool (opening one when all are busy).
    pub fn read<T>(&self, f: impl FnOnce(&Store) -> Outcome<T>) -> Outcome<T> {
        let idle = self.readers.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let store = match idle {
            Some(store) => store,
            None => open_read(&self.target).map_err(|e| Refusal(e.message))?,
        };
        let out = f(&store);
        self.readers.lock().unwrap_or_else(PoisonError::into_inner).push(store);
        out
    }
}

/// The answer to a write whose job the writer dropped: it panicked.
fn stopped() -> Refusal {
    Refusal("internal error: the write failed and was rolled back".into())
}

impl Writer {
    fn start(store: Store) -> Result<Writer, Failure> {
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("dstore-writer".into())
            .spawn(move || write_in_turn(store, &queue))
            .map_err(|e| Failure::environment(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer { jobs: Some(jobs), thread: Some(thread) })
    }
}

impl Drop for Writer {
    /// Closes the queue, lets the writer finish what was queued, and waits for it.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer thread: takes the queued writes in turn until the queue
/// closes. Insertions that wait together go in one transaction. A panic
/// inside a write rolls its transaction back (dropping it does), drops
/// the answers of its job (their callers report it) and leaves the
/// thread serving.
fn write_in_turn(mut store: Store, queue: &mpsc::Receiver<Job>) {
    let mut next = None;
    while let Some(job) = next.take().or_else(|| queue.recv().ok()) {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match job {
            Job::Run(f) => f(&mut store),
            Job::Insert(decision, placement, reply) => {
                let mut items = vec![(decision, placement)];
                let mut replies = vec![reply];
                while items.len() < GROUP {
                    match queue.try_recv() {
                        Ok(Job::Insert(decision, placement, reply)) => {
                            items.push((decision, placement));
                            replies.push(reply);
                        }
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                match store.insert_each(&items) {
                    Ok(outcomes) => {
                        for (reply, outcome) in replies.into_iter().zip(outcomes) {
                            let _ = reply.send(outcome.map_err(Refusal::from));
                        }
                    }
                    Err(e) => {
                        let message = e.to_string();
                        for reply in replies {
                            let _ = reply.send(Err(Refusal(message.clone())));
                        }
                    }
                }
            }
        }));
        if ran.is_err() {
            eprintln!("dstore: a write panicked and was rolled back");
        }
    }
}

/// The MCP server: the tools over one store's connections.
#[derive(Clone)]
pub struct Server {
    stores: Arc<Stores>,
    tools: Arc<Vec<Tool>>,
    listed: Arc<Vec<rmcp::model::Tool>>,
}

impl Server {
    pub fn new(stores: Arc<Stores>) -> Self {
        let tools = tools::served(stores.writer.is_none());
        let listed = Arc::new(tools.iter().map(describe).collect());
        Server { stores, tools, listed }
    }
}

/// A tool as `tools/list` shows it.
fn describe(t: &Tool) -> rmcp::model::Tool {
    let schema = |v: &serde_json::Value| Arc::new(v.as_object().expect("a schema is an object").clone());
    let annotations = if t.writes {
        ToolAnnotations::new().read_only(false).destructive(false).idempotent(t.idempotent).open_world(false)
    } else {
        ToolAnnotations::new().read_only(true).open_world(false)
    };
    rmcp::model::Tool::new(t.name, t.description, schema(&t.input))
        .with_raw_output_schema(schema(&t.output))
        .with_annotations(annotations)
}

/// The first protocol revision served: 2025-06-18 added structured tool output.
const OLDEST: ProtocolVersion = ProtocolVersion::V_2025_06_18;

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("dstore", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        let known = ProtocolVersion::KNOWN_VERSIONS;
        let from = known.iter().position(|v| *v == OLDEST).expect("the SDK knows 2025-06-18");
        Cow::Borrowed(&known[from..])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(index) = self.tools.iter().position(|t| t.name == request.name) else {
            return Err(ErrorData::invalid_params(format!("no tool named {:?}", request.name), None));
        };
        let server = self.clone();
        // The store's calls block: run them beside the runtime's threads.
        let ran = tokio::task::spawn_blocking(move || {
            let tool = &server.tools[index];
            let args = args::Args::new(request.arguments, tool.fields)?;
            (tool.run)(&server.stores, args)
        })
        .await;
        let result = match ran {
            Ok(Ok(answer)) => {
                let json = answer.structured.to_string();
                let mut result = CallToolResult::structured(answer.structured);
                result.content = vec![ContentBlock::text(answer.text), ContentBlock::text(json)];
                result
            }
            Ok(Err(Refusal(message))) => CallToolResult::error(vec![ContentBlock::text(message)]),
            Err(panic) => CallToolResult::error(vec![ContentBlock::text(format!("internal error: {panic}"))]),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let stores = self.stores.clone();
        let plans = tokio::task::spawn_blocking(move || stores.read(|s| Ok(s.plans()?)))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(|r| ErrorData::internal_error(r.0, None))?;
        Ok(ListResourcesResult::with_all_items(
            plans
                .iter()
                .map(|p| {
                    Resource::new(format!("dstore://plan/{}", p.plan_id), format!("plan {}", p.plan_id))
                        .with_description(format!("{} decisions, as JSON Lines", p.decisions))
                        .with_mime_type("application/jsonl")
                })
                .collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("dstore://decision/{decision_id}", "decision")
                .with_description("One decision in the interchange JSON.")
                .with_mime_type("application/json"),
            ResourceTemplate::new("dstore://plan/{plan_id}", "plan")
                .with_description("A plan's decisions as JSON Lines, in sequence order.")
                .with_mime_type("application/jsonl"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let stores = self.stores.clone();
        let read = {
            let uri = uri.clone();
            tokio::task::spawn_blocking(move || read_resource(&stores, &uri))
        };
        match read.await.map_err(|e| ErrorData::internal_error(e.to_string(), None))? {
            Ok((text, mime)) => {
                Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type(mime)]).into())
            }
            Err(Refusal(message)) => Err(ErrorData::resource_not_found(message, None)),
        }
    }
}

/// The text and MIME type of a `dstore://` resource.
fn read_resource(stores: &Stores, uri: &str) -> Outcome<(String, &'static str)> {
    if let Some(id) = uri.strip_prefix("dstore://decision/") {
        let id = DecisionId::parse(id).map_err(|e| Refusal(format!("{uri}: {e}")))?;
        return stores.read(|s| Ok((s.decision(id)?.to_json(), "application/json")));
    }
    if let Some(id) = uri.strip_prefix("dstore://plan/") {
        let plan = PlanId::parse(id).map_err(|e| Refusal(format!("{uri}: {e}")))?;
        return stores.read(|s| {
            let mut text = String::new();
            for d in s.plan_decisions(plan)? {
                text.push_str(&d.to_json());
                text.push('\n');
            }
            if text.is_empty() {
                return Err(Refusal(format!("{uri}: no such plan")));
            }
            Ok((text, "application/jsonl"))
        });
    }
    Err(Refusal(format!("{uri}: not a resource of this server (dstore://decision/ID or dstore://plan/ID)")))
}

/// Drops the server's last hold on its stores, after its runtime has
/// stopped: a PostgreSQL connection closes by blocking on a runtime of its
/// own, which tokio refuses inside another runtime's tasks (it panics).
fn close_outside_runtime(stores: Arc<Stores>) {
    drop(stores);
}

/// A runtime for a server: the store's calls run on its blocking threads.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::environment(format!("cannot start the server's runtime: {e}")))
}

/// `dstore mcp`: serves `target` to one agent over stdin and stdout until
/// stdin ends. Only protocol messages go to stdout.
pub fn stdio(target: &Path, read_only: bool) -> CmdResult {
    let stores = Arc::new(Stores::open(target, read_only)?);
    let server = Server::new(stores.clone());
    let rt = runtime()?;
    let ended = rt.block_on(async move {
        let (input, output, printer) = lines::stdio();
        let running = server.serve((input, output)).await.map_err(|e| e.to_string())?;
        let quit = running.waiting().await.map_err(|e| e.to_string())?;
        printer.await.map_err(|e| e.to_string())?;
        Ok::<_, String>(quit)
    });
    // The runtime's stdin reader may still wait on a read that never ends.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    close_outside_runtime(stores);
    match ended {
        Ok(_) => Ok(0),
        Err(e) => Err(Failure::environment(format!("mcp: {e}"))),
    }
}
