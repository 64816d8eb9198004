//! Signals to a job's process group.

pub(super) fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we made;
    // it has no memory-safety preconditions.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Signals every process of group `pgid` but its leader. A sandboxed job's
/// leader is bwrap, which would die of a SIGTERM and take the sandbox with
/// it, cutting the job's grace short; the job itself is in the group too.
/// The group is stopped meanwhile, so no process it starts escapes the
/// signal while `/proc` is read.
pub(super) fn signal_group_but_leader(pgid: i32, signal: i32) {
    signal_group(pgid, libc::SIGSTOP);
    let pids: Vec<i32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid| *pid != pgid)
        .collect();
    for pid in pids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold anything but `)` ends it last.
        let group = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<i32>().ok());
        if group == Some(pgid) {
            // SAFETY: kill(2) on a process of the group we made; no memory involved.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
    signal_group(pgid, libc::SIGCONT);
}
