//! Natural batching of the hot writes (lease, complete).
//!
//! Requests that arrive while a batch is being written go together into the
//! next one: one transaction and a handful of statements, however many
//! requests. Nothing waits for a batch to fill, so a lone request is
//! written at once and an idle coordinator adds no latency; under load the
//! batches grow by themselves and the cost per job falls.
//!
//! A batch that fails as a whole before it wrote anything is retried one
//! request at a time, so one bad request cannot fail its neighbours. One
//! that failed when it may already have written (the connection broke
//! during its write or its COMMIT) is not re-run: that could write twice.
//! Each of its requests fails with a retryable error instead.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::error::{Error, Result};
use super::observe;

type Reply<T> = oneshot::Sender<Result<T>>;

/// How a whole batch failed.
#[derive(Debug)]
pub enum BatchError {
    /// Nothing was written: the batch may run again.
    BeforeWrite(Error),
    /// The write may have happened: running again could do it twice.
    Ambiguous(Error),
}

impl BatchError {
    /// An error from a statement that writes on its own (autocommit), or
    /// from COMMIT. The database refusing it (a database error) means it
    /// was rolled back; any other failure (the connection broke, its thread
    /// died) leaves unknown whether it committed.
    pub fn from_write(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::Database(_) => Self::BeforeWrite(e.into()),
            other => Self::Ambiguous(other.into()),
        }
    }

    /// What one caller is told. An ambiguous failure is logged in full; the
    /// caller hears it may retry (a submit safely, with an Idempotency-Key).
    pub fn into_error(self) -> Error {
        match self {
            Self::BeforeWrite(e) => e,
            Self::Ambiguous(e) => {
                tracing::error!(error = %e, "a write failed and may or may not have committed");
                ambiguous()
            }
        }
    }
}

/// The error each request of an ambiguous batch gets.
fn ambiguous() -> Error {
    Error::Ambiguous
}

impl From<Error> for BatchError {
    fn from(e: Error) -> Self {
        Self::BeforeWrite(e)
    }
}

impl From<rusqlite::Error> for BatchError {
    fn from(e: rusqlite::Error) -> Self {
        Self::BeforeWrite(e.into())
    }
}

impl From<sqlx::Error> for BatchError {
    fn from(e: sqlx::Error) -> Self {
        Self::BeforeWrite(e.into())
    }
}

impl From<BatchError> for Error {
    fn from(e: BatchError) -> Self {
        e.into_error()
    }
}

/// Runs a batch: one result per request, in order; `Err` if the whole
/// batch failed, saying whether anything may have been written.
pub type BatchFn<Req, Resp> = Arc<
    dyn Fn(
            Vec<Req>,
        )
            -> futures_util::future::BoxFuture<'static, Result<Vec<Result<Resp>>, BatchError>>
        + Send
        + Sync,
>;

pub struct Batcher<Req, Resp> {
    tx: mpsc::UnboundedSender<(Req, Reply<Resp>)>,
}

impl<Req, Resp> Batcher<Req, Resp>
where
    Req: Clone + Send + 'static,
    Resp: Send + 'static,
{
    /// Up to `max` requests per batch, up to `concurrency` batches in flight.
    #[cfg(test)]
    pub fn spawn(max: usize, concurrency: usize, run: BatchFn<Req, Resp>) -> Self {
        Self::spawn_observed(None, max, concurrency, run)
    }

    /// As [`Batcher::spawn`], and each batch's size and write time go to
    /// the store's observer as this `kind` (`submit`, `lease`, `complete`, …).
    pub fn spawn_named(
        kind: &'static str,
        max: usize,
        concurrency: usize,
        run: BatchFn<Req, Resp>,
    ) -> Self {
        Self::spawn_observed(Some(kind), max, concurrency, run)
    }

    fn spawn_observed(
        observed: Option<&'static str>,
        max: usize,
        concurrency: usize,
        run: BatchFn<Req, Resp>,
    ) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Req, Reply<Resp>)>();
        let permits = Arc::new(Semaphore::new(concurrency));
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                // While we wait for a free slot, more requests queue up.
                let permit = permits.clone().acquire_owned().await.expect("never closed");
                let mut batch = vec![first];
                while batch.len() < max {
                    match rx.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                // A caller that went away (its client hung up) is not served.
                batch.retain(|(_, reply)| !reply.is_closed());
                if batch.is_empty() {
                    continue;
                }
                let run = run.clone();
                tokio::spawn(async move {
                    let (size, started) = (batch.len(), Instant::now());
                    execute(&run, batch).await;
                    if let (Some(kind), Some(o)) = (observed, observe::get()) {
                        o.batch_written(kind, size, started.elapsed());
                    }
                    drop(permit);
                });
            }
        });
        Self { tx }
    }

    pub async fn call(&self, req: Req) -> Result<Resp> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((req, reply))
            .map_err(|_| Error::Internal("the batch writer has stopped"))?;
        answer
            .await
            .map_err(|_| Error::Internal("the batch writer dropped a request"))?
    }
}

