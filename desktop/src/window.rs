//! The settings window is a process of its own: `drover-desktop --window`,
//! started by the tray process when the window is asked for, and gone
//! when it closes. So the webview's memory (its web and network
//! processes, and what WebKit keeps mapped in the process that showed it)
//! goes with it, and the tray process that lives all day never holds any.
//!
//! The two talk over the window process's stdin and stdout, one JSON
//! object per line: the window forwards each `invoke` (`{id, cmd, args}`)
//! and the tray answers it (`reply`), pushes events (`state-changed`,
//! `pending-link`) and asks it to come to the front (`focus`). The pipe is
//! private to the two processes; when the tray process ends, the window's
//! stdin closes and it closes too.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tauri::ipc::{Invoke, InvokeBody, InvokeResolver};
use tauri::{
    AppHandle, Context, Emitter as _, Manager as _, WebviewUrl, WebviewWindowBuilder, Wry,
};

use crate::commands::{self, Ctx};
use crate::error::AppError;
use crate::supervisor::Supervisor;

/// The argument that makes `drover-desktop` the settings window.
pub const ARG: &str = "--window";
/// The window's label (the capability in `capabilities/` names it).
const LABEL: &str = "main";

/// The window's `invoke`, forwarded to the tray process.
#[derive(Serialize, Deserialize)]
struct Request {
    id: u64,
    cmd: String,
    args: Value,
}

/// What the tray process sends the window.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum ToWindow {
    /// The answer to request `id`: `{"Ok": value}` or `{"Err": {code, message}}`.
    Reply {
        id: u64,
        result: Result<Value, Value>,
    },
    Event {
        name: String,
        payload: Value,
    },
    Focus,
}

// ------------------------------------------------------------ the tray process's side

/// The window process while it runs (managed by the tray app).
#[derive(Default)]
pub struct Window(Mutex<Option<Running>>);

struct Running {
    stdin: Arc<Mutex<ChildStdin>>,
    /// Tells this window from one opened after it closed.
    serial: u64,
}

impl Running {
    fn send(&self, message: &ToWindow) -> bool {
        send_line(&self.stdin, message)
    }
}

fn send_line(stdin: &Mutex<ChildStdin>, message: &ToWindow) -> bool {
    let mut line = serde_json::to_vec(message).expect("a message serialises");
    line.push(b'\n');
    let mut stdin = stdin.lock().unwrap_or_else(|e| e.into_inner());
    stdin.write_all(&line).and_then(|()| stdin.flush()).is_ok()
}

/// Brings the window to the front, starting its process if none runs.
pub fn show(app: &AppHandle) {
    let window = app.state::<Window>();
    let mut running = window.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = running.as_ref()
        && r.send(&ToWindow::Focus)
    {
        return;
    }
    match start(app) {
        Ok(r) => *running = Some(r),
        Err(e) => tracing::error!("opening the settings window: {e}"),
    }
}

/// Sends `event` to the window, if one is open.
pub fn emit<S: Serialize>(app: &AppHandle, event: &str, payload: &S) {
    let window = app.state::<Window>();
    let running = window.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = running.as_ref() {
        let payload = serde_json::to_value(payload).unwrap_or(Value::Null);
        r.send(&ToWindow::Event {
            name: event.to_owned(),
            payload,
        });
    }
}

fn start(app: &AppHandle) -> std::io::Result<Running> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let mut child = Command::new(std::env::current_exe()?)
        .arg(ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdin = Arc::new(Mutex::new(child.stdin.take().expect("piped")));
    let stdout = child.stdout.take().expect("piped");
    let cx = Arc::new(Ctx {
        sup: Arc::clone(app.state::<Arc<Supervisor>>().inner()),
        app: app.clone(),
    });
    let replies = Arc::clone(&stdin);
    let app = app.clone();
    std::thread::Builder::new()
        .name("window-requests".into())
        .spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(request) = serde_json::from_str::<Request>(&line) else {
                    // Something in the window process wrote to stdout.
                    tracing::debug!("window process: {line}");
                    continue;
                };
                let (cx, replies) = (Arc::clone(&cx), Arc::clone(&replies));
                tauri::async_runtime::spawn(async move {
                    let result = commands::call(&cx, &request.cmd, request.args).await;
                    let result = result.map_err(|e| serde_json::to_value(e).unwrap_or(Value::Null));
                    send_line(
                        &replies,
                        &ToWindow::Reply {
                            id: request.id,
                            result,
                        },
                    );
                });
            }
            ended(&app, serial, child);
        })?;
    Ok(Running { stdin, serial })
}

