//! The Tauri shell around the supervisor: the tray icon and its menu, the
//! settings window (made on demand, destroyed on close so its webview's
//! memory goes back), deep links, notifications, and quitting.

use std::sync::{Arc, Mutex};

use tauri::image::Image;
use tauri::menu::{IsMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Emitter as _, Manager as _, Runtime, WebviewUrl, WebviewWindowBuilder};

use crate::menu::{self, Action, Entry};
use crate::supervisor::{AppState, Notice, Supervisor};

pub const WINDOW: &str = "main";
const TRAY: &str = "drover";

/// What the tray shows now, so an unchanged menu is not rebuilt.
#[derive(Default)]
pub struct TrayModel(Mutex<Option<(Vec<Entry>, &'static str)>>);

fn icon(name: &str) -> Image<'static> {
    let bytes: &'static [u8] = match name {
        "tray-busy.png" => include_bytes!("../icons/tray-busy.png"),
        "tray-offline.png" => include_bytes!("../icons/tray-offline.png"),
        "tray-paused.png" => include_bytes!("../icons/tray-paused.png"),
        _ => include_bytes!("../icons/tray-idle.png"),
    };
    Image::from_bytes(bytes).expect("the tray icons are PNGs")
}

fn render<R: Runtime>(app: &AppHandle<R>, entries: &[Entry]) -> tauri::Result<Menu<R>> {
    let mut items: Vec<Box<dyn IsMenuItem<R>>> = Vec::new();
    for entry in entries {
        items.push(match entry {
            Entry::Item { id, label, enabled } => Box::new(MenuItem::with_id(
                app,
                id.as_str(),
                label,
                *enabled,
                None::<&str>,
            )?),
            Entry::Separator => Box::new(PredefinedMenuItem::separator(app)?),
        });
    }
    let refs: Vec<&dyn IsMenuItem<R>> = items.iter().map(|i| i.as_ref()).collect();
    Menu::with_items(app, &refs)
}

pub fn create_tray<R: Runtime>(app: &AppHandle<R>, state: &AppState) -> tauri::Result<TrayIcon<R>> {
    let entries = menu::build(state);
    let name = menu::icon_name(state.status);
    *app.state::<TrayModel>().0.lock().expect("tray lock") = Some((entries.clone(), name));
    TrayIconBuilder::with_id(TRAY)
        .icon(icon(name))
        .tooltip(format!("Drover — {}", menu::status_label(state.status)))
        .menu(&render(app, &entries)?)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu(app, event.id().as_ref()))
        .build(app)
}

/// Brings the state to the tray and to the window, if one is open.
pub fn on_changed<R: Runtime>(app: &AppHandle<R>, state: &AppState) {
    let entries = menu::build(state);
    let name = menu::icon_name(state.status);
    let model = app.state::<TrayModel>();
    let mut shown = model.0.lock().expect("tray lock");
    if shown.as_ref() != Some(&(entries.clone(), name))
        && let Some(tray) = app.tray_by_id(TRAY)
    {
        if let Ok(m) = render(app, &entries) {
            let _ = tray.set_menu(Some(m));
        }
        let _ = tray.set_icon(Some(icon(name)));
        let _ = tray.set_tooltip(Some(format!(
            "Drover — {}",
            menu::status_label(state.status)
        )));
        *shown = Some((entries, name));
    }
    drop(shown);
    let _ = app.emit_to(WINDOW, "state-changed", state);
}

pub fn hook<R: Runtime>(app: AppHandle<R>) -> crate::supervisor::Hook {
    Box::new(move |notice| match notice {
        Notice::Changed(state) => on_changed(&app, &state),
        Notice::Notify { title, body } => crate::notify::show(&app, &title, &body),
    })
}

pub fn show_window<R: Runtime>(app: &AppHandle<R>) {
    if let Some(window) = app.get_webview_window(WINDOW) {
        let _ = window.show();
        let _ = window.unminimize();
        let _ = window.set_focus();
        return;
    }
    let built = WebviewWindowBuilder::new(app, WINDOW, WebviewUrl::App("index.html".into()))
        .title("Drover")
        .inner_size(900.0, 640.0)
        .min_inner_size(640.0, 480.0)
        .build();
    if let Err(e) = built {
        tracing::error!("opening the settings window: {e}");
    }
}

/// A `drover://` link from the command line, a second launch, or the OS:
/// held for confirmation in the settings window.
pub fn open_link<R: Runtime>(app: &AppHandle<R>, link: String) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let sup = app.state::<Arc<Supervisor>>().inner().clone();
        match sup.open_link(&link).await {
            Ok(pending) => {
                show_window(&app);
                let _ = app.emit_to(WINDOW, "pending-link", pending);
            }
            Err(e) => crate::notify::show(&app, "Drover: could not open the link", &e.message),
        }
    });
}

fn on_menu<R: Runtime>(app: &AppHandle<R>, id: &str) {
    let Some(action) = menu::action(id) else {
        return;
    };
    let adding = id.starts_with("add:");
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let sup = app.state::<Arc<Supervisor>>().inner().clone();
        let result = match action {
            Action::Settings => {
                show_window(&app);
                Ok(())
            }
            Action::Quit => {
                quit(&app, &sup).await;
                Ok(())
            }
            Action::TogglePause => {
                let paused = sup.state().await.paused;
                sup.set_paused(!paused).await.map(drop)
            }
            Action::Add(pool) | Action::Remove(pool) => {
                let state = sup.state().await;
                let now = state
                    .pools
                    .iter()
                    .find(|p| p.reference == pool)
                    .map_or(0, |p| p.runners);
                let count = if adding {
                    now + 1
                } else {
                    now.saturating_sub(1)
                };
                sup.set_runner_count(&pool, count).await.map(drop)
            }
        };
        if let Err(e) = result {
            crate::notify::show(&app, "Drover", &e.to_string());
        }
    });
}

/// First quit drains (running jobs finish); a second stops at once.
pub async fn quit<R: Runtime>(app: &AppHandle<R>, sup: &Supervisor) {
    if sup.state().await.quitting {
        sup.kill_all().await;
    } else {
        sup.begin_quit().await;
    }
    sup.wait_stopped().await;
    app.exit(0);
}
