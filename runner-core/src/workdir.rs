//! Where jobs run on disk: the runner's own work root, and a fresh
//! directory in it per job, removed afterwards without following links.

use std::io;
use std::path::{Path, PathBuf};

use crate::isolation::{IsolationError, JobUser};

/// Makes `root` this runner's own directory for its jobs' directories, or
/// says why it cannot be: made 0700 if missing (0711 when jobs run as
/// another user, who may then pass through it but not list it). One that is
/// there must be a directory, not a symbolic link, of this process's user;
/// each directory above it must be root's or this user's, and sticky (as
/// `/tmp` is) if others may write to it. So no one else can put a link or a
/// directory of their own where a job's directory will be made.
/// On Windows it is made if missing and must be a directory, not a link: the
/// temporary directory it is in by default is the user's own.
#[cfg(windows)]
pub fn own_work_root(root: &Path, _user: Option<JobUser>) -> Result<(), IsolationError> {
    let made = |e| IsolationError::WorkRoot(root.to_owned(), e);
    std::fs::create_dir_all(root).map_err(made)?;
    let meta = std::fs::symlink_metadata(root).map_err(made)?;
    if !meta.file_type().is_dir() {
        return Err(IsolationError::WorkRootNotOwn(
            root.to_owned(),
            "it is a symbolic link or not a directory".into(),
        ));
    }
    Ok(())
}

#[cfg(unix)]
pub fn own_work_root(root: &Path, user: Option<JobUser>) -> Result<(), IsolationError> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    let not_own = |why: String| IsolationError::WorkRootNotOwn(root.to_owned(), why);
    let made = |e| IsolationError::WorkRoot(root.to_owned(), e);
    let absolute = match root.is_absolute() {
        true => root.to_owned(),
        false => std::env::current_dir().map_err(made)?.join(root),
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for dir in absolute.ancestors().skip(1) {
        // One that is missing is made below, as this user's.
        let Ok(meta) = std::fs::metadata(dir) else {
            continue;
        };
        if meta.uid() != 0 && meta.uid() != me {
            return Err(not_own(format!(
                "{} belongs to uid {}",
                dir.display(),
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(not_own(format!(
                "others may write to {}, which is not sticky",
                dir.display()
            )));
        }
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&absolute)
        .map_err(made)?;
    let meta = std::fs::symlink_metadata(&absolute).map_err(made)?;
    if !meta.file_type().is_dir() {
        return Err(not_own("it is a symbolic link or not a directory".into()));
    }
    if meta.uid() != me {
        return Err(not_own(format!("it belongs to uid {}", meta.uid())));
    }
    // With a job user, others may pass through (not list) to reach the job
    // directories, each 0700 and its job's. Without one, 0711 is left as it
    // is: another runner sharing this root may have a job user, and taking
    // its mode away under it would break its jobs (job directories stay
    // 0700 either way).
    let mode = meta.mode() & 0o7777;
    let wanted = match user {
        Some(_) => 0o711,
        None if mode == 0o711 => 0o711,
        None => 0o700,
    };
    if mode != wanted {
        std::fs::set_permissions(&absolute, std::fs::Permissions::from_mode(wanted))
            .map_err(made)?;
    }
    Ok(())
}

/// Makes a fresh directory `name` under `work_root` (see [`own_work_root`])
/// for one job, with `work/` (its working directory and `HOME`) and `tmp/`
/// (its `TMPDIR`), all 0700 and the job user's, if there is one; a leftover
/// of the same name (a runner killed mid-job) is removed first. Nothing in it
/// is followed if it is a symbolic link.
pub fn create_job_dir(work_root: &Path, name: &str, user: Option<JobUser>) -> io::Result<PathBuf> {
    #[cfg_attr(windows, allow(unused_mut))]
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    let dir = work_root.join(name);
    // The usual case in one `mkdir`: the root is there and the name is new.
    match builder.create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // The root went (a /tmp cleaner): made again, checked again.
            own_work_root(work_root, user).map_err(io::Error::other)?;
            builder.create(&dir)?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            remove_job_dir(&dir)?;
            builder.create(&dir)?;
        }
        Err(e) => return Err(e),
    }
    builder.create(dir.join("work"))?;
    builder.create(dir.join("tmp"))?;
    #[cfg(unix)]
    if let Some(u) = user {
        for d in [dir.join("work"), dir.join("tmp"), dir.clone()] {
            std::os::unix::fs::lchown(&d, Some(u.uid), Some(u.gid))?;
        }
    }
    #[cfg(windows)]
    let _ = user;
    Ok(dir)
}

/// Removes a job's directory, even one the job made read-only inside.
pub fn remove_job_dir(dir: &Path) -> io::Result<()> {
    if remove_empty_job_dir(dir) {
        return Ok(());
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            make_writable(dir);
            std::fs::remove_dir_all(dir)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Removes what most jobs leave, `work/` and `tmp/` empty, without a walk;
/// false if that is not what is there. Inside `dir` as opened (not
/// following a symbolic link put in its place).
#[cfg(unix)]
fn remove_empty_job_dir(dir: &Path) -> bool {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(opened) = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
    else {
        return false;
    };
    let emptied = [c"work", c"tmp"].iter().all(|name| {
        // SAFETY: a directory fd we own and a NUL-terminated name.
        unsafe { libc::unlinkat(opened.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) == 0 }
    });
    drop(opened);
    emptied && std::fs::remove_dir(dir).is_ok()
}

/// On Windows `remove_dir_all` removes whatever a job made, read-only files
/// included, without following links.
#[cfg(windows)]
fn remove_empty_job_dir(_dir: &Path) -> bool {
    false
}

#[cfg(windows)]
fn make_writable(_dir: &Path) {}

/// Gives the owner back rwx on every directory under `dir` (not following
/// symbolic links, even one put in a directory's place meanwhile), so what
/// is in them can be removed.
#[cfg(unix)]
fn make_writable(dir: &Path) {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(opened) = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
    else {
        return;
    };
    // SAFETY: fchmod on a descriptor we own.
    unsafe {
        libc::fchmod(opened.as_raw_fd(), 0o700);
    }
    drop(opened);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            make_writable(&entry.path());
        }
    }
}
