//! The catalogue of every HTTP operation: one entry per route and method,
//! saying who may call it, what it takes and answers, and which MCP tool
//! (if any) is its twin. `/openapi.json` is built from it (`openapi.rs`),
//! with the request and answer shapes derived from the wire types
//! (`schemars`), and so are the MCP tools' input schemas (`crate::mcp`).
//! A test checks that every entry is routed and every tool is served.
//!
//! Over 500 lines: it is a table, one entry per operation with the prose of
//! its documentation, and holds no logic.

use drover_wire::ErrorCode;
use drover_wire::op::{self, AnswerKind, Operation};
use schemars::{JsonSchema, Schema, SchemaGenerator};

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
    /// What `drover_wire::op` declares: id, method, path and the types.
    pub decl: Decl,
    /// Its MCP tool, for every human-facing operation.
    pub tool: Option<&'static str>,
    pub tag: &'static str,
    pub auth: Auth,
    pub summary: &'static str,
    pub description: &'static str,
    /// Path and header parameters, as OpenAPI parameter objects (JSON).
    pub params: &'static str,
    /// The body's documentation, when the declaration takes one.
    pub body: Option<Body>,
    pub responses: &'static [Resp],
}

/// An operation's declaration (`drover_wire::op`), with the schemas of
/// its query, body and answer types.
pub struct Decl {
    /// The OpenAPI `operationId`.
    pub id: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub query: Option<SchemaFn>,
    pub body: Option<SchemaFn>,
    pub answer: SchemaFn,
    pub kind: AnswerKind,
}

/// The catalogue's view of a declared operation.
pub const fn declared<O: Operation>() -> Decl
where
    O::Query: JsonSchema,
    O::Body: JsonSchema,
    O::Answer: JsonSchema,
{
    Decl {
        id: O::ID,
        method: O::METHOD.as_str(),
        path: O::PATH,
        query: if O::HAS_QUERY {
            Some(schema::<O::Query>)
        } else {
            None
        },
        body: if O::HAS_BODY {
            Some(schema::<O::Body>)
        } else {
            None
        },
        answer: schema::<O::Answer>,
        kind: O::ANSWER,
    }
}

pub struct Body {
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
    /// The declared answer, as JSON.
    Answer,
    /// The declared answer as JSON, or CSV with `Accept: text/csv`.
    AnswerOrCsv,
    /// The `ErrorBody` envelope with this code (its status is the one
    /// `error::status_of` gives it; a test holds them together).
    Error(ErrorCode),
    /// An OpenAPI content object (JSON): for text, HTML, and the probes.
    Raw(&'static str),
}

impl Op {
    /// The names in the path's `{…}` segments.
    pub fn path_params(&self) -> impl Iterator<Item = &'static str> {
        drover_wire::op::path_params(self.decl.path)
    }
}

/// Looks an operation up by its MCP tool name.
pub fn by_tool(name: &str) -> Option<&'static Op> {
    OPS.iter().find(|op| op.tool == Some(name))
}

// The refusals many operations share.
const GITHUB_NOT_CONFIGURED: Resp = Resp {
    status: 409,
    description: r#"This coordinator has no GitHub App configured (code `GITHUB_NOT_CONFIGURED`)."#,
    reply: Reply::Error(ErrorCode::GithubNotConfigured),
};

const GITHUB_ERROR: Resp = Resp {
    status: 502,
    description: r#"GitHub refused or failed a call the coordinator made; the message says what GitHub answered (code `GITHUB_ERROR`)."#,
    reply: Reply::Error(ErrorCode::GithubError),
};

/// The refusals of the routes that name one CI link.
const CI_LINK_BAD_NAME: Resp = Resp {
    status: 400,
    description: r#"A repository GitHub would not name, or an unknown host (code `BAD_REQUEST`)."#,
    reply: Reply::Error(ErrorCode::BadRequest),
};

const CI_LINK_NOT_FOUND: Resp = Resp {
    status: 404,
    description: r#"This workspace does not link that repository (code `NOT_FOUND`)."#,
    reply: Reply::Error(ErrorCode::NotFound),
};

/// What every operation but `/healthz` answers a client of another
/// protocol (the `version` layer, before routing); `openapi.rs` adds it to
/// each of them.
pub const VERSION_SKEW: Resp = Resp {
    status: 426,
    description: r#"The `drover-protocol` header names a protocol this coordinator does not serve: older than the oldest it serves (code `UPGRADE_REQUIRED`; the message names the `drover` version to install), or newer than it knows (code `COORDINATOR_TOO_OLD`: upgrade the coordinator, or use a `drover` of its version). `/healthz` reports the range. Requests without the header are served."#,
    reply: Reply::Error(ErrorCode::UpgradeRequired),
};

/// Every member operation reads `drover-surface` (for the audit log) and
/// refuses a value it does not know.
pub const BAD_SURFACE: Resp = Resp {
    status: 400,
    description: r#"A `drover-surface` header other than `rest`, `cli` or `desktop` (code `BAD_REQUEST`)."#,
    reply: Reply::Error(ErrorCode::BadRequest),
};

/// The answers an operation has by its kind, besides its own: a version
/// refusal on every route but `/healthz`, and on a member operation that
/// documents no `400` of its own, the refused `drover-surface` header.
pub fn implied(op: &Op) -> impl Iterator<Item = &'static Resp> {
    let skew = (op.decl.path != "/healthz").then_some(&VERSION_SKEW);
    let surface = (op.auth == Auth::Member && !op.responses.iter().any(|r| r.status == 400))
        .then_some(&BAD_SURFACE);
    skew.into_iter().chain(surface)
}

