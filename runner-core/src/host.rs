//! What a runner can tell about the machine it runs on.

use std::path::Path;

/// `os=…`, `arch=…`, and `docker` when a Docker engine socket is present.
pub fn detect_capabilities() -> Vec<String> {
    let mut caps = vec![
        format!("os={}", std::env::consts::OS),
        format!("arch={}", std::env::consts::ARCH),
    ];
    let engine = if cfg!(windows) {
        r"\\.\pipe\docker_engine"
    } else {
        "/var/run/docker.sock"
    };
    if Path::new(engine).exists() {
        caps.push("docker".into());
    }
    caps
}

/// The host name, reduced to characters a runner name may hold.
pub fn hostname() -> String {
    let raw = crate::platform::hostname();
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    let cleaned = cleaned
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned();
    if cleaned.is_empty() {
        "host".into()
    } else {
        cleaned
    }
}
