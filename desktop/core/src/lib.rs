//! The desktop app without its window: everything that decides, none of
//! what draws. runner-core runs the runners in the app's process; the
//! supervisor owns them, the keychain holds their secrets, `menu` says what
//! the tray shows. The shell (`drover-desktop`: tray, window, deep links,
//! notifications) only shows and asks. No GUI library is a dependency here,
//! so this crate and its tests build without the tauri/GTK/WebKit tree.

pub mod awake;
pub mod config;
pub mod error;
pub mod keychain;
pub mod links;
pub mod menu;
pub mod metered;
pub mod power;
pub mod quiet;
pub mod supervisor;
