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
name: Drover
on:
  push:
  pull_request:
  workflow_dispatch:
permissions:
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
        url = w.coordinator_url,
        runs_on_plain = w.runs_on.join(", "),
        runtime = w.runtime,
        runs_on = runs_on,
        url_q = yq(w.coordinator_url),
        audience_q = yq(w.audience),
        runtime_q = sh_q(w.runtime),
    )
}
