//! Large answers (a page of jobs, a job with its whole spec, a batch of its
//! log): at most a few at once per principal, each handed to the connection
//! a slice at a time. A client that stops reading holds its turn and what
//! is left of one answer until the write timeout ends its connection; its
//! next large reads wait briefly for a turn, then get `429 RATE_LIMITED`.
//! Other principals are not slowed.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use drover_wire::ErrorCode;
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::RETRY_AFTER_SECONDS;
use crate::error::{Error, Result};

/// Bytes handed to the connection at a time. Hyper buffers up to its
/// buffer size (64 KiB, `server::MAX_HEAD_BYTES`) before it asks for more.
pub const SLICE_BYTES: usize = 16 * 1024;

/// An answer up to this size is small: it takes no turn.
pub const SMALL_ANSWER_BYTES: usize = 64 * 1024;

/// Turns for large answers, per principal (a member or a CI principal).
pub struct HeavyReads {
    per_principal: usize,
    wait: Duration,
    principals: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl HeavyReads {
    pub fn new(per_principal: usize, wait: Duration) -> Arc<Self> {
        Arc::new(Self {
            per_principal: per_principal.max(1),
            wait,
            principals: Mutex::default(),
        })
    }

    fn slot(self: &Arc<Self>, principal: &str) -> Slot {
        let mut map = self.principals.lock().unwrap_or_else(|e| e.into_inner());
        let semaphore = map
            .entry(principal.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_principal)))
            .clone();
        Slot {
            semaphore,
            principal: principal.to_owned(),
            reads: self.clone(),
        }
    }

    /// A turn for `principal`, after a short wait at most; else 429.
    pub async fn turn(self: &Arc<Self>, principal: &str) -> Result<Turn> {
        let slot = self.slot(principal);
        let acquire = slot.semaphore.clone().acquire_owned();
        match tokio::time::timeout(self.wait, acquire).await {
            Ok(Ok(permit)) => Ok(Turn {
                _permit: permit,
                _slot: slot,
            }),
            _ => Err(Error::api(
                ErrorCode::RateLimited,
                format!(
                    "too many large answers to you in flight ({} at most); \
                     retry after {RETRY_AFTER_SECONDS} s",
                    self.per_principal
                ),
            )),
        }
    }

    /// A turn for `principal`, however long it takes (a stream's next batch).
    pub async fn wait_turn(self: &Arc<Self>, principal: &str) -> Turn {
        let slot = self.slot(principal);
        let permit = slot
            .semaphore
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        Turn {
            _permit: permit,
            _slot: slot,
        }
    }

    /// Principals holding or awaiting a turn (the table's size).
    pub fn principals(&self) -> usize {
        self.principals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

/// A principal's place in the table: its entry goes when the last one does.
struct Slot {
    semaphore: Arc<Semaphore>,
    principal: String,
    reads: Arc<HeavyReads>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self
            .reads
            .principals
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Clones are made under this lock: the map's and ours are the last.
        if map
            .get(&self.principal)
            .is_some_and(|s| Arc::ptr_eq(s, &self.semaphore))
            && Arc::strong_count(&self.semaphore) == 2
        {
            map.remove(&self.principal);
        }
    }
}

/// One large answer's turn; given back when dropped (the permit before the
/// slot, in field order).
pub struct Turn {
    _permit: OwnedSemaphorePermit,
    _slot: Slot,
}

impl Drop for Turn {
    fn drop(&mut self) {
        crate::trim::released();
    }
}

/// A JSON answer that holds `turn` until its last slice is handed over.
pub fn json(bytes: Vec<u8>, turn: Turn) -> Response {
    let mut response = Response::new(Body::new(Sliced {
        rest: Bytes::from(bytes),
        turn: Some(turn),
    }));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Takes the next slice of `rest`; `turn` goes with the last one.
pub fn next_slice(rest: &mut Bytes, turn: &mut Option<Turn>) -> Option<Bytes> {
    if rest.is_empty() {
        *turn = None;
        return None;
    }
    let piece = rest.split_to(rest.len().min(SLICE_BYTES));
    if rest.is_empty() {
        *turn = None;
    }
    Some(piece)
}

/// A body of known length, handed out a slice at a time.
struct Sliced {
    rest: Bytes,
    turn: Option<Turn>,
}

impl hyper::body::Body for Sliced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        Poll::Ready(next_slice(&mut this.rest, &mut this.turn).map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_are_per_principal_and_their_entries_go() {
        let reads = HeavyReads::new(2, Duration::from_millis(20));
        let a1 = reads.turn("a").await.unwrap();
        let _a2 = reads.turn("a").await.unwrap();
        let refused = reads.turn("a").await.err().unwrap();
        assert!(
            matches!(
                refused,
                Error::Api {
                    code: ErrorCode::RateLimited,
                    ..
                }
            ),
            "{refused:?}"
        );
        let b = reads.turn("b").await.unwrap();
        assert_eq!(reads.principals(), 2);
        drop(a1);
        let _a3 = reads.turn("a").await.unwrap();
        drop(b);
        assert_eq!(reads.principals(), 1, "b's entry went with its last turn");
    }

    #[tokio::test]
    async fn a_waiting_turn_keeps_the_entry() {
        let reads = HeavyReads::new(1, Duration::from_millis(20));
        let first = reads.turn("a").await.unwrap();
        let waiter = {
            let reads = reads.clone();
            tokio::spawn(async move { reads.wait_turn("a").await })
        };
        tokio::task::yield_now().await;
        drop(first);
        let second = waiter.await.unwrap();
        assert_eq!(reads.principals(), 1);
        drop(second);
        assert_eq!(reads.principals(), 0);
    }

    #[tokio::test]
    async fn a_sliced_body_gives_its_turn_back_with_the_last_slice() {
        let reads = HeavyReads::new(1, Duration::from_millis(20));
        let turn = reads.turn("a").await.unwrap();
        let mut rest = Bytes::from(vec![7u8; SLICE_BYTES * 2 + 1]);
        let mut turn = Some(turn);
        let mut sizes = Vec::new();
        while let Some(piece) = next_slice(&mut rest, &mut turn) {
            sizes.push(piece.len());
            assert_eq!(turn.is_some(), !rest.is_empty());
        }
        assert_eq!(sizes, [SLICE_BYTES, SLICE_BYTES, 1]);
        assert_eq!(reads.principals(), 0);
    }
}
