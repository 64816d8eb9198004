//! Every HTTP operation, declared once: its `operationId`, method, path,
//! query, body and answer. The coordinator routes each declaration
//! (`http::route::at`), documents it (`http::catalogue` adds the prose and
//! the refusals; `/openapi.json`, the MCP tools and `src-ui/src/wire.ts`
//! follow from those), and runner-core's client calls it
//! (`Client::call::<op::GetJob>`), so no path or method is written twice.
//!
//! A new operation: one line here, one entry in the catalogue, one service
//! function and its store call.

/// An operation's HTTP method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    /// Lower case, as OpenAPI names it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
            Self::Put => "put",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }
}

/// What a successful answer carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerKind {
    /// `application/json`: the operation's `Answer`.
    Json,
    /// JSON, or CSV when asked with `Accept: text/csv`.
    JsonOrCsv,
    /// `204`, no body (`Answer` is `()`).
    Empty,
    /// `text/plain` (`Answer` is `String`).
    Text,
    /// `text/html` (`Answer` is `String`).
    Html,
}

/// One operation. Implemented by the unit structs below, never by hand.
pub trait Operation {
    /// The OpenAPI `operationId`.
    const ID: &'static str;
    const METHOD: Method;
    /// With `{name}` for each path parameter, as axum and OpenAPI write it.
    const PATH: &'static str;
    const HAS_QUERY: bool;
    const HAS_BODY: bool;
    const ANSWER: AnswerKind;
    /// The query string's shape (`()` when it takes none).
    type Query;
    /// The JSON body (`()` when it takes none).
    type Body;
    /// A successful answer's body.
    type Answer;
}

/// An operation's declaration as a value, for tables and checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    pub id: &'static str,
    pub method: Method,
    pub path: &'static str,
    pub has_query: bool,
    pub has_body: bool,
    pub answer: AnswerKind,
}

impl Declared {
    pub const fn of<O: Operation>() -> Self {
        Self {
            id: O::ID,
            method: O::METHOD,
            path: O::PATH,
            has_query: O::HAS_QUERY,
            has_body: O::HAS_BODY,
            answer: O::ANSWER,
        }
    }

    /// The names in the path's `{…}` segments, in order.
    pub fn path_params(&self) -> impl Iterator<Item = &'static str> + use<> {
        path_params(self.path)
    }
}

/// The names in a path's `{…}` segments, in order.
pub fn path_params(path: &'static str) -> impl Iterator<Item = &'static str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
}

macro_rules! present {
    () => {
        false
    };
    ($t:ty) => {
        true
    };
}

macro_rules! or_unit {
    () => {
        ()
    };
    ($t:ty) => {
        $t
    };
}

macro_rules! answer {
    (json $t:ty) => {
        $t
    };
    (csv $t:ty) => {
        $t
    };
    (empty) => {
        ()
    };
    (text) => {
        String
    };
    (html) => {
        String
    };
}

macro_rules! answer_kind {
    (json) => {
        AnswerKind::Json
    };
    (csv) => {
        AnswerKind::JsonOrCsv
    };
    (empty) => {
        AnswerKind::Empty
    };
    (text) => {
        AnswerKind::Text
    };
    (html) => {
        AnswerKind::Html
    };
}

macro_rules! operations {
    ($(
        $name:ident $id:literal $method:ident $path:literal
            $(query $q:ty,)? $(body $b:ty,)? -> $kind:ident $($a:ty)?;
    )*) => {
        $(
            #[doc = concat!("`", stringify!($method), " ", $path, "` (`", $id, "`)")]
            pub struct $name;
            impl Operation for $name {
                const ID: &'static str = $id;
                const METHOD: Method = Method::$method;
                const PATH: &'static str = $path;
                const HAS_QUERY: bool = present!($($q)?);
                const HAS_BODY: bool = present!($($b)?);
                const ANSWER: AnswerKind = answer_kind!($kind);
                type Query = or_unit!($($q)?);
                type Body = or_unit!($($b)?);
                type Answer = answer!($kind $($a)?);
            }
        )*
        /// Every operation, in the order of the documentation.
        pub const ALL: &[Declared] = &[$(Declared::of::<$name>()),*];
    };
}

use crate as w;

