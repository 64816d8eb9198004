//! Drover's desktop app: a tray icon that lends this machine's runners to a
//! coordinator. What decides lives in `drover-desktop-core` (re-exported
//! here): the supervisor owns the runners, the keychain holds their
//! secrets. This crate is the shell (tray, window, deep links,
//! notifications): it only shows and asks.

pub use drover_desktop_core::{config, error, keychain, links, menu, power, supervisor};

pub mod commands;
pub mod notify;
pub mod shell;
pub mod window;
