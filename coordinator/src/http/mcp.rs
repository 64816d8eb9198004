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
use axum::http::StatusCode;
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
use serde::Serialize;
use serde_json::json;

mod args;

use super::catalogue::{OPS, Op, by_tool};
use super::extract::mcp_member;
use super::heavy;
use super::{AppState, MAX_BODY_BYTES};
use crate::error::Error;
use crate::service::{
    self, billing, ci, dto, github, jobs, members, on_demand, pairing, pools, runners,
};
use crate::store::{Member, RunnerScope, UsageOf};
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
    let q: wire::UsageReportQuery = a.query()?;
    let report = dto::usage_report(billing::report(st, m, of, &q).await?);
    Ok(match a.csv()? {
        true => billing::csv(&report).into_response(),
        false => axum::Json(report).into_response(),
    })
}

fn json<T: Serialize>(answer: T) -> Response {
    axum::Json(answer).into_response()
}

fn empty(_: ()) -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// Runs the operation's service with the call's typed arguments: what its
/// REST route runs, with the same turns for large answers (`heavy`).
async fn call(st: &AppState, m: Member, op: &Op, a: Args) -> Result<Response, Error> {
    use service::Scope::{Mine, Workspace};
    let turn = || st.limits.heavy.turn(m.id.as_str());
    Ok(match op.decl.id {
        "submitJob" => {
            let req: wire::SubmitJob = a.body()?;
            let _turn = match jobs::text_bytes(&req) > heavy::SMALL_ANSWER_BYTES {
                true => Some(turn().await?),
                false => None,
            };
            let key = a.header("idempotencyKey")?;
            json(wire::Job::from(jobs::submit(st, &m, req, key).await?.job))
        }
        "listJobs" => {
            let _turn = turn().await?;
            json(jobs::list(st, &m, a.query()?).await?)
        }
        "getJob" => {
            let _turn = turn().await?;
            json(jobs::get(st, &m, &a.id("id")).await?)
        }
        "cancelJob" => {
            let _turn = turn().await?;
            json(wire::Job::from(jobs::cancel(st, &m, &a.id("id")).await?))
        }
        "getJobLogs" => super::jobs::log_stream(st.clone(), &m, &a.id("id"), a.query()?).await?,
        "createRuntimeMine" => json(pools::create(st, &m, Mine, a.body()?).await?),
        "listRuntimesMine" => json(pools::list(st, &m, Mine).await?),
        "createJoinTokenMine" => {
            let req = a.optional_body()?;
            json(pools::mint_join_token(st, &m, Mine, &a.id("id"), req).await?)
        }
        "createRuntimeWorkspace" => json(pools::create(st, &m, Workspace, a.body()?).await?),
        "listRuntimesWorkspace" => json(pools::list(st, &m, Workspace).await?),
        "createJoinTokenWorkspace" => {
            let req = a.optional_body()?;
            json(pools::mint_join_token(st, &m, Workspace, &a.id("id"), req).await?)
        }
        "listJoinTokensMine" => json(pools::join_tokens(st, &m, Mine).await?),
        "revokeJoinTokenMine" => empty(pools::revoke_join_token(st, &m, Mine, &a.id("id")).await?),
        "listJoinTokensWorkspace" => json(pools::join_tokens(st, &m, Workspace).await?),
        "revokeJoinTokenWorkspace" => {
            empty(pools::revoke_join_token(st, &m, Workspace, &a.id("id")).await?)
        }
        "pairRunnerMine" => json(runners::pair(st, &m, Mine, a.optional_body()?).await?),
        "listRunnersMine" => json(runners::list(st, &m, RunnerScope::Mine).await?),
        "revokeRunnerMine" => match runners::revoke(st, &m, Mine, &a.id("id")).await? {
            Some(revoked) => json(revoked),
            None => empty(()),
        },
        "pairRunnerWorkspace" => json(runners::pair(st, &m, Workspace, a.optional_body()?).await?),
        "listRunnerRoster" => json(runners::list(st, &m, RunnerScope::Roster).await?),
        "listRunnersWorkspace" => json(runners::list(st, &m, RunnerScope::WorkspaceOwned).await?),
        "revokeRunnerWorkspace" => match runners::revoke(st, &m, Workspace, &a.id("id")).await? {
            Some(revoked) => json(revoked),
            None => empty(()),
        },
        "setBudget" => json(billing::set_budget(st, &m, a.body()?).await?),
        "getUsage" => json(billing::usage(st, &m).await?),
        "getWorkspaceUsageReport" => report(st, &m, UsageOf::Workspace, &a).await?,
        "getMyUsageReport" => report(st, &m, UsageOf::Mine, &a).await?,
        "getMe" => json(pairing::me(st, &m).await?),
        "createPairingCode" => json(pairing::create_code(st, &m).await?),
        "listTokensMine" => json(pairing::tokens(st, &m).await?),
        "revokeTokenMine" => empty(pairing::revoke_token(st, &m, &a.id("id")).await?),
        "listMembers" => json(members::list(st, &m).await?),
        "inviteMember" => json(members::invite(st, &m, a.body()?).await?),
        "updateMember" => json(members::update(st, &m, &a.id("id"), a.body()?).await?),
        "removeMember" => empty(members::remove(st, &m, &a.id("id")).await?),
        "listAuditEvents" => json(members::audit(st, &m, a.query()?).await?),
        "createGithubInstallLink" => json(github::install_link(st, &m, a.optional_body()?).await?),
        "listGithubInstallations" => json(github::installations(st, &m).await?),
        "listGithubRepos" => json(github::repos(st, &m, a.query()?).await?),
        "installGithubWorkspaceRunner" => json(github::install_runner(st, &m, a.body()?).await?),
        "setCiLink" => json(ci::set(st, &m, a.body()?).await?),
        "listCiLinks" => json(ci::list(st, &m).await?),
        "removeCiLink" => {
            empty(ci::remove(st, &m, &a.id("owner"), &a.id("repo"), a.query()?).await?)
        }
        "getCiWorkflow" => {
            let yaml = ci::workflow(st, &m, &a.id("owner"), &a.id("repo"), a.query()?).await?;
            yaml.into_response()
        }
        "setGithubOnDemand" => json(on_demand::set(st, &m, a.body()?).await?),
        "listGithubOnDemand" => json(on_demand::list(st, &m).await?),
        "removeGithubOnDemand" => empty(on_demand::remove(st, &m, &a.id("id")).await?),
        other => Error::api(
            drover_wire::ErrorCode::Internal,
            format!("the MCP tool of {other} has no service"),
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
