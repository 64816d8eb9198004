//! Recorded executions (job, attempt, runner, start, end) and the checks
//! the torture tests make on them: no two executions of a job overlap, and
//! a job runs again only after a lease was lost.

use super::*;

/// A job script that runs `body` and records its execution in `record`:
/// a `start` line before and an `end` line after, each
/// `<job> <attempt> <runner> start|end <unix ns>`.
pub fn recorded(record: &Path, body: &str) -> String {
    let line = |what: &str| {
        format!(
            "echo \"$DROVER_JOB_ID $DROVER_ATTEMPT $DROVER_RUNNER_ID {what} $(date +%s%N)\" >> {}",
            record.display()
        )
    };
    format!("{}; {body}; {}", line("start"), line("end"))
}

/// One run of a job, as its script recorded it (see [`recorded`]).
#[derive(Debug, Clone)]
pub struct Execution {
    pub job: String,
    pub attempt: u32,
    pub runner: String,
    /// Unix time in ns.
    pub start: u128,
    /// None if it never got to its end (its process was killed).
    pub end: Option<u128>,
}

/// Nanoseconds since the Unix epoch, comparable with [`Execution`] times.
pub fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos()
}

/// Every execution a record holds, by job, in order of start.
pub fn read_executions(record: &Path) -> std::collections::HashMap<String, Vec<Execution>> {
    let mut runs: std::collections::HashMap<(String, u32, String), Execution> =
        std::collections::HashMap::new();
    let mut starts: std::collections::HashMap<(String, u32), usize> =
        std::collections::HashMap::new();
    for line in read_lines(record) {
        let f: Vec<&str> = line.split(' ').collect();
        let [job, attempt, runner, what, ns] = f[..] else {
            panic!("malformed execution line {line:?}");
        };
        let attempt: u32 = attempt.parse().expect("attempt");
        let ns: u128 = ns.parse().expect("ns");
        let key = (job.to_owned(), attempt, runner.to_owned());
        match what {
            "start" => {
                *starts.entry((job.to_owned(), attempt)).or_default() += 1;
                let earlier = runs.insert(
                    key,
                    Execution {
                        job: job.to_owned(),
                        attempt,
                        runner: runner.to_owned(),
                        start: ns,
                        end: None,
                    },
                );
                assert!(
                    earlier.is_none(),
                    "{job} attempt {attempt} started twice on {runner}"
                );
            }
            "end" => {
                let run = runs
                    .get_mut(&key)
                    .unwrap_or_else(|| panic!("{line:?} has no start"));
                run.end = Some(ns);
            }
            _ => panic!("malformed execution line {line:?}"),
        }
    }
    for ((job, attempt), n) in starts {
        assert_eq!(
            n, 1,
            "{job} attempt {attempt} ran {n} times (one lease, two runners)"
        );
    }
    let mut by_job: std::collections::HashMap<String, Vec<Execution>> =
        std::collections::HashMap::new();
    for run in runs.into_values() {
        by_job.entry(run.job.clone()).or_default().push(run);
    }
    for runs in by_job.values_mut() {
        runs.sort_by_key(|r| r.start);
    }
    by_job
}

/// Checks an executions record against the jobs submitted (`ids`): every
/// job ran, no other job ran, no attempt ran twice, and each job's attempts
/// rise in the order they started. Returns the executions by job; see
/// [`LostLeases::check`] for overlaps and re-runs.
pub fn check_executions(
    record: &Path,
    ids: &[String],
) -> std::collections::HashMap<String, Vec<Execution>> {
    let by_job = read_executions(record);
    for id in ids {
        let runs = by_job
            .get(id)
            .unwrap_or_else(|| panic!("job {id} never ran"));
        for pair in runs.windows(2) {
            assert!(
                pair[0].attempt < pair[1].attempt,
                "{id} ran attempt {} after attempt {}",
                pair[1].attempt,
                pair[0].attempt
            );
        }
    }
    assert_eq!(
        by_job.len(),
        ids.len(),
        "executions recorded for jobs not submitted"
    );
    by_job
}

/// The executions that were run again: every one but the last of each job.
pub fn superseded(by_job: &std::collections::HashMap<String, Vec<Execution>>) -> Vec<&Execution> {
    by_job
        .values()
        .flat_map(|runs| &runs[..runs.len() - 1])
        .collect()
}

/// Why a runner may have lost a lease, to explain a re-run.
#[derive(Debug, Default)]
pub struct LostLeases {
    /// Runners whose process was killed, and when (unix ns).
    killed: Vec<(std::collections::HashSet<String>, u128)>,
    /// Runners whose process was started again, and when (unix ns).
    restarted: Vec<(std::collections::HashSet<String>, u128)>,
    /// (runner, job) pairs a runner reported losing: it stopped the job,
    /// abandoned it, or had its result refused.
    reported: std::collections::HashSet<(String, String)>,
    /// (runner, job) → when the runner said it had stopped the job (its
    /// process group is gone by then).
    stopped: std::collections::HashMap<(String, String), u128>,
}