async fn execute<Req: Clone, Resp>(run: &BatchFn<Req, Resp>, batch: Vec<(Req, Reply<Resp>)>) {
    let (reqs, replies): (Vec<Req>, Vec<Reply<Resp>>) = batch.into_iter().unzip();
    let alone = reqs.len() == 1;
    match run(reqs.clone()).await {
        Ok(results) => {
            debug_assert_eq!(results.len(), replies.len());
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        }
        Err(BatchError::Ambiguous(e)) => {
            tracing::error!(error = %e, size = reqs.len(), "a batch's write failed and may or may not have committed");
            for reply in replies {
                let _ = reply.send(Err(ambiguous()));
            }
        }
        Err(BatchError::BeforeWrite(e)) if alone => {
            let _ = replies.into_iter().next().map(|r| r.send(Err(e)));
        }
        Err(BatchError::BeforeWrite(e)) => {
            tracing::debug!(error = %e, size = reqs.len(), "batch failed; retrying one by one");
            for (req, reply) in reqs.into_iter().zip(replies) {
                let result = match run(vec![req]).await {
                    Ok(mut one) => one
                        .pop()
                        .unwrap_or_else(|| Err(Error::Internal("a batch of one gave no result"))),
                    Err(e) => Err(e.into_error()),
                };
                let _ = reply.send(result);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::Notify;

    use super::*;

    /// How the recording batch function fails a batch of many.
    #[derive(Clone, Copy)]
    enum Failing {
        Never,
        BeforeWrite,
        Ambiguously,
    }

    /// Echoes each request; records batch sizes; the first batch waits for `go`.
    fn recording(
        sizes: Arc<Mutex<Vec<usize>>>,
        go: Arc<Notify>,
        failing: Failing,
    ) -> BatchFn<u32, u32> {
        Arc::new(move |reqs: Vec<u32>| {
            let (sizes, go) = (sizes.clone(), go.clone());
            Box::pin(async move {
                let first = sizes.lock().unwrap().is_empty();
                sizes.lock().unwrap().push(reqs.len());
                if first {
                    go.notified().await;
                }
                if reqs.len() > 1 {
                    let e = Error::Internal("a batch of many failed");
                    match failing {
                        Failing::Never => {}
                        Failing::BeforeWrite => return Err(BatchError::BeforeWrite(e)),
                        Failing::Ambiguously => return Err(BatchError::Ambiguous(e)),
                    }
                }
                Ok(reqs
                    .into_iter()
                    .map(|r| {
                        if r == 13 {
                            Err(Error::bad_request("unlucky"))
                        } else {
                            Ok(r * 10)
                        }
                    })
                    .collect())
            })
        })
    }

    async fn queued_behind_first(failing: Failing) -> (Vec<Result<u32>>, Vec<usize>) {
        let (sizes, go) = (Arc::default(), Arc::new(Notify::new()));
        let batcher = Arc::new(Batcher::spawn(
            64,
            1,
            recording(Arc::clone(&sizes), go.clone(), failing),
        ));
        let b = batcher.clone();
        let first = tokio::spawn(async move { b.call(1).await });
        // The first batch is being written; everything sent now queues.
        while sizes.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let rest: Vec<_> = [2, 13, 4]
            .into_iter()
            .map(|r| {
                let (b, sent) = (batcher.clone(), sent.clone());
                // `call` queues its request in its first poll, with no await
                // between the count and the send.
                tokio::spawn(async move {
                    sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    b.call(r).await
                })
            })
            .collect();
        // Let the three calls reach the queue, then finish the first batch.
        while sent.load(std::sync::atomic::Ordering::SeqCst) < 3 {
            tokio::task::yield_now().await;
        }
        go.notify_one();
        let mut out = vec![first.await.unwrap()];
        for r in rest {
            out.push(r.await.unwrap());
        }
        let sizes = sizes.lock().unwrap().clone();
        (out, sizes)
    }

    #[tokio::test]
    async fn requests_arriving_during_a_batch_go_together_in_the_next() {
        let (out, sizes) = queued_behind_first(Failing::Never).await;
        assert_eq!(
            sizes,
            vec![1, 3],
            "a lone request goes at once; the rest together"
        );
        let values: Vec<Option<u32>> = out.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(values, vec![Some(10), Some(20), None, Some(40)]);
        assert_eq!(
            out[2].as_ref().unwrap_err().kind(),
            Some(crate::store::error::Kind::Invalid)
        );
    }

    #[tokio::test]
    async fn a_failed_batch_is_retried_one_request_at_a_time() {
        let (out, sizes) = queued_behind_first(Failing::BeforeWrite).await;
        assert_eq!(sizes, vec![1, 3, 1, 1, 1]);
        let values: Vec<Option<u32>> = out.iter().map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(
            values,
            vec![Some(10), Some(20), None, Some(40)],
            "only 13 fails"
        );
    }

    #[tokio::test]
    async fn a_batch_that_may_have_written_is_not_run_again() {
        let (out, sizes) = queued_behind_first(Failing::Ambiguously).await;
        assert_eq!(
            sizes,
            vec![1, 3],
            "no request of the failed batch runs twice"
        );
        assert_eq!(out[0].as_ref().ok(), Some(&10));
        for r in &out[1..] {
            let e = r.as_ref().unwrap_err();
            assert!(matches!(e, Error::Ambiguous), "{e}");
            assert!(e.to_string().contains("may or may not"), "{e}");
        }
    }

    #[tokio::test]
    async fn only_a_refusal_by_the_database_is_known_to_have_written_nothing() {
        use sqlx::Connection as _;
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            .execute(&mut conn)
            .await
            .unwrap();
        let twice = sqlx::query("INSERT INTO t (id) VALUES (1), (1)")
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert!(matches!(
            BatchError::from_write(twice),
            BatchError::BeforeWrite(_)
        ));

        let closed = BatchError::from_write(sqlx::Error::PoolClosed);
        assert!(matches!(closed, BatchError::Ambiguous(_)));
        let io = BatchError::from_write(sqlx::Error::Io(std::io::Error::other("reset")));
        assert!(matches!(io, BatchError::Ambiguous(_)));
        let protocol = BatchError::from_write(sqlx::Error::Protocol("eof".into()));
        assert!(matches!(protocol, BatchError::Ambiguous(_)));
    }
}
