//! `admin backup`: a consistent copy of a live SQLite database, taken
//! without stopping the coordinator that serves it.
//!
//! **How.** SQLite's online backup API (`sqlite3_backup_*`, via rusqlite),
//! run as ONE step over every page. One step reads in a single read
//! transaction, so the copy is the database as of one commit, and in WAL
//! mode a reader never blocks the writer: the coordinator goes on leasing,
//! completing and accepting jobs (their commits go to the WAL, which this
//! snapshot does not see). Two alternatives were worse:
//! - the backup API in small steps with pauses (rusqlite's
//!   `Connection::backup`) starts over whenever another connection writes
//!   between two steps, so under a steady load it may never finish;
//! - `VACUUM INTO` holds the same kind of read transaction but rebuilds
//!   every table and index while it does, which takes several times longer
//!   than copying pages.
//!
//! While the copy runs, checkpoints cannot move past its snapshot, so the
//! WAL grows by what is written meanwhile (the coordinator cuts it back
//! afterwards; see `sqlite`). Nothing here migrates or writes the source: a
//! backup taken with a newer binary leaves an older coordinator's database
//! as it was.
//!
//! **Where.** A temporary file beside `FILE` (created 0600), fsynced, then
//! linked to `FILE` (which refuses an existing file) or renamed over it
//! (`--force`); the directory is fsynced too. The copy is switched to a
//! rollback journal, so the backup is one self-contained file (a
//! coordinator started on it switches it back to WAL). It is checked
//! (`PRAGMA integrity_check`, on the copy, not the live database) before it
//! takes the name `FILE`; a failed backup leaves nothing at `FILE`.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// What a backup wrote.
#[derive(Debug)]
pub struct BackupReport {
    pub file: PathBuf,
    pub bytes: u64,
    pub jobs: i64,
    pub took: Duration,
}

/// Why a backup did not happen: refused before any work (nothing read or
/// written), or failed on the way (nothing left at the destination).
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// Copies the SQLite database `source` to `to` (see the module's comment).
pub fn backup(source: &Path, to: &Path, force: bool) -> Result<BackupReport, BackupError> {
    use anyhow::Context as _;
    let started = Instant::now();
    if !source.is_file() {
        return Err(BackupError::Refused(format!(
            "there is no database at {}",
            source.display()
        )));
    }
    if let Ok(existing) = fs::metadata(to) {
        if !force {
            return Err(BackupError::Refused(format!(
                "{} exists: choose a new file, or give --force to replace it",
                to.display()
            )));
        }
        let live = fs::metadata(source).context("reading the database's metadata")?;
        if (existing.dev(), existing.ino()) == (live.dev(), live.ino()) || !existing.is_file() {
            return Err(BackupError::Refused(format!(
                "{} is the database itself or not a file: back up to another file",
                to.display()
            )));
        }
    }
    let name = to
        .file_name()
        .ok_or_else(|| BackupError::Refused(format!("{} names no file", to.display())))?;
    let dir = match to.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = copy_and_check(source, &tmp).and_then(|jobs| {
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .context("syncing the copy")?;
        let named = if force {
            fs::rename(&tmp, to)
        } else {
            // Refuses a file made meanwhile, where a rename would replace it.
            fs::hard_link(&tmp, to)
        };
        named.with_context(|| format!("naming the copy {}", to.display()))?;
        Ok(jobs)
    });
    remove_temporary(&tmp);
    let jobs = written?;
    // The new name survives a power loss once its directory is synced.
    File::open(&dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    let bytes = fs::metadata(to)
        .with_context(|| format!("reading {}", to.display()))?
        .len();
    Ok(BackupReport {
        file: to.to_owned(),
        bytes,
        jobs,
        took: started.elapsed(),
    })
}

/// The copy at `tmp`, checked; the number of jobs in it.
fn copy_and_check(source: &Path, tmp: &Path) -> anyhow::Result<i64> {
    use anyhow::{Context as _, bail};
    // Made here, so it is 0600 whatever the umask, and never someone else's.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    // Read-write without create: a reader of a WAL database needs its
    // shared-memory file, which a read-only connection may not make. This
    // connection only reads.
    let src = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening the database {}", source.display()))?;
    src.busy_timeout(Duration::from_secs(10))?;
    let mut dst = Connection::open_with_flags(
        tmp,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening {}", tmp.display()))?;
    {
        let copy = Backup::new(&src, &mut dst).context("starting the backup")?;
        // Every page in one step: one read transaction, one snapshot.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match copy.step(-1).context("copying the database")? {
                StepResult::Done => break,
                // Busy or locked (say, the WAL being recovered): again soon.
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => bail!("the database stayed locked for 30 s; nothing was copied"),
            }
        }
    }
    drop(src);
    // One file: a rollback journal instead of the source's WAL.
    let mode: String = dst
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .context("switching the copy to a rollback journal")?;
    if !mode.eq_ignore_ascii_case("delete") {
        bail!("the copy stayed in journal mode {mode}");
    }
    let problems: Vec<String> = dst
        .prepare("PRAGMA integrity_check")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()
        .context("checking the copy")?;
    if problems != ["ok"] {
        bail!(
            "the copy failed its integrity check ({} problems, first: {}); nothing was written",
            problems.len(),
            problems.first().map_or("", String::as_str)
        );
    }
    let jobs: i64 = dst
        .query_row("SELECT COUNT(*) FROM jobs", [], |r| r.get(0))
        .context("counting jobs in the copy: is this a Drover database?")?;
    dst.close()
        .map_err(|(_, e)| e)
        .context("closing the copy")?;
    let mode = fs::metadata(tmp)?.permissions().mode();
    if mode & 0o077 != 0 {
        fs::set_permissions(tmp, fs::Permissions::from_mode(0o600))?;
    }
    Ok(jobs)
}

/// Removes the temporary copy and whatever SQLite made beside it.
fn remove_temporary(tmp: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut path = tmp.as_os_str().to_owned();
        path.push(suffix);
        let _ = fs::remove_file(PathBuf::from(path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_it_must_not_replace_and_leaves_nothing_when_it_fails() {
        let dir = std::env::temp_dir().join(format!("drover-backup-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let db = dir.join("d.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE jobs (id TEXT); INSERT INTO jobs VALUES ('a'), ('b');")
            .unwrap();
        let to = dir.join("copy.db");
        let report = backup(&db, &to, false).unwrap();
        assert_eq!(report.jobs, 2);
        let mode = fs::metadata(&to).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Existing: refused, unless forced; the database itself, always.
        assert!(matches!(
            backup(&db, &to, false),
            Err(BackupError::Refused(_))
        ));
        backup(&db, &to, true).unwrap();
        assert!(matches!(
            backup(&db, &db, true),
            Err(BackupError::Refused(_))
        ));
        assert!(matches!(
            backup(&dir.join("none.db"), &dir.join("x.db"), false),
            Err(BackupError::Refused(_))
        ));
        // Not a Drover database: failed, and nothing left behind.
        conn.execute_batch("DROP TABLE jobs").unwrap();
        let other = dir.join("other.db");
        assert!(matches!(
            backup(&db, &other, false),
            Err(BackupError::Failed(_))
        ));
        let mut left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["copy.db", "d.db", "d.db-shm", "d.db-wal"]);
        drop(conn);
        fs::remove_dir_all(&dir).unwrap();
    }
}
