//! The headless runner as a service on macOS (a launchd plist) and on
//! Windows (a Task Scheduler task), as runner-core/cli/packaging ships
//! them: each file is well-formed (read by Python's plistlib and
//! ElementTree), and the command line it starts is one `drover runner`
//! takes: run here with the same arguments, it gets past parsing them and
//! stops only at what this machine lacks (the token file the README's
//! steps put in place).

use std::path::Path;
use std::process::Command;

use drover_tests::*;

/// What `script` (Python) prints, given `file`.
fn python(script: &str, file: &Path) -> String {
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(file)
        .output()
        .expect("python3 runs");
    stdout_ok(&out)
}

/// `drover` with `args` (the service's, less the program): refused for the
/// missing token file, not for an argument.
fn takes_arguments(args: &[String], token_file: &str) {
    let out = Command::new(bin("drover"))
        .args(args)
        .env_remove("DROVER_TOKEN")
        .output()
        .expect("drover runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        !said.contains("Usage:") && !said.contains("unexpected argument"),
        "an argument was refused: {said}"
    );
    assert!(
        said.contains(token_file),
        "stopped at the token file: {said}"
    );
}

#[test]
fn the_launchd_plist_starts_a_runner_drover_accepts() {
    let plist = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runner-core/cli/packaging/macos/com.drover.runner.plist");
    let read = "import json, plistlib, sys; p = plistlib.load(open(sys.argv[1], 'rb')); \
                print(json.dumps([p['Label'], p['RunAtLoad'], p['KeepAlive'], p['ProgramArguments']]))";
    let (label, at_load, keep_alive, args): (String, bool, bool, Vec<String>) =
        serde_json::from_str(&python(read, &plist)).unwrap();
    assert_eq!(label, "com.drover.runner");
    assert!(at_load && keep_alive, "started at boot and kept running");
    assert_eq!(args[..2], ["/usr/local/bin/drover", "runner"]);
    let sandbox = args
        .iter()
        .position(|a| a == "--sandbox")
        .expect("--sandbox");
    assert_eq!(args[sandbox + 1], "sandbox-exec");
    takes_arguments(&args[1..], "/usr/local/etc/drover/runner.token");
}

#[test]
fn the_windows_task_starts_a_runner_drover_accepts() {
    let xml = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../runner-core/cli/packaging/windows/drover-runner.xml");
    let read = "import json, sys, xml.etree.ElementTree as E; \
                ns = {'t': 'http://schemas.microsoft.com/windows/2004/02/mit/task'}; \
                r = E.parse(sys.argv[1]).getroot(); \
                print(json.dumps([r.find('.//t:Exec/t:Command', ns).text, \
                r.find('.//t:Exec/t:Arguments', ns).text, \
                r.find('.//t:Settings/t:ExecutionTimeLimit', ns).text, \
                r.find('.//t:Triggers/t:BootTrigger', ns) is not None]))";
    let (command, arguments, limit, at_boot): (String, String, String, bool) =
        serde_json::from_str(&python(read, &xml)).unwrap();
    assert!(command.ends_with(r"\drover.exe"), "{command}");
    assert_eq!(limit, "PT0S", "never timed out");
    assert!(at_boot, "started at boot");
    let args: Vec<String> = arguments.split_whitespace().map(String::from).collect();
    assert_eq!(args[0], "runner");
    takes_arguments(&args, r"C:\ProgramData\Drover\runner.token");
}
