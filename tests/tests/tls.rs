//! HTTPS end to end: a coordinator serving TLS itself (`--tls-cert`,
//! `--tls-key`) with a throwaway CA's certificate, and the `drover` CLI as a
//! user builds it (`cargo install --path runner-core/cli`; tests/run.sh
//! installs it and sets `DROVER_INSTALLED_CLI`), so TLS that only the
//! workspace build would enable cannot hide. Errors name their cause: a
//! wrong CA, an expired certificate, a name mismatch, a refused
//! connection, an answer that is not a Drover coordinator's, a malformed URL.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use drover_tests::runner_core::wire::JobState;
use drover_tests::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The `drover` binary `cargo install --path runner-core/cli` made.
fn installed_cli() -> PathBuf {
    let path = std::env::var_os("DROVER_INSTALLED_CLI")
        .map(PathBuf::from)
        .expect(
            "DROVER_INSTALLED_CLI is not set: tests/run.sh installs the CLI as a user does \
         (cargo install --path runner-core/cli --root …) and sets it to that `drover` binary",
        );
    assert!(
        path.is_file(),
        "DROVER_INSTALLED_CLI={} is not a file",
        path.display()
    );
    path
}

/// A throwaway certificate authority; its certificate is `pem`.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Drover test CA {name}"));
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).expect("write CA");
        Self {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for `localhost` written to `cert` and `key`
    /// (expired a few years ago if `expired`).
    fn issue(&self, cert: &Path, key: &Path, expired: bool) {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let leaf_key = KeyPair::generate().expect("key");
        let leaf = params
            .signed_by(&leaf_key, &self.issuer)
            .expect("certificate");
        std::fs::write(key, leaf_key.serialize_pem()).expect("write key");
        std::fs::write(cert, leaf.pem()).expect("write certificate");
    }
}

/// A coordinator serving TLS with a certificate of a new CA: (it, the CA).
async fn tls_coordinator(dir: &Path) -> (Coordinator, Ca) {
    let ca = Ca::new(dir, "ca");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    ca.issue(&cert, &key, false);
    let c = Coordinator::start_with(CoordinatorOptions {
        tls: Some(ServerTls {
            cert,
            key,
            ca: ca.pem.clone(),
        }),
        ..CoordinatorOptions::default()
    })
    .await;
    assert!(c.url.starts_with("https://localhost:"), "{}", c.url);
    (c, ca)
}

/// The installed `drover` with `args`, against `url`, trusting `ca` (if
/// given) besides the system's roots.
fn drover(url: &str, ca: Option<&Path>, token: &str, args: &[&str]) -> Output {
    let mut command = Command::new(installed_cli());
    command
        .args(args)
        .env("DROVER_URL", url)
        .env("DROVER_TOKEN", token)
        .env_remove("DROVER_CA_FILE");
    if let Some(ca) = ca {
        command.env("DROVER_CA_FILE", ca);
    }
    command.output().expect("run the installed drover")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A runner joined and a job run with `drover runner`, `drover submit
/// --wait` and MCP, all over HTTPS with the installed CLI; a URL naming
/// another host than the certificate's is a name mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_flows_run_over_https_with_the_installed_cli() {
    let dir = TempDir::new("tls");
    let (c, ca) = tls_coordinator(dir.path()).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let ca_file = ca.pem.display().to_string();

    let join = ws_join_token(&admin, "default").await;
    let state = TempDir::new("state");
    let state_dir = state.path().display().to_string();
    let runner = RunnerProcess::spawn_program(
        &installed_cli(),
        &c.url,
        &[
            "--join",
            "self:ws",
            "--token",
            &join.token,
            "--state-dir",
            &state_dir,
            "--ca-file",
            &ca_file,
        ],
        &[],
    );
    c.wait_for_waiting(1).await;

    let (url, token, ca_path) = (c.url.clone(), admin.token.clone(), ca.pem.clone());
    let out = tokio::task::spawn_blocking(move || {
        drover(
            &url,
            Some(&ca_path),
            &token,
            &[
                "submit",
                "--runtime",
                "self:ws",
                "--wait",
                "--",
                "sh",
                "-c",
                "echo over-tls",
            ],
        )
    })
    .await
    .unwrap();
    let stdout = stdout_ok(&out);
    assert!(stdout.contains("over-tls"), "{stdout}");
    assert!(
        !stderr(&out).contains("clear text"),
        "no warning for https: {}",
        stderr(&out)
    );

    // MCP over HTTPS with the official Python SDK, trusting the test CA.
    let python = std::env::var("DROVER_MCP_PYTHON").expect(
        "DROVER_MCP_PYTHON is not set: run tests/run.sh, which makes a venv with the MCP client",
    );
    let (url, token, ca_path) = (c.url.clone(), admin.token.clone(), ca.pem.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-c", MCP_SUBMIT])
            .env("DROVER_URL", url)
            .env("TOKEN", token)
            .env("CA_FILE", ca_path)
            .output()
            .expect("run python")
    })
    .await
    .unwrap();
    let id = stdout_ok(&out).trim().to_owned();
    assert!(id.starts_with("job_"), "{id:?}: {}", stderr(&out));
    let job = wait_done(&admin.client, &id).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");

    // The certificate names localhost, not 127.0.0.1.
    let by_ip = c.url.replace("localhost", "127.0.0.1");
    let out = drover(&by_ip, Some(&ca.pem), &admin.token, &["whoami"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("name mismatch") && stderr(&out).contains("127.0.0.1"),
        "{}",
        stderr(&out)
    );
    drop(runner);
}

