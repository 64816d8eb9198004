//! Asking for work: the lease request, and the leases the runner holds,
//! which it reports after a request it gave up unread.

use std::sync::atomic::Ordering;
use std::time::Duration;

use drover_wire::ErrorCode;

use super::{Runner, Step};
use crate::client::{ClientError, Offer};

/// How long a runner paused while its lease request waits still reads that
/// request, for the coordinator to end it (see `try_lease_and_run`).
pub const PAUSE_GRACE: Duration = Duration::from_secs(2);

impl Runner {
    /// A lease poll given up unanswered may have been handed a job meanwhile:
    /// the next poll says which leases this runner holds, and the
    /// coordinator gives back any other at once instead of at its TTL.
    pub(super) fn gave_up_poll(&self, step: Step) -> Step {
        self.report_held.store(true, Ordering::Release);
        step
    }

    /// Asks for a job: a long-poll; or, when the coordinator should hear
    /// which leases this runner holds, a quick look that says so (one at a
    /// time, and any lease it brings is held before the next report).
    pub(super) async fn ask_for_work(&self) -> Result<Option<Offer>, ClientError> {
        let wait = self.settings.lease_wait;
        let long_poll = || async {
            let r = self.client.offer(wait).await;
            if let Ok(offer) = &r {
                self.hold(offer.as_ref());
            }
            r
        };
        if !self.report_held.load(Ordering::Acquire) || self.held_unknown.load(Ordering::Acquire) {
            return long_poll().await;
        }
        let one = self.reporting.lock().await;
        if !self.report_held.load(Ordering::Acquire) {
            drop(one);
            return long_poll().await;
        }
        let held: Vec<String> = self.held.lock().expect("held").iter().cloned().collect();
        match self.client.offer_holding(Duration::ZERO, Some(held)).await {
            Ok(offer) => {
                self.report_held.store(false, Ordering::Release);
                self.hold(offer.as_ref());
                Ok(offer)
            }
            // A coordinator that predates `held` refuses the field.
            Err(ClientError::Api {
                code: ErrorCode::BadRequest,
                ..
            }) => {
                self.held_unknown.store(true, Ordering::Release);
                drop(one);
                long_poll().await
            }
            Err(e) => Err(e),
        }
    }

    /// Counts the lease an answer brought as held.
    pub(super) fn hold(&self, offer: Option<&Offer>) {
        let id = match offer {
            Some(Offer::Lease(lease)) => Some(&lease.lease_id),
            Some(Offer::Unreadable { lease_id, .. }) => lease_id.as_ref(),
            None => None,
        };
        if let Some(id) = id {
            self.held.lock().expect("held").insert(id.clone());
        }
    }

    pub(super) fn unhold(&self, lease: &str) {
        self.held.lock().expect("held").remove(lease);
    }
}
