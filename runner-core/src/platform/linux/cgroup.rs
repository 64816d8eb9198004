//! A cgroup (v2) per job, so that everything a job started can be killed
//! when it ends, even a process that left its process group (`setsid`, a
//! double fork). Used where the runner may make cgroups (as root, or in a
//! delegated cgroup) and the kernel has `cgroup.kill` (Linux 5.14).

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The runner's own cgroup, under which each running job gets one. They
/// are reused, one job at a time (making and removing a cgroup per job
/// costs more than the job's start), and removed when this is dropped.
#[derive(Debug)]
pub(crate) struct JobCgroups {
    parent: PathBuf,
    free: Mutex<Vec<JobCgroup>>,
    /// Jobs are born in their cgroup (`spawn`): a probe at start saw a
    /// process cloned into one live, and no `clone3` was refused since.
    clone_into: AtomicBool,
}

/// Job cgroups made by this process so far, by every `JobCgroups` in it.
static MADE: AtomicUsize = AtomicUsize::new(0);

impl JobCgroups {
    /// The runner's cgroup, if it may make child cgroups there; else why not.
    pub fn new() -> Result<Self, String> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
        // `… mount-point options - cgroup2 …`: field 5 is the mount point.
        let mount = mounts
            .lines()
            .find(|l| {
                l.split_once(" - ")
                    .is_some_and(|(_, rest)| rest.starts_with("cgroup2 "))
            })
            .and_then(|l| l.split(' ').nth(4))
            .map(PathBuf::from)
            .ok_or("no cgroup v2 hierarchy is mounted")?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or("this process is in no cgroup v2")?;
        let cgroups = Self {
            parent: mount.join(own.trim_start_matches('/')),
            free: Mutex::new(Vec::new()),
            clone_into: AtomicBool::new(false),
        };
        cgroups.remove_stale();
        let probe = cgroups
            .take()
            .map_err(|e| format!("cannot make a cgroup in {}: {e}", cgroups.parent.display()))?;
        let killable = probe.dir.join("cgroup.kill").exists();
        let born_lives = super::spawn::probe(&probe.dir);
        cgroups.clone_into.store(born_lives, Ordering::Relaxed);
        cgroups.give_back(probe);
        if !killable {
            return Err("the kernel has no cgroup.kill (Linux 5.14 or later)".into());
        }
        Ok(cgroups)
    }

    /// Removes the empty cgroups of runners that died without removing
    /// theirs (killed with SIGKILL). One still holding processes stays.
    fn remove_stale(&self) {
        let Ok(entries) = std::fs::read_dir(&self.parent) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let owner = name
                .to_str()
                .and_then(|n| n.strip_prefix("drover-"))
                .and_then(|n| n.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok());
            if let Some(pid) = owner
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }

    /// Whether jobs are started inside their cgroup with `clone3`, rather
    /// than moved there before `exec` (see `spawn`).
    pub fn clone_into(&self) -> bool {
        self.clone_into.load(Ordering::Relaxed)
    }

    /// `clone3` was refused (a seccomp filter, say): move jobs from now on.
    pub fn clone_refused(&self) {
        self.clone_into.store(false, Ordering::Relaxed);
    }

    /// An empty cgroup for one job.
    pub fn take(&self) -> io::Result<JobCgroup> {
        let reused = self.free.lock().expect("cgroups lock").pop();
        if let Some(free) = reused {
            // (Another runner in another PID namespace may have taken it for stale.)
            if !free.dir.exists() {
                std::fs::create_dir(&free.dir)?;
            }
            return Ok(free);
        }
        // Numbered across the process, not per `JobCgroups`: the desktop
        // app runs a fleet per pool in one process, and two fleets sharing
        // a cgroup would kill each other's jobs (`end` kills all in it).
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = self
            .parent
            .join(format!("drover-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let procs = CString::new(
            dir.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .map_err(io::Error::other)?;
        Ok(JobCgroup { dir, procs })
    }

    /// Kills every process still in `cgroup` and keeps it for another job,
    /// once empty.
    pub async fn end(&self, cgroup: JobCgroup) -> io::Result<()> {
        let events = std::fs::File::open(cgroup.dir.join("cgroup.events"))?;
        if populated(&events) {
            std::fs::write(cgroup.dir.join("cgroup.kill"), "1")?;
            // Not gone in 2 s (a process stuck in the kernel): leave it.
            let dir = cgroup.dir.clone();
            let emptied =
                tokio::task::spawn_blocking(move || wait_empty(&events, Duration::from_secs(2)))
                    .await
                    .map_err(io::Error::other)??;
            if !emptied {
                return Err(io::Error::other(format!(
                    "{} still holds processes after cgroup.kill",
                    dir.display()
                )));
            }
            // Not reused: this kernel kills a process born by clone3 into a
            // cgroup killed before (its kill count differs from the
            // parent's), so the next job gets a fresh one.
            return std::fs::remove_dir(&dir);
        }
        self.give_back(cgroup);
        Ok(())
    }

    fn give_back(&self, cgroup: JobCgroup) {
        self.free.lock().expect("cgroups lock").push(cgroup);
    }
}

impl Drop for JobCgroups {
    fn drop(&mut self) {
        for cgroup in self.free.get_mut().expect("cgroups lock").drain(..) {
            let _ = std::fs::remove_dir(&cgroup.dir);
        }
    }
}

/// One job's cgroup, while it runs.
#[derive(Debug)]
pub(crate) struct JobCgroup {
    dir: PathBuf,
    procs: CString,
}

impl JobCgroup {
    /// The cgroup's directory (for `clone3`'s `CLONE_INTO_CGROUP`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves the calling process into the cgroup. Only async-signal-safe
    /// calls: this runs between `fork` and `exec`. (Where `clone3` is
    /// allowed, a job is born in its cgroup instead: see `spawn`.)
    pub fn join_self(&self) -> io::Result<()> {
        // SAFETY: a NUL-terminated path; open/write/close are
        // async-signal-safe and touch no memory of ours but `b"0"`.
        unsafe {
            let fd = libc::open(self.procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            let error = io::Error::last_os_error();
            libc::close(fd);
            if written != 1 {
                return Err(error);
            }
        }
        Ok(())
    }
}

/// Whether the cgroup whose open `cgroup.events` this is holds a process.
fn populated(events: &std::fs::File) -> bool {
    use std::os::unix::fs::FileExt as _;
    let mut buf = [0u8; 128];
    // (The file is regenerated on each read from offset 0.)
    events.read_at(&mut buf, 0).is_ok_and(|n| {
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "populated 1")
    })
}

/// Waits up to `limit` for the cgroup to empty: the kernel wakes a poll
/// on `cgroup.events` (POLLPRI) when it changes, so no sleeping in steps.
fn wait_empty(events: &std::fs::File, limit: Duration) -> io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    let deadline = std::time::Instant::now() + limit;
    while populated(events) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let mut fd = libc::pollfd {
            fd: events.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        let rc = unsafe { libc::poll(&mut fd, 1, left.as_millis().max(1) as libc::c_int) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
    Ok(true)
}
