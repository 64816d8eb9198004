//! The Tauri shell around the supervisor: the tray icon and its menu, the
//! settings window (a process of its own, `window.rs`, started on demand
//! and gone when it closes), deep links, notifications, and quitting.

use std::sync::Arc;

use tauri::image::Image;
use tauri::menu::{IsMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager as _, Runtime};

use crate::menu::{self, Action, Entry};
use crate::supervisor::{AppState, Notice, Supervisor};

const TRAY: &str = "drover";

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

fn tooltip(state: &AppState) -> String {
    format!("Drover — {}", menu::status_label(state.status))
}

/// Makes the tray from the supervisor's state as it is now, then draws it
/// (and the window, if one is open) again after every change. The state
/// is taken from the watch before the tray is made, so a change made
/// while it is being made is drawn right after: the tray cannot be left
/// showing a state that has passed.
pub fn start_tray(app: &AppHandle, sup: &Supervisor) -> tauri::Result<()> {
    let mut states = sup.watch();
    let state = states.borrow_and_update().clone();
    let mut drawn = (menu::build(&state), menu::icon_name(state.status));
    TrayIconBuilder::with_id(TRAY)
        .icon(icon(drawn.1))
        .tooltip(tooltip(&state))
        .menu(&render(app, &drawn.0)?)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu(app, event.id().as_ref()))
        .build(app)?;
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        while states.changed().await.is_ok() {
            let state = states.borrow_and_update().clone();
            let now = (menu::build(&state), menu::icon_name(state.status));
            if now != drawn
                && let Some(tray) = app.tray_by_id(TRAY)
            {
                match render(&app, &now.0) {
                    Ok(m) => {
                        let _ = tray.set_menu(Some(m));
                    }
                    Err(e) => tracing::error!("drawing the tray menu: {e}"),
                }
                let _ = tray.set_icon(Some(icon(now.1)));
                let _ = tray.set_tooltip(Some(tooltip(&state)));
                drawn = now;
            }
            crate::window::emit(&app, "state-changed", &state);
        }
    });
    Ok(())
}

pub fn hook<R: Runtime>(app: AppHandle<R>) -> crate::supervisor::Hook {
    Box::new(move |notice| match notice {
        Notice::Notify { title, body } => crate::notify::show(&app, &title, &body),
    })
}

/// A `drover://` link from the command line, a second launch, or the OS:
/// held for confirmation in the settings window.
pub fn open_link(app: &AppHandle, link: String) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let sup = app.state::<Arc<Supervisor>>().inner().clone();
        match sup.open_link(&link).await {
            Ok(pending) => {
                crate::window::show(&app);
                crate::window::emit(&app, "pending-link", &pending);
            }
            // Said in the window too (its dialog), before anything is asked.
            Err(e) => {
                crate::window::show(&app);
                crate::notify::show(&app, "Drover: could not open the link", &e.message);
            }
        }
    });
}

fn on_menu(app: &AppHandle, id: &str) {
    let Some(action) = menu::action(id) else {
        return;
    };
    let adding = id.starts_with("add:");
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let sup = app.state::<Arc<Supervisor>>().inner().clone();
        let result = match action {
            Action::Settings => {
                crate::window::show(&app);
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
