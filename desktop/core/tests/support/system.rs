//! NetworkManager and logind, the third-party system services the app asks
//! on the system bus, stood in for on the test's private bus (it is the
//! system bus too, see `SecretService::start`): `Metered` as the test sets
//! it, and `Inhibit` answering with a pipe's write end, as logind does,
//! whose read end tells when the app has let go of it (every copy closed).

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use dbus::blocking::Connection;
use dbus::channel::{MatchingReceiver as _, Sender as _};
use dbus::message::MatchRule;
use dbus::{Message, strings::ErrorName};

/// One `Inhibit` call: its arguments and the read end of the pipe.
pub struct Inhibitor {
    pub what: String,
    pub who: String,
    pub why: String,
    pub mode: String,
    read: OwnedFd,
}

impl Inhibitor {
    /// Whether some process still holds the write end.
    fn held(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut poll, 1, 0) };
        !(n == 1 && poll.revents & libc::POLLHUP != 0)
    }
}

#[derive(Default)]
struct Shared {
    metered: AtomicU32,
    inhibitors: Mutex<Vec<Inhibitor>>,
    stop: AtomicBool,
}

pub struct SystemServices {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl SystemServices {
    /// Owns `org.freedesktop.NetworkManager` (metered: 4, "guessed no")
    /// and `org.freedesktop.login1` on the system bus; returns once both
    /// are owned.
    pub fn start() -> Self {
        let shared = Arc::new(Shared::default());
        shared.metered.store(4, Ordering::SeqCst);
        let (ready, owned) = std::sync::mpsc::channel();
        let serve = shared.clone();
        let thread = std::thread::spawn(move || {
            let bus = Connection::new_system().expect("the test's system bus");
            for name in ["org.freedesktop.NetworkManager", "org.freedesktop.login1"] {
                bus.request_name(name, false, true, true)
                    .unwrap_or_else(|e| panic!("owning {name}: {e}"));
            }
            let answer = serve.clone();
            bus.start_receive(
                MatchRule::new_method_call(),
                Box::new(move |call, bus| {
                    let reply = answer.answer(&call);
                    let _ = bus.send(reply);
                    true
                }),
            );
            ready.send(()).unwrap();
            while !serve.stop.load(Ordering::SeqCst) {
                bus.process(Duration::from_millis(50))
                    .expect("serving the bus");
            }
        });
        owned
            .recv_timeout(drover_tests::DEADLINE)
            .expect("the stand-ins own their names");
        Self {
            shared,
            thread: Some(thread),
        }
    }

    /// NetworkManager's `Metered`: 1 yes, 2 no, 3 guessed yes, 4 guessed no.
    pub fn set_metered(&self, value: u32) {
        self.shared.metered.store(value, Ordering::SeqCst);
    }

    /// The inhibitors some process still holds: (what, who, why, mode).
    pub fn held(&self) -> Vec<(String, String, String, String)> {
        let all = self.shared.inhibitors.lock().unwrap();
        all.iter()
            .filter(|i| i.held())
            .map(|i| (i.what.clone(), i.who.clone(), i.why.clone(), i.mode.clone()))
            .collect()
    }

    /// How many times `Inhibit` was called.
    pub fn inhibit_calls(&self) -> usize {
        self.shared.inhibitors.lock().unwrap().len()
    }
}

impl Shared {
    fn answer(&self, call: &Message) -> Message {
        let member = call.member().map(|m| m.to_string()).unwrap_or_default();
        let interface = call.interface().map(|i| i.to_string()).unwrap_or_default();
        match (interface.as_str(), member.as_str()) {
            ("org.freedesktop.DBus.Properties", "Get") => match call.read2::<&str, &str>() {
                Ok(("org.freedesktop.NetworkManager", "Metered")) => call
                    .method_return()
                    .append1(dbus::arg::Variant(self.metered.load(Ordering::SeqCst))),
                _ => unknown(call, "no such property here"),
            },
            ("org.freedesktop.login1.Manager", "Inhibit") => {
                let Ok((what, who, why, mode)) = call.read4::<&str, &str, &str, &str>() else {
                    return unknown(call, "Inhibit takes four strings");
                };
                let mut fds = [0; 2];
                // SAFETY: a two-int array for pipe2.
                assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
                // SAFETY: both are ours, just made.
                let (read, write) = unsafe {
                    (
                        OwnedFd::from_raw_fd(fds[0]),
                        dbus::arg::OwnedFd::new(fds[1]),
                    )
                };
                self.inhibitors.lock().unwrap().push(Inhibitor {
                    what: what.into(),
                    who: who.into(),
                    why: why.into(),
                    mode: mode.into(),
                    read,
                });
                // libdbus keeps its own copy; ours closes here.
                call.method_return().append1(write)
            }
            _ => unknown(call, "not something these stand-ins answer"),
        }
    }
}

fn unknown(call: &Message, why: &str) -> Message {
    call.error(
        &ErrorName::from("org.freedesktop.DBus.Error.UnknownMethod"),
        &std::ffi::CString::new(why).unwrap(),
    )
}

impl Drop for SystemServices {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
