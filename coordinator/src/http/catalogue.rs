//! The catalogue of every HTTP operation: one entry per route and method,
//! saying who may call it, what it takes and answers, and which MCP tool
//! (if any) is its twin. `/openapi.json` is built from it (`openapi.rs`),
//! with the request and answer shapes derived from the wire types
//! (`schemars`), and so are the MCP tools' input schemas (`crate::mcp`).
//! A test checks that every entry is routed and every tool is served.
//!
//! Over 500 lines: it is a table, one entry per operation with the prose of
//! its documentation, and holds no logic.

use drover_wire as wire;
use schemars::{JsonSchema, Schema, SchemaGenerator};

use super::{billing, jobs, members};

/// Makes the schema of a type (a `$ref` to it, for named types).
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

pub fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// Which credential an operation takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// A member's API token; admin-only operations say so and check it.
    Member,
    /// A runner's credential (`rnr_…`).
    Runner,
    /// A pool's join token (`djt_…`).
    Join,
    /// None (a pairing code in the path, or a public page).
    Public,
}

pub struct Op {
    /// The OpenAPI `operationId`.
    pub id: &'static str,
    /// Its MCP tool, for every human-facing operation.
    pub tool: Option<&'static str>,
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub auth: Auth,
    pub summary: &'static str,
    pub description: &'static str,
    /// Path and header parameters, as OpenAPI parameter objects (JSON).
    pub params: &'static str,
    /// The query string's shape.
    pub query: Option<SchemaFn>,
    pub body: Option<Body>,
    pub responses: &'static [Resp],
}

pub struct Body {
    pub schema: SchemaFn,
    /// False when an empty body means every field's default.
    pub required: bool,
    pub description: &'static str,
}

pub struct Resp {
    pub status: u16,
    pub description: &'static str,
    pub reply: Reply,
}

pub enum Reply {
    Empty,
    Json(SchemaFn),
    /// JSON, or CSV with `Accept: text/csv`.
    JsonOrCsv(SchemaFn),
    /// The `ErrorBody` envelope with this code.
    Error(&'static str),
    /// An OpenAPI content object (JSON): for text, HTML, and the probes.
    Raw(&'static str),
}

impl Op {
    /// The names in the path's `{…}` segments.
    pub fn path_params(&self) -> impl Iterator<Item = &'static str> {
        self.path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
    }
}

/// Looks an operation up by its MCP tool name.
pub fn by_tool(name: &str) -> Option<&'static Op> {
    OPS.iter().find(|op| op.tool == Some(name))
}