operations! {
    // jobs
    SubmitJob "submitJob" Post "/v1/jobs" body w::SubmitJob, -> json w::Job;
    ListJobs "listJobs" Get "/v1/jobs" query w::JobListQuery, -> json w::JobList;
    GetJob "getJob" Get "/v1/jobs/{id}" -> json w::Job;
    CancelJob "cancelJob" Post "/v1/jobs/{id}/cancel" -> json w::Job;
    GetJobLogs "getJobLogs" Get "/v1/jobs/{id}/logs" query w::LogQuery, -> text;
    // pools (runtimes) and their join tokens
    CreateRuntimeMine "createRuntimeMine" Post "/v1/me/runtimes"
        body w::CreateRuntime, -> json w::Runtime;
    ListRuntimesMine "listRuntimesMine" Get "/v1/me/runtimes" -> json w::RuntimeList;
    CreateJoinTokenMine "createJoinTokenMine" Post "/v1/me/runtimes/{id}/join-tokens"
        body w::CreateJoinToken, -> json w::JoinToken;
    CreateRuntimeWorkspace "createRuntimeWorkspace" Post "/v1/workspace/runtimes"
        body w::CreateRuntime, -> json w::Runtime;
    ListRuntimesWorkspace "listRuntimesWorkspace" Get "/v1/workspace/runtimes"
        -> json w::RuntimeList;
    CreateJoinTokenWorkspace "createJoinTokenWorkspace" Post
        "/v1/workspace/runtimes/{id}/join-tokens" body w::CreateJoinToken, -> json w::JoinToken;
    ListJoinTokensMine "listJoinTokensMine" Get "/v1/me/join-tokens" -> json w::JoinTokenList;
    RevokeJoinTokenMine "revokeJoinTokenMine" Delete "/v1/me/join-tokens/{id}" -> empty;
    ListJoinTokensWorkspace "listJoinTokensWorkspace" Get "/v1/workspace/join-tokens"
        -> json w::JoinTokenList;
    RevokeJoinTokenWorkspace "revokeJoinTokenWorkspace" Delete
        "/v1/workspace/join-tokens/{id}" -> empty;
    // runners
    PairRunnerMine "pairRunnerMine" Post "/v1/me/runners"
        body w::PairRunner, -> json w::PairedRunner;
    ListRunnersMine "listRunnersMine" Get "/v1/me/runners" -> json w::RunnerList;
    RevokeRunnerMine "revokeRunnerMine" Delete "/v1/me/runners/{id}" -> empty;
    PairRunnerWorkspace "pairRunnerWorkspace" Post "/v1/workspace/runners"
        body w::PairRunner, -> json w::PairedRunner;
    ListRunnerRoster "listRunnerRoster" Get "/v1/workspace/runners" -> json w::RunnerList;
    RevokeRunnerWorkspace "revokeRunnerWorkspace" Delete "/v1/workspace/runners/{id}"
        -> json w::RevokedRunner;
    ListRunnersWorkspace "listRunnersWorkspace" Get "/v1/workspace/runners/owned"
        -> json w::RunnerList;
    // billing
    SetBudget "setBudget" Put "/v1/workspace/budget" body w::SetBudget, -> json w::Usage;
    GetUsage "getUsage" Get "/v1/workspace/usage" -> json w::Usage;
    // the member, pairing, tokens
    GetMe "getMe" Get "/v1/me" -> json w::Me;
    CreatePairingCode "createPairingCode" Post "/v1/me/pairing-codes" -> json w::PairingCode;
    RedeemPairingCode "redeemPairingCode" Post "/v1/pairing-codes/{code}/redeem"
        body w::RedeemPairingCode, -> json w::DeviceToken;
    ListTokensMine "listTokensMine" Get "/v1/me/tokens" -> json w::ApiTokenList;
    RevokeTokenMine "revokeTokenMine" Delete "/v1/me/tokens/{id}" -> empty;
    // the runner protocol
    RunnerJoin "runnerJoin" Post "/v1/runner/join" body w::JoinRequest, -> json w::JoinedRunner;
    RunnerJoinTokenInfo "runnerJoinTokenInfo" Get "/v1/runner/join-token"
        -> json w::JoinTokenInfo;
    RunnerHello "runnerHello" Post "/v1/runner/hello" body w::Hello, -> json w::HelloResponse;
    RunnerLeave "runnerLeave" Post "/v1/runner/leave" -> empty;
    RunnerBye "runnerBye" Post "/v1/runner/bye" -> empty;
    RunnerLease "runnerLease" Post "/v1/runner/lease"
        body w::LeaseRequest, -> json w::LeaseResponse;
    RunnerHeartbeat "runnerHeartbeat" Post "/v1/runner/leases/{lease}/heartbeat"
        body w::Heartbeat, -> json w::HeartbeatResponse;
    RunnerLogs "runnerLogs" Post "/v1/runner/leases/{lease}/logs" body w::LogChunk, -> empty;
    RunnerComplete "runnerComplete" Post "/v1/runner/leases/{lease}/complete"
        body w::Complete, -> json w::CompleteResponse;
    // documents and probes
    GetOpenApi "getOpenApi" Get "/openapi.json" -> json serde_json::Value;
    GetDocs "getDocs" Get "/docs" -> html;
    Healthz "healthz" Get "/healthz" -> json serde_json::Value;
    Readyz "readyz" Get "/readyz" -> json serde_json::Value;
    Metrics "metrics" Get "/metrics" -> text;
    // members and the audit log
    ListMembers "listMembers" Get "/v1/workspace/members" -> json w::MemberList;
    InviteMember "inviteMember" Post "/v1/workspace/members"
        body w::InviteMember, -> json w::Invite;
    UpdateMember "updateMember" Patch "/v1/workspace/members/{id}"
        body w::UpdateMember, -> json w::Member;
    RemoveMember "removeMember" Delete "/v1/workspace/members/{id}" -> empty;
    ListAuditEvents "listAuditEvents" Get "/v1/workspace/audit"
        query w::AuditQuery, -> json w::AuditPage;
    GetWorkspaceUsageReport "getWorkspaceUsageReport" Get "/v1/workspace/billing/usage"
        query w::UsageReportQuery, -> csv w::UsageReport;
    GetMyUsageReport "getMyUsageReport" Get "/v1/me/usage"
        query w::UsageReportQuery, -> csv w::UsageReport;
    // GitHub and CI
    CreateGithubInstallLink "createGithubInstallLink" Post
        "/v1/workspace/github-app/install-link"
        body w::GithubInstallLinkRequest, -> json w::GithubInstallLink;
    GithubSetup "githubSetup" Get "/v1/github/setup" -> html;
    ListGithubInstallations "listGithubInstallations" Get
        "/v1/workspace/github-app/installations" -> json w::GithubInstallationList;
    ListGithubRepos "listGithubRepos" Get "/v1/workspace/github-app/repos"
        query w::GithubRepoQuery, -> json w::GithubRepoList;
    InstallGithubWorkspaceRunner "installGithubWorkspaceRunner" Post
        "/v1/workspace/runners/github-install"
        body w::GithubInstallRequest, -> json w::GithubInstall;
    SetCiLink "setCiLink" Put "/v1/workspace/ci/links" body w::CiLinkRequest, -> json w::CiLink;
    ListCiLinks "listCiLinks" Get "/v1/workspace/ci/links" -> json w::CiLinkList;
    RemoveCiLink "removeCiLink" Delete "/v1/workspace/ci/links/{owner}/{repo}"
        query w::CiLinkQuery, -> empty;
    GetCiWorkflow "getCiWorkflow" Get "/v1/workspace/ci/links/{owner}/{repo}/workflow"
        query w::CiLinkQuery, -> text;
    SetGithubOnDemand "setGithubOnDemand" Put "/v1/workspace/github/on-demand"
        body w::GithubOnDemandRequest, -> json w::GithubOnDemand;
    ListGithubOnDemand "listGithubOnDemand" Get "/v1/workspace/github/on-demand"
        -> json w::GithubOnDemandList;
    RemoveGithubOnDemand "removeGithubOnDemand" Delete "/v1/workspace/github/on-demand/{id}"
        -> empty;
    GithubWebhook "githubWebhook" Post "/v1/github/webhook"
        body serde_json::Value, -> json w::GithubWebhookReceipt;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_each_method_and_path_is_declared_once() {
        let mut ids = std::collections::HashSet::new();
        let mut routes = std::collections::HashSet::new();
        for d in ALL {
            assert!(ids.insert(d.id), "{} is declared twice", d.id);
            assert!(
                routes.insert((d.method, d.path)),
                "{:?} {} is declared twice",
                d.method,
                d.path
            );
            assert!(d.path.starts_with('/'), "{}: {}", d.id, d.path);
        }
    }

    #[test]
    fn path_parameters_are_read_in_order() {
        let d = Declared::of::<RemoveCiLink>();
        assert_eq!(d.path_params().collect::<Vec<_>>(), ["owner", "repo"]);
        assert_eq!(Declared::of::<GetMe>().path_params().count(), 0);
    }
}
