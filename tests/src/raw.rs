//! Raw HTTP/1.1 on a socket: for requests no well-behaved client would send
//! (or would send otherwise), and answers read byte for byte.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::Coordinator;

/// The coordinator's `host:port`.
pub fn addr(c: &Coordinator) -> String {
    c.url.trim_start_matches("http://").to_owned()
}

/// Everything the server sends until it closes the connection (or `wait` passes).
pub async fn read_to_close(s: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut out = Vec::new();
    match tokio::time::timeout(wait, s.read_to_end(&mut out)).await {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

/// One raw request on a fresh connection; the whole answer.
pub async fn raw(c: &Coordinator, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr(c)).await.expect("connect");
    s.write_all(request).await.expect("write");
    read_to_close(&mut s, Duration::from_secs(10))
        .await
        .expect("the server closes after an error")
}

/// The status and the error code of a raw answer, which must be our envelope.
pub fn status_and_code(answer: &str) -> (u16, String) {
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{answer}"
    );
    let v: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"));
    let code = v["error"]["code"].as_str().expect("error.code").to_owned();
    assert!(v["error"]["message"].is_string(), "{answer}");
    (status, code)
}