pub static OPS: &[Op] = &[
    Op {
        id: "submitJob",
        tool: Some("submit_job"),
        method: "post",
        path: "/v1/jobs",
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Submit a job"#,
        description: r#"Validates the job, resolves its runtime ref for the caller's workspace and queues it; a runner in the target pool (or the pinned runner) is woken at once. Jobs on a workspace-owned pool are refused while the workspace budget is spent. With an `Idempotency-Key` header, the same key from the same member within 24 hours answers the job the first request queued (`200`, the job as it is now, with `Idempotent-Replayed: true`) instead of queueing another, so a client may retry a submit whose answer it never got; the key and the job are written in one transaction. The same key with a different body is refused (`409 CONFLICT`)."#,
        params: r#"[{"name": "Idempotency-Key", "in": "header", "required": false, "description": "1-255 printable ASCII characters (e.g. a UUID) naming this submission for 24 hours, per member.", "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]{1,255}$"}}]"#,
        query: None,
        body: Some(Body {
            schema: schema::<wire::SubmitJob>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The job an earlier request with the same `Idempotency-Key` queued, as it is now; nothing new was queued."#,
                reply: Reply::Json(schema::<wire::Job>),
            },
            Resp {
                status: 201,
                description: r#"The job, queued."#,
                reply: Reply::Json(schema::<wire::Job>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, a field is out of range (command/script, env, requires, timeoutSeconds, priority, maxAttempts, image), the `Idempotency-Key` is not 1-255 printable ASCII characters, or the runtime ref breaks the grammar (`INVALID_REF`) (code `BAD_REQUEST`, `INVALID_REF`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 402,
                description: r#"The target is workspace-owned and the workspace budget is spent (code `BUDGET_EXCEEDED`)."#,
                reply: Reply::Error("BUDGET_EXCEEDED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"The ref names no pool or runner the caller can see, or the pool has no runner (`NO_RUNNERS`) (code `NOT_FOUND`, `NO_RUNNERS`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 409,
                description: r#"The `Idempotency-Key` was used in the last 24 hours with a different body (code `CONFLICT`)."#,
                reply: Reply::Error("CONFLICT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 422,
                description: r#"The ref pins a runner that lacks a capability in `requires` (code `CAPABILITY_MISMATCH`)."#,
                reply: Reply::Error("CAPABILITY_MISMATCH"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only. When the write may or may not have happened the message says so: retry with the same `Idempotency-Key` (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listJobs",
        tool: Some("list_jobs"),
        method: "get",
        path: "/v1/jobs",
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"List jobs"#,
        description: r#"Jobs the caller may see (their own, and any on a workspace-owned pool), newest first."#,
        params: "",
        query: Some(schema::<jobs::ListQuery>),
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The jobs, newest first."#,
                reply: Reply::Json(schema::<wire::JobList>),
            },
            Resp {
                status: 400,
                description: r#"Unknown `state`, `limit` outside 1..=1000, or an unknown query parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getJob",
        tool: Some("get_job"),
        method: "get",
        path: "/v1/jobs/{id}",
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Get a job"#,
        description: r#""#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Job id (`job_\u2026`). A job the caller cannot see is 404.", "schema": {"type": "string"}}]"#,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The job."#,
                reply: Reply::Json(schema::<wire::Job>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No such job, or one the caller may not see (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "cancelJob",
        tool: Some("cancel_job"),
        method: "post",
        path: "/v1/jobs/{id}/cancel",
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Cancel a job"#,
        description: r#"A queued job is cancelled at once; a leased or running job gets `cancelRequested` and its runner is told on its next heartbeat. Cancelling an already cancelled job changes nothing. No request body."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Job id (`job_\u2026`). A job the caller cannot see is 404.", "schema": {"type": "string"}}]"#,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The job after the cancel."#,
                reply: Reply::Json(schema::<wire::Job>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No such job, or one the caller may not see (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 409,
                description: r#"The job already finished in a state other than `cancelled` (code `CONFLICT`)."#,
                reply: Reply::Error("CONFLICT"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getJobLogs",
        tool: Some("get_job_logs"),
        method: "get",
        path: "/v1/jobs/{id}/logs",
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Read a job's logs"#,
        description: r#"The job's log text (stdout and stderr chunks of every attempt, in order) as `text/plain`. With `follow=true` the response is streamed and stays open until the job ends (or the coordinator shuts down)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Job id (`job_\u2026`). A job the caller cannot see is 404.", "schema": {"type": "string"}}]"#,
        query: Some(schema::<jobs::LogsQuery>),
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The log text; streamed when `follow=true`."#,
                reply: Reply::Raw(
                    r#"{"text/plain; charset=utf-8": {"schema": {"type": "string"}}}"#,
                ),
            },
            Resp {
                status: 400,
                description: r#"`follow` is not a boolean, or an unknown query parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No such job, or one the caller may not see (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "createRuntimeMine",
        tool: Some("create_my_runtime"),
        method: "post",
        path: "/v1/me/runtimes",
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a personal pool"#,
        description: r#"Creates a personal runtime (pool) in the caller's workspace."#,
        params: "",
        query: None,
        body: Some(Body {
            schema: schema::<wire::CreateRuntime>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The new pool."#,
                reply: Reply::Json(schema::<wire::Runtime>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 409,
                description: r#"A pool with this name already exists for this owner (code `CONFLICT`)."#,
                reply: Reply::Error("CONFLICT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listRuntimesMine",
        tool: Some("list_my_runtimes"),
        method: "get",
        path: "/v1/me/runtimes",
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"List personal pools"#,
        description: r#"The caller's personal pools, sorted by name."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The pools."#,
                reply: Reply::Json(schema::<wire::RuntimeList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "createJoinTokenMine",
        tool: Some("create_my_join_token"),
        method: "post",
        path: "/v1/me/runtimes/{id}/join-tokens",
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a join token for a personal pool"#,
        description: r#"Mints a join token (`djt_…`, shown once) that a runner exchanges at `POST /v1/runner/join` for its own credential. The body may be empty."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "The pool's name or id (`rt_\u2026`). The name `default` creates the owner's default pool on first use.", "schema": {"type": "string"}}]"#,
        query: None,
        body: Some(Body {
            schema: schema::<wire::CreateJoinToken>,
            required: false,
            description: r#"Optional; an empty body means the defaults."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The join token."#,
                reply: Reply::Json(schema::<wire::JoinToken>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or `ttlSeconds` is outside 1..=2592000 (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "createRuntimeWorkspace",
        tool: Some("create_runtime"),
        method: "post",
        path: "/v1/workspace/runtimes",
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a workspace-owned pool"#,
        description: r#"Creates a workspace-owned runtime (pool) in the caller's workspace. Needs the workspace admin role."#,
        params: "",
        query: None,
        body: Some(Body {
            schema: schema::<wire::CreateRuntime>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The new pool."#,
                reply: Reply::Json(schema::<wire::Runtime>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member lacks the workspace admin role (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 409,
                description: r#"A pool with this name already exists for this owner (code `CONFLICT`)."#,
                reply: Reply::Error("CONFLICT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listRuntimesWorkspace",
        tool: Some("list_runtimes"),
        method: "get",
        path: "/v1/workspace/runtimes",
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"List workspace-owned pools"#,
        description: r#"The workspace-owned pools (any member may list them), sorted by name."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The pools."#,
                reply: Reply::Json(schema::<wire::RuntimeList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "createJoinTokenWorkspace",
        tool: Some("create_join_token"),
        method: "post",
        path: "/v1/workspace/runtimes/{id}/join-tokens",
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a join token for a workspace-owned pool"#,
        description: r#"Mints a join token (`djt_…`, shown once) that a runner exchanges at `POST /v1/runner/join` for its own credential. The body may be empty. Needs the workspace admin role."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "The pool's name or id (`rt_\u2026`). The name `default` creates the owner's default pool on first use.", "schema": {"type": "string"}}]"#,
        query: None,
        body: Some(Body {
            schema: schema::<wire::CreateJoinToken>,
            required: false,
            description: r#"Optional; an empty body means the defaults."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The join token."#,
                reply: Reply::Json(schema::<wire::JoinToken>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or `ttlSeconds` is outside 1..=2592000 (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member lacks the workspace admin role (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "pairRunnerMine",
        tool: Some("pair_personal_runner"),
        method: "post",
        path: "/v1/me/runners",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Pair a personal runner"#,
        description: r#"Creates a runner in one of the owner's pools and returns its credential (`rnr_…`, shown once). The body may be empty."#,
        params: "",
        query: None,
        body: Some(Body {
            schema: schema::<wire::PairRunner>,
            required: false,
            description: r#"Optional; an empty body pairs a runner named `runner` into the `default` pool."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The runner and its credential."#,
                reply: Reply::Json(schema::<wire::PairedRunner>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name or a label is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listRunnersMine",
        tool: Some("list_my_runners"),
        method: "get",
        path: "/v1/me/runners",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"List my runners"#,
        description: r#"The caller's personal runners that are not revoked."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The runners."#,
                reply: Reply::Json(schema::<wire::RunnerList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "revokeRunnerMine",
        tool: Some("revoke_my_runner"),
        method: "delete",
        path: "/v1/me/runners/{id}",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Revoke a personal runner"#,
        description: r#"Its token stops working at once; any job it holds is re-queued (or ends `lost` when out of attempts, `cancelled` when a cancel was requested)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Runner id (`rn_\u2026`).", "schema": {"type": "string"}}]"#,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No live personal runner with this id in the caller's scope (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "pairRunnerWorkspace",
        tool: Some("pair_workspace_runner"),
        method: "post",
        path: "/v1/workspace/runners",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Pair a workspace-owned runner"#,
        description: r#"Creates a runner in one of the owner's pools and returns its credential (`rnr_…`, shown once). The body may be empty. Needs the workspace admin role."#,
        params: "",
        query: None,
        body: Some(Body {
            schema: schema::<wire::PairRunner>,
            required: false,
            description: r#"Optional; an empty body pairs a runner named `runner` into the `default` pool."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The runner and its credential."#,
                reply: Reply::Json(schema::<wire::PairedRunner>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name or a label is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member lacks the workspace admin role (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listRunnerRoster",
        tool: Some("list_workspace_runners"),
        method: "get",
        path: "/v1/workspace/runners",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"List the workspace roster"#,
        description: r#"Workspace-owned runners and every member's personal runners in this workspace (not revoked). Any member may list it."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The runners."#,
                reply: Reply::Json(schema::<wire::RunnerList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "revokeRunnerWorkspace",
        tool: Some("revoke_workspace_runner"),
        method: "delete",
        path: "/v1/workspace/runners/{id}",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Revoke a workspace-owned runner"#,
        description: r#"Its token stops working at once; any job it holds is re-queued (or ends `lost` when out of attempts, `cancelled` when a cancel was requested). Needs the workspace admin role."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Runner id (`rn_\u2026`).", "schema": {"type": "string"}}]"#,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member lacks the workspace admin role (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No live workspace-owned runner with this id in the caller's scope (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listRunnersWorkspace",
        tool: Some("list_workspace_owned_runners"),
        method: "get",
        path: "/v1/workspace/runners/owned",
        tag: "runners",
        auth: Auth::Member,
        summary: r#"List workspace-owned runners"#,
        description: r#"Workspace-owned runners only (not revoked). Any member may list them."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The runners."#,
                reply: Reply::Json(schema::<wire::RunnerList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "setBudget",
        tool: Some("set_budget"),
        method: "put",
        path: "/v1/workspace/budget",
        tag: "billing",
        auth: Auth::Member,
        summary: r#"Set the workspace's monthly budget"#,
        description: r#"Sets (or, with `null`, removes) the runner-minutes the workspace may be charged per calendar month (UTC). Once this month's are spent, jobs submitted to workspace-owned pools are refused with `402 BUDGET_EXCEEDED` (saying the budget, the use and when it resets) until the month ends; queued and running jobs go on, and jobs on members' own runners are never refused. Needs the workspace admin role. Recorded in the audit log (`budget.set`)."#,
        params: "",
        query: None,
        body: Some(Body {
            schema: schema::<wire::SetBudget>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The workspace's usage with the new limit."#,
                reply: Reply::Json(schema::<wire::Usage>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or `limitSeconds` is too large (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member lacks the workspace admin role (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getUsage",
        tool: Some("get_usage"),
        method: "get",
        path: "/v1/workspace/usage",
        tag: "billing",
        auth: Auth::Member,
        summary: r#"Get workspace usage"#,
        description: r#"This month's (UTC) runner time charged to the workspace and run on members' own runners, the monthly budget, and when it resets."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The usage."#,
                reply: Reply::Json(schema::<wire::Usage>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getMe",
        tool: Some("get_me"),
        method: "get",
        path: "/v1/me",
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"Who you are"#,
        description: r#"The member behind this request's member API token (workspace, email, subject, role) and the token itself (`current: true`; `null` for a token without an id). The desktop app checks a pasted token with it."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The caller."#,
                reply: Reply::Json(schema::<wire::Me>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "createPairingCode",
        tool: Some("create_pairing_code"),
        method: "post",
        path: "/v1/me/pairing-codes",
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"Create a one-time pairing code"#,
        description: r#"A code (`dpc_…`, shown once, stored hashed) that a device redeems once, within ten minutes, at `POST /v1/pairing-codes/{code}/redeem` for its own member API token. The link names this coordinator by its public URL (`serve --public-url`)."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 201,
                description: r#"The code and its link."#,
                reply: Reply::Json(schema::<wire::PairingCode>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "redeemPairingCode",
        tool: None,
        method: "post",
        path: "/v1/pairing-codes/{code}/redeem",
        tag: "pairing",
        auth: Auth::Public,
        summary: r#"Redeem a pairing code for a device token"#,
        description: r#"Needs no other credential: the code is one. Answers once with a member API token named after the device (listed under `GET /v1/me/tokens`, revocable there). Of two redeems of one code at once, exactly one succeeds. Wrong codes (unknown, used or expired) are limited per client address: after a burst of 20, one more every 3 seconds; beyond that the answer is 429 `RATE_LIMITED` with `Retry-After`, before any lookup. A right code costs nothing. Behind a reverse proxy its clients share the proxy's address."#,
        params: r#"[{"name": "code", "in": "path", "required": true, "description": "The pairing code (`dpc_\u2026`).", "schema": {"type": "string"}}]"#,
        query: None,
        body: Some(Body {
            schema: schema::<wire::RedeemPairingCode>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The device's token (shown once)."#,
                reply: Reply::Json(schema::<wire::DeviceToken>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, or `deviceName` is empty, over 64 characters or holds control characters (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 404,
                description: r#"No such pairing code (unknown or malformed; code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 410,
                description: r#"The code was already redeemed (code `PAIRING_CODE_USED`), or is older than ten minutes (code `PAIRING_CODE_EXPIRED`)."#,
                reply: Reply::Error("PAIRING_CODE_USED"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 429,
                description: r#"Too many wrong pairing codes from this client address; retry after `Retry-After` seconds (code `RATE_LIMITED`)."#,
                reply: Reply::Error("RATE_LIMITED"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listTokensMine",
        tool: Some("list_my_tokens"),
        method: "get",
        path: "/v1/me/tokens",
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"List your API tokens"#,
        description: r#"The caller's member API tokens, oldest first: never a secret or its hash. `current` marks the token of this request."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The tokens."#,
                reply: Reply::Json(schema::<wire::ApiTokenList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "revokeTokenMine",
        tool: Some("revoke_my_token"),
        method: "delete",
        path: "/v1/me/tokens/{id}",
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"Revoke one of your API tokens"#,
        description: r#"The token stops working at once (the next request with it gets 401). It may be the caller's own."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Token id (`tok_\u2026`).", "schema": {"type": "string"}}]"#,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No token with this id among the caller's (another member's token is not found either; code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerJoin",
        tool: None,
        method: "post",
        path: "/v1/runner/join",
        tag: "runner protocol",
        auth: Auth::Join,
        summary: r#"Exchange a join token for a runner credential"#,
        description: r#"Creates a runner in the join token's pool. The token stays valid until it expires."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::JoinRequest>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The new runner's id and credential."#,
                reply: Reply::Json(schema::<wire::JoinedRunner>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, the name or a capability is invalid, the ref breaks the grammar (`INVALID_REF`), or the `drover-protocol` header names a version other than 1 (code `BAD_REQUEST`, `INVALID_REF`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown or expired join token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a join token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"The ref does not name the join token's pool, or that pool no longer exists (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerJoinTokenInfo",
        tool: None,
        method: "get",
        path: "/v1/runner/join-token",
        tag: "runner protocol",
        auth: Auth::Join,
        summary: r#"Which pool a join token joins"#,
        description: r#"Answers the pool of the join token given as bearer, without using it up or creating anything. `drover runner --join` asks before reusing the credentials it saved, so a state directory holding another pool's runner is refused rather than silently used."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The token's pool."#,
                reply: Reply::Json(schema::<wire::JoinTokenInfo>),
            },
            Resp {
                status: 400,
                description: r#"The `drover-protocol` header names a version other than 1 (code `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("UNSUPPORTED_PROTOCOL"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown or expired join token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a join token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"The join token's pool no longer exists (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
        ],
    },
    Op {
        id: "runnerHello",
        tool: None,
        method: "post",
        path: "/v1/runner/hello",
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Announce detected capabilities"#,
        description: r#"Replaces the runner's detected capabilities and its slots (how many leases it may hold at once), and marks it seen."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::Hello>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"Who this runner is."#,
                reply: Reply::Json(schema::<wire::HelloResponse>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, a capability is invalid, `slots` is outside 1..=256, or the `drover-protocol` header names a version other than 1 (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerLeave",
        tool: None,
        method: "post",
        path: "/v1/runner/leave",
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Revoke this runner"#,
        description: r#"The runner revokes itself, as its owner or a workspace admin would (`DELETE /v1/me/runners/{id}`, `DELETE /v1/workspace/runners/{id}`): its credential stops working at once, a job it holds goes back to the queue (or ends `lost` when out of attempts), jobs pinned to it end `lost`, and pool listings no longer show it. No body."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 400,
                description: r#"The `drover-protocol` header names a version other than 1 (code `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("UNSUPPORTED_PROTOCOL"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked already (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerLease",
        tool: None,
        method: "post",
        path: "/v1/runner/lease",
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Long-poll for a job"#,
        description: r#"Answers at once with a lease when a job the runner can run is queued (jobs pinned to it first, then its pool's queue, by priority then first-in first-out); otherwise waits up to `waitMs` (at most 30000) and answers `{"lease": null}`. A runner holds at most as many leases, and keeps at most as many lease requests waiting, as the slots it declared in hello; beyond that this answers `429 LEASE_LIMIT` at once."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::LeaseRequest>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"A lease, or `null` when the wait ended without a job."#,
                reply: Reply::Json(schema::<wire::LeaseResponse>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the `drover-protocol` header names a version other than 1 (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 429,
                description: r#"The runner already holds as many leases as its slots, or has a lease request waiting for each of them; it should finish a job (or wait) and ask again. Nothing was leased (code `LEASE_LIMIT`)."#,
                reply: Reply::Error("LEASE_LIMIT"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerHeartbeat",
        tool: None,
        method: "post",
        path: "/v1/runner/leases/{lease}/heartbeat",
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Renew a lease and wait for a cancel"#,
        description: r#"Renews the lease (a leased job becomes `running`), then waits up to `waitMs` (at most half the lease TTL) for a cancel, so a cancel reaches the runner at once."#,
        params: r##"[{"$ref": "#/components/parameters/LeaseId"}, {"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::Heartbeat>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"Whether to cancel, and the lease TTL."#,
                reply: Reply::Json(schema::<wire::HeartbeatResponse>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the `drover-protocol` header names a version other than 1 (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 409,
                description: r#"The lease is no longer held by this runner (expired, re-queued or revoked) (code `LEASE_LOST`)."#,
                reply: Reply::Error("LEASE_LOST"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerLogs",
        tool: None,
        method: "post",
        path: "/v1/runner/leases/{lease}/logs",
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Append a log chunk"#,
        description: r#"Stores one chunk of output for the leased job; a chunk number already stored for this attempt is ignored."#,
        params: r##"[{"$ref": "#/components/parameters/LeaseId"}, {"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::LogChunk>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 204,
                description: r#"Stored (or already stored)."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, `seq` is too large, or the `drover-protocol` header names a version other than 1 (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 409,
                description: r#"The lease is no longer held by this runner (expired, re-queued or revoked) (code `LEASE_LOST`)."#,
                reply: Reply::Error("LEASE_LOST"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "runnerComplete",
        tool: None,
        method: "post",
        path: "/v1/runner/leases/{lease}/complete",
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Complete the leased job"#,
        description: r#"Finishes the job, records provenance and usage. Idempotent per lease: a repeat answers the final state with `repeated: true`."#,
        params: r##"[{"$ref": "#/components/parameters/LeaseId"}, {"$ref": "#/components/parameters/DroverProtocol"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::Complete>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The job's final state."#,
                reply: Reply::Json(schema::<wire::CompleteResponse>),
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the `drover-protocol` header names a version other than 1 (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 408,
                description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
                reply: Reply::Error("REQUEST_TIMEOUT"),
            },
            Resp {
                status: 409,
                description: r#"The lease is no longer held by this runner (expired, re-queued or revoked) (code `LEASE_LOST`)."#,
                reply: Reply::Error("LEASE_LOST"),
            },
            Resp {
                status: 413,
                description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
                reply: Reply::Error("PAYLOAD_TOO_LARGE"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getOpenApi",
        tool: None,
        method: "get",
        path: "/openapi.json",
        tag: "meta",
        auth: Auth::Public,
        summary: r#"This OpenAPI document"#,
        description: r#""#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The OpenAPI 3.1 document."#,
                reply: Reply::Raw(r#"{"application/json": {"schema": {"type": "object"}}}"#),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getDocs",
        tool: None,
        method: "get",
        path: "/docs",
        tag: "meta",
        auth: Auth::Public,
        summary: r#"API docs page"#,
        description: r#"An HTML page that renders `/openapi.json` with no network access."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The docs page."#,
                reply: Reply::Raw(
                    r#"{"text/html; charset=utf-8": {"schema": {"type": "string"}}}"#,
                ),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "healthz",
        tool: None,
        method: "get",
        path: "/healthz",
        tag: "meta",
        auth: Auth::Public,
        summary: r#"Liveness (the process serves HTTP), and the long-polls waiting now"#,
        description: r#"Answers 200 while the process runs, whatever the database does: for a liveness probe (restart the coordinator if it fails). No credential."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The coordinator is up."#,
                reply: Reply::Raw(
                    r#"{"application/json": {"schema": {"type": "object", "required": ["status", "waitingLeases"], "properties": {"status": {"type": "string", "const": "ok"}, "waitingLeases": {"type": "integer", "minimum": 0, "description": "Lease long-polls waiting for a job."}, "waitingHeartbeats": {"type": "integer", "minimum": 0, "description": "Leases whose heartbeat is waiting for a cancel."}, "followedLogs": {"type": "integer", "minimum": 0, "description": "Jobs whose log is being followed."}}}}}"#,
                ),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "readyz",
        tool: None,
        method: "get",
        path: "/readyz",
        tag: "meta",
        auth: Auth::Public,
        summary: r#"Readiness: the database answers and its migrations are this build's"#,
        description: r#"For a readiness probe or a load balancer's health check: 200 when the coordinator can serve; 503 `NOT_READY` when its database does not answer within 2 s (PostgreSQL through the pool; SQLite by opening the file afresh), when the applied migrations differ from the ones this build carries (missing, failed, or unknown ones from a newer coordinator), or once it is shutting down. An answer is reused for up to a second. No credential."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"Ready."#,
                reply: Reply::Raw(
                    r#"{"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string", "const": "ready"}}}}}"#,
                ),
            },
            Resp {
                status: 503,
                description: r#"Not ready (code `NOT_READY`; the message says why, naming migration versions at most), or overloaded (code `OVERLOADED`, with `Retry-After`)."#,
                reply: Reply::Error("NOT_READY"),
            },
        ],
    },
    Op {
        id: "metrics",
        tool: None,
        method: "get",
        path: "/metrics",
        tag: "meta",
        auth: Auth::Public,
        summary: r#"Metrics in the Prometheus text format"#,
        description: r#"Queue depth and oldest queued job's age per pool, runners online per pool (read from the database at scrape time; labelled by pool id, at most 200 pools, the rest under `pool="other"`), lease/submit/complete latency histograms, batch sizes and write times per kind, waiting lease long-polls, and on PostgreSQL the replica signal lag and reconnects. Names and meanings: README, Operating. Open to anyone who reaches the listen address unless the coordinator runs with `--metrics-token-file`; then that token is wanted as a bearer. Shows no names, emails or tokens."#,
        params: "",
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The metrics."#,
                reply: Reply::Raw(
                    r#"{"text/plain; version=0.0.4": {"schema": {"type": "string"}}}"#,
                ),
            },
            Resp {
                status: 401,
                description: r#"`--metrics-token-file` is set and the bearer token is missing or wrong (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(""),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listMembers",
        tool: Some("list_members"),
        method: "get",
        path: "/v1/workspace/members",
        tag: "members",
        auth: Auth::Member,
        summary: r#"List the workspace's members"#,
        description: r#"Admins only. Current members, invited ones too (`status: invited`), oldest first, each with their API tokens' names, creation and last use: never a secret."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The members."#,
                reply: Reply::Json(schema::<wire::MemberList>),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "inviteMember",
        tool: Some("invite_member"),
        method: "post",
        path: "/v1/workspace/members",
        tag: "members",
        auth: Auth::Member,
        summary: r#"Invite a member"#,
        description: r#"Admins only. Adds the member (`status: invited`) and answers a one-time code, shown once, good for seven days, with its `drover://pair` link: the invitee redeems it (`POST /v1/pairing-codes/{code}/redeem`, `drover redeem`, or the desktop app) for their first token, and becomes `active`. Inviting someone invited but not joined gives a new code (the old ones stop working); someone removed comes back. Recorded in the audit log (`member.invited`)."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::InviteMember>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"Invited."#,
                reply: Reply::Json(schema::<wire::Invite>),
            },
            Resp {
                status: 400,
                description: r#"Not a JSON object of this shape, or an invalid email or role (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 409,
                description: r#"Already an active member of this workspace (code `CONFLICT`)."#,
                reply: Reply::Error("CONFLICT"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "updateMember",
        tool: Some("update_member"),
        method: "patch",
        path: "/v1/workspace/members/{id}",
        tag: "members",
        auth: Auth::Member,
        summary: r#"Change a member's role"#,
        description: r#"Admins only. The last admin cannot be demoted. Recorded in the audit log (`member.updated`)."#,
        params: r##"[{"name": "id", "in": "path", "required": true, "description": "Member id (`usr_\u2026`).", "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
        query: None,
        body: Some(Body {
            schema: schema::<wire::UpdateMember>,
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The member, with the new role."#,
                reply: Reply::Json(schema::<wire::Member>),
            },
            Resp {
                status: 400,
                description: r#"Not a JSON object of this shape, or an invalid email or role (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No current member with this id in the caller's workspace (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 409,
                description: r#"The change would leave the workspace without an admin (code `LAST_ADMIN`)."#,
                reply: Reply::Error("LAST_ADMIN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "removeMember",
        tool: Some("remove_member"),
        method: "delete",
        path: "/v1/workspace/members/{id}",
        tag: "members",
        auth: Auth::Member,
        summary: r#"Remove a member"#,
        description: r#"Admins only. At once, on every replica: the member's API tokens and unused codes stop working, their personal runners are revoked, their queued jobs end `cancelled` and their running jobs are told to cancel. Workspace pools are untouched. The last admin cannot be removed. Recorded in the audit log (`member.removed`)."#,
        params: r##"[{"name": "id", "in": "path", "required": true, "description": "Member id (`usr_\u2026`).", "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
        query: None,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Removed."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 404,
                description: r#"No current member with this id in the caller's workspace (code `NOT_FOUND`)."#,
                reply: Reply::Error("NOT_FOUND"),
            },
            Resp {
                status: 409,
                description: r#"The change would leave the workspace without an admin (code `LAST_ADMIN`)."#,
                reply: Reply::Error("LAST_ADMIN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "listAuditEvents",
        tool: Some("list_audit_events"),
        method: "get",
        path: "/v1/workspace/audit",
        tag: "members",
        auth: Auth::Member,
        summary: r#"Read the audit log"#,
        description: r#"Admins only. Every state-changing action in the workspace, newest first: who (a member, a runner leaving, a pool's join token), when, what, the target's id, and the surface (`rest`, `cli`, `desktop`, `mcp`). Never a token, a code or a job's env value."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        query: Some(schema::<members::AuditParams>),
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"A page of entries."#,
                reply: Reply::Json(schema::<wire::AuditPage>),
            },
            Resp {
                status: 400,
                description: r#"An unknown parameter or action, or a bad limit or cursor (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getWorkspaceUsageReport",
        tool: Some("get_usage_report"),
        method: "get",
        path: "/v1/workspace/billing/usage",
        tag: "billing",
        auth: Auth::Member,
        summary: r#"A month's usage report"#,
        description: r#"Admins only. The workspace's metered runner time in a month, one line per pool, member or runner, largest first. Every attempt is one usage line, metered once: a complete sent twice adds nothing, and an attempt whose lease was lost while it ran is metered for the time it ran."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        query: Some(schema::<billing::ReportParams>),
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The report: JSON, or CSV (RFC 4180, a header line `month,<by>_id,<by>,runner_ms,charged_ms,attempts`) with `Accept: text/csv`."#,
                reply: Reply::JsonOrCsv(schema::<wire::UsageReport>),
            },
            Resp {
                status: 400,
                description: r#"A month not `YYYY-MM`, a `by` not pool, member or runner, or an unknown parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
    Op {
        id: "getMyUsageReport",
        tool: Some("get_my_usage_report"),
        method: "get",
        path: "/v1/me/usage",
        tag: "billing",
        auth: Auth::Member,
        summary: r#"Your usage in a month"#,
        description: r#"The runner time of the jobs the caller submitted, in a month, by pool, member or runner: on workspace pools (charged to the workspace) and on the caller's own runners."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        query: Some(schema::<billing::ReportParams>),
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The report: JSON, or CSV (RFC 4180, a header line `month,<by>_id,<by>,runner_ms,charged_ms,attempts`) with `Accept: text/csv`."#,
                reply: Reply::JsonOrCsv(schema::<wire::UsageReport>),
            },
            Resp {
                status: 400,
                description: r#"A month not `YYYY-MM`, a `by` not pool, member or runner, or an unknown parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error("BAD_REQUEST"),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error("UNAUTHORIZED"),
            },
            Resp {
                status: 403,
                description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
                reply: Reply::Error("FORBIDDEN"),
            },
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
                reply: Reply::Error("INTERNAL"),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error("OVERLOADED"),
            },
        ],
    },
];