impl LostLeases {
    /// The runners `p` has brought online, killed now (call right after `kill9`).
    pub fn killed(&mut self, p: &RunnerProcess) {
        self.killed.push((p.runner_ids(), unix_ns()));
    }

    /// `p`'s runners, started again now (call right before `restart`).
    pub fn restarted(&mut self, p: &RunnerProcess) {
        self.restarted.push((p.runner_ids(), unix_ns()));
    }

    /// Whether a killed process explains `run`: its runner was killed, and
    /// the run began before that, or just after as an orphan (a job process
    /// is its own process group, so a SIGKILLed runner's job may get to its
    /// first line after the kill), and before the runner came back.
    fn killed_during(&self, run: &Execution) -> bool {
        const ORPHAN_START_NS: u128 = 5_000_000_000;
        self.killed.iter().any(|(runners, at)| {
            let back = self
                .restarted
                .iter()
                .filter(|(again, when)| again.contains(&run.runner) && when > at)
                .map(|(_, when)| *when)
                .min()
                .unwrap_or(u128::MAX);
            runners.contains(&run.runner) && run.start < (at + ORPHAN_START_NS).min(back)
        })
    }

    /// What `p`'s runners said about leases they lost.
    pub fn reported_by(&mut self, p: &RunnerProcess) {
        for (at, line) in p.timed_lines() {
            let Some((runner, event)) = line
                .strip_prefix("runner ")
                .and_then(|l| l.split_once(": "))
            else {
                continue;
            };
            let lost = event.strip_prefix("lost the lease on ");
            let job = lost
                .or_else(|| event.strip_prefix("abandoned "))
                .or_else(|| event.strip_prefix("result of "));
            let Some(job) = job.and_then(|j| j.split([' ', ':']).next()) else {
                continue;
            };
            let key = (runner.to_owned(), job.to_owned());
            if lost.is_some_and(|l| l.ends_with(": stopped the job")) {
                self.stopped.entry(key.clone()).or_insert(at);
            }
            self.reported.insert(key);
        }
    }

