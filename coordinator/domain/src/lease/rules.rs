//! The lease rules (SPEC §2.5, §2.6) as one table of cases. Each runs
//! against `plan()` with no database (`plan_tests.rs`) and against the
//! store on a real database (`store::tests`): on SQLite that is `plan()`
//! behind the reads and the write, on PostgreSQL the `drover_lease`
//! function, so the two backends are held to the same rules.
//!
//! A case names runners, jobs and the requests of one lease batch, in
//! order; it expects each request's pick (a job's name, `-` for nothing,
//! `revoked`, `limit`) and whom each request's handler wakes (`` for no
//! one, `pool <pool> [requires]`, `runner <runner>`).
//!
//! (Over 300 lines: a table, one entry per rule.)

pub struct Runner {
    pub name: &'static str,
    pub pool: &'static str,
    /// Labels given at pairing.
    pub caps: &'static [&'static str],
    pub slots: u32,
    /// Leases it holds when the batch comes.
    pub held: u32,
    /// Capabilities it had when the jobs were submitted, and no longer.
    pub lost: &'static [&'static str],
    pub revoked: bool,
}

pub struct Job {
    pub name: &'static str,
    /// Its pool's queue, or (when `pinned`) its runner's.
    pub pool: &'static str,
    pub requires: &'static [&'static str],
    pub pinned: Option<&'static str>,
    pub priority: i64,
}

pub struct Case {
    pub name: &'static str,
    pub runners: &'static [Runner],
    /// In the order they were submitted.
    pub jobs: &'static [Job],
    /// The batch: one runner name per request.
    pub requests: &'static [&'static str],
    pub picks: &'static [&'static str],
    pub wakes: &'static [&'static str],
}

const fn runner(name: &'static str, pool: &'static str, caps: &'static [&'static str]) -> Runner {
    Runner {
        name,
        pool,
        caps,
        slots: 1,
        held: 0,
        lost: &[],
        revoked: false,
    }
}

impl Runner {
    const fn slots(self, slots: u32) -> Self {
        Self { slots, ..self }
    }
    const fn holding(self, held: u32) -> Self {
        Self { held, ..self }
    }
    const fn lost(self, lost: &'static [&'static str]) -> Self {
        Self { lost, ..self }
    }
    const fn revoked(self) -> Self {
        Self {
            revoked: true,
            ..self
        }
    }
}

const fn job(name: &'static str, pool: &'static str, requires: &'static [&'static str]) -> Job {
    Job {
        name,
        pool,
        requires,
        pinned: None,
        priority: 0,
    }
}

const fn pinned(
    name: &'static str,
    runner: &'static str,
    requires: &'static [&'static str],
) -> Job {
    Job {
        name,
        pool: "",
        requires,
        pinned: Some(runner),
        priority: 0,
    }
}

impl Job {
    const fn priority(self, priority: i64) -> Self {
        Self { priority, ..self }
    }
}

const ANY: &[&str] = &[];

