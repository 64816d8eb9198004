//! What a runner can tell about the machine it runs on.

use std::path::Path;

/// `os=…`, `arch=…`, and `docker` when a Docker engine socket is present.
pub fn detect_capabilities() -> Vec<String> {
    let mut caps = vec![
        format!("os={}", std::env::consts::OS),
        format!("arch={}", std::env::consts::ARCH),
    ];
    if Path::new("/var/run/docker.sock").exists() {
        caps.push("docker".into());
    }
    caps
}

/// The host name, reduced to characters a runner name may hold.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates
    // within it or truncates.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let raw = if ok {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
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
