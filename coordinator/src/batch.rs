//! Natural batching of the hot writes (lease, complete).
//!
//! Requests that arrive while a batch is being written go together into the
//! next one: one transaction and a handful of statements, however many
//! requests. Nothing waits for a batch to fill, so a lone request is
//! written at once and an idle coordinator adds no latency; under load the
//! batches grow by themselves and the cost per job falls.
//!
//! A batch that fails as a whole (a database error) is retried one request
//! at a time, so one bad request cannot fail its neighbours.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::error::{Error, Result};

type Reply<T> = oneshot::Sender<Result<T>>;

/// Runs a batch: one result per request, in order; `Err` if the whole
/// batch failed (and nothing was committed).
pub type BatchFn<Req, Resp> = Arc<
    dyn Fn(Vec<Req>) -> futures_util::future::BoxFuture<'static, Result<Vec<Result<Resp>>>>
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
    pub fn spawn(max: usize, concurrency: usize, run: BatchFn<Req, Resp>) -> Self {
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
                    execute(&run, batch).await;
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
        Err(e) if alone => {
            let _ = replies.into_iter().next().map(|r| r.send(Err(e)));
        }
        Err(e) => {
            tracing::debug!(error = %e, size = reqs.len(), "batch failed; retrying one by one");
            for (req, reply) in reqs.into_iter().zip(replies) {
                let result = match run(vec![req]).await {
                    Ok(mut one) => one
                        .pop()
                        .unwrap_or_else(|| Err(Error::Internal("a batch of one gave no result"))),
                    Err(e) => Err(e),
                };
                let _ = reply.send(result);
            }
        }
    }
}
