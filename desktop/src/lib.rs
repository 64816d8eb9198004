//! Drover's desktop app: a tray icon that lends this machine's runners to a
//! coordinator. runner-core runs the runners in this process; the
//! supervisor owns them, the keychain holds their secrets, and the shell
//! (tray, window, deep links) only shows and asks.

pub mod commands;
pub mod config;
pub mod error;
pub mod keychain;
pub mod links;
pub mod menu;
pub mod notify;
pub mod power;
pub mod shell;
pub mod supervisor;