/// The window process closed its stdout: it is ending (its window closed).
fn ended(app: &AppHandle, serial: u64, mut child: Child) {
    match child.wait() {
        Ok(status) if status.success() => {}
        Ok(status) => tracing::warn!("the settings window's process ended: {status}"),
        Err(e) => tracing::warn!("waiting for the settings window's process: {e}"),
    }
    let window = app.state::<Window>();
    let mut running = window.0.lock().unwrap_or_else(|e| e.into_inner());
    if running.as_ref().is_some_and(|r| r.serial == serial) {
        *running = None;
    }
}

// ------------------------------------------------------------ the window process

type Waiting = Arc<Mutex<HashMap<u64, InvokeResolver<Wry>>>>;

/// `drover-desktop --window`: the settings window, until it is closed or
/// the tray process that started it ends.
pub fn run(context: Context<Wry>) {
    let waiting: Waiting = Arc::default();
    let forward = {
        let waiting = Arc::clone(&waiting);
        let next = AtomicU64::new(1);
        let stdout = Mutex::new(std::io::stdout());
        move |invoke: Invoke<Wry>| {
            let Invoke {
                message, resolver, ..
            } = invoke;
            let args = match message.payload() {
                InvokeBody::Json(args) => args.clone(),
                InvokeBody::Raw(_) => {
                    resolver.reject(AppError::invalid("the app's commands take JSON"));
                    return true;
                }
            };
            let id = next.fetch_add(1, Ordering::Relaxed);
            let mut line = serde_json::to_vec(&Request {
                id,
                cmd: message.command().to_owned(),
                args,
            })
            .expect("a request serialises");
            line.push(b'\n');
            waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, resolver);
            let mut out = stdout.lock().unwrap_or_else(|e| e.into_inner());
            if out.write_all(&line).and_then(|()| out.flush()).is_err()
                && let Some(resolver) = waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id)
            {
                resolver.reject(AppError::new("INTERNAL", "the tray app has ended"));
            }
            true
        }
    };
    let app = tauri::Builder::default()
        .invoke_handler(forward)
        .setup(move |app| {
            WebviewWindowBuilder::new(app, LABEL, WebviewUrl::App("index.html".into()))
                .title("Drover")
                .inner_size(900.0, 640.0)
                .min_inner_size(640.0, 480.0)
                .build()?;
            let handle = app.handle().clone();
            std::thread::Builder::new()
                .name("tray-messages".into())
                .spawn(move || from_tray(&handle, &waiting))?;
            Ok(())
        })
        .build(context)
        .expect("building the settings window");
    app.run(|_, _| {});
}

/// Answers, events and focus requests from the tray process; its end
/// (stdin closed) ends the window.
fn from_tray(app: &AppHandle, waiting: &Waiting) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let message = match serde_json::from_str::<ToWindow>(&line) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("a message from the tray app: {e}");
                continue;
            }
        };
        match message {
            ToWindow::Reply { id, result } => {
                let resolver = waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                match (resolver, result) {
                    (Some(r), Ok(value)) => r.resolve(value),
                    (Some(r), Err(error)) => r.reject(error),
                    (None, _) => {}
                }
            }
            ToWindow::Event { name, payload } => {
                let _ = app.emit_to(LABEL, &name, payload);
            }
            ToWindow::Focus => {
                if let Some(window) = app.get_webview_window(LABEL) {
                    let _ = window.show();
                    let _ = window.unminimize();
                    let _ = window.set_focus();
                }
            }
        }
    }
    app.exit(0);
}
