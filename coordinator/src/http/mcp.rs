//! MCP on `/mcp` (streamable HTTP, stateless, JSON answers; `rmcp`).
//!
//! One tool for every human-facing operation of the catalogue: its name is
//! the operation's `tool`, its input schema joins the path parameters, the
//! query fields and the body's fields (derived from the same wire types as
//! `/openapi.json`). A call authenticates with the same bearer token as
//! REST and runs the operation's own handler function, in process: the same
//! role checks, the same store calls, the same audit entries (surface
//! `mcp`). A refusal is a tool error whose structured content is REST's
//! envelope, `{"error": {"code", "message"}}`, with the same code.
//!
//! A request whose `Origin` header names another site than the
//! coordinator's own (its public URL's `scheme://host[:port]`) is refused
//! with `403 FORBIDDEN_ORIGIN` before its token is looked at, as the MCP
//! specification asks of servers: a web page must not drive the tools with
//! a token it got hold of. Clients that send no `Origin` (the CLI, MCP
//! SDKs, desktop clients) are served.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

mod args;

use super::catalogue::{OPS, Op, by_tool};
use super::extract::{AuthMember, Json, Query, mcp_member};
use super::{AppState, MAX_BODY_BYTES};
use super::{billing, ci, github, jobs, members, pairing, runners, runtimes};
use crate::error::Error;
use crate::service;
use crate::store::{Member, UsageOf};
use args::{Args, input_schema};
use drover_wire as wire;

/// Largest answer a tool returns (a job's log, followed to its end).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// `/mcp`: the token is checked before the MCP layer sees the request.
pub fn router(state: AppState) -> Router<AppState> {
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    // Every call carries a bearer token, so a page that rebinds a name to
    // this address gains nothing: any Host is served (as on REST).
    config.allowed_hosts = Vec::new();
    config.max_request_body_bytes = MAX_BODY_BYTES;
    let tools = Tools { st: state.clone() };
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state, authenticate))
}

async fn authenticate(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    if let Err(e) = super::origin::same_origin(&parts.headers, &st.public_url) {
        return e.into_response();
    }
    match mcp_member(&parts, &st).await {
        Ok(member) => {
            let mut req = Request::from_parts(parts, body);
            req.extensions_mut().insert(member);
            next.run(req).await
        }
        Err(e) => {
            let mut r = e.into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().expect("a header"),
            );
            r
        }
    }
}

#[derive(Clone)]
struct Tools {
    st: AppState,
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("drover", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Drover runs jobs on pools of self-hosted runners. Each tool is one REST \
                 operation of /openapi.json (its x-mcp-tool), with the same rules and error codes.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(op) = by_tool(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named {:?}", request.name),
                None,
            ));
        };
        let member = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Member>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))?;
        let answer = match Args::split(op, request.arguments.unwrap_or_default()) {
            Ok(args) => call(&self.st, member, op, args).await,
            Err(e) => Err(e),
        }
        .unwrap_or_else(IntoResponse::into_response);
        Ok(tool_result(answer).await.into())
    }
}

/// Every tool, built once.
fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        OPS.iter()
            .filter_map(|op| {
                let name = op.tool?;
                let description = if op.description.is_empty() {
                    op.summary.to_owned()
                } else {
                    format!("{}.\n\n{}", op.summary, op.description)
                };
                // Hints for clients: reads change nothing; removals and
                // revocations cannot be undone; nothing reaches outside.
                let hints = ToolAnnotations::new()
                    .read_only(op.decl.method == "get")
                    .destructive(op.decl.method == "delete")
                    .idempotent(matches!(op.decl.method, "get" | "put" | "delete"))
                    .open_world(false);
                Some(Tool::new(name, description, input_schema(op)).annotate(hints))
            })
            .collect()
    })
}

/// A usage report, as JSON or (`format: csv`) as CSV text.
async fn report(st: &AppState, m: &Member, of: UsageOf, a: &Args) -> Result<Response, Error> {
    let Query(q) = a.query::<wire::UsageReportQuery>()?;
    let report = super::dto::usage_report(service::billing::report(st, m, of, &q).await?);
    Ok(match a.csv()? {
        true => service::billing::csv(&report).into_response(),
        false => axum::Json(report).into_response(),
    })
}

