//! The workflow file of a CI link: it runs on the linked GitHub runner and
//! submits a Drover job with `drover submit --github-oidc --runtime … --wait`,
//! so the job's logs and exit code become the step's. It authenticates with
//! GitHub's OIDC token: no secret is stored in the repository.

/// `s` as a single-quoted YAML scalar.
fn yq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `s` as a single-quoted shell word.
fn sh_q(s: &str) -> String {
    super::script::sh_quote(s)
}

pub struct Workflow<'a> {
    pub repository: &'a str,
    pub coordinator_url: &'a str,
    /// The audience the OIDC token must name.
    pub audience: &'a str,
    pub runs_on: &'a [String],
    pub runtime: &'a str,
    /// The link's `refs` (`None`: any ref).
    pub refs: Option<&'a [String]>,
    /// The link's `events` (`None`: its default, which leaves pull
    /// requests out).
    pub events: Option<&'a [String]>,
}

/// What the workflow runs on when the link lists no events: the events a
/// link allows by default that need no settings.
const DEFAULT_EVENTS: [&str; 2] = ["push", "workflow_dispatch"];

/// Events a workflow can name with no settings of their own.
const PLAIN_EVENTS: [&str; 5] = [
    "push",
    "pull_request",
    "pull_request_target",
    "workflow_dispatch",
    "merge_group",
];

/// The `on:` block: the events the link allows, and for `push` the
/// branches and tags its `refs` allow (a trailing `*` becomes `**`, which
/// crosses `/` as the link's pattern does).
fn triggers(w: &Workflow<'_>) -> String {
    let events: Vec<&str> = match w.events {
        Some(e) => e.iter().map(String::as_str).collect(),
        None => DEFAULT_EVENTS.to_vec(),
    };
    let mut out = String::from("on:\n");
    let mut other = Vec::new();
    for event in events {
        if !PLAIN_EVENTS.contains(&event) {
            other.push(event);
            continue;
        }
        out.push_str(&format!("  {event}:\n"));
        if let (Some(refs), "push") = (w.refs, event) {
            for (key, prefix) in [("branches", "refs/heads/"), ("tags", "refs/tags/")] {
                let globs: Vec<String> = refs
                    .iter()
                    .filter_map(|r| r.strip_prefix(prefix))
                    .map(|g| match g.strip_suffix('*') {
                        Some(rest) => yq(&format!("{rest}**")),
                        None => yq(g),
                    })
                    .collect();
                if !globs.is_empty() {
                    out.push_str(&format!("    {key}: [{}]\n", globs.join(", ")));
                }
            }
        }
    }
    if !other.is_empty() {
        out.push_str(&format!(
            "  # The link also allows: {} (add their triggers here).\n",
            other.join(", ")
        ));
    }
    out
}

pub fn render(w: &Workflow<'_>) -> String {
    let runs_on = w
        .runs_on
        .iter()
        .map(|l| yq(l))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"# Drover CI for {repository}, rendered by the coordinator at {url}.
# The workflow runs on [{runs_on_plain}]; its job runs on Drover's {runtime}.
# It signs in with the workflow's GitHub OIDC token: no secret to store.
# Set the repository variable DROVER_COMMAND to what the job should run.
# The coordinator refuses runs of refs and events the link does not allow.
name: Drover
{on}permissions:
  contents: read
  id-token: write
jobs:
  drover:
    runs-on: [{runs_on}]
    timeout-minutes: 360
    env:
      DROVER_URL: {url_q}
      DROVER_OIDC_AUDIENCE: {audience_q}
      DROVER_COMMAND: ${{{{ vars.DROVER_COMMAND || 'echo "Drover ran $GITHUB_REPOSITORY at $GITHUB_SHA"' }}}}
    steps:
      - name: Run the job on Drover ({runtime})
        run: |
          drover submit --github-oidc --runtime {runtime_q} --env GITHUB_REPOSITORY --env GITHUB_SHA --env GITHUB_REF --wait -- sh -c "$DROVER_COMMAND"
"#,
        repository = w.repository,
        on = triggers(w),
        url = w.coordinator_url,
        runs_on_plain = w.runs_on.join(", "),
        runtime = w.runtime,
        runs_on = runs_on,
        url_q = yq(w.coordinator_url),
        audience_q = yq(w.audience),
        runtime_q = sh_q(w.runtime),
    )
}
