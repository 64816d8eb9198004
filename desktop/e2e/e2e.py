"""The desktop app end to end, in a real window: a real coordinator, the
real app under Xvfb with a tray host, driven through tauri-driver and
WebKitWebDriver (selenium), the tray through xdotool.

    e2e.py --bin target/debug --out DIR

makes a throwaway HOME (and XDG dirs), runs itself again with --inner
inside `dbus-run-session`, then ends and reaps whatever was left. The
inner run makes a throwaway CA and a server certificate (openssl), starts
gnome-keyring (Secret Service, throwaway password), Xvfb, trayer, the
coordinator serving HTTPS with that certificate and tauri-driver, and goes
through the steps of main(). Everything trusts the CA through
DROVER_CA_FILE, never the system's store. Screenshots, logs and the memory
figure go to DIR.
"""

import argparse
import json
import os
import re
import select
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402
    Failure,
    Procs,
    become_subreaper,
    close_window,
    descendants_of,
    free_port,
    http_ok,
    mapped_toplevels,
    reap_orphans,
    tree_memory,
    wait_for,
    xdotool,
)

KEYRING_PASSWORD = "e2e-throwaway"
LEASE_TTL_MS = 4000
JOB_OUTPUT = "hello from the desktop e2e"
TOKEN_RE = re.compile(r"\b(?:drv|rnr|djt)_[0-9a-z]{20,}")


def log(msg):
    print(f"e2e: {msg}", flush=True)


# ---------------------------------------------------------------- outer


def outer(args):
    """A throwaway home, one private session bus, and no orphan left."""
    become_subreaper()
    run = tempfile.mkdtemp(prefix="drover-e2e-")
    home = os.path.join(run, "home")
    runtime = os.path.join(run, "runtime")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DBUS_", "DROVER_", "WAYLAND_"))}
    env.pop("DISPLAY", None)
    env.update(
        HOME=home,
        XDG_CONFIG_HOME=os.path.join(home, ".config"),
        XDG_DATA_HOME=os.path.join(home, ".local/share"),
        XDG_CACHE_HOME=os.path.join(home, ".cache"),
        XDG_STATE_HOME=os.path.join(home, ".local/state"),
        # Outside HOME: the document portal mounts a FUSE file system here.
        XDG_RUNTIME_DIR=runtime,
        NO_AT_BRIDGE="1",
        E2E_RUN=run,
    )
    for d in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        os.makedirs(env[d], exist_ok=True)
    os.makedirs(runtime, mode=0o700)
    os.chmod(home, 0o700)
    inner_argv = [sys.executable, os.path.abspath(__file__), "--inner", "--bin", args.bin, "--out", args.out]
    if args.app:
        inner_argv += ["--app", args.app]
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    rc = 1
    try:
        # The bus and what it starts (portals, at-spi) write to our stdout and
        # stderr: to a log, all but the inner run's own lines.
        with open(os.path.join(args.out, "logs", "session.log"), "a") as session_log:
            session = subprocess.Popen(["dbus-run-session", "--", *inner_argv], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, errors="replace")
            for line in session.stdout:
                if line.startswith("e2e: "):
                    print(line, end="", flush=True)
                else:
                    session_log.write(line)
            rc = session.wait()
    finally:
        reap_orphans()
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[1].startswith(run)]
        for m in sorted(mounts, reverse=True):
            subprocess.call(["fusermount", "-u", "-z", m])
        if rc == 0 or not args.keep:
            shutil.rmtree(run, ignore_errors=True)
        else:
            log(f"kept the run's home and logs in {run}")
    return rc


# ---------------------------------------------------------------- inner


class Run:
    """What the steps share."""

    def __init__(self, args):
        self.bin = os.path.abspath(args.bin)
        self.app = os.path.abspath(args.app or self.exe("drover-desktop"))
        self.out = os.path.abspath(args.out)
        self.run = os.environ["E2E_RUN"]
        self.home = os.environ["HOME"]
        self.logs = os.path.join(self.out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.env = dict(os.environ)
        # The system bus (NetworkManager, logind) is this run's bus too: the
        # app is not paused by the host's metered network, nor asks its logind.
        self.env["DBUS_SYSTEM_BUS_ADDRESS"] = self.env["DBUS_SESSION_BUS_ADDRESS"]
        self.procs = Procs(self.logs, self.env)
        self.driver = None
        self.app_proc = None  # the app when this script started it (not WebDriver)
        self.tls = None  # an SSL context trusting the run's throwaway CA
        self.url = None
        self.admin = None
        self.secrets_shown = []  # tokens the app showed once (never to be stored)

    def exe(self, name):
        return os.path.join(self.bin, name)

    # -- the coordinator, as the admin
    def cli(self, *args, timeout=60, check=True):
        env = dict(self.env, DROVER_URL=self.url, DROVER_TOKEN=self.admin["token"])
        return self.procs.run("cli", [self.exe("drover"), *args], env=env, timeout=timeout, check=check)

    def api(self, path):
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.admin['token']}"})
        with urllib.request.urlopen(req, timeout=10, context=self.tls) as r:
            return json.load(r)

    def github(self, command, timeout=30):
        """One command to the fake GitHub (tests/src/bin/drover-fake-github.rs),
        or None to read its greeting; its JSON answer."""
        p = self.fake_github
        if command is not None:
            p.stdin.write((command + "\n").encode())
            p.stdin.flush()
        ready, _, _ = select.select([p.stdout], [], [], timeout)
        if not ready:
            raise Failure(f"the fake GitHub did not answer {command!r} within {timeout} s")
        line = p.stdout.readline()
        if not line:
            raise Failure(f"the fake GitHub exited; see {self.procs.log_path('fake-github')}")
        answer = json.loads(line)
        if "error" in answer:
            raise Failure(f"the fake GitHub refused {command!r}: {answer['error']}")
        return answer

    # -- the window
    def el(self, testid, within=None):
        from selenium.webdriver.common.by import By

        return (within or self.driver).find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def els(self, testid, within=None):
        from selenium.webdriver.common.by import By

        return (within or self.driver).find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')

    def text(self, testid, within=None):
        return self.el(testid, within).text.strip()

    def click(self, testid, within=None, timeout=20):
        """Clicks once it is shown and enabled. The window re-renders on every
        state change, so `within` may be a function that finds the container
        again, and a click on an element replaced meanwhile is retried."""

        def attempt():
            container = within() if callable(within) else within
            el = self.el(testid, container)
            if not (el.is_displayed() and el.is_enabled()):
                return False
            el.click()
            return True

        self.wait_ui(f"a click on {testid}", attempt, timeout, interval=0.2)

    def type(self, testid, value):
        el = wait_for(f"{testid} to be shown", lambda: self.el(testid).is_displayed() and self.el(testid))
        el.clear()
        el.send_keys(value)

    def tab(self, name):
        self.click(f"tab-{name}")
        wait_for(f"panel-{name}", lambda: self.el(f"panel-{name}").is_displayed())

    def status(self):
        """The window's status badge: the state's name (its text is for people)."""
        return self.el("status").get_attribute("data-status")

    def ui_error(self):
        """The error line: its sentence, and the code and detail behind it."""
        try:
            said = self.text("error")
            details = self.els("error-detail")
            return f"{said} [{details[0].get_attribute('textContent')}]" if said and details else said
        except Exception:  # noqa: BLE001
            return ""

    def wait_ui(self, what, check, timeout=30, interval=0.1):
        """wait_for, naming the app's last error when it fails."""
        try:
            return wait_for(what, check, timeout, interval)
        except Failure as e:
            err = self.ui_error()
            raise Failure(f"{e}; the app's error line: {err!r}" if err else str(e)) from None

    def screenshot(self, name):
        # The DOM is ready when we get here, but a capture right after a
        # change can show the old frame: keep the first one taken twice.
        png = settled(f"the window to paint for {name}", self.driver.get_screenshot_as_png)
        path = os.path.join(self.out, f"desktop-{name}.png")
        with open(path, "wb") as f:
            f.write(png)
        log(f"screenshot {path}")


