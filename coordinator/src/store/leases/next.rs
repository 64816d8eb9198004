//! A runner's complete and its next lease, when it asks for the next job
//! with the result: on PostgreSQL in one transaction, on SQLite as two calls.

use std::sync::Arc;

use super::{CompleteRequest, Completion, LeaseAttempt, LeaseRequest, only_result};
use crate::store::Store;
use crate::store::backend::OnEngine;
use crate::store::backend::sqlite::SqliteEngine;
use crate::store::batch::BatchError;
use crate::store::error::Result;

impl Store {
    /// PostgreSQL: a runner's complete and its next lease (it asked for
    /// its next job with the result, `wait_ms` 0) in one transaction, so one
    /// commit, one wait for the WAL to reach the disk, where the two calls
    /// made two. `Ok(None)` for the lease when the complete was a repeat
    /// (its first answer may have carried a lease already). On SQLite, whose
    /// batch writer commits many calls at once, the two go as two calls.
    pub async fn complete_then_lease(
        &self,
        complete: CompleteRequest,
        lease: LeaseRequest,
    ) -> Result<(Completion, Option<Result<LeaseAttempt>>)> {
        self.engine
            .run(self, CompleteThenLease { complete, lease })
            .await
    }

    /// As two calls (SQLite): the complete, then, unless it was a repeat,
    /// the lease.
    async fn complete_then_lease_apart(
        &self,
        complete: CompleteRequest,
        lease: LeaseRequest,
    ) -> Result<(Completion, Option<Result<LeaseAttempt>>)> {
        let completion = self
            .complete(
                &complete.runner,
                &complete.lease,
                &complete.done,
                complete.now,
            )
            .await?;
        if completion.repeated {
            return Ok((completion, None));
        }
        let attempt = self
            .try_lease(&lease.runner, &lease.runtime, lease.now, lease.ttl_ms)
            .await;
        Ok((completion, Some(attempt)))
    }

    /// In one transaction (PostgreSQL).
    async fn complete_then_lease_at_once(
        &self,
        complete: CompleteRequest,
        lease: LeaseRequest,
    ) -> Result<(Completion, Option<Result<LeaseAttempt>>)> {
        let (now, ttl_ms) = (lease.now, lease.ttl_ms);
        let mut tx = self.writer.begin().await?;
        let completion = only_result(
            self.complete_on(&mut tx, std::slice::from_ref(&complete))
                .await?,
        )?;
        if completion.repeated {
            tx.commit().await?;
            return Ok((completion, None));
        }
        let written = self
            .lease_on(&mut tx, std::slice::from_ref(&lease), now, ttl_ms)
            .await?;
        tx.commit().await.map_err(BatchError::from_write)?;
        let attempt = only_result(self.attempts(written, now, ttl_ms).await);
        Ok((completion, Some(attempt)))
    }
}

/// A complete and the next lease: see `Store::complete_then_lease`.
struct CompleteThenLease {
    complete: CompleteRequest,
    lease: LeaseRequest,
}

impl OnEngine for CompleteThenLease {
    type Out = Result<(Completion, Option<Result<LeaseAttempt>>)>;

    async fn on_sqlite(self, store: &Store, _: &Arc<SqliteEngine>) -> Self::Out {
        store
            .complete_then_lease_apart(self.complete, self.lease)
            .await
    }

    async fn on_postgres(self, store: &Store) -> Self::Out {
        store
            .complete_then_lease_at_once(self.complete, self.lease)
            .await
    }
}
