//! Desktop notifications. Linux and Windows: Tauri's notification plugin.
//! macOS: the User Notifications framework through the pure-Rust `objc2`
//! bindings, because the plugin's notify-rust compiles Objective-C against
//! Apple's SDK, which only a Mac has; so the app can be checked anywhere.

use tauri::{AppHandle, Runtime};

/// The notification plugin, where the app uses it.
#[cfg(not(target_os = "macos"))]
pub fn plugin<R: Runtime>() -> tauri::plugin::TauriPlugin<R> {
    tauri_plugin_notification::init()
}

/// Shows `title` and `body` as a desktop notification; one that cannot be
/// shown (no notification service, permission refused) is only logged.
#[cfg(not(target_os = "macos"))]
pub fn show<R: Runtime>(app: &AppHandle<R>, title: &str, body: &str) {
    use tauri_plugin_notification::NotificationExt as _;
    if let Err(e) = app.notification().builder().title(title).body(body).show() {
        tracing::debug!("notification not shown: {e}");
    }
}

/// Shows `title` and `body` as a desktop notification; one that cannot be
/// shown (permission refused) is only logged. The first asks macOS for
/// permission, which it remembers.
#[cfg(target_os = "macos")]
pub fn show<R: Runtime>(_app: &AppHandle<R>, title: &str, body: &str) {
    use std::sync::Once;
    use std::sync::atomic::{AtomicU64, Ordering};

    use block2::RcBlock;
    use objc2::runtime::Bool;
    use objc2_foundation::{NSError, NSString};
    use objc2_user_notifications::{
        UNAuthorizationOptions, UNMutableNotificationContent, UNNotificationRequest,
        UNUserNotificationCenter,
    };

    static ASKED: Once = Once::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let center = UNUserNotificationCenter::currentNotificationCenter();
    ASKED.call_once(|| {
        let answered = RcBlock::new(|granted: Bool, _error: *mut NSError| {
            if !granted.as_bool() {
                tracing::info!("notifications are turned off for Drover in System Settings");
            }
        });
        center.requestAuthorizationWithOptions_completionHandler(
            UNAuthorizationOptions::Alert | UNAuthorizationOptions::Sound,
            &answered,
        );
    });
    let content = UNMutableNotificationContent::new();
    content.setTitle(&NSString::from_str(title));
    content.setBody(&NSString::from_str(body));
    let id = format!("drover-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let request = UNNotificationRequest::requestWithIdentifier_content_trigger(
        &NSString::from_str(&id),
        &content,
        None,
    );
    let added = RcBlock::new(|error: *mut NSError| {
        if !error.is_null() {
            tracing::debug!("notification not shown");
        }
    });
    center.addNotificationRequest_withCompletionHandler(&request, Some(&added));
}
