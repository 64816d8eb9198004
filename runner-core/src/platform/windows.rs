//! Windows: each job in its own Job Object, made with
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`, so every process the job starts is
//! in it and nothing outlives it, even if the runner dies. The job's first
//! process is created suspended, put in the Job Object, then resumed: it
//! cannot start anything outside it first. It is also the leader of a new
//! process group, which a cancel asks to stop with `CTRL_BREAK_EVENT`
//! before `TerminateJobObject` after the grace. A script job runs as a
//! `.cmd` file under `cmd.exe`. There is no sandbox.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::windows::io::{AsRawHandle as _, FromRawHandle as _, OwnedHandle};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use tokio::process::Command;
use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent, GetConsoleWindow,
};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_NO_WINDOW, CREATE_SUSPENDED, OpenThread, ResumeThread,
    THREAD_SUSPEND_RESUME,
};

use super::{EnvFd, JobProcess, Launch, Pipe};
use crate::exec::Place;
use crate::isolation::{Containment, IsolationError, JobUser, Sandbox};

/// A Job Object is made per job; nothing is shared between jobs.
#[derive(Debug)]
pub(crate) struct Jobs;

pub(crate) fn jobs(_sandboxed: bool) -> (Jobs, Containment) {
    (Jobs, Containment::JobObject)
}

pub(crate) fn find_sandbox(
    sandbox: Sandbox,
    _user: Option<JobUser>,
) -> Result<Option<PathBuf>, IsolationError> {
    match sandbox {
        Sandbox::None => Ok(None),
        Sandbox::Bwrap | Sandbox::SandboxExec => Err(IsolationError::NoSandboxHere),
    }
}

pub(crate) fn look_up(_name: &str) -> Result<JobUser, IsolationError> {
    Err(IsolationError::JobUserNotHere)
}

/// `cmd.exe`: `%ComSpec%`, else the system's.
pub(crate) fn shell() -> PathBuf {
    std::env::var_os("ComSpec")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            let root = std::env::var_os("SystemRoot").unwrap_or_else(|| r"C:\Windows".into());
            PathBuf::from(root).join(r"System32\cmd.exe")
        })
}

/// A script job: its text in `tmp\job.cmd` of the job's directory, run by
/// `cmd.exe /d /c` (no AutoRun commands), which ends with its exit code. A
/// batch file, unlike `cmd /c TEXT`, may span lines.
pub(crate) fn script(
    shell: &Path,
    script: &str,
    dir: &Path,
) -> io::Result<(OsString, Vec<OsString>)> {
    let file = dir.join("tmp").join("job.cmd");
    let text = script.replace("\r\n", "\n").replace('\n', "\r\n");
    std::fs::write(&file, format!("@echo off\r\n{text}\r\n"))?;
    Ok((shell.into(), vec!["/d".into(), "/c".into(), file.into()]))
}

/// Whether `path` is a file (Windows runs any file by its extension).
pub(crate) fn is_program(path: &Path) -> bool {
    path.is_file()
}

/// `drover-work` in the user's own temporary directory.
pub(crate) fn default_work_root() -> PathBuf {
    std::env::temp_dir().join("drover-work")
}

pub(crate) fn hostname() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

pub(crate) fn sandboxed<'a>(
    _sandbox: &Path,
    _place: &Place,
    _program: &OsStr,
    _args: &[OsString],
    _env: impl Iterator<Item = (&'a OsStr, &'a OsStr)>,
) -> Result<(Command, Option<EnvFd>), String> {
    Err(IsolationError::NoSandboxHere.to_string())
}

/// A Job Object that kills what is in it when its last handle closes.
fn job_object() -> io::Result<OwnedHandle> {
    // SAFETY: no attributes, no name: a new anonymous Job Object.
    let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if handle.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just made, ours alone.
    let job = unsafe { OwnedHandle::from_raw_handle(handle) };
    // SAFETY: plain data; zero is "no limit" for every field.
    let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: the structure the class names, with its size.
    let ok = unsafe {
        SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            (&raw const limits).cast(),
            std::mem::size_of_val(&limits) as u32,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(job)
}

/// Resumes the threads of process `pid`, created suspended (its one thread).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of the system's threads, closed below.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle just made, ours alone.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(snapshot) };
    // SAFETY: plain data; dwSize set as the API asks.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    // SAFETY: the snapshot and an entry of the size it says.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: a thread of our own suspended child.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if !thread.is_null() {
                // SAFETY: just opened, closed at once after.
                let thread = unsafe { OwnedHandle::from_raw_handle(thread) };
                // SAFETY: a thread handle with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(thread.as_raw_handle()) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(io::Error::other("its thread was not found to resume"));
    }
    Ok(())
}

pub(crate) struct Process {
    child: tokio::process::Child,
    pid: u32,
    job: OwnedHandle,
}

/// Starts the job suspended in a new process group, puts it in a new Job
/// Object, then lets it run. With no console of the runner's to share (the
/// desktop app, a service), it gets none: no window opens.
pub(crate) async fn start(launch: Launch, _jobs: &Jobs) -> Result<Process, String> {
    let Launch {
        mut cmd, program, ..
    } = launch;
    let could_not_start = |e: io::Error| format!("could not start {program:?}: {e}");
    let job = job_object().map_err(|e| format!("cannot make the job's Job Object: {e}"))?;
    let mut flags = CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED;
    // SAFETY: no preconditions.
    if unsafe { GetConsoleWindow() }.is_null() {
        flags |= CREATE_NO_WINDOW;
    }
    cmd.creation_flags(flags);
    let mut child = cmd.spawn().map_err(could_not_start)?;
    let pid = child.id().unwrap_or(0);
    let handle = child.raw_handle().unwrap_or(std::ptr::null_mut()) as HANDLE;
    // SAFETY: our Job Object and our own child's process handle.
    let assigned = unsafe { AssignProcessToJobObject(job.as_raw_handle(), handle) } != 0;
    let started = if assigned {
        resume(pid)
    } else {
        Err(io::Error::last_os_error())
    };
    if let Err(e) = started {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return Err(could_not_start(e));
    }
    Ok(Process { child, pid, job })
}

impl Process {
    /// How many processes of the job are still running.
    fn active(&self) -> io::Result<u32> {
        // SAFETY: plain data, filled in by the query.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the structure the class names, with its size.
        let ok = unsafe {
            QueryInformationJobObject(
                self.job.as_raw_handle(),
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                std::mem::size_of_val(&info) as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info.ActiveProcesses)
    }
}

impl JobProcess for Process {
    fn output(&mut self) -> (Pipe, Pipe) {
        (
            Box::new(self.child.stdout.take().expect("piped")),
            Box::new(self.child.stderr.take().expect("piped")),
        )
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// CTRL_BREAK to the job's process group; it reaches the job only when
    /// the runner has a console it shares (a service or the app has none:
    /// then the grace passes and the Job Object is ended).
    fn interrupt(&self) {
        // SAFETY: no memory involved; a group id of our own child.
        unsafe {
            GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, self.pid);
        }
    }

    fn kill(&self) {
        // SAFETY: our own Job Object; 1 is the code its processes end with.
        unsafe {
            TerminateJobObject(self.job.as_raw_handle(), 1);
        }
    }

    /// Ends the Job Object and waits (up to 2 s) until no process of it runs.
    async fn end(self, _jobs: &Jobs) -> Option<String> {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.active() {
                Ok(0) => return None,
                Ok(n) if Instant::now() >= deadline => {
                    return Some(format!(
                        "{n} processes of the job still run after TerminateJobObject"
                    ));
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(e) => {
                    return Some(format!(
                        "cannot tell whether the job's processes ended: {e}"
                    ));
                }
            }
        }
    }

    fn exit_code(status: ExitStatus) -> i32 {
        // A Windows exit code is a u32; as an i32, as other systems report.
        status.code().unwrap_or(-1)
    }
}

/// Nothing to do: Windows lets a user's processes read each other's memory.
pub(crate) fn harden_process() -> io::Result<()> {
    Ok(())
}