/// Runs the operation: its service, or its handler as its route would.
async fn call(st: &AppState, member: Member, op: &Op, a: Args) -> Result<Response, Error> {
    let (s, m) = (State(st.clone()), AuthMember(member.clone()));
    macro_rules! run {
        ($e:expr) => {
            $e.await.into_response()
        };
    }
    Ok(match op.decl.id {
        "submitJob" => {
            let Json(req) = a.body()?;
            let key = a.header("idempotencyKey")?;
            let submitted = service::jobs::submit(st, &member, req, key).await?;
            axum::Json(wire::Job::from(submitted.job)).into_response()
        }
        "listJobs" => run!(jobs::list(s, m, a.query()?)),
        "getJob" => run!(jobs::show(s, m, a.id("id"))),
        "cancelJob" => {
            let job = service::jobs::cancel(st, &member, &a.id("id").0).await?;
            axum::Json(wire::Job::from(job)).into_response()
        }
        "getJobLogs" => run!(jobs::logs(s, m, a.id("id"), a.query()?)),
        "createRuntimeMine" => run!(runtimes::create_mine(s, m, a.body()?)),
        "listRuntimesMine" => run!(runtimes::list_mine(s, m)),
        "createJoinTokenMine" => {
            run!(runtimes::join_token_mine(
                s,
                m,
                a.id("id"),
                a.optional_body()?
            ))
        }
        "createRuntimeWorkspace" => run!(runtimes::create_ws(s, m, a.body()?)),
        "listRuntimesWorkspace" => run!(runtimes::list_ws(s, m)),
        "createJoinTokenWorkspace" => {
            run!(runtimes::join_token_ws(
                s,
                m,
                a.id("id"),
                a.optional_body()?
            ))
        }
        "listJoinTokensMine" => run!(runtimes::list_join_tokens_mine(s, m)),
        "revokeJoinTokenMine" => run!(runtimes::revoke_join_token_mine(s, m, a.id("id"))),
        "listJoinTokensWorkspace" => run!(runtimes::list_join_tokens_ws(s, m)),
        "revokeJoinTokenWorkspace" => run!(runtimes::revoke_join_token_ws(s, m, a.id("id"))),
        "pairRunnerMine" => run!(runners::pair_mine(s, m, a.optional_body()?)),
        "listRunnersMine" => run!(runners::list_mine(s, m)),
        "revokeRunnerMine" => run!(runners::revoke_mine(s, m, a.id("id"))),
        "pairRunnerWorkspace" => run!(runners::pair_ws(s, m, a.optional_body()?)),
        "listRunnerRoster" => run!(runners::roster(s, m)),
        "listRunnersWorkspace" => run!(runners::list_owned(s, m)),
        "revokeRunnerWorkspace" => run!(runners::revoke_ws(s, m, a.id("id"))),
        "setBudget" => run!(billing::set_budget(s, m, a.body()?)),
        "getUsage" => run!(billing::usage(s, m)),
        "getWorkspaceUsageReport" => report(st, &member, UsageOf::Workspace, &a).await?,
        "getMyUsageReport" => report(st, &member, UsageOf::Mine, &a).await?,
        "getMe" => run!(pairing::me(s, m)),
        "createPairingCode" => run!(pairing::create_code(s, m)),
        "listTokensMine" => run!(pairing::list_tokens(s, m)),
        "revokeTokenMine" => run!(pairing::revoke_token(s, m, a.id("id"))),
        "listMembers" => run!(members::list(s, m)),
        "inviteMember" => run!(members::invite(s, m, a.body()?)),
        "updateMember" => run!(members::update(s, m, a.id("id"), a.body()?)),
        "removeMember" => run!(members::remove(s, m, a.id("id"))),
        "listAuditEvents" => run!(members::audit(s, m, a.query()?)),
        "createGithubInstallLink" => run!(github::install_link(s, m, a.optional_body()?)),
        "listGithubInstallations" => run!(github::installations(s, m)),
        "listGithubRepos" => run!(github::repos(s, m, a.query()?)),
        "installGithubWorkspaceRunner" => run!(github::install_runner(s, m, a.body()?)),
        "setCiLink" => run!(ci::set(s, m, a.body()?)),
        "listCiLinks" => run!(ci::list(s, m)),
        "removeCiLink" => run!(ci::remove(s, m, a.ids("owner", "repo"), a.query()?)),
        "getCiWorkflow" => run!(ci::render(s, m, a.ids("owner", "repo"), a.query()?)),
        other => Error::api(
            drover_wire::ErrorCode::Internal,
            format!("the MCP tool of {other} has no handler"),
        )
        .into_response(),
    })
}

/// The handler's answer as a tool result: its JSON as structured content
/// (an empty answer is `{}`; text is `{"text": …}`), and a refusal as a
/// tool error holding REST's error envelope.
async fn tool_result(answer: Response) -> CallToolResult {
    let (parts, body) = answer.into_parts();
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let bytes = match to_bytes(body, MAX_ANSWER_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return CallToolResult::structured_error(json!({"error": {
                "code": "PAYLOAD_TOO_LARGE",
                "message": format!("the answer could not be read whole: {e}"),
            }}));
        }
    };
    let value = if bytes.is_empty() {
        json!({})
    } else if is_json {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({}))
    } else {
        json!({"text": String::from_utf8_lossy(&bytes)})
    };
    if parts.status.is_success() {
        CallToolResult::structured(value)
    } else {
        CallToolResult::structured_error(value)
    }
}

#[cfg(test)]
mod tests {
    use super::args::{FORMAT, header_params};
    use super::*;
    use crate::http::catalogue::Auth;
    use crate::http::openapi::{inline_generator, query_fields};
    use drover_wire::op::AnswerKind;

    #[test]
    fn every_member_operation_has_one_tool_and_its_inputs_do_not_collide() {
        let mut names = std::collections::HashSet::new();
        for op in OPS {
            if op.auth == Auth::Member {
                let tool = op
                    .tool
                    .unwrap_or_else(|| panic!("{} has no MCP tool", op.decl.id));
                assert!(names.insert(tool), "{tool} names two operations");
                let mut inputs: Vec<String> = op.path_params().map(str::to_owned).collect();
                if let Some(q) = op.decl.query {
                    inputs.extend(query_fields(q).into_iter().map(|(n, _, _)| n));
                }
                inputs.extend(header_params(op).into_iter().map(|(n, _)| n));
                if op.decl.kind == AnswerKind::JsonOrCsv {
                    inputs.push(FORMAT.into());
                }
                let schema = input_schema(op);
                let props = schema["properties"].as_object().unwrap();
                let body = op.decl.body.map_or(0, |b| {
                    b(&mut inline_generator()).to_value()["properties"]
                        .as_object()
                        .map_or(0, |p| p.len())
                });
                assert_eq!(
                    props.len(),
                    inputs.len() + body,
                    "{tool}: an input name is used twice"
                );
            } else {
                assert!(
                    op.tool.is_none(),
                    "{} is not a member's operation",
                    op.decl.id
                );
            }
        }
        assert_eq!(names.len(), tools().len());
    }
}
