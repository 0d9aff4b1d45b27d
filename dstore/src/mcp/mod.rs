//! The store as Model Context Protocol tools (`docs/agent-tools.md`):
//! `dstore mcp` serves one agent over stdio, `dstore serve` many over
//! Streamable HTTP (the service of `http`, which `serve` mounts at `/mcp`).
//! Both run the same [`Server`] on the official SDK (rmcp), which calls the
//! tools of `tools`; they call the library, through the server's
//! [`Stores`] (one writer thread, a pool of readers).

mod args;
pub mod http;
mod lines;
mod tools;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use decision_store::decision::{DecisionId, PlanId};
use decision_store::time::utc_ms;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    Role, ServerCapabilities, ServerConfig, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use crate::app::errors::{jsonrpc_code, CmdResult, Failure};
use crate::app::stores::{close_outside_runtime, runtime, Stores};
use crate::app::text::count;
use args::{Outcome, Refusal};
use tools::Tool;

/// What an agent is told about the server when it connects.
const INSTRUCTIONS: &str = "A decision store: record each decision you make (record_decision, with your \
confidence and the graph nodes you looked at in `observed`), correct or supersede it when you change your \
mind, and ask for context (get_context) before you plan a change. stale_decisions tells which decisions \
rest on context that has changed since.";

/// The MCP server: the tools over one store's connections.
#[derive(Clone)]
pub struct Server {
    stores: Arc<Stores>,
    tools: Arc<Vec<Tool>>,
    listed: Arc<Vec<rmcp::model::Tool>>,
}

impl Server {
    pub fn new(stores: Arc<Stores>) -> Self {
        let tools = tools::served(stores.is_read_only());
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().enable_prompts().build())
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
            let why = if tools::all().iter().any(|t| t.name == request.name) {
                format!("{} writes, and this server is read-only (--read-only)", request.name)
            } else {
                format!("no tool named {:?}", request.name)
            };
            return Err(ErrorData::invalid_params(why, None));
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

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            PROMPT,
            Some("How to work with this decision store: what to record, and when to ask for context."),
            None,
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != PROMPT {
            return Err(ErrorData::invalid_params(
                format!("no prompt named {:?} (there is {PROMPT:?})", request.name),
                None,
            ));
        }
        let text = PromptMessage::new_text(Role::User, AGENT_INSTRUCTIONS.trim_end());
        Ok(GetPromptResult::new(vec![text]).with_description("How to work with this decision store").into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let stores = self.stores.clone();
        let plans = tokio::task::spawn_blocking(move || stores.read(|s| s.plans()))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(|e| ErrorData::new(ErrorCode(jsonrpc_code(e.kind())), e.to_string(), None))?;
        let recent = Resource::new(RECENT_PLANS, "recent plans")
            .with_description("The plans changed last, newest first: each with its goal, times and counts, as JSON.")
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(
            std::iter::once(recent)
                .chain(plans.iter().map(|p| {
                    Resource::new(format!("dstore://plan/{}", p.plan_id), format!("plan {}", p.plan_id))
                        .with_description(format!("{}, as JSON Lines", count(p.decisions, "decision")))
                        .with_mime_type("application/jsonl")
                }))
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
            // Every resource names a decision or plan: one it cannot read is not found.
            Err(Refusal(message)) => Err(ErrorData::resource_not_found(message, None)),
        }
    }
}

/// The resource of the plans changed last.
const RECENT_PLANS: &str = "dstore://plans/recent";
/// How many plans it lists.
const RECENT: usize = 50;

/// The name of the prompt that tells an agent how to use the store.
const PROMPT: &str = "use_the_decision_store";
/// Its text: the instruction text of docs/agents.md ("What to tell the
/// agent"), which a test holds equal to this file.
const AGENT_INSTRUCTIONS: &str = include_str!("instructions.txt");

/// The text and MIME type of a `dstore://` resource.
fn read_resource(stores: &Stores, uri: &str) -> Outcome<(String, &'static str)> {
    if uri == RECENT_PLANS {
        let plans = stores.read(|s| s.recent_plans(""))?;
        let rows: Vec<serde_json::Value> = plans
            .iter()
            .take(RECENT)
            .map(|p| {
                serde_json::json!({"plan_id": p.plan_id.to_string(), "goal": p.goal, "decisions": p.decisions,
                    "started_at": utc_ms(p.first_ms), "updated_at": utc_ms(p.last_ms)})
            })
            .collect();
        return Ok((
            serde_json::to_string_pretty(&serde_json::json!({"plans": rows})).unwrap_or_default(),
            "application/json",
        ));
    }
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
    Err(Refusal(format!(
        "{uri}: not a resource of this server ({RECENT_PLANS}, dstore://decision/ID or dstore://plan/ID)"
    )))
}

/// `dstore mcp`: the store's tools for one agent, on stdin and stdout.
#[derive(Debug, clap::Args)]
pub struct StdioArgs {
    /// The store: a path (created when missing) or a postgres:// URL.
    store: PathBuf,
    /// Serve the read tools only.
    #[arg(long)]
    read_only: bool,
}

/// `dstore mcp`: serves the store to one agent over stdin and stdout until
/// stdin ends. Only protocol messages go to stdout.
pub fn stdio(a: &StdioArgs) -> CmdResult {
    let stores = Arc::new(Stores::open(&a.store, a.read_only)?);
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