/// One MCP tool call over HTTPS: submits a job, prints its id.
const MCP_SUBMIT: &str = r#"
import asyncio, json, os, ssl
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def main():
    tls = ssl.create_default_context(cafile=os.environ["CA_FILE"])
    headers = {"Authorization": "Bearer " + os.environ["TOKEN"]}
    async with httpx2.AsyncClient(headers=headers, verify=tls) as client:
        async with streamable_http_client(os.environ["DROVER_URL"] + "/mcp", http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                r = await session.call_tool("submit_job", {"runtime": "self:ws", "script": "echo via-mcp"})
                assert not r.is_error, r
                value = r.structured_content or json.loads(r.content[0].text)
                print(value["id"])

asyncio.run(main())
"#;

/// A renewed certificate is served without a restart; a broken pair
/// keeps the previous one in service; an expired certificate and another
/// CA's are refused with errors that say which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let dir = TempDir::new("tls");
    let (c, ca) = tls_coordinator(dir.path()).await;
    let admin = c.bootstrap("acme", "admin@acme.test");
    let tls = c.options.tls.clone().expect("tls");
    let whoami = |ca: &Path| drover(&c.url, Some(ca), &admin.token, &["whoami"]);
    stdout_ok(&whoami(&ca.pem));

    // Half a renewal (a certificate that is not PEM): logged, and the
    // previous pair keeps serving.
    std::fs::write(&tls.cert, "not a certificate\n").unwrap();
    eventually("the broken pair to be logged", DEADLINE, || {
        stdout_ok(&whoami(&ca.pem));
        let logged = c
            .log_text()
            .contains("cannot be used; still serving the previous pair");
        async move { logged.then_some(()) }
    })
    .await;
    assert!(c.log_text().contains("cert.pem"), "the log names the file");
    stdout_ok(&whoami(&ca.pem));

    // An expired certificate: the CLI says so.
    ca.issue(&tls.cert, &tls.key, true);
    let out = eventually("the expired certificate to be served", DEADLINE, || {
        let out = whoami(&ca.pem);
        async move { (!out.status.success()).then_some(out) }
    })
    .await;
    assert!(stderr(&out).contains("expired"), "{}", stderr(&out));
    assert_eq!(out.status.code(), Some(2));

    // Renewed by another CA: served at the next connection; the old CA
    // is now the wrong one, and the CLI says so.
    let other = Ca::new(dir.path(), "other-ca");
    other.issue(&tls.cert, &tls.key, false);
    eventually("the renewed certificate to be served", DEADLINE, || {
        let ok = whoami(&other.pem).status.success();
        async move { ok.then_some(()) }
    })
    .await;
    let out = whoami(&ca.pem);
    assert!(
        stderr(&out).contains("unknown authority (unknown issuer)")
            && stderr(&out).contains("--ca-file"),
        "{}",
        stderr(&out)
    );
    // Without --ca-file (the system's roots only), the same.
    let out = drover(&c.url, None, &admin.token, &["whoami"]);
    assert!(stderr(&out).contains("unknown issuer"), "{}", stderr(&out));
}

/// A refused connection names the URL; a server that is not a Drover
/// coordinator is named so (not its HTML page); a malformed `--url` is
/// refused before any request; plain http:// to another machine warns.
#[test]
fn cli_errors_name_their_cause() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let out = drover(
        &format!("http://127.0.0.1:{closed_port}"),
        None,
        "drv_x",
        &["whoami"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("connection refused") && err.contains(&format!("127.0.0.1:{closed_port}")),
        "{err}"
    );
    assert!(!err.contains("clear text"), "loopback: no warning: {err}");

    // Another web server: an HTML 501 page.
    let web = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let web_url = format!("http://{}", web.local_addr().unwrap());
    std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        for mut conn in web.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let body =
                "<html><head><title>501 Not Implemented</title></head><body>nope</body></html>";
            let _ = write!(
                conn,
                "HTTP/1.1 501 Not Implemented\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let out = drover(&web_url, None, "drv_x", &["whoami"]);
    let err = stderr(&out);
    assert!(
        err.contains("is not a Drover coordinator")
            && err.contains("501")
            && !err.contains("<html>"),
        "{err}"
    );

    // Malformed: no request is made.
    let out = drover("htps:/ci.example.com", None, "drv_x", &["whoami"]);
    let err = stderr(&out);
    assert!(err.contains("malformed") && err.contains("htps:/"), "{err}");

    // Plain http:// to an address that is not loopback: a warning first.
    let out = drover(
        &format!("http://0.0.0.0:{closed_port}"),
        None,
        "drv_x",
        &["whoami"],
    );
    let err = stderr(&out);
    assert_eq!(err.matches("clear text").count(), 1, "{err}");
    assert!(err.contains("use https://"), "{err}");
}
