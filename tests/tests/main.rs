//! The end-to-end tests, one module per capability, in one test binary:
//! built and linked once rather than once per file (each file's tests are
//! `module::test`, e.g. `dispatch::torture_…`). Every file in this
//! directory is a module here (`coordinator/tests/layout.rs` checks it).

mod answers;
mod audit;
mod backup;
mod billing;
mod ci;
mod ci_links;
mod conformance;
mod connections;
mod desktop_api;
mod dispatch;
mod failure;
mod github;
mod github_actions_runner;
mod github_install_script;
mod github_on_demand;
mod github_owner;
mod hostile;
mod isolation;
mod join_tokens;
mod launchers;
mod lifecycle;
mod mcp;
mod members;
mod operability;
mod pairing;
mod placement;
mod replicas;
mod retention;
mod rights;
mod runner_hardening;
mod secrets;
mod services;
mod store_hardening;
mod surface;
mod tls;
mod typescript;
mod version_skew;
mod windows;
