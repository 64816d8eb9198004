//! `drover-desktop`: the tray app. `drover-desktop 'drover://pair?…'`
//! (or the OS opening such a link) hands the link to the running app;
//! `drover-desktop --show` opens the settings window at start;
//! `drover-desktop --window` is that window's own process (`window.rs`).

use std::sync::Arc;

use drover_desktop::{config, links, shell, supervisor};
use runner_core::runner::RunnerSettings;
use tauri::{Manager as _, RunEvent};
use tauri_plugin_autostart::MacosLauncher;

fn main() {
    // First, before any job can run: no process of this user (a job the
    // app runs unsandboxed included) reads this process's memory or
    // environment through /proc, or ptraces it.
    let hardened = runner_core::isolation::harden_process();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DROVER_LOG")
                .unwrap_or_else(|_| "drover_desktop=info,runner_core=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = hardened {
        tracing::warn!("could not make this process unreadable to its jobs: {e}");
    }
    let context = tauri::generate_context!();
    if std::env::args().any(|a| a == drover_desktop::window::ARG) {
        return drover_desktop::window::run(context);
    }
    let builder = tauri::Builder::default()
        .manage(drover_desktop::window::Window::default())
        // First: a second launch hands its link over and exits.
        .plugin(tauri_plugin_single_instance::init(
            |app, argv, _cwd| match links::find_in_args(argv) {
                Some(link) => shell::open_link(app, link),
                None => drover_desktop::window::show(app),
            },
        ))
        .plugin(tauri_plugin_deep_link::init())
        .plugin(tauri_plugin_autostart::init(
            MacosLauncher::LaunchAgent,
            None,
        ));
    #[cfg(not(target_os = "macos"))]
    let builder = builder.plugin(drover_desktop::notify::plugin());
    let app = builder
        .setup(|app| {
            let handle = app.handle().clone();
            let options = supervisor::Options {
                config_path: config::default_path().ok_or("no configuration directory")?,
                device_name: runner_core::host::hostname(),
                runner: RunnerSettings::default(),
                hook: shell::hook(handle.clone()),
                // A private CA's PEM file, trusted besides the system's roots.
                client: runner_core::client::ClientOptions {
                    ca_file: std::env::var_os("DROVER_CA_FILE")
                        .filter(|f| !f.is_empty())
                        .map(Into::into),
                },
                tick: supervisor::TICK,
            };
            let sup = tauri::async_runtime::block_on(supervisor::Supervisor::start(options))?;
            let state = tauri::async_runtime::block_on(sup.state());
            app.manage(Arc::clone(&sup));
            shell::start_tray(&handle, &sup)?;
            // Development builds register drover:// themselves; an
            // installed app is registered by its package (the .deb's
            // desktop file), so a release build writes no handler file.
            #[cfg(all(debug_assertions, any(target_os = "linux", windows)))]
            {
                use tauri_plugin_deep_link::DeepLinkExt as _;
                if let Err(e) = app.deep_link().register_all() {
                    tracing::debug!("registering drover:// links: {e}");
                }
            }
            {
                use tauri_plugin_deep_link::DeepLinkExt as _;
                let h = handle.clone();
                app.deep_link().on_open_url(move |event| {
                    for url in event.urls() {
                        shell::open_link(&h, url.to_string());
                    }
                });
            }
            match links::find_in_args(std::env::args()) {
                Some(link) => shell::open_link(&handle, link),
                // Signed out, or asked for (`--show`): the window, at once.
                None if std::env::args().any(|a| a == "--show")
                    || (state.account.is_none() && state.pools.is_empty()) =>
                {
                    drover_desktop::window::show(&handle)
                }
                None => {}
            }
            Ok(())
        })
        .build(context)
        .expect("building the app");
    app.run(|_app, event| {
        // No window lives in this process; only Quit (code set) exits.
        if let RunEvent::ExitRequested { api, code, .. } = event
            && code.is_none()
        {
            api.prevent_exit();
        }
    });
}