const OVERLOADED: Resp = Resp {
    status: 503,
    description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
    reply: Reply::Error(ErrorCode::Overloaded),
};
/// The cap on large answers per principal (`http::heavy`).
const TOO_MANY_LARGE_ANSWERS: Resp = Resp {
    status: 429,
    description: r#"Too many large answers (job lists, jobs, log batches) are in flight to this member or CI principal (`--max-reads-per-member`, 8 by default; a client that stops reading holds its turn until the body timeout); retry after `Retry-After` seconds (code `RATE_LIMITED`)."#,
    reply: Reply::Error(ErrorCode::RateLimited),
};
const INTERNAL: Resp = Resp {
    status: 500,
    description: r#"Something failed inside the coordinator; details are in its log only (code `INTERNAL`)."#,
    reply: Reply::Error(ErrorCode::Internal),
};
const NOT_MEMBER_TOKEN: Resp = Resp {
    status: 403,
    description: r#"The token is not a member API token (code `FORBIDDEN`)."#,
    reply: Reply::Error(ErrorCode::Forbidden),
};
const UNAUTHORIZED: Resp = Resp {
    status: 401,
    description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
    reply: Reply::Error(ErrorCode::Unauthorized),
};
const BODY_TIMEOUT: Resp = Resp {
    status: 408,
    description: r#"The request body did not arrive within the body timeout; the connection closes (code `REQUEST_TIMEOUT`)."#,
    reply: Reply::Error(ErrorCode::RequestTimeout),
};
const BODY_TOO_LARGE: Resp = Resp {
    status: 413,
    description: r#"The request body exceeds 1 MiB (code `PAYLOAD_TOO_LARGE`)."#,
    reply: Reply::Error(ErrorCode::PayloadTooLarge),
};
const NOT_ADMIN: Resp = Resp {
    status: 403,
    description: r#"The token is not a member API token, or the member is not an admin (code `FORBIDDEN`)."#,
    reply: Reply::Error(ErrorCode::Forbidden),
};
/// The 403 of the job routes, which a CI token may call too.
const JOB_FORBIDDEN: Resp = Resp {
    status: 403,
    description: r#"The token is neither a member API token nor a linked repository's CI token (code `FORBIDDEN`), or it is the CI token of a run whose ref or event its CI link does not allow, or of a job for a pool other than the link's runtime (code `CI_NOT_ALLOWED`)."#,
    reply: Reply::Error(ErrorCode::Forbidden),
};
const NOT_RUNNER_TOKEN: Resp = Resp {
    status: 403,
    description: r#"The token is not a runner token (code `FORBIDDEN`)."#,
    reply: Reply::Error(ErrorCode::Forbidden),
};
/// The 400 of a route with no body or query: only the protocol header can be wrong.
const PROTOCOL_NOT_A_NUMBER: Resp = Resp {
    status: 400,
    description: r#"The `drover-protocol` header is not a number (code `UNSUPPORTED_PROTOCOL`)."#,
    reply: Reply::Error(ErrorCode::UnsupportedProtocol),
};
const RUNNER_UNAUTHORIZED: Resp = Resp {
    status: 401,
    description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked (code `UNAUTHORIZED`)."#,
    reply: Reply::Error(ErrorCode::Unauthorized),
};

