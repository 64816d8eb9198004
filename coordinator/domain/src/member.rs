//! Who asks: members of a workspace and their roles, runners and join
//! tokens as credentials, and the surface a request came from.

use crate::error::{Error, Kind, Result};
use crate::ids::{JoinTokenId, MemberId, RunnerId, RuntimeId, TokenId, WorkspaceId};

/// Which surface a request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Surface {
    #[default]
    Rest,
    Cli,
    Desktop,
    Mcp,
}

impl Surface {
    /// What a client may claim in its `drover-surface` header (MCP is
    /// set by the coordinator's MCP server, never claimed).
    pub fn from_header(s: &str) -> Option<Self> {
        match s {
            "rest" => Some(Self::Rest),
            "cli" => Some(Self::Cli),
            "desktop" => Some(Self::Desktop),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rest => "rest",
            Self::Cli => "cli",
            Self::Desktop => "desktop",
            Self::Mcp => "mcp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Member,
}

impl Role {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "admin" => Some(Self::Admin),
            "member" => Some(Self::Member),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }
}

/// A signed-in member of one workspace.
#[derive(Debug, Clone)]
pub struct Member {
    pub id: MemberId,
    pub email: String,
    pub role: Role,
    pub workspace_id: WorkspaceId,
    pub workspace_name: String,
    /// The API token this member signed in with, if it has an id.
    pub token_id: Option<TokenId>,
    /// Where this request came from (the audit log names it).
    pub surface: Surface,
    /// A CI principal (a linked repository's GitHub Actions OIDC token):
    /// it may submit jobs to the workspace's pools only, and sees (reads,
    /// follows, cancels) only the jobs its repository submitted.
    pub ci: bool,
}

impl Member {
    /// `settings:write`: managing workspace pools and runners.
    pub fn require_admin(&self) -> Result<()> {
        if self.role == Role::Admin {
            Ok(())
        } else {
            Err(Error::new(
                Kind::Forbidden,
                "this needs the workspace admin role (settings:write)",
            ))
        }
    }
}

/// A runner credential: can only lease from its own pool.
#[derive(Debug, Clone)]
pub struct RunnerAuth {
    pub runner_id: RunnerId,
    pub runtime_id: RuntimeId,
    /// Labels and detected capabilities, as of authentication.
    pub capabilities: Vec<String>,
    /// Leases (and lease long-polls) it may have at once, as of its last hello.
    pub slots: u32,
}

#[derive(Debug, Clone)]
pub enum Principal {
    Member(Member),
    Runner(RunnerAuth),
    /// A pool's join token: can only exchange itself for a runner credential.
    Join {
        runtime_id: RuntimeId,
        /// The token's id, so a join counts its use (and finds it revoked).
        token_id: JoinTokenId,
    },
}