def throwaway_ca(r):
    """A CA and a certificate for 127.0.0.1 and localhost that it signed,
    made with the openssl CLI in the run's directory; DROVER_CA_FILE for
    every client (the CLI, the headless runner, the fake GitHub, the app)."""
    d = os.path.join(r.run, "tls")
    os.makedirs(d)
    ca_key, ca, key, csr, cert, ext = (os.path.join(d, n) for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem", "server.ext"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    r.procs.run("openssl-ca", ["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2",
                               "-subj", "/CN=Drover e2e throwaway CA",
                               "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    r.procs.run("openssl-csr", ["openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost"])
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    r.procs.run("openssl-sign", ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                                 "-out", cert, "-days", "2", "-extfile", ext])
    r.env["DROVER_CA_FILE"] = ca
    r.tls = ssl.create_default_context(cafile=ca)
    return cert, key


def start_services(r):
    env = r.env
    # First: every process started from here on trusts the CA (DROVER_CA_FILE).
    cert, key = throwaway_ca(r)
    has_owner = lambda name: "true" in subprocess.run(  # noqa: E731
        ["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
         "--method", "org.freedesktop.DBus.NameHasOwner", name],
        env=env, capture_output=True, text=True, timeout=10,
    ).stdout
    # XEmbed tray: with a StatusNotifierWatcher the icon would go there instead.
    if has_owner("org.kde.StatusNotifierWatcher"):
        raise Failure("a StatusNotifierWatcher runs on the session bus; the tray icon would not go to trayer")

    log("gnome-keyring (Secret Service), unlocked with a throwaway password")
    keyring = r.procs.start("gnome-keyring", ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    keyring.stdin.write(KEYRING_PASSWORD.encode())
    keyring.stdin.close()
    wait_for("gnome-keyring to own org.freedesktop.secrets", lambda: has_owner("org.freedesktop.secrets"), 20)

    log("Xvfb")
    rfd, wfd = os.pipe()
    xvfb = r.procs.start("xvfb", ["Xvfb", "-displayfd", str(wfd), "-screen", "0", "1280x800x24", "-nolisten", "tcp", "-noreset"], pass_fds=(wfd,))
    os.close(wfd)
    number = b""
    deadline = time.monotonic() + 20
    while not number.endswith(b"\n"):
        if time.monotonic() > deadline:
            raise Failure("Xvfb did not report its display within 20 s")
        chunk = os.read(rfd, 16)
        if not chunk:
            raise Failure(f"Xvfb exited; see {r.procs.log_path('xvfb')}")
        number += chunk
    os.close(rfd)
    env["DISPLAY"] = f":{number.decode().strip()}"

    def display_up():
        if xvfb.poll() is not None:
            raise Failure(f"Xvfb exited {xvfb.returncode}; see {r.procs.log_path('xvfb')}")
        return subprocess.run(["xdpyinfo"], env=env, capture_output=True, timeout=10).returncode == 0

    wait_for(f"display {env['DISPLAY']} to answer", display_up, 20)
    log(f"display {env['DISPLAY']}")

    log("trayer (an XEmbed tray host)")
    trayer = r.procs.start("trayer", ["trayer", "--edge", "bottom", "--align", "right", "--widthtype", "request", "--height", "32",
                             "--SetDockType", "false", "--transparent", "false", "--tint", "0x2b2b2b"])

    def trayer_window():
        if trayer.poll() is not None:
            raise Failure(f"trayer exited {trayer.returncode}; see {r.procs.log_path('trayer')}")
        return xdotool(env, "search", "--onlyvisible", "--class", "trayer").split("\n")[0]

    r.trayer = wait_for("trayer's window", trayer_window, 20)

    log("a fake GitHub (github.com and a GHE host) for the workspace's GitHub App")
    r.fake_github = r.procs.start("fake-github", [r.exe("drover-fake-github")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    github_args = r.github(None)["serveArgs"]

    log("coordinator, serving HTTPS with a certificate from a throwaway CA")
    os.makedirs(os.path.join(r.run, "coordinator"))
    database = f"sqlite://{r.run}/coordinator/drover.db"
    # A short lease TTL: the sleep step stops the app past it.
    r.coordinator_args = ["serve", "--database", database, "--tls-cert", cert, "--tls-key", key, "--lease-ttl-ms", str(LEASE_TTL_MS), *github_args]
    coordinator = r.coordinator = r.procs.start("coordinator", [r.exe("drover-coordinator"), *r.coordinator_args, "--listen", "127.0.0.1:0"])
    stdout_log = r.procs.log_path("coordinator")

    def listening():
        if coordinator.poll() is not None:
            raise Failure(f"the coordinator exited; see {stdout_log}")
        with open(stdout_log, errors="replace") as f:
            m = re.search(r"listening on (https?://\S+)", f.read())
        return m and m.group(1)

    r.url = wait_for("the coordinator's URL", listening, 30)
    assert r.url.startswith("https://"), f"the coordinator with --tls-cert listens on {r.url}"
    wait_for("the coordinator to be ready", lambda: http_ok(r.url + "/readyz", r.tls), 30)
    boot = r.procs.run("bootstrap", [r.exe("drover-coordinator"), "admin", "bootstrap", "--workspace", "e2e",
                                     "--email", "admin@e2e.test", "--database", database, "--json"])
    r.admin = json.loads(boot.stdout)
    log(f"coordinator {r.url}, admin {r.admin['email']} ({r.admin['subject']})")

    log("tauri-driver")
    port, native = free_port(), free_port()
    r.tauri_driver = r.procs.start("tauri-driver", ["tauri-driver", "--port", str(port), "--native-port", str(native)])
    wait_for("tauri-driver", lambda: http_ok(f"http://127.0.0.1:{port}/status"), 30)
    r.driver_url = f"http://127.0.0.1:{port}"


def start_app(r, args=()):
    """Starts the app through WebDriver (tauri-driver launches it)."""
    from selenium import webdriver
    from selenium.webdriver.common.options import ArgOptions

    options = ArgOptions()
    options.set_capability("browserName", "wry")
    options.set_capability("tauri:options", {"application": r.app, "args": list(args)})
    r.driver = webdriver.Remote(command_executor=r.driver_url, options=options)
    r.wait_ui("the window's status", lambda: r.el("status").is_displayed(), 60)
    r.app_pid = wait_for("the app's process", lambda: app_pid(r), 10)


def first_start(r):
    log("the app, through WebDriver")
    try:
        start_app(r)
        # Signed out at first start: the window shows the sign-in form.
        r.wait_ui("the sign-in form", lambda: r.el("signin-url").is_displayed(), 30)
    except Failure:
        if r.driver and "Could not connect to localhost" in r.driver.page_source:
            raise Failure("the window loads tauri.conf.json's build.devUrl instead of the embedded src-ui/dist: "
                          "a cargo build without tauri's custom-protocol feature is a dev build") from None
        raise
    assert r.status() == "signedOut", r.status()
    # Words for people, not the state's name.
    assert r.text("status") == "Signed out", f"the status badge says {r.text('status')!r}"


def restart_app(r):
    """Ends the app (its WebDriver session) and starts it again with its
    window open (--show), signed in from the keychain."""
    if r.driver:
        r.driver.quit()
        r.driver = None
    stop_app(r)
    start_app(r, ["--show"])


def stop_app(r):
    """With its window closed the app outlives the WebDriver session (it
    lives in the tray): ends it as a session's logout does."""
    old = r.app_pid
    if os.path.exists(f"/proc/{old}"):
        os.kill(old, signal.SIGTERM)
    if r.app_proc and r.app_proc.pid == old:
        # Started by this script: reap it.
        r.app_proc.wait(30)
        r.app_proc = None
    wait_for(f"the app (pid {old}) to exit", lambda: not os.path.exists(f"/proc/{old}"), 30)


def app_pid(r):
    """The app started by WebKitWebDriver (under our tauri-driver): found by
    its command line, which stays readable when the app has made its other
    /proc entries unreadable (PR_SET_DUMPABLE 0)."""
    exe = os.path.realpath(r.app)
    for pid in descendants_of(r.tauri_driver.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv0 = argv[0].decode(errors="replace")
        # Not its settings window's process (`--window`).
        if argv0 and os.path.realpath(argv0) == exe and b"--window" not in argv:
            return pid
    return None


def step1_pairing_link(r):
    log("1. a pairing link to the HTTPS coordinator, handed to the running app by a second launch")
    link = r.cli("pair-link").stdout.strip()
    assert link.startswith("drover://pair?"), link
    linked = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query).get("url")
    assert linked == [r.url], f"the link names {linked}, not {r.url}"
    second = r.procs.start("second-launch", [r.app, link])
    wait_for("the second launch to hand its link over and exit", lambda: second.poll() is not None, 30)
    assert second.returncode == 0, f"the second launch exited {second.returncode}"
    r.wait_ui("the link dialog", lambda: r.el("link-dialog").is_displayed())
    coordinator, pool = r.text("link-coordinator"), r.text("link-pool")
    assert r.url in coordinator, f"link dialog names {coordinator!r}, not {r.url}"
    assert pool, "the link dialog names no pool"
    assert not r.els("link-cleartext"), "the link dialog warns of clear text for an https:// coordinator"
    log(f"   dialog: coordinator {coordinator!r}, pool {pool!r}")
    r.click("link-confirm")
    r.wait_ui("the link dialog to close", lambda: not r.els("link-dialog") or not r.el("link-dialog").is_displayed())
    r.tab("machine")
    row = r.wait_ui("a pool row", lambda: r.els("pool-row") and r.els("pool-row")[0])
    r.pool_ref = row.get_attribute("data-ref")
    r.wait_ui("runner-count 1", lambda: r.text("runner-count", r.els("pool-row")[0]) == "1")
    runners = wait_for("one runner online at the coordinator", lambda: online_runners(r, 1), 30)
    log(f"   pool {r.pool_ref}: runner {runners[0]['id']} online")
    r.wait_ui("status idle", lambda: r.status() == "idle")
    assert not r.els("cleartext-notice"), "a clear-text notice while signed in over https://"


def step_link_while_signed_in(r):
    """A pairing link opened while signed in says so before asking anything."""
    log("a pairing link opened while signed in: refused in the window before anything is asked")
    link = r.cli("pair-link").stdout.strip()
    second = r.procs.start("second-launch-signed-in", [r.app, link])
    wait_for("the second launch to hand its link over and exit", lambda: second.poll() is not None, 30)
    said = r.wait_ui("the window to say why", lambda: r.els("link-refused") and r.text("link-refused-message"))
    assert said.startswith(f"This device is already signed in as {r.admin['email']} on {r.url}"), f"the window says {said!r}"
    assert not r.els("link-dialog"), "a confirmation dialog was offered for a link that can only fail"
    r.click("link-refused-close")
    r.wait_ui("the refusal to close", lambda: not r.els("link-refused"))
    log(f"   {said!r}")


def online_runners(r, n):
    runners = [x for x in r.api("/v1/me/runners")["runners"] if x["online"]]
    return runners if len(runners) == n else None


def step2_second_runner(r):
    log("2. a second runner")
    r.click("runner-add", lambda: r.els("pool-row")[0])
    r.wait_ui("runner-count 2", lambda: r.text("runner-count", r.els("pool-row")[0]) == "2")
    r.wait_ui("two runner rows", lambda: len(r.els("runner-row")) == 2)
    runners = wait_for("two runners online at the coordinator", lambda: online_runners(r, 2), 30)
    roster = r.cli("runners", "list").stdout
    for x in runners:
        assert re.search(rf"{x['id']}\s.*\sonline\s", roster), f"`drover runners list` does not show {x['id']} online:\n{roster}"
    log(f"   runners {', '.join(x['id'] for x in runners)} online (drover runners list agrees)")
    r.screenshot("machine")


def step3_job(r):
    log(f"3. a job from the CLI on {r.pool_ref}")
    out = r.cli("submit", "--runtime", r.pool_ref, "--wait", "--", "sh", "-c", f"echo {JOB_OUTPUT}", timeout=120).stdout
    job = out.split("\n")[0].strip()
    assert job.startswith("job_") and JOB_OUTPUT in out, out
    r.tab("pools")
    r.wait_ui("my-pool-row", lambda: any(x.get_attribute("data-ref") == r.pool_ref for x in r.els("my-pool-row")))

    def row():
        rows = [x for x in r.els("job-row") if x.get_attribute("data-id") == job]
        if not rows:
            r.click("jobs-refresh")
        return rows and rows[0]

    r.wait_ui(f"job {job} in the jobs list", row, 30, 0.5)
    r.wait_ui(f"job {job} succeeded", lambda: "succeeded" in row().text)
    # WebKitWebDriver finds a <tr> itself not interactable: click its first cell.
    r.wait_ui("a click on the job's row", lambda: row().find_element("css selector", "td").click() or True, 20, 0.2)
    r.wait_ui("its log", lambda: JOB_OUTPUT in r.text("job-logs"))
    log(f"   {job} succeeded; its log shows {JOB_OUTPUT!r}")
    r.screenshot("pools")


def step4_workspace(r):
    log("4. as an admin: pair and revoke a workspace runner")
    assert r.els("tab-workspace"), "no Workspace tab for an admin"
    r.tab("workspace")
    r.wait_ui("the workspace pools", lambda: r.els("ws-pools"))
    if not r.els("ws-pool-row"):
        r.type("ws-create-pool-name", "builders")
        r.click("ws-create-pool-submit")
        r.wait_ui("the new pool", lambda: r.els("ws-pool-row"))
    from selenium.webdriver.support.ui import Select

    pool_id = r.els("ws-pool-row")[0].get_attribute("data-id")
    Select(r.el("ws-pair-pool")).select_by_value(pool_id)
    r.type("ws-pair-name", "build-box-1")
    r.click("ws-pair-submit")
    token = r.wait_ui("the paired runner's token", lambda: r.els("ws-pair-token") and r.text("ws-pair-token"))
    command = r.text("ws-pair-command")
    assert token.startswith("rnr_"), "ws-pair-token is not a runner token"
    assert "drover runner" in command and token in command, "ws-pair-command is not the `drover runner` command"
    r.secrets_shown.append(token)
    runner = next(x for x in r.api("/v1/workspace/runners")["runners"] if x["name"] == "build-box-1")
    log(f"   paired {runner['id']}; token and `drover runner …` command shown")

    # Run it, as the admin would on a build server (its own home: a
    # headless runner keeps its own files).
    box = os.path.join(r.run, "build-box")
    os.makedirs(box)
    # 0600: the runner refuses a token file others may read.
    with open(os.open(os.path.join(box, "token"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(token)
    box_env = dict(r.env, HOME=box, XDG_DATA_HOME=box, XDG_CONFIG_HOME=box)
    headless = r.procs.start("build-box", [r.exe("drover"), "runner", "--url", r.url, "--token-file", os.path.join(box, "token")], env=box_env)

    def roster_row():
        rows = [x for x in r.els("ws-runner-row") if x.get_attribute("data-id") == runner["id"]]
        return rows and rows[0]

    def online_in_roster():
        row = roster_row()
        if row and row.find_elements("css selector", ".badge-online"):
            return row
        r.click("ws-refresh")
        return None

    r.wait_ui("the workspace runner online in the roster", online_in_roster, 30, 0.5)
    r.screenshot("workspace")
    r.click("ws-revoke", roster_row)

    def gone():
        row = roster_row()
        if not row or row.find_elements("css selector", ".badge-offline") or "revoked" in row.text:
            return True
        return None

    r.wait_ui("the revoked runner to leave the roster", gone, 30)
    ids = [x["id"] for x in r.api("/v1/workspace/runners")["runners"]]
    assert runner["id"] not in ids, f"the coordinator still lists {runner['id']}"
    assert runner["id"] not in r.cli("runners", "list").stdout, "`drover runners list` still shows the revoked runner"
    wait_for("the revoked headless runner to stop", lambda: headless.poll() is not None, 60)
    log(f"   revoked {runner['id']}: gone from the roster and from `drover runners list`; its runner stopped")


def step4_people(r):
    """As the admin: invite a member and remove them, the month's usage,
    and the audit log naming the desktop as the surface."""
    log("4b. as an admin: members, usage by month, the audit log")
    email = "newbie@e2e.test"
    r.type("ws-invite-email", email)
    r.click("ws-invite-submit")
    link = r.wait_ui("the invite link", lambda: r.els("ws-invite-link") and r.text("ws-invite-link"))
    assert link.startswith("drover://pair?url="), f"ws-invite-link is not a pairing link: {link}"
    r.secrets_shown.append(link.rsplit("code=", 1)[1])

    def member_row():
        rows = [x for x in r.els("ws-member-row") if x.get_attribute("data-email") == email]
        return rows and rows[0]

    row = r.wait_ui("the invited member listed", member_row)
    assert r.text("ws-member-status", row) == "invited", "the new member is not shown as invited"
    listed = {m["email"]: m for m in r.api("/v1/workspace/members")["members"]}
    assert listed[email]["status"] == "invited", "the coordinator does not list the invited member"
    r.screenshot("members")
    r.click("ws-member-remove", member_row)
    r.wait_ui("the removed member to leave the list", lambda: not member_row())
    assert email not in {m["email"] for m in r.api("/v1/workspace/members")["members"]}, "the coordinator still lists the removed member"
    log(f"   invited {email} (link shown once), listed as invited, removed")

    # The month's usage: step 3's job ran on a personal pool of this workspace.
    r.click("ws-report-submit")
    want = {x["id"] for x in r.api("/v1/workspace/billing/usage")["lines"]}
    assert want, "the coordinator metered nothing this month"
    shown = r.wait_ui("the usage report's lines", lambda: {x.get_attribute("data-id") for x in r.els("ws-report-row")} or None)
    assert shown == want, f"the usage report shows {shown}, the coordinator {want}"
    log(f"   usage by pool this month: {len(shown)} line(s), as the coordinator reports")

    # The audit log: what this window did, from the desktop.
    def audited():
        rows = {(x.get_attribute("data-action"), x.get_attribute("data-surface")) for x in r.els("ws-audit-row")}
        if {("member.invited", "desktop"), ("member.removed", "desktop"), ("runner.paired", "desktop")} <= rows:
            return rows
        r.click("ws-refresh")
        return None

    r.wait_ui("the audit log to show the invite and the removal, via desktop", audited, 30, 0.5)
    log("   audit log: member.invited, member.removed and runner.paired, each via desktop")


def step4_github(r):
    """As the admin: the GitHub dialog against the fake GitHub:
    the install link while the App is installed nowhere, then the picker
    with search and the GHE badge, an organization-level runner with a
    group and a label, and its script."""
    log("4c. as an admin: a GitHub Actions runner from the GitHub dialog")
    r.click("gh-open")
    r.wait_ui("the dialog to say the App is not installed", lambda: r.els("gh-not-installed"))
    r.click("gh-install-link")
    url = r.wait_ui("the install link", lambda: r.els("gh-install-url") and r.text("gh-install-url"))
    assert "/apps/drover-test/installations/new?state=" in url, f"gh-install-url is not the App's install page: {url}"
    log("   not installed: the dialog offers the App's install link")

    # The admin installs the App on an organization at github.com and on
    # one at the GHE host; GitHub's setup redirect links them.
    for host, account, repos in (("github.com", "octo", "hello,site"), ("ghe.test", "platform", "infra")):
        installation = r.github(f"install {host} {account} Organization {repos}")["installationId"]
        r.github(f"link {host} {installation} {r.url} {r.admin['token']}")
    r.click("gh-reload")

    def shown():
        return {(t.get_attribute("data-kind"), t.get_attribute("data-name")) for t in r.els("gh-target") if t.is_displayed()}

    everything = {("org", "octo"), ("org", "platform"), ("repo", "octo/hello"), ("repo", "octo/site"), ("repo", "platform/infra")}
    r.wait_ui("the picker to list both installations", lambda: shown() == everything)
    badged = {t.get_attribute("data-name") for t in r.els("gh-target") if r.els("gh-host-badge", t)}
    assert badged == {"platform", "platform/infra"}, f"GHE badges on {badged}"
    r.screenshot("github")
    r.type("gh-search", "octo")
    r.wait_ui("the search to narrow the picker", lambda: shown() == {("org", "octo"), ("repo", "octo/hello"), ("repo", "octo/site")})
    next(t for t in r.els("gh-target") if t.get_attribute("data-kind") == "org" and t.is_displayed()).click()
    r.wait_ui("the organization picked", lambda: r.text("gh-selected") == "Organization octo on github.com")
    r.type("gh-runner-group", "builds")
    r.type("gh-labels", "gpu")
    r.click("gh-submit")
    script = r.wait_ui("the install script", lambda: r.els("gh-script") and r.el("gh-script").get_attribute("textContent"))
    values = dict(line.split("=", 1) for line in script.splitlines() if re.match(r"^[A-Z_]+=", line))
    assert values.get("GH_URL", "").strip("'").endswith("/octo"), f"GH_URL {values.get('GH_URL')}"
    assert values.get("GH_GROUP", "").strip("'") == "builds", f"GH_GROUP {values.get('GH_GROUP')}"
    assert values.get("GH_LABELS", "").strip("'").endswith(",gpu"), f"GH_LABELS {values.get('GH_LABELS')}"
    r.secrets_shown += [values[k].strip("'") for k in ("GH_TOKEN", "DROVER_RUNNER_TOKEN") if k in values]
    assert r.github("registrations")["registrationTokens"] == 1, "the fake GitHub minted no registration token"
    runner = values["DROVER_RUNNER_ID"].strip("'")
    owned = {x["id"] for x in r.api("/v1/workspace/runners/owned")["runners"]}
    assert runner in owned, f"the coordinator does not list {runner}"
    assert "drover-" in r.text("gh-hint"), "no workflow hint"
    r.click("gh-close")
    r.wait_ui("the dialog to close", lambda: not r.els("gh-dialog"))
    log(f"   picked org octo (search, GHE badge on platform), group builds, label gpu: runner {runner} and its script")

    log("4d. as an admin: GitHub Actions on demand from its dialog")
    from selenium.webdriver.support.ui import Select
    r.click("od-open")
    r.wait_ui("the on-demand dialog, nothing on yet", lambda: r.els("od-none"))
    Select(r.el("od-target")).select_by_value("repo|github.com|octo/hello")
    pool = Select(r.el("od-pool")).first_selected_option.get_attribute("value")
    r.type("od-labels", "linux")
    r.type("od-max", "3")
    r.click("od-submit")
    hint = r.wait_ui("the workflow hint", lambda: r.els("od-saved-hint") and r.text("od-saved-hint"))
    assert hint == f"runs-on: [self-hosted, drover-{pool}, linux]", f"od-saved-hint: {hint}"
    listed = r.api("/v1/workspace/github/on-demand")["pools"]
    assert [(p["target"], p["pool"], p["maxRunners"]) for p in listed] == [("octo/hello", pool, 3)], listed
    r.wait_ui("the list to show it", lambda: [x.get_attribute("data-target") for x in r.els("od-row")] == ["octo/hello"])
    r.screenshot("on-demand")
    r.click("od-remove")
    r.wait_ui("it turned off", lambda: r.els("od-none"))
    assert r.api("/v1/workspace/github/on-demand")["pools"] == [], "the coordinator still lists it"
    r.click("od-close")
    r.wait_ui("the dialog to close", lambda: not r.els("od-dialog"))
    log(f"   octo/hello served on demand by pool {pool} (label linux, at most 3), then turned off")


SANDBOX_BUILD = "built in its own directory"


def step6_sandbox(r):
    """A workspace job on the app's runner is someone else's: it
    runs sandboxed. It cannot read a file in the user's home or the app's
    settings, ask the Secret Service for drover's items, call the session
    bus (the app's own address given), or read the app's /proc entries;
    an ordinary build in its own directory works."""
    log("6. a workspace job on this machine runs in a sandbox")
    pool = json.loads(r.cli("runtimes", "list", "--workspace", "--json").stdout)["runtimes"][0]
    link = r.cli("runtimes", "join-token", pool["id"], "--workspace", "--link").stdout.strip()
    assert link.startswith("drover://join?"), link
    second = r.procs.start("join-launch", [r.app, link])
    wait_for("the second launch to hand its join link over and exit", lambda: second.poll() is not None, 30)
    r.wait_ui("the join dialog", lambda: r.el("link-dialog").is_displayed())
    r.click("link-confirm")
    r.wait_ui("the join dialog to close", lambda: not r.els("link-dialog") or not r.el("link-dialog").is_displayed())
    r.tab("machine")

    def pool_row():
        rows = [x for x in r.els("pool-row") if x.get_attribute("data-ref") == pool["ref"]]
        return rows and rows[0]

    r.wait_ui(f"{pool['ref']} shown as sandboxed", lambda: pool_row() and r.text("pool-sandbox", pool_row()) == "sandboxed")

    def announced():
        mine = [x for x in r.api("/v1/workspace/runners")["runners"]
                if x["runtimeId"] == pool["id"] and x["online"] and any(c.startswith("sandbox=") for c in x["capabilities"])]
        return mine and mine[0]

    runner = wait_for("the app's workspace runner online, its sandbox announced", announced, 30)
    assert "sandbox=bwrap" in runner["capabilities"], f"the app's runner announced {runner['capabilities']}"
    assert "github-actions" in runner["capabilities"], f"the app's workspace runner serves no Actions on demand: {runner['capabilities']}"
    roster = r.cli("runners", "list").stdout
    assert re.search(rf"{runner['id']}\s.*\ssandboxed\s", roster), f"`drover runners list` does not show {runner['id']} sandboxed:\n{roster}"

    secret_file = os.path.join(r.home, "diary.txt")
    with open(secret_file, "w") as f:
        f.write("e2e-home-secret\n")
    config = os.path.join(r.env["XDG_CONFIG_HOME"], "drover", "desktop.json")
    bus = r.env["DBUS_SESSION_BUS_ADDRESS"]
    gdbus = "gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus --method org.freedesktop.DBus.ListNames"
    probes = {
        "home": f"cat {secret_file}",
        "settings": f"cat {config}",
        "secret-service": "secret-tool search --all service drover",
        "secret-service-at-the-apps-bus": f"DBUS_SESSION_BUS_ADDRESS='{bus}' secret-tool search --all service drover",
        "session-bus": gdbus,
        "the-apps-session-bus": f"DBUS_SESSION_BUS_ADDRESS='{bus}' {gdbus}",
        "app-environ": f"cat /proc/{r.app_pid}/environ",
    }
    script = "".join(f"if {cmd} >/dev/null 2>&1; then echo 'LEAK {what}'; else echo 'refused {what}'; fi\n" for what, cmd in probes.items())
    script += ("printf '#include <stdio.h>\\nint main(void) { puts(\"%s\"); return 0; }\\n' > hello.c\n"
               "cc -o hello hello.c && ./hello\n") % SANDBOX_BUILD
    # Outside the sandbox, as this user, the same probes work (they are real).
    control = subprocess.run(["sh", "-c", script], env=r.env, capture_output=True, text=True, timeout=60, cwd=r.run).stdout
    for what in ("home", "settings", "secret-service", "session-bus"):
        assert f"LEAK {what}" in control, f"the probe {what!r} fails even outside the sandbox:\n{control}"
    out = r.cli("submit", "--runtime", pool["ref"], "--wait", "--", "sh", "-c", script, timeout=120).stdout
    leaks = [line for line in out.splitlines() if line.startswith("LEAK")]
    assert not leaks, f"the workspace job reached: {leaks}\n{out}"
    for what in probes:
        assert f"refused {what}" in out, f"the probe {what!r} did not run:\n{out}"
    assert SANDBOX_BUILD in out, f"the build in the job's own directory failed:\n{out}"
    assert "e2e-home-secret" not in out
    log(f"   runner {runner['id']} announced sandbox=bwrap; its job was refused {', '.join(probes)}; its build ran")


def step_account(r):
    r.tab("account")
    r.wait_ui("signed in as the admin", lambda: r.text("signed-in-as") == r.admin["email"])
    r.wait_ui("this device in the device list", lambda: r.els("device-row"))
    r.screenshot("account")


def step5_keychain(r):
    log("5. the tokens are in the keychain, and in no file under HOME")
    # secret-tool prints attributes on stderr: both line-buffered, one pipe, in order.
    found = subprocess.run(["stdbuf", "-oL", "-eL", "secret-tool", "search", "--all", "service", "drover"], env=r.env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=20)
    items, current = [], {}
    for line in found.stdout.splitlines():
        if line.startswith("["):
            current = {}
            items.append(current)
        elif " = " in line:
            key, value = line.split(" = ", 1)
            current[key.strip()] = value
    by_user = {i.get("attribute.username"): i for i in items}
    log(f"   keychain items: {sorted(k for k in by_user if k)}")
    r.keychain_items = by_user
    if getattr(r, "expect_empty_keychain", False):
        return
    assert "account" in by_user, "no `account` item in the keychain"
    runner_items = [k for k in by_user if k and k.startswith(f"runner:{r.pool_ref}-")]
    assert len(runner_items) == 2, f"expected two runner credentials for {r.pool_ref}, found {runner_items}"
    tokens = sorted({t for i in items for t in TOKEN_RE.findall(i.get("secret", ""))})
    device = TOKEN_RE.findall(by_user["account"].get("secret", ""))
    assert device and device[0].startswith("drv_") and device[0] != r.admin["token"], "the account item holds no device token"
    assert len([t for t in tokens if t.startswith("rnr_")]) == 2, "the runner items hold no runner tokens"
    needles = tokens + r.secrets_shown
    hits = subprocess.run(["grep", "-rlF", "-D", "skip", *sum((["-e", t] for t in needles), []), r.home],
                          capture_output=True, text=True, timeout=120)
    assert hits.returncode == 1, f"a token is in a file under HOME: {hits.stdout.strip() or hits.stderr.strip()}"
    config = os.path.join(r.env["XDG_CONFIG_HOME"], "drover", "desktop.json")
    assert os.path.exists(config), f"no {config}"
    log(f"   {len(tokens)} tokens in the keychain (1 device, {len(tokens) - 1} runners); "
        f"none of them nor the workspace runner's token in any file under HOME ({config} holds none)")


def step_quiet_hours(r):
    """Quiet hours set in the window around the time now: new jobs wait,
    the window and the tray say why, the coordinator lists the runners
    paused; taken off, they lease again."""
    log("quiet hours around now, set in the Machine tab: paused, and the tray says until when")
    r.tab("machine")
    r.click("quiet-hours")
    r.wait_ui("the quiet-hours fields", lambda: r.el("quiet-from").is_enabled())
    now = time.localtime()
    at = lambda minutes: time.strftime("%H:%M", time.localtime(time.mktime(now) + minutes * 60))  # noqa: E731
    for field, value in (("quiet-from", at(-2)), ("quiet-to", at(3))):
        # As a time picker sets it (its typing is the browser's locale's).
        r.driver.execute_script(
            "const el = arguments[0]; el.value = arguments[1]; el.dispatchEvent(new Event('change'));", r.el(field), value)
        r.wait_ui(f"{field} saved", lambda: invoke(r, "get_state")["settings"]["quietHours"][field[6:]] == value)
    r.wait_ui("the window to say paused", lambda: r.status() == "paused")
    notice = r.text("held-notice")
    assert notice.startswith(f"Quiet hours until {at(3)}"), f"the held notice says {notice!r}"
    registered = 0  # any registration: the app is not restarted here
    wait_for("the tray to say why", lambda: (sni_menu(r, registered) or [""])[0] == f"Drover — Paused: quiet hours until {at(3)}", 10)
    roster = wait_for("drover runners list to say paused",
                      lambda: (out := r.cli("runners", "list").stdout) and re.search(r"\spaused\s", out) and out, 30)
    r.driver.execute_script("arguments[0].closest('.quiet').scrollIntoView({block: 'end'})", r.el("quiet-hours"))
    r.screenshot("machine-quiet")
    r.click("quiet-hours")
    r.wait_ui("the window to say idle", lambda: r.status() == "idle")
    wait_for("the tray to say idle", lambda: (sni_menu(r, registered) or [""])[0] == "Drover — Idle", 10)
    paused = len(re.findall(r"\spaused\s", roster))
    log(f"   window: {notice!r}; tray: 'Drover — Paused: quiet hours until {at(3)}'; "
        f"drover runners list: {paused} runners paused")


def step_sleep(r):
    """The laptop sleeps mid-job past its lease TTL (the app and its job
    stopped with SIGSTOP, as a suspended machine is) and wakes: the job was
    given back and runs once more, to the end, once; both attempts metered
    once; the runners come back within seconds."""
    ttl = LEASE_TTL_MS / 1000
    log(f"asleep past the lease TTL ({ttl:.0f} s) mid-job: SIGSTOP the app and its job, then SIGCONT")
    marks = os.path.join(r.run, "sleep-marks")
    before = r.api("/v1/workspace/usage")["jobsOwnPays"]
    job = r.cli("submit", "--runtime", r.pool_ref, "--", "sh", "-c",
                f"echo start >> {marks}; sleep 2; echo done >> {marks}").stdout.split("\n")[0].strip()
    wait_for("the job's first attempt to start", lambda: os.path.exists(marks) and "start" in open(marks).read(), 30, 0.02)
    stopped = [r.app_pid, *descendants_of(r.app_pid)]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    asleep = time.monotonic()
    try:
        # Queued, or at once leased to one of the app's long-polls (stopped too).
        shown = wait_for("the coordinator to give the job back",
                         lambda: (j := r.api(f"/v1/jobs/{job}"))["state"] in ("queued", "leased") and j, 60, 0.05)
        gave_back = time.monotonic() - asleep
        # Asleep a little longer, as a laptop would be.
        wait_for("two lease TTLs asleep", lambda: time.monotonic() - asleep > 2 * ttl, 3 * ttl)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    woke = time.monotonic()
    wait_for("the job started again on this machine", lambda: open(marks).read().split().count("start") >= 2, 60, 0.02)
    back = time.monotonic() - woke
    done = wait_for("the job to succeed", lambda: (j := r.api(f"/v1/jobs/{job}"))["state"] == "succeeded" and j, 60, 0.05)
    ran = time.monotonic() - woke
    assert done["attempt"] == 2, f"the job succeeded on attempt {done['attempt']}, not the second"
    lines = open(marks).read().split()
    assert lines.count("start") == 2, f"the job started {lines.count('start')} times: {lines}"
    metered = r.api("/v1/workspace/usage")["jobsOwnPays"] - before
    assert metered == 2, f"{metered} attempts metered for two attempts"
    r.wait_ui("the window to say idle", lambda: r.status() == "idle", 30)
    said = r.wait_ui("the Activity list to say the job was handed back",
                     lambda: [x.text for x in r.els("activity-item") if job in x.text], 30)
    assert "this machine did not answer in time" in said[0], f"the Activity list says {said}"
    log(f"   given back {gave_back:.1f} s after the app stopped ({shown['state']}); awake again: "
        f"the job running again on this machine in {back:.2f} s, done (attempt 2) in {ran:.1f} s; "
        f"marks {lines}; {metered} attempts metered")
    with open(os.path.join(r.out, "sleep.txt"), "w") as f:
        f.write(f"lease TTL {ttl:.0f} s; job given back {gave_back:.1f} s after the app stopped; after waking: "
                f"re-queued job running again {back:.2f} s, done {ran:.1f} s; attempts metered {metered}\n")


def step_reconnect(r):
    """The coordinator goes away and comes back on the same address: the
    window says it cannot reach it in words, and once it is back the app is
    online again by itself and the error has gone, with no click."""
    log("the coordinator stopped and started again: the app says so, then comes back by itself")
    r.tab("pools")
    r.coordinator.terminate()
    r.coordinator.wait(30)
    r.wait_ui("the window to say offline", lambda: r.status() == "offline", 60)
    r.click("jobs-refresh")
    error = r.wait_ui("an error in words", lambda: r.text("error"), 20)
    assert error.startswith("Can't reach 127.0.0.1"), f"the error line says {error!r}"
    port = urllib.parse.urlsplit(r.url).port
    r.coordinator = r.procs.start("coordinator-again", [r.exe("drover-coordinator"), *r.coordinator_args, "--listen", f"127.0.0.1:{port}"])
    wait_for("the coordinator to be ready again", lambda: http_ok(r.url + "/readyz", r.tls), 30, 0.02)
    back = time.monotonic()
    r.wait_ui("the window to say idle", lambda: r.status() == "idle", 30, 0.05)
    online = time.monotonic() - back
    r.wait_ui("the error to clear by itself", lambda: not r.text("error"), 10)
    cleared = time.monotonic() - back
    wait_for("the app's runners online at the coordinator", lambda: len([x for x in r.api("/v1/me/runners")["runners"] if x["online"]]) >= 1, 30)
    log(f"   while it was down the window said {error!r}; {online:.1f} s after it was back the app was online, "
        f"{cleared:.1f} s after the error had gone")
    with open(os.path.join(r.out, "reconnect.txt"), "w") as f:
        f.write(f"coordinator back -> app online: {online:.2f} s; error cleared: {cleared:.2f} s\n")


def step_revoked(r):
    log("the app's device token revoked from the CLI: the app is signed out and says by whom")
    devices = [t for t in r.api("/v1/me/tokens")["tokens"] if not t["current"]]
    assert len(devices) == 1, f"expected the app's one device token besides the admin's, found {devices}"
    lent = [x["id"] for x in r.api("/v1/me/runners")["runners"]]
    assert lent, "the app lends no runner to revoke"
    r.cli("tokens", "revoke", devices[0]["id"])
    revoked = time.monotonic()
    r.tab("account")
    notice = r.wait_ui("the window to say this device was signed out",
                       lambda: r.els("signed-out-notice") and r.text("signed-out-notice"), 30)
    took = time.monotonic() - revoked
    assert "the drover CLI" in notice and r.admin["email"] in notice, f"the notice says {notice!r}"
    assert r.status() == "signedOut", r.status()
    assert r.el("signin-url").is_displayed(), "no sign-in form after the device was signed out"
    left = [x["id"] for x in r.api("/v1/me/runners")["runners"] if x["id"] in lent and x.get("online")]
    assert not left, f"runners the device paired are still online: {left}"
    r.expect_empty_keychain = True
    step5_keychain(r)
    assert not r.keychain_items, f"the keychain still holds {sorted(r.keychain_items)}"
    log(f"   signed out {took:.1f} s after the revoke; the window says: {notice!r}")
    r.screenshot("signed-out")


# ---------------------------------------------------------------- tray


def settled(what, capture, timeout=10):
    """The first capture that equals the one before it: the screen has
    finished painting."""
    last = [None]

    def same():
        shot = capture()
        if shot == last[0]:
            return shot
        last[0] = shot
        return None

    return wait_for(what, same, timeout, 0.2)


def open_tray_menu(r):
    """Clicks the tray icon; returns the menu's window geometry."""
    x, y, w, h = map(int, re.findall(r"-?\d+", xdotool(r.env, "getwindowgeometry", r.trayer))[1:5])
    before = mapped_toplevels(r.env)
    # The only icon in trayer: its middle.
    xdotool(r.env, "mousemove", str(x + h // 2), str(y + h // 2), "click", "1")

    def menu():
        new = {k: v for k, v in mapped_toplevels(r.env).items() if k not in before}
        tall = [v for v in new.values() if v[3] > 3 * h]
        return tall and tall[0]

    return wait_for("the tray menu to open", menu, 10)


def tray(r):
    log("tray: the icon's menu in trayer, driven with xdotool")
    wait_for("the tray icon in trayer", lambda: tray_width(r) > 1, 20)
    r.tab("machine")
    mx, my, mw, mh = open_tray_menu(r)
    log(f"   menu open at {mw}x{mh}+{mx}+{my}")
    # 2 pools rows + 2 runner rows + add/remove + pause/settings/quit + status: 9 items and 2 separators.
    assert mh >= 9 * 18, f"the menu is {mh} px high: too short for the expected items"
    # The menu is mapped; capture the screen once it has painted (two
    # captures in a row alike).
    # PPM: pixels only (ImageMagick's PNGs carry their creation time).
    def capture():
        return subprocess.run(["import", "-window", "root", "ppm:-"], env=r.env, check=True, timeout=30, capture_output=True).stdout

    full = os.path.join(r.logs, "tray-full.png")
    pixels = settled("the tray menu to paint", capture)
    subprocess.run(["convert", "ppm:-", full], input=pixels, check=True, timeout=30)
    tx, ty, tw, th = map(int, re.findall(r"-?\d+", xdotool(r.env, "getwindowgeometry", r.trayer))[1:5])
    left, top = min(tx, mx), min(ty, my)
    right, bottom = max(tx + tw, mx + mw), max(ty + th, my + mh)
    crop = f"{right - left + 16}x{bottom - top + 16}+{max(left - 8, 0)}+{max(top - 8, 0)}"
    subprocess.run(["convert", full, "-crop", crop, "+repage", os.path.join(r.out, "desktop-tray.png")], check=True, timeout=30)
    log(f"   screenshot {os.path.join(r.out, 'desktop-tray.png')}")
    # Enabled items, top down: Add runner, Remove runner, Pause all, Settings…, Quit.
    xdotool(r.env, "key", "--delay", "100", "Down", "Down", "Down", "Return")
    r.wait_ui("status paused after the tray's Pause all", lambda: r.status() == "paused", 15)
    assert r.el("pause-all").is_selected(), "pause-all is not checked after the tray paused"
    # The coordinator says so too: paused, not offline.
    ids = [x["id"] for x in r.api("/v1/me/runners")["runners"]]

    def all_paused():
        listing = r.cli("runners", "list").stdout
        return all(re.search(rf"{i}\s.*\spaused\s", listing) for i in ids) and listing

    listing = wait_for("drover runners list to say paused", all_paused, 30)
    log(f"   tray's Pause all: the app is paused, and `drover runners list` says so for {len(ids)} runners")
    r.click("pause-all")
    r.wait_ui("status idle after resuming in the window", lambda: r.status() == "idle", 15)


def gdbus(r, dest, path, method, *args):
    done = subprocess.run(["gdbus", "call", "--session", "--dest", dest, "--object-path", path, "--method", method, *args],
                          env=r.env, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise Failure(f"gdbus {method} on {dest}{path}: {done.stderr.strip()}")
    return done.stdout


def sni_menu(r, registered_before):
    """The tray menu's visible labels, top down, as the tray host reads
    them: from the StatusNotifierItem registered after `registered_before`
    lines of the watcher's log, over com.canonical.dbusmenu. None until the
    app has registered."""
    with open(r.procs.log_path("sni-watcher")) as f:
        lines = [x.split() for x in f.read().splitlines() if x.startswith("registered ")]
    if len(lines) <= registered_before:
        return None
    _, bus, path = lines[-1]
    menu = re.search(r"objectpath '([^']+)'", gdbus(r, bus, path, "org.freedesktop.DBus.Properties.Get", "org.kde.StatusNotifierItem", "Menu"))
    layout = gdbus(r, bus, menu.group(1), "com.canonical.dbusmenu.GetLayout", "0", "int32 -1", "@as []")
    # Each item: (id, {properties}, [children]); labels in the order shown.
    items = re.findall(r"\(\d+, (\{[^{}]*\}), ", layout)
    return [m.group(1) for props in items if "'visible': <false>" not in props
            for m in [re.search(r"'label': <'([^']*)'>", props)] if m]


def restarts(r, n=10):
    """The tray after a restart: drawn from the state as it is once the
    tray exists, never left on the state at start (runners connecting).
    Read as a desktop's tray host reads it (a StatusNotifierWatcher, the
    menu over D-Bus), so this comes last: trayer no longer gets the icon."""
    log(f"restarting the app {n} times: each time the tray menu agrees with the window within 2 s")
    watcher = r.procs.start("sni-watcher", [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sni_watcher.py")])
    wait_for("the StatusNotifierWatcher", lambda: watcher.poll() is None and "watching" in open(r.procs.log_path("sni-watcher")).read(), 20)
    lags = []
    for i in range(1, n + 1):
        registered = sum(1 for x in open(r.procs.log_path("sni-watcher")) if x.startswith("registered "))
        restart_app(r)
        r.wait_ui(f"restart {i}: the window to say idle", lambda: r.status() == "idle", 60)
        window = r.text("status")
        agreed = time.monotonic()
        last = [None]

        def agrees():
            last[0] = menu = sni_menu(r, registered)
            return menu and menu[0] == f"Drover — {window}" and not any(x.endswith("connecting") for x in menu)

        try:
            wait_for("the tray menu to agree with the window", agrees, 2.0, 0.05)
        except Failure as e:
            raise Failure(f"restart {i}: the window says {window!r}, the tray menu 2 s later: {last[0]} ({e})") from None
        lags.append(time.monotonic() - agreed)
    log(f"   {n} restarts: the tray menu agreed with the window at most {max(lags):.2f} s after it said idle; "
        f"last menu: {last[0][:4]}")


def tray_width(r):
    return int(re.findall(r"(\d+)x\d+", xdotool(r.env, "getwindowgeometry", r.trayer))[0])


def invoke(r, cmd, args=None):
    """One of the app's commands, called as the window's own code calls it."""
    out = r.driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.__TAURI_INTERNALS__.invoke(arguments[0], arguments[1]).then(v => done({ok: v}), e => done({err: e}));",
        cmd, args or {})
    if "err" in out:
        raise Failure(f"{cmd}: {out['err']}")
    return out["ok"]


def window_process(r):
    """The settings window's own process (`drover-desktop --window`), if one runs."""
    for pid in descendants_of(r.app_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"--window" in f.read().split(b"\0"):
                    return pid
        except OSError:
            continue
    return None


def memory(r):
    """PSS of all the app's processes together, with 1 and then 3 runners:
    signed in with the window never opened, with it open, and after it has
    closed. The window is a process of its own that ends when it closes,
    so what it costs goes with it."""
    log("memory: 1 and 3 runners; the window never opened, open, then closed")
    rows = []
    for n in (1, 3):
        if not r.driver:
            restart_app(r)
        pool = invoke(r, "get_state")["pools"][0]["ref"]
        invoke(r, "set_runner_count", {"pool": pool, "count": n})
        wait_for(f"{n} runners online at the coordinator", lambda: online_runners(r, n), 60)
        # Started as a login starts it: no window, no WebDriver.
        r.driver.quit()
        r.driver = None
        stop_app(r)
        registered = sum(1 for x in open(r.procs.log_path("sni-watcher")) if x.startswith("registered "))
        r.app_proc = r.procs.start(f"app-{n}-runners", [r.app])
        r.app_pid = r.app_proc.pid
        wait_for("the app's tray item", lambda: sni_menu(r, registered), 30)
        wait_for(f"{n} runners online again", lambda: online_runners(r, n), 60)
        assert not window_process(r), "a window process runs though no window was asked for"
        rows.append((f"{n} runner{'s' * (n > 1)}, signed in, the window never opened", settled_memory(r.app_pid)))
        # Opened as a person opens it from the tray or the launcher: a
        # second launch hands over to the running app.
        r.procs.run("second-launch", [r.app, "--show"], timeout=30)
        wait_for("the window", lambda: xdotool(r.env, "search", "--onlyvisible", "--name", "^Drover$"), 30)
        wait_for("its web process", lambda: any(name == "WebKitWebProcess" for _, name, _, _ in tree_memory(r.app_pid)), 30)
        rows.append((f"{n} runner{'s' * (n > 1)}, the window open", settled_memory(r.app_pid)))
        window = xdotool(r.env, "search", "--onlyvisible", "--name", "^Drover$").split("\n")[0]
        close_window(r.env["DISPLAY"], window)
        wait_for("the window's process to end", lambda: not window_process(r), 30)
        assert os.path.exists(f"/proc/{r.app_pid}"), "the app exited when its window closed"
        closed = settled_memory(r.app_pid)
        assert [name for _, name, _, _ in closed] == ["drover-desktop"], f"still running after the window closed: {closed}"
        rows.append((f"{n} runner{'s' * (n > 1)}, after the window closed", closed))
        menu = sni_menu(r, registered)
        assert menu and menu[0] == "Drover — Idle", f"the tray menu after the window closed: {menu}"
    lines = []
    for title, procs in rows:
        rss, pss = sum(x[2] for x in procs) / 1024, sum(x[3] for x in procs) / 1024
        lines.append(f"{title}: {len(procs)} processes, RSS {rss:.0f} MiB, PSS {pss:.0f} MiB")
        lines += [f"    {name:<22} pid {pid:<7} RSS {rs / 1024:6.1f} MiB  PSS {ps / 1024:6.1f} MiB" for pid, name, rs, ps in procs]
    with open(os.path.join(r.out, "memory.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for line in lines:
        log("   " + line)
    # For the steps after this one: the window again, through WebDriver.
    restart_app(r)


def settled_memory(pid):
    """The tree's memory once the window's end has settled: two readings
    half a second apart within 1 MiB of each other."""
    last = [None]

    def steady():
        rows = tree_memory(pid)
        total = sum(x[2] for x in rows)
        prev, last[0] = last[0], total
        return rows if prev is not None and abs(total - prev) < 1024 else None

    return wait_for("the app's memory to settle", steady, 30, 0.5)


def failure_evidence(r):
    try:
        if r.driver:
            r.driver.get_screenshot_as_file(os.path.join(r.logs, "failure-window.png"))
            with open(os.path.join(r.logs, "failure-page.html"), "w") as f:
                f.write(r.driver.page_source)
    except Exception as e:  # noqa: BLE001
        log(f"(no window screenshot: {e})")
    if r.env.get("DISPLAY"):
        subprocess.run(["import", "-window", "root", os.path.join(r.logs, "failure-screen.png")], env=r.env, timeout=30)


def inner(args):
    r = Run(args)
    started = time.monotonic()
    try:
        start_services(r)
        first_start(r)
        step1_pairing_link(r)
        step2_second_runner(r)
        step_link_while_signed_in(r)
        step3_job(r)
        step4_workspace(r)
        step4_people(r)
        step4_github(r)
        step_account(r)
        step5_keychain(r)
        tray(r)
        step6_sandbox(r)
        restarts(r)
        memory(r)
        step_quiet_hours(r)
        step_sleep(r)
        step_reconnect(r)
        step_revoked(r)
        log(f"passed in {time.monotonic() - started:.0f} s")
        return 0
    except (Failure, AssertionError, Exception) as e:  # noqa: BLE001
        log(f"FAILED: {type(e).__name__}: {e}")
        failure_evidence(r)
        log(f"logs and screenshots in {r.logs}")
        return 1
    finally:
        if r.driver:
            try:
                r.driver.quit()
            except Exception as e:  # noqa: BLE001
                log(f"(ending the WebDriver session: {e})")
        r.procs.stop_all()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True, help="the directory of drover-desktop, drover and drover-coordinator")
    p.add_argument("--out", required=True, help="screenshots, memory.txt and logs/ go here")
    p.add_argument("--app", help="the app's binary (default: BIN/drover-desktop), e.g. a release build")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--keep", action="store_true", help="keep the throwaway home if the run fails")
    args = p.parse_args()
    sys.exit(inner(args) if args.inner else outer(args))


if __name__ == "__main__":
    main()
