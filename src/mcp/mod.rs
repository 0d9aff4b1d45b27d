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

mod args;
pub mod http;
mod lines;
mod tools;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use decision_store::{DecisionId, PlanId, Store};
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

/// The store's connections: one writer, and read-only ones for the reads.
pub struct Stores {
    target: PathBuf,
    writer: Option<Mutex<Store>>,
    readers: Mutex<Vec<Store>>,
}

impl Stores {
    /// Opens `target` (a path or a `postgres://` URL); a server that writes
    /// creates a missing store file, as `dstore init` does.
    pub fn open(target: &Path, read_only: bool) -> Result<Self, Failure> {
        let writer = if read_only { None } else { Some(Mutex::new(open_write(target)?)) };
        let reader = open_read(target)?;
        Ok(Stores { target: target.to_owned(), writer, readers: Mutex::new(vec![reader]) })
    }

    /// Runs `f` on the writer, after the writes before it.
    fn write<T>(&self, f: impl FnOnce(&mut Store) -> Outcome<T>) -> Outcome<T> {
        let writer = self.writer.as_ref().ok_or_else(|| Refusal("this server is read-only (--read-only)".into()))?;
        // A panic inside a write rolled its transaction back (dropping it does): the store is whole.
        let mut store = writer.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut store)
    }

    /// Runs `f` on a read-only connection of the pool (opening one when all are busy).
    fn read<T>(&self, f: impl FnOnce(&Store) -> Outcome<T>) -> Outcome<T> {
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
    let rt = runtime()?;
    let ended = rt.block_on(async move {
        let (input, output, printer) = lines::stdio();
        let running = Server::new(stores).serve((input, output)).await.map_err(|e| e.to_string())?;
        let quit = running.waiting().await.map_err(|e| e.to_string())?;
        printer.await.map_err(|e| e.to_string())?;
        Ok::<_, String>(quit)
    });
    // The runtime's stdin reader may still wait on a read that never ends.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match ended {
        Ok(_) => Ok(0),
        Err(e) => Err(Failure::environment(format!("mcp: {e}"))),
    }
}
