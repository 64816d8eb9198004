//! What the coordinator knows of a runner besides its leases: while its
//! owner has it paused it asks for no job, so no lease request keeps it
//! seen; it says hello with `paused` instead, now and then.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Runner;

/// How often a paused runner says hello (the coordinator shows a runner
/// online while it has heard from it in the last 40 s).
pub const PAUSED_HELLO: Duration = Duration::from_secs(15);

impl Runner {
    /// Tells the coordinator when the owner pauses or resumes this runner;
    /// while paused (no lease requests keep it seen), says so again every
    /// [`PAUSED_HELLO`], so listings show it online and paused.
    pub(super) async fn presence(self: Arc<Self>, mut pause: watch::Receiver<bool>, slots: u32) {
        let mut paused = *pause.borrow_and_update();
        loop {
            if paused {
                tokio::select! {
                    changed = pause.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep(PAUSED_HELLO) => {}
                }
            } else if pause.changed().await.is_err() {
                return;
            }
            paused = *pause.borrow_and_update();
            let r = self
                .client
                .hello_as(&self.settings.capabilities, slots, paused)
                .await;
            self.link(&r);
        }
    }
}
