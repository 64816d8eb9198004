//! Keeping the machine from sleeping on its own while a job runs. On
//! Linux, a logind inhibitor (`Inhibit("sleep:idle", …, "block")` on the
//! system bus): held as a file descriptor while any job runs, closed when
//! none does. Idle suspend waits; a person who suspends by hand is asked
//! first by their desktop, and closing the lid still sleeps (logind's
//! default). On macOS, `caffeinate -i` for as long; on Windows,
//! `SetThreadExecutionState(ES_SYSTEM_REQUIRED)` on the thread that holds it.
//!
//! The calls block, so a thread of its own takes and drops the hold; the
//! supervisor only says whether it wants it.

use std::sync::mpsc;

pub struct KeepAwake {
    want: mpsc::Sender<bool>,
}

impl KeepAwake {
    pub fn start() -> Self {
        let (want, asked) = mpsc::channel::<bool>();
        let spawned = std::thread::Builder::new()
            .name("keep-awake".into())
            .spawn(move || hold_while_asked(asked));
        if let Err(e) = spawned {
            tracing::warn!("cannot keep the machine awake while jobs run: {e}");
        }
        Self { want }
    }

    /// Hold (or let go of) the machine's wakefulness; the same answer twice
    /// does nothing.
    pub fn set(&self, on: bool) {
        let _ = self.want.send(on);
    }
}

fn hold_while_asked(asked: mpsc::Receiver<bool>) {
    let mut wanted = false;
    let mut hold: Option<Hold> = None;
    while let Ok(mut want) = asked.recv() {
        // Only the latest wish counts.
        while let Ok(later) = asked.try_recv() {
            want = later;
        }
        if want == wanted {
            continue;
        }
        wanted = want;
        if !want {
            if hold.take().is_some() {
                tracing::info!("no job runs: this machine may sleep again");
            }
            continue;
        }
        // Tried once per job-running spell: a machine without the service
        // says so once, not on every change.
        match Hold::take() {
            Ok(h) => {
                tracing::info!("keeping this machine awake while jobs run");
                hold.replace(h);
            }
            Err(e) => tracing::warn!("cannot keep this machine awake while jobs run: {e}"),
        }
    }
}

/// What keeps the machine awake; dropping it lets the machine sleep.
#[cfg(target_os = "linux")]
struct Hold(#[allow(dead_code)] dbus::arg::OwnedFd);

#[cfg(target_os = "linux")]
impl Hold {
    fn take() -> Result<Self, String> {
        use dbus::blocking::Connection;
        let bus = Connection::new_system().map_err(|e| format!("the system bus: {e}"))?;
        let logind = bus.with_proxy(
            "org.freedesktop.login1",
            "/org/freedesktop/login1",
            std::time::Duration::from_secs(5),
        );
        let (fd,): (dbus::arg::OwnedFd,) = logind
            .method_call(
                "org.freedesktop.login1.Manager",
                "Inhibit",
                ("sleep:idle", "Drover", "A job is running", "block"),
            )
            .map_err(|e| format!("logind's Inhibit: {e}"))?;
        Ok(Self(fd))
    }
}

#[cfg(target_os = "macos")]
struct Hold(std::process::Child);

#[cfg(target_os = "macos")]
impl Hold {
    fn take() -> Result<Self, String> {
        // -w: it ends with this app, however the app ends.
        std::process::Command::new("/usr/bin/caffeinate")
            .args(["-i", "-w", &std::process::id().to_string()])
            .stdin(std::process::Stdio::null())
            .spawn()
            .map(Self)
            .map_err(|e| format!("caffeinate: {e}"))
    }
}

#[cfg(target_os = "macos")]
impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(windows)]
struct Hold;

#[cfg(windows)]
impl Hold {
    fn take() -> Result<Self, String> {
        use windows_sys::Win32::System::Power::{
            ES_CONTINUOUS, ES_SYSTEM_REQUIRED, SetThreadExecutionState,
        };
        // SAFETY: plain flags; it applies to this (the holding) thread.
        match unsafe { SetThreadExecutionState(ES_CONTINUOUS | ES_SYSTEM_REQUIRED) } {
            0 => Err("SetThreadExecutionState failed".into()),
            _ => Ok(Self),
        }
    }
}

#[cfg(windows)]
impl Drop for Hold {
    fn drop(&mut self) {
        use windows_sys::Win32::System::Power::{ES_CONTINUOUS, SetThreadExecutionState};
        // SAFETY: as above.
        unsafe { SetThreadExecutionState(ES_CONTINUOUS) };
    }
}
