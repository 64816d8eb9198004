//! The tray menu as plain data, built from the app's state: the shell
//! renders it with Tauri's tray and routes clicks back by id. Kept apart
//! from Tauri so it is tested without a display.

use crate::supervisor::{AppState, PoolKind, Status};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Item {
        id: String,
        label: String,
        enabled: bool,
    },
    Separator,
}

/// What a click on a menu item asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Add(String),
    Remove(String),
    TogglePause,
    Settings,
    Quit,
}

pub fn status_label(status: Status) -> &'static str {
    match status {
        Status::SignedOut => "Signed out",
        Status::Idle => "Idle",
        Status::Busy => "Busy",
        Status::Offline => "Offline",
        Status::Paused => "Paused",
    }
}

/// The tray icon's file for a status.
pub fn icon_name(status: Status) -> &'static str {
    match status {
        Status::Idle => "tray-idle.png",
        Status::Busy => "tray-busy.png",
        Status::Offline | Status::SignedOut => "tray-offline.png",
        Status::Paused => "tray-paused.png",
    }
}

fn item(id: impl Into<String>, label: impl Into<String>, enabled: bool) -> Entry {
    Entry::Item {
        id: id.into(),
        label: label.into(),
        enabled,
    }
}

fn runners(n: usize) -> String {
    match n {
        1 => "1 runner".to_owned(),
        n => format!("{n} runners"),
    }
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub fn build(state: &AppState) -> Vec<Entry> {
    // Paused on its own: says why ("Paused — on battery power").
    let status = match (&state.held, state.status) {
        (Some(why), Status::Paused) if !state.paused => {
            format!("Drover — Paused: {}", lowercase_first(why))
        }
        _ => format!("Drover — {}", status_label(state.status)),
    };
    let mut menu = vec![item("status", status, false)];
    for pool in &state.pools {
        menu.push(Entry::Separator);
        let kind = match (pool.kind, pool.sandboxed) {
            (PoolKind::Personal, _) => "",
            (PoolKind::Workspace, Some(false)) => " (workspace, unsandboxed)",
            (PoolKind::Workspace, _) => " (workspace)",
        };
        menu.push(item(
            format!("pool:{}", pool.reference),
            format!("{}{kind} — {}", pool.name, runners(pool.runners)),
            false,
        ));
        for runner in &pool.live {
            let doing = if runner.draining {
                match runner.current_jobs.as_slice() {
                    [] => "stopping".to_owned(),
                    jobs => format!("finishing {}", jobs.join(", ")),
                }
            } else if !runner.online {
                "connecting".to_owned()
            } else {
                match runner.current_jobs.as_slice() {
                    [] if state.status == Status::Paused => "paused".to_owned(),
                    [] => "idle".to_owned(),
                    jobs => format!("running {}", jobs.join(", ")),
                }
            };
            // By the name the window and the coordinator show; the id
            // until its first hello has told the name.
            let name = if runner.name.is_empty() {
                &runner.id
            } else {
                &runner.name
            };
            menu.push(item(
                format!("runner:{}", runner.id),
                format!("    {name} — {doing}"),
                false,
            ));
        }
        let live = !state.quitting;
        menu.push(item(format!("add:{}", pool.reference), "Add runner", live));
        menu.push(item(
            format!("remove:{}", pool.reference),
            "Remove runner",
            live && pool.runners > 0,
        ));
    }
    menu.push(Entry::Separator);
    if !state.pools.is_empty() {
        let label = if state.paused {
            "Resume all"
        } else {
            "Pause all"
        };
        menu.push(item("pause", label, !state.quitting));
    }
    menu.push(item("settings", "Settings…", true));
    let quit = if state.quitting {
        "Quit now (stop running jobs)"
    } else {
        "Quit"
    };
    menu.push(item("quit", quit, true));
    menu
}

pub fn action(id: &str) -> Option<Action> {
    match id {
        "pause" => Some(Action::TogglePause),
        "settings" => Some(Action::Settings),
        "quit" => Some(Action::Quit),
        _ => match id.split_once(':') {
            Some(("add", pool)) => Some(Action::Add(pool.to_owned())),
            Some(("remove", pool)) => Some(Action::Remove(pool.to_owned())),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::{LocalPool, LocalRunner, Settings};

    fn state(status: Status, pools: Vec<LocalPool>) -> AppState {
        AppState {
            status,
            paused: status == Status::Paused,
            on_battery: false,
            metered: false,
            quiet: false,
            held: None,
            quitting: false,
            account: None,
            pools,
            settings: Settings::default(),
            pending: None,
            link_refused: None,
            activity: vec![],
            signed_out: None,
        }
    }

    fn pool(runners: Vec<LocalRunner>) -> LocalPool {
        LocalPool {
            coordinator: "https://c.example".into(),
            reference: "self:ann:default".into(),
            runtime_id: "rt_1".into(),
            name: "default".into(),
            kind: PoolKind::Personal,
            runners: runners.len(),
            slots: 1,
            labels: vec![],
            live: runners,
            allow_unsandboxed: false,
            sandboxed: Some(false),
            refused: None,
        }
    }

    fn runner(id: &str, jobs: &[&str]) -> LocalRunner {
        LocalRunner {
            id: id.into(),
            name: String::new(),
            online: true,
            draining: false,
            current_jobs: jobs.iter().map(|j| j.to_string()).collect(),
        }
    }

    fn labels(menu: &[Entry]) -> Vec<String> {
        menu.iter()
            .map(|e| match e {
                Entry::Item { label, enabled, .. } => {
                    format!("{label}{}", if *enabled { "" } else { " [-]" })
                }
                Entry::Separator => "---".into(),
            })
            .collect()
    }

    #[test]
    fn a_busy_pool_shows_its_count_what_each_runner_runs_and_add_remove() {
        let menu = build(&state(
            Status::Busy,
            vec![pool(vec![runner("rn_1", &["job_9"]), runner("rn_2", &[])])],
        ));
        assert_eq!(
            labels(&menu),
            [
                "Drover — Busy [-]",
                "---",
                "default — 2 runners [-]",
                "    rn_1 — running job_9 [-]",
                "    rn_2 — idle [-]",
                "Add runner",
                "Remove runner",
                "---",
                "Pause all",
                "Settings…",
                "Quit",
            ]
        );
        assert_eq!(icon_name(Status::Busy), "tray-busy.png");
    }

    #[test]
    fn a_workspace_pool_lent_without_a_sandbox_says_so() {
        let mut lent = pool(vec![]);
        lent.kind = PoolKind::Workspace;
        let mut boxed = lent.clone();
        boxed.sandboxed = Some(true);
        let l = labels(&build(&state(Status::Idle, vec![lent, boxed])));
        assert!(
            l.contains(&"default (workspace, unsandboxed) — 0 runners [-]".to_owned()),
            "{l:?}"
        );
        assert!(
            l.contains(&"default (workspace) — 0 runners [-]".to_owned()),
            "{l:?}"
        );
    }

    #[test]
    fn paused_offers_resume_and_an_empty_pool_cannot_shrink() {
        let menu = build(&state(Status::Paused, vec![pool(vec![])]));
        let l = labels(&menu);
        assert_eq!(l[2], "default — 0 runners [-]");
        let one = build(&state(Status::Idle, vec![pool(vec![runner("rn_1", &[])])]));
        assert_eq!(labels(&one)[2], "default — 1 runner [-]");
        assert!(l.contains(&"Resume all".to_owned()), "{l:?}");
        assert!(l.contains(&"Remove runner [-]".to_owned()), "{l:?}");
        assert_eq!(icon_name(Status::Paused), "tray-paused.png");
    }

    #[test]
    fn paused_on_its_own_says_why_and_offers_pause_not_resume() {
        let mut held = state(Status::Paused, vec![pool(vec![runner("rn_1", &[])])]);
        held.paused = false;
        held.held = Some("Quiet hours until 07:00".into());
        let l = labels(&build(&held));
        assert_eq!(l[0], "Drover — Paused: quiet hours until 07:00 [-]");
        assert_eq!(l[3], "    rn_1 — paused [-]");
        assert!(l.contains(&"Pause all".to_owned()), "{l:?}");
    }

    #[test]
    fn quitting_offers_a_forced_quit_and_nothing_else_to_change() {
        let mut s = state(Status::Busy, vec![pool(vec![runner("rn_1", &["job_1"])])]);
        s.quitting = true;
        s.pools[0].live[0].draining = true;
        let l = labels(&build(&s));
        assert!(
            l.contains(&"Quit now (stop running jobs)".to_owned()),
            "{l:?}"
        );
        assert!(
            l.contains(&"    rn_1 — finishing job_1 [-]".to_owned()),
            "{l:?}"
        );
        assert!(l.contains(&"Add runner [-]".to_owned()), "{l:?}");
        assert!(l.contains(&"Pause all [-]".to_owned()), "{l:?}");
    }

    #[test]
    fn signed_out_has_only_settings_and_quit() {
        let l = labels(&build(&state(Status::SignedOut, vec![])));
        assert_eq!(l, ["Drover — Signed out [-]", "---", "Settings…", "Quit"]);
    }

    #[test]
    fn clicks_map_to_actions() {
        assert_eq!(
            action("add:self:ann:default"),
            Some(Action::Add("self:ann:default".into()))
        );
        assert_eq!(
            action("remove:ws:acme:build"),
            Some(Action::Remove("ws:acme:build".into()))
        );
        assert_eq!(action("pause"), Some(Action::TogglePause));
        assert_eq!(action("runner:rn_1"), None);
        assert_eq!(action("status"), None);
    }
}
