//! What the coordinator's admin commands print.

use serde::{Deserialize, Serialize};

/// What `drover-coordinator admin bootstrap|add-member --json` prints.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemberCredential {
    pub workspace: String,
    pub email: String,
    pub subject: String,
    pub role: String,
    pub token: String,
}
