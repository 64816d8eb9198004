"""What the desktop end-to-end run stands on: the processes it starts (and
always stops and reaps), waiting on conditions with deadlines, the X
display (the tray icon, its menu, closing a window the way a window
manager does) and the memory of a process tree."""

import ctypes
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request


class Failure(Exception):
    pass


def wait_for(what, check, timeout=30.0, interval=0.1):
    """Polls check() until it returns something truthy (returned), or fails
    naming `what` once the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 (kept for the failure message)
            last = e
        if time.monotonic() > deadline:
            extra = f" (last error: {last!r})" if last else ""
            raise Failure(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url, context=None):
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            return r.status == 200
    except OSError:
        return False


class Procs:
    """Starts processes in their own process groups, with logs in `logdir`;
    stop_all() ends them newest first (SIGTERM, then SIGKILL) and waits."""

    def __init__(self, logdir, env):
        self.logdir = logdir
        self.env = env
        self.started = []

    def log_path(self, name):
        return os.path.join(self.logdir, f"{name}.log")

    def start(self, name, argv, env=None, stdin=subprocess.DEVNULL, **kw):
        log = open(self.log_path(name), "ab")
        p = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=kw.pop("stdout", log),
            stderr=log,
            env=env or self.env,
            start_new_session=True,
            **kw,
        )
        log.close()
        self.started.append((name, p))
        return p

    def run(self, name, argv, timeout=60, env=None, check=True, input=None):
        """Runs a command to its end; its stderr goes to the log."""
        with open(self.log_path(name), "ab") as log:
            try:
                r = subprocess.run(
                    argv,
                    input=input,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env or self.env,
                    timeout=timeout,
                    text=True,
                )
            except subprocess.TimeoutExpired:
                raise Failure(f"{name}: {argv[0]} did not end within {timeout} s") from None
        if check and r.returncode != 0:
            raise Failure(f"{name}: {' '.join(argv[:3])}… exited {r.returncode}; see {self.log_path(name)}")
        return r

    def stop(self, name, p, grace=10):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                print(f"e2e: {name} ignored SIGTERM for {grace} s; killing it")
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        # What it started in its group and left behind.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stop_all(self):
        while self.started:
            name, p = self.started.pop()
            self.stop(name, p)


# --- reaping: PID 1 on these machines does not reap orphans ---------------

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Orphans of everything below us come to us instead of PID 1."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid …; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def descendants_of(pid):
    out, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def reap_orphans(grace=10):
    """Ends and reaps whatever was left to us (daemons a bus activated, a
    bus whose session ended): SIGTERM, then SIGKILL after `grace` seconds."""
    me = os.getpid()
    deadline = time.monotonic() + grace
    sent_kill = False
    for pid in children_of(me):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        if time.monotonic() > deadline and not sent_kill:
            for pid in children_of(me):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            sent_kill = True
        time.sleep(0.05)


# --- the X display --------------------------------------------------------


def xdotool(env, *args):
    r = subprocess.run(["xdotool", *args], env=env, capture_output=True, text=True, timeout=10)
    return r.stdout.strip() if r.returncode == 0 else ""


def geometry(env, window):
    """(x, y, width, height) of a window, from xwininfo."""
    out = subprocess.run(["xwininfo", "-id", str(window)], env=env, capture_output=True, text=True, timeout=10).stdout
    get = lambda key: int(re.search(rf"{key}:\s+(-?\d+)", out).group(1))  # noqa: E731
    return get("Absolute upper-left X"), get("Absolute upper-left Y"), get("Width"), get("Height"), "IsViewable" in out


def mapped_toplevels(env):
    """The viewable children of the root window: {id: (x, y, w, h)}."""
    out = subprocess.run(["xwininfo", "-root", "-children"], env=env, capture_output=True, text=True, timeout=10).stdout
    windows = {}
    for wid in re.findall(r"^\s+(0x[0-9a-f]+) ", out, re.M):
        try:
            x, y, w, h, viewable = geometry(env, wid)
        except (AttributeError, subprocess.TimeoutExpired):
            continue
        if viewable and w > 1 and h > 1:
            windows[wid] = (x, y, w, h)
    return windows


class _XClientMessage(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("serial", ctypes.c_ulong),
        ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("window", ctypes.c_ulong),
        ("message_type", ctypes.c_ulong),
        ("format", ctypes.c_int),
        ("data", ctypes.c_long * 5),
    ]


class _XEvent(ctypes.Union):
    _fields_ = [("xclient", _XClientMessage), ("pad", ctypes.c_long * 24)]


def close_window(display, window):
    """Sends WM_DELETE_WINDOW, as a window manager's close button does."""
    x11 = ctypes.CDLL("libX11.so.6")
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.POINTER(_XEvent)]
    x11.XFlush.argtypes = [ctypes.c_void_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    dpy = x11.XOpenDisplay(display.encode())
    if not dpy:
        raise Failure(f"cannot open display {display}")
    try:
        ev = _XEvent()
        ev.xclient.type = 33  # ClientMessage
        ev.xclient.window = int(window, 0) if isinstance(window, str) else window
        ev.xclient.message_type = x11.XInternAtom(dpy, b"WM_PROTOCOLS", 0)
        ev.xclient.format = 32
        ev.xclient.data[0] = x11.XInternAtom(dpy, b"WM_DELETE_WINDOW", 0)
        ev.xclient.data[1] = 0  # CurrentTime
        if not x11.XSendEvent(dpy, ev.xclient.window, 0, 0, ctypes.byref(ev)):
            raise Failure("XSendEvent failed")
        x11.XFlush(dpy)
    finally:
        x11.XCloseDisplay(dpy)


# --- memory ----------------------------------------------------------------


def comm(pid):
    """The program's name (its file name: /proc/PID/comm stops at 15 bytes)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0")[0].decode(errors="replace")) or "?"
    except OSError:
        return "?"


def memory_kib(pid):
    """(RSS, PSS) in KiB from /proc/PID/smaps_rollup, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            text = f.read()
    except OSError:
        return None
    rss = re.search(r"^Rss:\s+(\d+) kB", text, re.M)
    pss = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    if not rss or not pss:
        return None
    return int(rss.group(1)), int(pss.group(1))


def tree_memory(root_pid):
    """[(pid, name, rss_kib, pss_kib)] of a process and all its descendants."""
    rows = []
    for pid in [root_pid, *descendants_of(root_pid)]:
        m = memory_kib(pid)
        if m:
            rows.append((pid, comm(pid), *m))
    return rows