    /// The executions in `reruns` that no lost lease explains: their runner
    /// was not killed after they started, and did not say it lost that job.
    pub fn unexplained<'a>(&self, reruns: &[&'a Execution]) -> Vec<&'a Execution> {
        reruns
            .iter()
            .copied()
            .filter(|run| {
                !self.killed_during(run)
                    && !self
                        .reported
                        .contains(&(run.runner.clone(), run.job.clone()))
            })
            .collect()
    }

    /// Pairs of executions of one job that may have overlapped in time: the
    /// earlier one did not end (by its own record, or by its runner's word
    /// that it stopped it) before the later one started.
    pub fn overlapping<'a>(
        &self,
        runs: &'a std::collections::HashMap<String, Vec<Execution>>,
    ) -> Vec<(&'a Execution, &'a Execution)> {
        let mut out = Vec::new();
        for job_runs in runs.values() {
            for pair in job_runs.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                let end = a.end.or_else(|| {
                    self.stopped
                        .get(&(a.runner.clone(), a.job.clone()))
                        .copied()
                });
                if end.is_none_or(|end| end >= b.start) {
                    out.push((a, b));
                }
            }
        }
        out
    }

    /// Asserts that executions of one job never overlapped in time and that
    /// each re-run followed a lost lease. A live runner may still be
    /// retrying the result it will be refused, so its word is awaited (with
    /// a deadline).
    pub async fn check(
        mut self,
        runs: &std::collections::HashMap<String, Vec<Execution>>,
        procs: &[RunnerProcess],
    ) {
        let reruns = superseded(runs);
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            for p in procs {
                self.reported_by(p);
            }
            let (left, overlaps) = (self.unexplained(&reruns), self.overlapping(runs));
            if left.is_empty() && overlaps.is_empty() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "executions that overlap: {overlaps:?}; \
                 re-run, but their runner neither died nor lost its lease: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One connection to a coordinator's database, kept open between polls:
/// a test polling every 10 ms must not start a PostgreSQL backend each time.
pub enum DbProbe {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

const FINISHED: &str =
    "SELECT COUNT(*) FROM jobs WHERE state NOT IN ('queued', 'leased', 'running')";

impl DbProbe {
    pub async fn open(c: &Coordinator) -> Self {
        match c.options.backend {
            Backend::Sqlite => Self::Sqlite(
                sqlx::sqlite::SqlitePoolOptions::new()
                    // sqlx 0.8.6's reaper can spin forever (see the store's pool_options).
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .max_connections(1)
                    .connect(&format!("{}?mode=ro", c.database))
                    .await
                    .expect("connect"),
            ),
            Backend::Postgres => Self::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .max_connections(1)
                    .connect(&c.database)
                    .await
                    .expect("connect"),
            ),
        }
    }

    /// How many jobs have ended.
    pub async fn finished_jobs(&self) -> usize {
        let n: i64 = match self {
            Self::Sqlite(pool) => sqlx::query_scalar(FINISHED).fetch_one(pool).await,
            Self::Postgres(pool) => sqlx::query_scalar(FINISHED).fetch_one(pool).await,
        }
        .expect("count finished jobs");
        n as usize
    }
}

/// Each of `jobs` jobs is metered, and each attempt that started exactly
/// once: a job has as many usage lines as attempts (an attempt that never
/// started gives its number back, and is not metered).
pub async fn check_metering(c: &Coordinator, jobs: usize) {
    let off = c
        .query_text(
            "SELECT j.id || ': attempt ' || CAST(j.attempt AS TEXT) || ', usage lines '
                 || CAST((SELECT COUNT(*) FROM usage u WHERE u.job_id = j.id) AS TEXT)
             FROM jobs j WHERE j.attempt <> (SELECT COUNT(*) FROM usage u WHERE u.job_id = j.id)",
        )
        .await;
    assert!(
        off.is_empty(),
        "metered other than once per attempt: {off:?}"
    );
    let metered = c
        .query_text("SELECT CAST(COUNT(DISTINCT job_id) AS TEXT) FROM usage")
        .await;
    assert_eq!(metered, [Some(jobs.to_string())], "every job is metered");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(lines: &[&str]) -> (TempDir, PathBuf) {
        let dir = TempDir::new("record");
        let path = dir.path().join("executions");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        (dir, path)
    }

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_rerun_after_the_first_execution_ended_is_fine() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 1 rn_a end 200",
            "j1 2 rn_b start 300",
            "j1 2 rn_b end 400",
        ]);
        let runs = check_executions(&path, &ids(&["j1"]));
        let again = superseded(&runs);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].runner, "rn_a");
        let mut lost = LostLeases::default();
        assert_eq!(lost.unexplained(&again).len(), 1, "no lost lease yet");
        lost.reported.insert(("rn_a".to_owned(), "j1".to_owned()));
        assert!(lost.unexplained(&again).is_empty());
    }

    #[test]
    fn overlapping_executions_of_one_job_are_caught() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 2 rn_b start 150",
            "j1 1 rn_a end 200",
            "j1 2 rn_b end 400",
        ]);
        let runs = check_executions(&path, &ids(&["j1"]));
        assert_eq!(LostLeases::default().overlapping(&runs).len(), 1);
    }

    #[test]
    fn an_execution_with_no_end_overlaps_unless_its_runner_stopped_it_in_time() {
        let (_d, path) = record(&["j1 1 rn_a start 100", "j1 2 rn_b start 150"]);
        let runs = check_executions(&path, &ids(&["j1"]));
        let mut lost = LostLeases::default();
        assert_eq!(lost.overlapping(&runs).len(), 1, "no end known");
        let key = ("rn_a".to_owned(), "j1".to_owned());
        lost.stopped.insert(key.clone(), 160);
        assert_eq!(lost.overlapping(&runs).len(), 1, "stopped too late");
        lost.stopped.insert(key, 140);
        assert!(lost.overlapping(&runs).is_empty());
    }

    #[test]
    #[should_panic(expected = "ran 2 times")]
    fn one_attempt_on_two_runners_is_caught() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 1 rn_a end 120",
            "j1 1 rn_b start 150",
            "j1 1 rn_b end 160",
        ]);
        check_executions(&path, &ids(&["j1"]));
    }

    #[test]
    fn a_rerun_with_no_lost_lease_is_caught() {
        let (_d, path) = record(&[
            "j1 1 rn_a start 100",
            "j1 1 rn_a end 200",
            "j1 2 rn_b start 300",
            "j1 2 rn_b end 400",
        ]);
        let runs = check_executions(&path, &ids(&["j1"]));
        let mut lost = LostLeases::default();
        lost.killed.push((["rn_a".to_owned()].into(), 50));
        lost.restarted.push((["rn_a".to_owned()].into(), 80));
        assert_eq!(
            lost.unexplained(&superseded(&runs)).len(),
            1,
            "killed, and back before the execution started"
        );
        lost.killed.push((["rn_a".to_owned()].into(), 90));
        assert!(
            lost.unexplained(&superseded(&runs)).is_empty(),
            "killed again just before it started: an orphan of the kill"
        );
    }
}