pub const CASES: &[Case] = &[
    Case {
        name: "fifo in request order: the earliest request gets the head",
        runners: &[runner("r1", "p", ANY), runner("r2", "p", ANY)],
        jobs: &[job("j1", "p", ANY), job("j2", "p", ANY)],
        requests: &["r2", "r1"],
        picks: &["j1", "j2"],
        wakes: &["", ""],
    },
    Case {
        name: "an empty queue gives nothing",
        runners: &[runner("r1", "p", ANY)],
        jobs: &[],
        requests: &["r1"],
        picks: &["-"],
        wakes: &[""],
    },
    Case {
        name: "jobs behind wake one waiter each: for the next job in line",
        runners: &[runner("r1", "p", ANY)],
        jobs: &[
            job("j1", "p", ANY),
            job("j2", "p", &["gpu"]),
            job("j3", "p", ANY),
        ],
        requests: &["r1"],
        picks: &["j1"],
        wakes: &["pool p gpu"],
    },
    Case {
        name: "a runner skips jobs it cannot run",
        runners: &[runner("plain", "p", ANY)],
        jobs: &[job("gpu-job", "p", &["gpu"]), job("j2", "p", ANY)],
        requests: &["plain"],
        picks: &["j2"],
        wakes: &[""],
    },
    Case {
        name: "capabilities route each job to a runner that meets it",
        runners: &[
            runner("plain", "p", ANY),
            runner("gpu", "p", &["gpu", "os=linux"]),
        ],
        jobs: &[job("needs-gpu", "p", &["gpu"]), job("any", "p", ANY)],
        requests: &["plain", "gpu"],
        picks: &["any", "needs-gpu"],
        wakes: &["", ""],
    },
    Case {
        name: "a bare requirement is met by any value",
        runners: &[runner("linux", "p", &["os=linux"])],
        jobs: &[job("mac", "p", &["os=macos"]), job("any-os", "p", &["os"])],
        requests: &["linux"],
        picks: &["any-os"],
        wakes: &[""],
    },
    Case {
        name: "nobody capable leaves the job queued",
        runners: &[runner("a", "p", ANY), runner("b", "p", &["docker"])],
        jobs: &[job("gpu-job", "p", &["gpu"])],
        requests: &["a", "b"],
        picks: &["-", "-"],
        wakes: &["", ""],
    },
    Case {
        name: "pinned jobs come before the pool (whose queue is then not read)",
        runners: &[runner("r1", "p", ANY)],
        jobs: &[job("pool-job", "p", ANY), pinned("mine", "r1", ANY)],
        requests: &["r1"],
        picks: &["mine"],
        wakes: &[""],
    },
    Case {
        name: "a pinned job goes only to its runner",
        runners: &[runner("r1", "p", ANY), runner("r2", "p", ANY)],
        jobs: &[job("pool-job", "p", ANY), pinned("for-r2", "r2", ANY)],
        requests: &["r1", "r2"],
        picks: &["pool-job", "for-r2"],
        wakes: &["", ""],
    },
    Case {
        name: "a second pinned job wakes its runner",
        runners: &[runner("r1", "p", ANY).slots(2)],
        jobs: &[pinned("first", "r1", ANY), pinned("second", "r1", ANY)],
        requests: &["r1"],
        picks: &["first"],
        wakes: &["runner r1"],
    },
    Case {
        name: "one runner with two slots takes two pinned jobs",
        runners: &[runner("r1", "p", ANY).slots(2)],
        jobs: &[pinned("first", "r1", ANY), pinned("second", "r1", ANY)],
        requests: &["r1", "r1"],
        picks: &["first", "second"],
        // The first saw the second behind it before the next request took it.
        wakes: &["runner r1", ""],
    },
    Case {
        name: "a pinned job its runner can no longer run is skipped",
        runners: &[runner("r1", "p", ANY).lost(&["gpu"])],
        jobs: &[pinned("gpu", "r1", &["gpu"]), job("pool-job", "p", ANY)],
        requests: &["r1"],
        picks: &["pool-job"],
        wakes: &[""],
    },
    Case {
        name: "slots limit the requests of one runner",
        runners: &[runner("r1", "p", ANY).slots(2).holding(1)],
        jobs: &[job("j1", "p", ANY), job("j2", "p", ANY)],
        requests: &["r1", "r1"],
        picks: &["j1", "limit"],
        wakes: &["pool p", ""],
    },
    Case {
        name: "a request takes its slot even when it finds nothing",
        runners: &[runner("r1", "p", ANY)],
        jobs: &[],
        requests: &["r1", "r1"],
        picks: &["-", "limit"],
        wakes: &["", ""],
    },
    Case {
        name: "a full runner leases nothing; the job goes to the runner with room",
        runners: &[runner("r1", "p", ANY).holding(1), runner("r2", "p", ANY)],
        jobs: &[job("j1", "p", ANY)],
        requests: &["r1", "r2"],
        picks: &["limit", "j1"],
        wakes: &["", ""],
    },
    Case {
        name: "a revoked runner gets nothing",
        runners: &[runner("gone", "p", ANY).revoked(), runner("r1", "p", ANY)],
        jobs: &[job("j1", "p", ANY)],
        requests: &["gone", "r1"],
        picks: &["revoked", "j1"],
        wakes: &["", ""],
    },
    Case {
        name: "requests compete for one job: one job, one lease",
        runners: &[
            runner("r1", "p", ANY),
            runner("r2", "p", ANY),
            runner("r3", "p", ANY),
        ],
        jobs: &[job("only", "p", ANY)],
        requests: &["r3", "r1", "r2"],
        picks: &["only", "-", "-"],
        wakes: &["", "", ""],
    },
    Case {
        name: "pools are served from their own queues",
        runners: &[runner("a1", "a", ANY), runner("b1", "b", ANY)],
        jobs: &[
            job("a-job", "a", ANY),
            job("b-job", "b", ANY),
            job("b-next", "b", ANY),
        ],
        requests: &["b1", "a1"],
        picks: &["b-job", "a-job"],
        wakes: &["pool b", ""],
    },
    Case {
        name: "priority first, then the order of submission",
        runners: &[runner("r1", "p", ANY).slots(3)],
        jobs: &[
            job("older", "p", ANY),
            job("urgent", "p", ANY).priority(10),
            job("newer", "p", ANY),
        ],
        requests: &["r1", "r1"],
        picks: &["urgent", "older"],
        wakes: &["pool p", ""],
    },
    Case {
        name: "a pinned job of higher priority comes first among the pinned",
        runners: &[runner("r1", "p", ANY).slots(2)],
        jobs: &[
            pinned("low", "r1", ANY),
            pinned("high", "r1", ANY).priority(5),
        ],
        requests: &["r1", "r1"],
        picks: &["high", "low"],
        wakes: &["runner r1", ""],
    },
];

/// A wake as the table writes it, given how to name a pool and a runner.
pub fn wake_text(
    wake: Option<&crate::wake::Wake>,
    pool: impl Fn(&str) -> String,
    runner: impl Fn(&str) -> String,
) -> String {
    use crate::wake::Wake;
    match wake {
        None => String::new(),
        Some(Wake::Pool { runtime, requires }) => {
            let mut text = format!("pool {}", pool(runtime.as_str()));
            if !requires.is_empty() {
                text.push(' ');
                text.push_str(&requires.join(","));
            }
            text
        }
        Some(Wake::Runner { runner: r, .. }) => format!("runner {}", runner(r.as_str())),
    }
}
