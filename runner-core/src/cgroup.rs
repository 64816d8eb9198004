//! A cgroup (v2) per job, so that everything a job started can be killed
//! when it ends, even a process that left its process group (`setsid`, a
//! double fork). Used where the runner may make cgroups (as root, or in a
//! delegated cgroup) and the kernel has `cgroup.kill` (Linux 5.14).

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The runner's own cgroup, under which each job gets one.
#[derive(Debug)]
pub(crate) struct JobCgroups {
    parent: PathBuf,
}

impl JobCgroups {
    /// The runner's cgroup, if it may make child cgroups there; else why not.
    pub fn new() -> Result<Self, String> {
        if !cfg!(target_os = "linux") {
            return Err("cgroups are Linux only".into());
        }
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
        let parent = mount.join(own.trim_start_matches('/'));
        let probe = parent.join(format!("drover-{}-probe", std::process::id()));
        std::fs::create_dir(&probe)
            .map_err(|e| format!("cannot make a cgroup in {}: {e}", parent.display()))?;
        let killable = probe.join("cgroup.kill").exists();
        let _ = std::fs::remove_dir(&probe);
        if !killable {
            return Err("the kernel has no cgroup.kill (Linux 5.14 or later)".into());
        }
        Ok(Self { parent })
    }

    /// A new, empty cgroup for one job.
    pub fn create(&self, job: &str) -> io::Result<JobCgroup> {
        let name: String = job
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = self
            .parent
            .join(format!("drover-{}-{name}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let procs = CString::new(dir.join("cgroup.procs").into_os_string().into_encoded_bytes())
            .map_err(io::Error::other)?;
        Ok(JobCgroup { dir, procs })
    }
}

/// One job's cgroup; [`JobCgroup::kill_and_remove`] ends it.
#[derive(Debug)]
pub(crate) struct JobCgroup {
    dir: PathBuf,
    procs: CString,
}

impl JobCgroup {
    /// Moves the calling process into the cgroup. Only async-signal-safe
    /// calls: this runs between `fork` and `exec`.
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

    /// Kills every process still in the cgroup, waits (a little) for them
    /// to go, and removes it.
    pub async fn kill_and_remove(self) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.kill"), "1")?;
        for _ in 0..200 {
            if !populated(&self.dir) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        std::fs::remove_dir(&self.dir)
    }
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|e| e.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}