pub static OPS: &[Op] = &[
    Op {
        decl: declared::<op::SubmitJob>(),
        tool: Some("submit_job"),
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Submit a job"#,
        description: r#"Validates the job, resolves its runtime ref for the caller's workspace and queues it; a runner in the target pool (or the pinned runner) is woken at once. Jobs on a workspace-owned pool are refused while the workspace budget is spent. With an `Idempotency-Key` header, the same key from the same member within 24 hours answers the job the first request queued (`200`, the job as it is now, with `Idempotent-Replayed: true`) instead of queueing another, so a client may retry a submit whose answer it never got; the key and the job are written in one transaction. The same key with a different body is refused (`409 CONFLICT`). The answer holds the job's whole command or script; when that is over 64 KiB the answer is a large one (see `429`)."#,
        params: r#"[{"name": "Idempotency-Key", "in": "header", "required": false, "description": "1-255 printable ASCII characters (e.g. a UUID) naming this submission for 24 hours, per member.", "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]{1,255}$"}}]"#,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The job an earlier request with the same `Idempotency-Key` queued, as it is now; nothing new was queued."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 201,
                description: r#"The job, queued."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, a field is out of range (command/script, env, requires, timeoutSeconds, priority, maxAttempts, image), the `Idempotency-Key` is not 1-255 printable ASCII characters, or the runtime ref breaks the grammar (`INVALID_REF`) (code `BAD_REQUEST`, `INVALID_REF`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            Resp {
                status: 402,
                description: r#"The target is workspace-owned and the workspace budget is spent (code `BUDGET_EXCEEDED`)."#,
                reply: Reply::Error(ErrorCode::BudgetExceeded),
            },
            JOB_FORBIDDEN,
            Resp {
                status: 404,
                description: r#"The ref names no pool or runner the caller can see, or the pool has no runner (`NO_RUNNERS`) (code `NOT_FOUND`, `NO_RUNNERS`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"The `Idempotency-Key` was used in the last 24 hours with a different body (code `CONFLICT`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            BODY_TOO_LARGE,
            Resp {
                status: 422,
                description: r#"The ref pins a runner that lacks a capability in `requires` (code `CAPABILITY_MISMATCH`)."#,
                reply: Reply::Error(ErrorCode::CapabilityMismatch),
            },
            TOO_MANY_LARGE_ANSWERS,
            Resp {
                status: 500,
                description: r#"Something failed inside the coordinator; details are in its log only. When the write may or may not have happened the message says so: retry with the same `Idempotency-Key` (code `INTERNAL`)."#,
                reply: Reply::Error(ErrorCode::Internal),
            },
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListJobs>(),
        tool: Some("list_jobs"),
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"List jobs"#,
        description: r#"Jobs the caller may see (SPEC §9: a member's or admin's own, and any on a workspace-owned pool, never another member's personal-pool jobs; a CI principal's only the jobs its repository submitted), newest first, a page at a time. Each job's command or script is a preview (512 bytes at most, `truncated: true` when cut; `GET /v1/jobs/{id}` has it whole). A page holds at most `limit` jobs and ends early, before the job that would take it past 512 KiB; `nextBefore`, passed as `before`, continues with the older jobs. A large answer (see `429`)."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"A page of jobs, newest first, and where the next one starts."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"Unknown `state`, `limit` outside 1..=1000, a `before` that is not a page's `nextBefore`, or an unknown query parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            JOB_FORBIDDEN,
            TOO_MANY_LARGE_ANSWERS,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetJob>(),
        tool: Some("get_job"),
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Get a job"#,
        description: r#"The job with its whole command or script. A large answer (see `429`)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Job id (`job_\u2026`). A job the caller cannot see is 404 (a member or admin sees their own and the workspace pools' jobs; a CI principal only its repository's).", "schema": {"type": "string"}}]"#,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The job."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            JOB_FORBIDDEN,
            Resp {
                status: 404,
                description: r#"No such job, or one the caller may not see (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            TOO_MANY_LARGE_ANSWERS,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CancelJob>(),
        tool: Some("cancel_job"),
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Cancel a job"#,
        description: r#"A queued job is cancelled at once; a leased or running job gets `cancelRequested` and its runner is told on its next heartbeat. Cancelling an already cancelled job changes nothing. No request body. The answer is the job with its whole spec: a large answer (see `429`; refused before anything changes)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Job id (`job_\u2026`). A job the caller cannot see is 404 (a member or admin sees their own and the workspace pools' jobs; a CI principal only its repository's).", "schema": {"type": "string"}}]"#,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The job after the cancel."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            JOB_FORBIDDEN,
            Resp {
                status: 404,
                description: r#"No such job, or one the caller may not see (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            Resp {
                status: 409,
                description: r#"The job already finished in a state other than `cancelled` (code `CONFLICT`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            TOO_MANY_LARGE_ANSWERS,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetJobLogs>(),
        tool: Some("get_job_logs"),
        tag: "jobs",
        auth: Auth::Member,
        summary: r#"Read a job's logs"#,
        description: r#"The job's log text (stdout and stderr chunks of every attempt, in order) as `text/plain`. With `follow=true` the response is streamed and stays open until the job ends (or the coordinator shuts down). The log is read and sent in batches of about 256 K characters, each a large answer (see `429`: the first one's turn is asked for at once, later ones wait for theirs); waiting for new output takes no turn. A stream that reads the log of a job that has ended to its end closes with the trailer fields `drover-job-state` (the terminal state) and `drover-exit-code` (when the job has one), declared in its `Trailer` header and sent where the request says `TE: trailers`: a client following a job to its end need not ask for the job again."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Job id (`job_\u2026`). A job the caller cannot see is 404 (a member or admin sees their own and the workspace pools' jobs; a CI principal only its repository's).", "schema": {"type": "string"}}]"#,
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
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            JOB_FORBIDDEN,
            Resp {
                status: 404,
                description: r#"No such job, or one the caller may not see (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            TOO_MANY_LARGE_ANSWERS,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CreateRuntimeMine>(),
        tool: Some("create_my_runtime"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a personal pool"#,
        description: r#"Creates a personal runtime (pool) in the caller's workspace."#,
        params: "",
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The new pool."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_MEMBER_TOKEN,
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"A pool with this name already exists for this owner (code `CONFLICT`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListRuntimesMine>(),
        tool: Some("list_my_runtimes"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"List personal pools"#,
        description: r#"The caller's personal pools, sorted by name."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The pools."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CreateJoinTokenMine>(),
        tool: Some("create_my_join_token"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a join token for a personal pool"#,
        description: r#"Mints a join token (`djt_…`, shown once) that a runner exchanges at `POST /v1/runner/join` for its own credential, with its id (`jt_…`) to list and revoke it by. It lives one day unless `ttlSeconds` says otherwise (at most 30 days). The body may be empty. Recorded in the audit log (`join_token.created`)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "The pool's name or id (`rt_\u2026`). The name `default` creates the owner's default pool on first use.", "schema": {"type": "string"}}]"#,
        body: Some(Body {
            required: false,
            description: r#"Optional; an empty body means the defaults."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The join token."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or `ttlSeconds` is outside 1..=2592000 (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_MEMBER_TOKEN,
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CreateRuntimeWorkspace>(),
        tool: Some("create_runtime"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a workspace-owned pool"#,
        description: r#"Creates a workspace-owned runtime (pool) in the caller's workspace. Needs the workspace admin role."#,
        params: "",
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The new pool."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"A pool with this name already exists for this owner (code `CONFLICT`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListRuntimesWorkspace>(),
        tool: Some("list_runtimes"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"List workspace-owned pools"#,
        description: r#"The workspace-owned pools (any member may list them), sorted by name."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The pools."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CreateJoinTokenWorkspace>(),
        tool: Some("create_join_token"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Create a join token for a workspace-owned pool"#,
        description: r#"Mints a join token (`djt_…`, shown once) that a runner exchanges at `POST /v1/runner/join` for its own credential, with its id (`jt_…`) to list and revoke it by. It lives one day unless `ttlSeconds` says otherwise (at most 30 days). The body may be empty. Recorded in the audit log (`join_token.created`). Needs the workspace admin role."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "The pool's name or id (`rt_\u2026`). The name `default` creates the owner's default pool on first use.", "schema": {"type": "string"}}]"#,
        body: Some(Body {
            required: false,
            description: r#"Optional; an empty body means the defaults."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The join token."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or `ttlSeconds` is outside 1..=2592000 (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListJoinTokensMine>(),
        tool: Some("list_my_join_tokens"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"List the join tokens of the caller's personal pools"#,
        description: r#"The join tokens of the caller's personal pools that have not expired, oldest first: each one's id (`jt_…`), pool, who minted it, when it was made, when it expires, when a runner last joined with it and how many did. Never the token itself."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The join tokens."#,
                reply: Reply::Answer,
            },
            UNAUTHORIZED,
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RevokeJoinTokenMine>(),
        tool: Some("revoke_my_join_token"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Revoke a join token of the caller's personal pools"#,
        description: r#"The join token stops working at once, on every replica: a runner that tries to join with it next gets 401 `UNAUTHORIZED`. Runners that already joined with it keep their own credentials. Recorded in the audit log (`join_token.revoked`)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "The join token's id (`jt_\u2026`), from the listing.", "schema": {"type": "string"}}]"#,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            UNAUTHORIZED,
            NOT_MEMBER_TOKEN,
            Resp {
                status: 404,
                description: r#"No join token with this id for the caller's personal pools (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListJoinTokensWorkspace>(),
        tool: Some("list_join_tokens"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"List the join tokens of the workspace-owned pools"#,
        description: r#"The join tokens of the workspace-owned pools that have not expired, oldest first: each one's id (`jt_…`), pool, who minted it, when it was made, when it expires, when a runner last joined with it and how many did. Never the token itself. Needs the workspace admin role."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The join tokens."#,
                reply: Reply::Answer,
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RevokeJoinTokenWorkspace>(),
        tool: Some("revoke_join_token"),
        tag: "runtimes",
        auth: Auth::Member,
        summary: r#"Revoke a join token of the workspace-owned pools"#,
        description: r#"The join token stops working at once, on every replica: a runner that tries to join with it next gets 401 `UNAUTHORIZED`. Runners that already joined with it keep their own credentials. Recorded in the audit log (`join_token.revoked`). Needs the workspace admin role."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "The join token's id (`jt_\u2026`), from the listing.", "schema": {"type": "string"}}]"#,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"No join token with this id for the workspace-owned pools (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::PairRunnerMine>(),
        tool: Some("pair_personal_runner"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Pair a personal runner"#,
        description: r#"Creates a runner in one of the owner's pools and returns its credential (`rnr_…`, shown once). The body may be empty."#,
        params: "",
        body: Some(Body {
            required: false,
            description: r#"Optional; an empty body pairs a runner named `runner` into the `default` pool."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The runner and its credential."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name or a label is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_MEMBER_TOKEN,
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListRunnersMine>(),
        tool: Some("list_my_runners"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"List my runners"#,
        description: r#"The caller's personal runners that are not revoked."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The runners."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RevokeRunnerMine>(),
        tool: Some("revoke_my_runner"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Revoke a personal runner"#,
        description: r#"Its token stops working at once; any job it holds is re-queued (or ends `lost` when out of attempts, `cancelled` when a cancel was requested)."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Runner id (`rn_\u2026`).", "schema": {"type": "string"}}]"#,
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
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            Resp {
                status: 404,
                description: r#"No live personal runner with this id in the caller's scope (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::PairRunnerWorkspace>(),
        tool: Some("pair_workspace_runner"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Pair a workspace-owned runner"#,
        description: r#"Creates a runner in one of the owner's pools and returns its credential (`rnr_…`, shown once). The body may be empty. Needs the workspace admin role."#,
        params: "",
        body: Some(Body {
            required: false,
            description: r#"Optional; an empty body pairs a runner named `runner` into the `default` pool."#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The runner and its credential."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the name or a label is invalid (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"No pool with this name or id for this owner (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListRunnerRoster>(),
        tool: Some("list_workspace_runners"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"List the workspace roster"#,
        description: r#"Workspace-owned runners and every member's personal runners in this workspace (not revoked). Any member may list it."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The runners."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RevokeRunnerWorkspace>(),
        tool: Some("revoke_workspace_runner"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"Revoke a workspace-owned runner"#,
        description: r#"Its token stops working at once; any job it holds is re-queued (or ends `lost` when out of attempts, `cancelled` when a cancel was requested). A runner registered with GitHub (`POST /v1/workspace/runners/github-install`) loses its GitHub Actions runner too: the coordinator finds it by name and deletes it; when GitHub keeps it because it is running a job, the answer says so and the coordinator retries until it is idle. Needs the workspace admin role."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Runner id (`rn_\u2026`).", "schema": {"type": "string"}}]"#,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"Revoked; the runner had a GitHub Actions runner beside it, and this says what GitHub did."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"No live workspace-owned runner with this id in the caller's scope (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListRunnersWorkspace>(),
        tool: Some("list_workspace_owned_runners"),
        tag: "runners",
        auth: Auth::Member,
        summary: r#"List workspace-owned runners"#,
        description: r#"Workspace-owned runners only (not revoked). Any member may list them."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The runners."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::SetBudget>(),
        tool: Some("set_budget"),
        tag: "billing",
        auth: Auth::Member,
        summary: r#"Set the workspace's monthly budget"#,
        description: r#"Sets (or, with `null`, removes) the runner-minutes the workspace may be charged per calendar month (UTC). Once this month's are spent, jobs submitted to workspace-owned pools are refused with `402 BUDGET_EXCEEDED` (saying the budget, the use and when it resets) until the month ends; queued and running jobs go on, and jobs on members' own runners are never refused. Needs the workspace admin role. Recorded in the audit log (`budget.set`)."#,
        params: "",
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The workspace's usage with the new limit."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or `limitSeconds` is too large (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetUsage>(),
        tool: Some("get_usage"),
        tag: "billing",
        auth: Auth::Member,
        summary: r#"Get workspace usage"#,
        description: r#"This month's (UTC) runner time charged to the workspace and run on members' own runners, the monthly budget, and when it resets."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The usage."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetMe>(),
        tool: Some("get_me"),
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"Who you are"#,
        description: r#"The member behind this request's member API token (workspace, email, subject, role) and the token itself (`current: true`; `null` for a token without an id). The desktop app checks a pasted token with it."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The caller."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CreatePairingCode>(),
        tool: Some("create_pairing_code"),
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"Create a one-time pairing code"#,
        description: r#"A code (`dpc_…`, shown once, stored hashed) that a device redeems once, within ten minutes, at `POST /v1/pairing-codes/{code}/redeem` for its own member API token. The link names this coordinator by its public URL (`serve --public-url`)."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 201,
                description: r#"The code and its link."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RedeemPairingCode>(),
        tool: None,
        tag: "pairing",
        auth: Auth::Public,
        summary: r#"Redeem a pairing code for a device token"#,
        description: r#"Needs no other credential: the code is one. Answers once with a member API token named after the device (listed under `GET /v1/me/tokens`, revocable there). Of two redeems of one code at once, exactly one succeeds. Wrong codes (unknown, used or expired) are limited per client address: after a burst of 20, one more every 3 seconds; beyond that the answer is 429 `RATE_LIMITED` with `Retry-After`, before any lookup. A right code costs nothing. Behind a reverse proxy its clients share the proxy's address."#,
        params: r#"[{"name": "code", "in": "path", "required": true, "description": "The pairing code (`dpc_\u2026`).", "schema": {"type": "string"}}]"#,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The device's token (shown once)."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, or `deviceName` is empty, over 64 characters or holds control characters (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            Resp {
                status: 404,
                description: r#"No such pairing code (unknown or malformed; code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            Resp {
                status: 410,
                description: r#"The code was already redeemed (code `PAIRING_CODE_USED`), or is older than ten minutes (code `PAIRING_CODE_EXPIRED`)."#,
                reply: Reply::Error(ErrorCode::PairingCodeUsed),
            },
            BODY_TOO_LARGE,
            Resp {
                status: 429,
                description: r#"Too many wrong pairing codes from this client address; retry after `Retry-After` seconds (code `RATE_LIMITED`)."#,
                reply: Reply::Error(ErrorCode::RateLimited),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListTokensMine>(),
        tool: Some("list_my_tokens"),
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"List your API tokens"#,
        description: r#"The caller's member API tokens, oldest first: never a secret or its hash. `current` marks the token of this request."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The tokens."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RevokeTokenMine>(),
        tool: Some("revoke_my_token"),
        tag: "pairing",
        auth: Auth::Member,
        summary: r#"Revoke one of your API tokens"#,
        description: r#"The token stops working at once (the next request with it gets 401). It may be the caller's own."#,
        params: r#"[{"name": "id", "in": "path", "required": true, "description": "Token id (`tok_\u2026`).", "schema": {"type": "string"}}]"#,
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
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_MEMBER_TOKEN,
            Resp {
                status: 404,
                description: r#"No token with this id among the caller's (another member's token is not found either; code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerJoin>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Join,
        summary: r#"Exchange a join token for a runner credential"#,
        description: r#"Creates a runner in the join token's pool, and counts the token's use. The token stays valid until it expires or is revoked (by its pool's owner or an admin, or when the member who minted it is removed)."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The new runner's id and credential."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, the name or a capability is invalid, the ref breaks the grammar (`INVALID_REF`), or the `drover-protocol` header is not a number (code `BAD_REQUEST`, `INVALID_REF`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked join token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            Resp {
                status: 403,
                description: r#"The token is not a join token (code `FORBIDDEN`)."#,
                reply: Reply::Error(ErrorCode::Forbidden),
            },
            Resp {
                status: 404,
                description: r#"The ref does not name the join token's pool, or that pool no longer exists (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerJoinTokenInfo>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Join,
        summary: r#"Which pool a join token joins"#,
        description: r#"Answers the pool of the join token given as bearer, without using it up or creating anything. `drover runner --join` asks before reusing the credentials it saved, so a state directory holding another pool's runner is refused rather than silently used."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The token's pool."#,
                reply: Reply::Answer,
            },
            PROTOCOL_NOT_A_NUMBER,
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked join token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            Resp {
                status: 403,
                description: r#"The token is not a join token (code `FORBIDDEN`)."#,
                reply: Reply::Error(ErrorCode::Forbidden),
            },
            Resp {
                status: 404,
                description: r#"The join token's pool no longer exists (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
        ],
    },
    Op {
        decl: declared::<op::RunnerHello>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Announce detected capabilities"#,
        description: r#"Replaces the runner's detected capabilities and its slots (how many leases it may hold at once), records whether its owner paused it (`paused`: listings then say so, and its lease requests waiting now end at once, with no job), and marks it seen. Answers its id, pool and name."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"Who this runner is."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, a capability is invalid, `slots` is outside 1..=256, or the `drover-protocol` header is not a number (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            RUNNER_UNAUTHORIZED,
            NOT_RUNNER_TOKEN,
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerLeave>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Revoke this runner"#,
        description: r#"The runner revokes itself, as its owner or a workspace admin would (`DELETE /v1/me/runners/{id}`, `DELETE /v1/workspace/runners/{id}`): its credential stops working at once, a job it holds goes back to the queue (or ends `lost` when out of attempts), jobs pinned to it end `lost`, and pool listings no longer show it. No body."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Revoked."#,
                reply: Reply::Empty,
            },
            PROTOCOL_NOT_A_NUMBER,
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, an unknown token, or the runner was revoked already (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_RUNNER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerBye>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Say this runner is stopping"#,
        description: r#"The runner is stopping (its process quits, or its machine's app stops it): listings show it offline at once, not once it has been silent for 40 s. It stays paired: its next hello brings it back online. What it still holds is not released (a runner says bye once its jobs are done; a lease it still holds expires as usual). No body."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Shown offline."#,
                reply: Reply::Empty,
            },
            PROTOCOL_NOT_A_NUMBER,
            RUNNER_UNAUTHORIZED,
            NOT_RUNNER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerLease>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Long-poll for a job"#,
        description: r#"Answers at once with a lease when a job the runner can run is queued (jobs pinned to it first, then its pool's queue, by priority then first-in first-out); otherwise waits up to `waitMs` (at most 30000) and answers `{"lease": null}`. A runner holds at most as many leases, and keeps at most as many lease requests waiting, as the slots it declared in hello; beyond that this answers `429 LEASE_LIMIT` at once. With `held` (the leases the runner still holds: after it restarted, or reconnected having stopped its jobs), every other lease it holds is first released as if it had expired, so those no longer count against its slots."#,
        params: r##"[{"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"A lease, or `null` when the wait ended without a job."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the `drover-protocol` header is not a number (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            RUNNER_UNAUTHORIZED,
            NOT_RUNNER_TOKEN,
            BODY_TIMEOUT,
            BODY_TOO_LARGE,
            Resp {
                status: 429,
                description: r#"The runner already holds as many leases as its slots, or has a lease request waiting for each of them; it should finish a job (or wait) and ask again. Nothing was leased (code `LEASE_LIMIT`)."#,
                reply: Reply::Error(ErrorCode::LeaseLimit),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerHeartbeat>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Renew a lease and wait for a cancel"#,
        description: r#"Renews the lease (a leased job becomes `running`), then waits up to `waitMs` (at most half the lease TTL) for a cancel, so a cancel reaches the runner at once."#,
        params: r##"[{"$ref": "#/components/parameters/LeaseId"}, {"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"Whether to cancel, and the lease TTL."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the `drover-protocol` header is not a number (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            RUNNER_UNAUTHORIZED,
            NOT_RUNNER_TOKEN,
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"The lease is no longer held by this runner (expired, re-queued or revoked) (code `LEASE_LOST`)."#,
                reply: Reply::Error(ErrorCode::LeaseLost),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerLogs>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Append a log chunk"#,
        description: r#"Stores one chunk of output for the leased job; a chunk number already stored for this attempt is ignored."#,
        params: r##"[{"$ref": "#/components/parameters/LeaseId"}, {"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: Some(Body {
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
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, `seq` is too large, or the `drover-protocol` header is not a number (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            RUNNER_UNAUTHORIZED,
            NOT_RUNNER_TOKEN,
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"The lease is no longer held by this runner (expired, re-queued or revoked) (code `LEASE_LOST`)."#,
                reply: Reply::Error(ErrorCode::LeaseLost),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RunnerComplete>(),
        tool: None,
        tag: "runner protocol",
        auth: Auth::Runner,
        summary: r#"Complete the leased job"#,
        description: r#"Finishes the job, records provenance and usage. Idempotent per lease: a repeat answers the final state with `repeated: true`."#,
        params: r##"[{"$ref": "#/components/parameters/LeaseId"}, {"$ref": "#/components/parameters/DroverProtocol"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The job's final state."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"The JSON body is malformed, has unknown or missing fields or wrong types, or the `drover-protocol` header is not a number (code `BAD_REQUEST`, `UNSUPPORTED_PROTOCOL`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            RUNNER_UNAUTHORIZED,
            NOT_RUNNER_TOKEN,
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"The lease is no longer held by this runner (expired, re-queued or revoked) (code `LEASE_LOST`)."#,
                reply: Reply::Error(ErrorCode::LeaseLost),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetOpenApi>(),
        tool: None,
        tag: "meta",
        auth: Auth::Public,
        summary: r#"This OpenAPI document"#,
        description: r#""#,
        params: "",
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
                reply: Reply::Error(ErrorCode::Overloaded),
            },
        ],
    },
    Op {
        decl: declared::<op::GetDocs>(),
        tool: None,
        tag: "meta",
        auth: Auth::Public,
        summary: r#"API docs page"#,
        description: r#"An HTML page that renders `/openapi.json` with no network access."#,
        params: "",
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
                reply: Reply::Error(ErrorCode::Overloaded),
            },
        ],
    },
    Op {
        decl: declared::<op::Healthz>(),
        tool: None,
        tag: "meta",
        auth: Auth::Public,
        summary: r#"Liveness (the process serves HTTP), its version and protocols, and the long-polls waiting now"#,
        description: r#"Answers 200 while the process runs, whatever the database does: for a liveness probe (restart the coordinator if it fails). Also the one route served whatever `drover-protocol` a request names, so a client of any version can read which protocols this coordinator serves. No credential."#,
        params: "",
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The coordinator is up."#,
                reply: Reply::Raw(
                    r#"{"application/json": {"schema": {"type": "object", "required": ["status", "version", "protocol", "waitingLeases"], "properties": {"status": {"type": "string", "const": "ok"}, "version": {"type": "string", "description": "This coordinator's version, e.g. `0.1.0`: the `drover` to install when it answers `426 UPGRADE_REQUIRED`."}, "protocol": {"type": "object", "required": ["oldest", "newest"], "properties": {"oldest": {"type": "integer", "minimum": 0, "description": "The oldest `drover-protocol` served; an older one is answered `426 UPGRADE_REQUIRED`."}, "newest": {"type": "integer", "minimum": 0, "description": "The newest `drover-protocol` known; a newer one is answered `426 COORDINATOR_TOO_OLD`."}}}, "waitingLeases": {"type": "integer", "minimum": 0, "description": "Lease long-polls waiting for a job."}, "waitingHeartbeats": {"type": "integer", "minimum": 0, "description": "Leases whose heartbeat is waiting for a cancel."}, "followedLogs": {"type": "integer", "minimum": 0, "description": "Jobs whose log is being followed."}, "otherReplicas": {"type": "boolean", "description": "PostgreSQL: another replica listens for this one's signals (looked for a few times a second; while none does, this one sends none). Always false on SQLite."}}}}}"#,
                ),
            },
            Resp {
                status: 503,
                description: r#"The coordinator is overloaded (too many connections, large bodies or member reads in flight, or a busy database); retry after `Retry-After` seconds (code `OVERLOADED`)."#,
                reply: Reply::Error(ErrorCode::Overloaded),
            },
        ],
    },
    Op {
        decl: declared::<op::Readyz>(),
        tool: None,
        tag: "meta",
        auth: Auth::Public,
        summary: r#"Readiness: the database answers and its migrations are this build's"#,
        description: r#"For a readiness probe or a load balancer's health check: 200 when the coordinator can serve; 503 `NOT_READY` when its database does not answer within 2 s (PostgreSQL through the pool; SQLite by opening the file afresh), when the applied migrations differ from the ones this build carries (missing, failed, or unknown ones from a newer coordinator), or once it is shutting down. An answer is reused for up to a second. No credential."#,
        params: "",
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
                reply: Reply::Error(ErrorCode::NotReady),
            },
        ],
    },
    Op {
        decl: declared::<op::Metrics>(),
        tool: None,
        tag: "meta",
        auth: Auth::Public,
        summary: r#"Metrics in the Prometheus text format"#,
        description: r#"Queue depth and oldest queued job's age per pool, runners online per pool (read from the database at scrape time; labelled by pool id, at most 200 pools, the rest under `pool="other"`), lease/submit/complete latency histograms, batch sizes and write times per kind, waiting lease long-polls, and on PostgreSQL the replica signal lag and reconnects. Names and meanings: README, Operating. Open to anyone who reaches the listen address unless the coordinator runs with `--metrics-token-file`; then that token is wanted as a bearer. Shows no names, emails or tokens."#,
        params: "",
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
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListMembers>(),
        tool: Some("list_members"),
        tag: "members",
        auth: Auth::Member,
        summary: r#"List the workspace's members"#,
        description: r#"Admins only. Current members, invited ones too (`status: invited`), oldest first, each with their API tokens' names, creation and last use: never a secret."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The members."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 401,
                description: r#"No `Authorization: Bearer` header, or an unknown, expired or revoked token (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::InviteMember>(),
        tool: Some("invite_member"),
        tag: "members",
        auth: Auth::Member,
        summary: r#"Invite a member"#,
        description: r#"Admins only. Adds the member (`status: invited`) and answers a one-time code, shown once, good for seven days, with its `drover://pair` link: the invitee redeems it (`POST /v1/pairing-codes/{code}/redeem`, `drover redeem`, or the desktop app) for their first token, and becomes `active`. Inviting someone invited but not joined gives a new code (the old ones stop working); someone removed comes back. Recorded in the audit log (`member.invited`)."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"Invited."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"Not a JSON object of this shape, or an invalid email or role (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 409,
                description: r#"Already an active member of this workspace (code `CONFLICT`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::UpdateMember>(),
        tool: Some("update_member"),
        tag: "members",
        auth: Auth::Member,
        summary: r#"Change a member's role"#,
        description: r#"Admins only. The last admin cannot be demoted. Recorded in the audit log (`member.updated`)."#,
        params: r##"[{"name": "id", "in": "path", "required": true, "description": "Member id (`usr_\u2026`).", "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The member, with the new role."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"Not a JSON object of this shape, or an invalid email or role (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"No current member with this id in the caller's workspace (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            Resp {
                status: 409,
                description: r#"The change would leave the workspace without an admin (code `LAST_ADMIN`)."#,
                reply: Reply::Error(ErrorCode::LastAdmin),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RemoveMember>(),
        tool: Some("remove_member"),
        tag: "members",
        auth: Auth::Member,
        summary: r#"Remove a member"#,
        description: r#"Admins only. At once, on every replica: the member's API tokens and unused codes stop working, so do the join tokens they minted and the unused invites they created (`join_token.revoked`, `invite.revoked`), their personal runners are revoked, their queued jobs end `cancelled` and their running jobs are told to cancel. Workspace pools are untouched. The last admin cannot be removed. Recorded in the audit log (`member.removed`)."#,
        params: r##"[{"name": "id", "in": "path", "required": true, "description": "Member id (`usr_\u2026`).", "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
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
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"No current member with this id in the caller's workspace (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            Resp {
                status: 409,
                description: r#"The change would leave the workspace without an admin (code `LAST_ADMIN`)."#,
                reply: Reply::Error(ErrorCode::LastAdmin),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListAuditEvents>(),
        tool: Some("list_audit_events"),
        tag: "members",
        auth: Auth::Member,
        summary: r#"Read the audit log"#,
        description: r#"Admins only. Every state-changing action in the workspace, newest first: who (a member, a runner leaving, a pool's join token), when, what, the target's id, and the surface (`rest`, `cli`, `desktop`, `mcp`). Never a token, a code or a job's env value."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"A page of entries."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"An unknown parameter or action, or a bad limit or cursor (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetWorkspaceUsageReport>(),
        tool: Some("get_usage_report"),
        tag: "billing",
        auth: Auth::Member,
        summary: r#"A month's usage report"#,
        description: r#"Admins only. The workspace's metered runner time in a month, one line per pool, member or runner, largest first. Every attempt is one usage line, metered once: a complete sent twice adds nothing, and an attempt whose lease was lost while it ran is metered for the time it ran."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The report: JSON, or CSV (RFC 4180, a header line `month,<by>_id,<by>,runner_ms,charged_ms,attempts`) with `Accept: text/csv`."#,
                reply: Reply::AnswerOrCsv,
            },
            Resp {
                status: 400,
                description: r#"A month not `YYYY-MM`, a `by` not pool, member or runner, or an unknown parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetMyUsageReport>(),
        tool: Some("get_my_usage_report"),
        tag: "billing",
        auth: Auth::Member,
        summary: r#"Your usage in a month"#,
        description: r#"The runner time of the jobs the caller submitted, in a month, by pool, member or runner: on workspace pools (charged to the workspace) and on the caller's own runners."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The report: JSON, or CSV (RFC 4180, a header line `month,<by>_id,<by>,runner_ms,charged_ms,attempts`) with `Accept: text/csv`."#,
                reply: Reply::AnswerOrCsv,
            },
            Resp {
                status: 400,
                description: r#"A month not `YYYY-MM`, a `by` not pool, member or runner, or an unknown parameter (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_MEMBER_TOKEN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::CreateGithubInstallLink>(),
        tool: Some("create_github_install_link"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Link to install the workspace's GitHub App"#,
        description: r#"Admins only. The App's install page on github.com or a configured GitHub Enterprise Server host, carrying a one-time `state` bound to this workspace that works for ten minutes. After installing, GitHub redirects to `GET /v1/github/setup`, which links the installation once GitHub confirms the signing-in user can reach it."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: Some(Body {
            required: false,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The install link."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"A malformed body, or a host this coordinator is not configured with (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            GITHUB_NOT_CONFIGURED,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GithubSetup>(),
        tool: None,
        tag: "github",
        auth: Auth::Public,
        summary: r#"GitHub's setup redirect (the App's Setup URL)"#,
        description: r#"Where GitHub sends the browser after the App is installed. The coordinator uses up the `state`, exchanges the OAuth `code` for a user token, and links `installation_id` to the state's workspace only if `GET /user/installations` lists it for that user and that user administers its account: an active `admin` of the organization (`GET /user/memberships/orgs/{org}`), or, for a user account, that user (`GET /user`). An installation belongs to one workspace at most. Answers an HTML page that says what was linked, or why not (with the error code)."#,
        params: r#"[{"name": "installation_id", "in": "query", "required": false, "schema": {"type": "integer"}}, {"name": "setup_action", "in": "query", "required": false, "schema": {"type": "string", "enum": ["install", "update", "request"]}}, {"name": "state", "in": "query", "required": false, "schema": {"type": "string"}}, {"name": "code", "in": "query", "required": false, "schema": {"type": "string"}}]"#,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"Linked (or, for `setup_action=request`, waiting for an owner's approval)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
            Resp {
                status: 400,
                description: r#"`installation_id`, `state` or `code` is missing (code `BAD_REQUEST`)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
            Resp {
                status: 403,
                description: r#"GitHub refused the code, the user cannot reach that installation (a spoofed `installation_id`), does not administer its account (the page says who must finish the install), or the admin who made the link is no longer one (code `FORBIDDEN`)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
            Resp {
                status: 404,
                description: r#"No such state (code `NOT_FOUND`)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
            Resp {
                status: 409,
                description: r#"The installation is linked to another workspace, or no App is configured (code `CONFLICT`, `GITHUB_NOT_CONFIGURED`)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
            Resp {
                status: 410,
                description: r#"The state was used already, or is older than ten minutes (code `STATE_USED`, `STATE_EXPIRED`)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
            Resp {
                status: 502,
                description: r#"GitHub failed a call (code `GITHUB_ERROR`)."#,
                reply: Reply::Raw(r#"{"text/html": {"schema": {"type": "string"}}}"#),
            },
        ],
    },
    Op {
        decl: declared::<op::ListGithubInstallations>(),
        tool: Some("list_github_installations"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"The App's installations linked to this workspace"#,
        description: r#"Admins only. Each installation with its host and the account it is on, in the order they were linked."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The installations."#,
                reply: Reply::Answer,
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListGithubRepos>(),
        tool: Some("list_github_repos"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Repositories the App may reach"#,
        description: r#"Admins only. Every linked installation's repositories, each with its host and owner, in pages: installations in the order they were linked, each one's repositories as GitHub pages them (`GET /installation/repositories`)."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"A page of repositories, and the next page's number if there is one."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"An unknown parameter, or a page or perPage out of range (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            GITHUB_NOT_CONFIGURED,
            INTERNAL,
            GITHUB_ERROR,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::InstallGithubWorkspaceRunner>(),
        tool: Some("github_install_workspace_runner"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Stand up a build server: a GitHub Actions runner and a Drover runner"#,
        description: r#"Admins only. Resolves the App's installation on the repository's or organization's owner (`host` given: that host's only; omitted: github.com's, then any host's), mints a runner registration token there (`POST /repos/{o}/{r}/actions/runners/registration-token` or `POST /orgs/{org}/…`), pairs a fresh workspace runner on `pool`, and answers one POSIX shell script for a Linux build server that installs both as systemd services: actions/runner (downloaded and checked against its SHA-256, then `config.sh --url … --token … --labels self-hosted,drover-<pool>[,…] [--runnergroup …] [--ephemeral] --unattended --name drover-<runner>`) and `drover runner` with the new runner's token. Running it twice does no harm. The registration token and the runner token are in the script only: shown once, never stored. The workflow hint says how a workflow targets the pool."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 201,
                description: r#"The paired runner, its GitHub runner, the script and the workflow hint."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"A malformed body; both or neither of `repository` and `org`; `runnerGroup` without `org`; a name, label or group GitHub would refuse; an unknown host (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"The App is not installed on that owner (on that host) for this workspace, or no such pool (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            BODY_TIMEOUT,
            GITHUB_NOT_CONFIGURED,
            BODY_TOO_LARGE,
            INTERNAL,
            GITHUB_ERROR,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::SetCiLink>(),
        tool: Some("link_ci_repository"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Link a repository for CI"#,
        description: r#"Admins only. Links (or updates) a repository: its GitHub Actions OIDC tokens become a CI principal of this workspace (`ci:<owner>/<repo>`) that may submit jobs to the link's `runtime` only (default `self:ws`; any other pool is `403 CI_NOT_ALLOWED`), never a personal pool, with the workspace paying, and read, follow and cancel only the jobs its repository submitted (any other job is 404 to it). The workspace's GitHub App installation on the owner must reach the repository: the link pins GitHub's id of the repository (again on every relink), and a token of another repository of that name is refused. `refs` (patterns, a trailing `*` matching any rest) and `events` restrict which workflow runs may act; without `events`, `pull_request` and `pull_request_target` runs are refused (GitHub's token does not say whether a pull request comes from a fork). Refused runs get `403 CI_NOT_ALLOWED`. `runsOn` (default `[self-hosted]`) and `runtime` shape its rendered workflow, whose triggers follow `events` and `refs`. A repository is linked to one workspace at most."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The link."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"A malformed body, a repository GitHub would not name, an unknown host, bad `runsOn` labels, `refs` or `events`, or a `runtime` that is not a workspace ref (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            BODY_TIMEOUT,
            Resp {
                status: 404,
                description: r#"The workspace's GitHub App is not installed on the repository's owner, or its installation does not reach the repository (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            Resp {
                status: 409,
                description: r#"Another workspace links that repository (code `CONFLICT`), or this coordinator has no GitHub App configured (code `GITHUB_NOT_CONFIGURED`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            GITHUB_ERROR,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListCiLinks>(),
        tool: Some("list_ci_links"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"The repositories linked for CI"#,
        description: r#"Admins only."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The links, by repository."#,
                reply: Reply::Answer,
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RemoveCiLink>(),
        tool: Some("unlink_ci_repository"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Unlink a repository"#,
        description: r#"Admins only. Its OIDC tokens stop working at once; its jobs keep naming it."#,
        params: r##"[{"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Unlinked."#,
                reply: Reply::Empty,
            },
            CI_LINK_BAD_NAME,
            UNAUTHORIZED,
            NOT_ADMIN,
            CI_LINK_NOT_FOUND,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GetCiWorkflow>(),
        tool: Some("get_ci_workflow"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"The workflow file of a linked repository"#,
        description: r#"Admins only. A GitHub Actions workflow (YAML) that runs on the link's `runsOn` and submits a job to its `runtime` with `drover submit --github-oidc --runtime … --wait`, so the job's logs and exit code become the step's. It asks for `id-token: write` and stores no secret. Save it as `.github/workflows/drover.yml`."#,
        params: r##"[{"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The workflow."#,
                reply: Reply::Raw(r#"{"application/yaml": {"schema": {"type": "string"}}}"#),
            },
            CI_LINK_BAD_NAME,
            UNAUTHORIZED,
            NOT_ADMIN,
            CI_LINK_NOT_FOUND,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::SetGithubOnDemand>(),
        tool: Some("set_github_on_demand"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Serve GitHub Actions on demand from a workspace pool"#,
        description: r#"Admins only. Turns a workspace pool on (again: changes it) for a repository (`owner/name`) or an organization the workspace's GitHub App is installed on: each `workflow_job` GitHub queues whose `runs-on` labels are all among the pool's (`self-hosted`, `drover-<pool>` and the custom `labels`) gets a just-in-time, ephemeral Actions runner, started as a Drover job on one of the pool's runners (one that offers the `github-actions` capability), at most `maxRunners` at once. GitHub says a job is queued by webhook (`POST /v1/github/webhook`), or, where webhooks cannot arrive, the coordinator polls GitHub (`serve --github-poll-seconds`). A spent budget fails the workflow job where GitHub shows it (a failed check run, its run cancelled). Organizations' runners join `runnerGroupId` (default 1, GitHub's default group). The Drover jobs are the workspace's, billed as any, submitted by the principal `actions:<target>`. Audited."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: Some(Body {
            required: true,
            description: r#""#,
        }),
        responses: &[
            Resp {
                status: 200,
                description: r#"The on-demand pool, with the `runs-on` its workflows use."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"A malformed body, a target GitHub would not name, an unknown host, bad labels, `maxRunners` outside 1-1000, or a `runnerGroupId` for a repository (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            BODY_TIMEOUT,
            Resp {
                status: 404,
                description: r#"No such workspace pool, or the workspace's GitHub App is not installed on the target's owner (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            Resp {
                status: 409,
                description: r#"Another workspace serves that target (code `CONFLICT`), or this coordinator has no GitHub App configured (code `GITHUB_NOT_CONFIGURED`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::ListGithubOnDemand>(),
        tool: Some("list_github_on_demand"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"The pools serving GitHub Actions on demand"#,
        description: r#"Admins only."#,
        params: r##"[{"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 200,
                description: r#"The on-demand pools, oldest first."#,
                reply: Reply::Answer,
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::RemoveGithubOnDemand>(),
        tool: Some("remove_github_on_demand"),
        tag: "github",
        auth: Auth::Member,
        summary: r#"Stop serving GitHub Actions on demand from a pool"#,
        description: r#"Admins only. Workflow jobs not yet served are forgotten; Actions runners already started run their job to its end. Audited."#,
        params: r##"[{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}, {"$ref": "#/components/parameters/Surface"}]"##,
        body: None,
        responses: &[
            Resp {
                status: 204,
                description: r#"Turned off."#,
                reply: Reply::Empty,
            },
            UNAUTHORIZED,
            NOT_ADMIN,
            Resp {
                status: 404,
                description: r#"This workspace has no such on-demand pool (code `NOT_FOUND`)."#,
                reply: Reply::Error(ErrorCode::NotFound),
            },
            INTERNAL,
            OVERLOADED,
        ],
    },
    Op {
        decl: declared::<op::GithubWebhook>(),
        tool: None,
        tag: "github",
        auth: Auth::Public,
        summary: r#"GitHub's webhook deliveries (the App's Webhook URL)"#,
        description: r#"GitHub calls it; the App's webhook secret (`--github-webhook-secret-file`) signs each delivery (`X-Hub-Signature-256`, HMAC-SHA256 of the body), and each delivery (`X-GitHub-Delivery`) is taken once. A `workflow_job` event `queued` whose labels an on-demand pool has is recorded for that pool (once per workflow job) and served in the background; `completed` releases its Actions runner (an unused one is deleted from GitHub and its Drover job cancelled). Other events and actions are taken and ignored. The answer comes before any call to GitHub."#,
        params: r#"[{"name": "X-Hub-Signature-256", "in": "header", "required": true, "schema": {"type": "string"}}, {"name": "X-GitHub-Delivery", "in": "header", "required": true, "schema": {"type": "string"}}, {"name": "X-GitHub-Event", "in": "header", "required": false, "schema": {"type": "string"}}, {"name": "X-GitHub-Enterprise-Host", "in": "header", "required": false, "schema": {"type": "string"}}]"#,
        body: Some(Body {
            required: true,
            description: r#"The event, as GitHub sends it (`Content-Type: application/json`)."#,
        }),
        responses: &[
            Resp {
                status: 202,
                description: r#"Taken: what the coordinator does with it (`queued`, `finished`, `ignored`)."#,
                reply: Reply::Answer,
            },
            Resp {
                status: 400,
                description: r#"Not JSON, no `X-GitHub-Delivery`, a `workflow_job` event of another shape, or an unknown GitHub Enterprise host (code `BAD_REQUEST`)."#,
                reply: Reply::Error(ErrorCode::BadRequest),
            },
            Resp {
                status: 401,
                description: r#"No `X-Hub-Signature-256`, or one that does not sign the body with the App's webhook secret (code `UNAUTHORIZED`)."#,
                reply: Reply::Error(ErrorCode::Unauthorized),
            },
            BODY_TIMEOUT,
            Resp {
                status: 409,
                description: r#"The delivery was taken before (a replay, code `CONFLICT`), or this coordinator has no GitHub App or no webhook secret (code `GITHUB_NOT_CONFIGURED`)."#,
                reply: Reply::Error(ErrorCode::Conflict),
            },
            BODY_TOO_LARGE,
            INTERNAL,
            OVERLOADED,
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalogue documents each declaration once, in its order, and
    /// nothing else: a declared operation without prose, or prose for an
    /// operation no one declared, fails here.
    #[test]
    fn the_catalogue_documents_every_declaration_once() {
        let documented: Vec<_> = OPS.iter().map(|o| (o.decl.id, o.decl.path)).collect();
        let declared: Vec<_> = op::ALL.iter().map(|d| (d.id, d.path)).collect();
        assert_eq!(documented, declared);
    }

    /// Each success answer is what the declaration says it answers, and
    /// a body is documented exactly when one is declared.
    #[test]
    fn success_answers_follow_the_declaration() {
        for o in OPS {
            let d = &o.decl;
            assert_eq!(d.body.is_some(), o.body.is_some(), "{}: body", d.id);
            let ok: Vec<_> = o.responses.iter().filter(|r| r.status < 300).collect();
            assert!(!ok.is_empty(), "{} documents no success", d.id);
            for r in ok {
                let fits = match (&r.reply, d.kind) {
                    (Reply::Answer, AnswerKind::Json) => true,
                    (Reply::AnswerOrCsv, AnswerKind::JsonOrCsv) => true,
                    // An empty answer where there is nothing to say (a
                    // revoked runner that had no GitHub runner to remove).
                    (Reply::Empty, _) => r.status == 204,
                    (Reply::Raw(c), AnswerKind::Json) => c.contains("application/json"),
                    (Reply::Raw(c), AnswerKind::Html) => c.contains("text/html"),
                    (Reply::Raw(c), AnswerKind::Text) => !c.contains("application/json"),
                    _ => false,
                };
                assert!(
                    fits,
                    "{} {}: not a declared {:?} answer",
                    d.id, r.status, d.kind
                );
            }
        }
    }
}
