//! The coordinator's source keeps the shape ARCHITECTURE.md describes: these
//! read the source files, so a change that breaks a boundary fails here.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path, text));
        }
    }
    out
}

fn is_test_file(path: &Path) -> bool {
    path.file_stem()
        .is_some_and(|s| s.to_string_lossy().ends_with("tests"))
}

#[test]
fn store_and_dispatch_do_not_import_each_other() {
    let mut bad = Vec::new();
    for (path, text) in sources(&src().join("store")) {
        if text.contains("crate::dispatch") {
            bad.push(format!("{} imports dispatch", path.display()));
        }
    }
    let dispatch = std::fs::read_to_string(src().join("dispatch.rs")).unwrap();
    if dispatch.contains("crate::store") {
        bad.push("dispatch.rs imports store".into());
    }
    // The leaf both use imports neither.
    let wake = std::fs::read_to_string(src().join("wake.rs")).unwrap();
    if wake.contains("crate::store") || wake.contains("crate::dispatch") {
        bad.push("wake.rs imports store or dispatch".into());
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_store_returns_no_wire_types() {
    let mut bad = Vec::new();
    for (path, text) in sources(&src().join("store")) {
        if is_test_file(&path) {
            continue;
        }
        // Inline test modules may build wire requests.
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let returns = line.split_once("->").map_or("", |(_, r)| r);
            if returns.contains("wire::") {
                bad.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(bad.is_empty(), "build wire shapes in http::dto: {bad:#?}");
}

#[test]
fn only_the_backend_modules_name_a_backend() {
    let store = src().join("store");
    let allowed = ["mod.rs", "sqlite.rs", "postgres.rs"];
    let mut bad = Vec::new();
    for (path, text) in sources(&store) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let top = path.parent() == Some(store.as_path());
        if is_test_file(&path) || (top && allowed.contains(&name.as_str())) {
            continue;
        }
        if text.contains("Backend::") || text.contains(".backend ==") {
            bad.push(path.display().to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "put backend differences in Dialect: {bad:#?}"
    );
}

#[test]
fn long_files_say_why() {
    // Every Rust file of the workspace, not only the coordinator's.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = [
        "coordinator/src",
        "coordinator/tests",
        "runner-core/src",
        "runner-core/cli/src",
        "runner-core/wire/src",
        "tests/src",
        "tests/tests",
    ];
    let mut bad = Vec::new();
    for dir in dirs {
        for (path, text) in sources(&root.join(dir)) {
            let long = text.lines().count() > 500;
            // The reason goes in the file's opening doc comment.
            let head: String = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .collect::<Vec<_>>()
                .join(" ");
            if long && !head.contains("Over 500 lines") {
                bad.push(path.display().to_string());
            }
        }
    }
    assert!(
        bad.is_empty(),
        "split these, or say why at the top (\"Over 500 lines: …\"): {bad:#?}"
    );
}

/// ARCHITECTURE.md's codemap names every Rust file of the workspace in the
/// entry of its top-level directory (a crate's lib.rs and main.rs are the
/// crate's own line; a mod.rs, its directory), and names no file that is
/// not there.
#[test]
fn the_codemap_names_every_file_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let start = doc.find("## Codemap").expect("a Codemap section");
    let end = doc[start + 3..]
        .find("\n## ")
        .map_or(doc.len(), |e| start + 3 + e);
    // Entries at the left margin that name a directory, with their lines.
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in doc[start..end].lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if !line.starts_with(' ') && !line.is_empty() {
            entries.push((first.to_owned(), String::new()));
        }
        if let Some((_, text)) = entries.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    let entry = |dir: &str| -> &str {
        entries
            .iter()
            .find(|(name, _)| name == dir)
            .map(|(_, text)| text.as_str())
            .unwrap_or_else(|| panic!("the codemap has no entry {dir}"))
    };
    let names = |text: &str| -> Vec<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
            .filter(|w| w.ends_with(".rs") && w.len() > 3)
            .map(str::to_owned)
            .collect()
    };
    let trees = [
        (
            "coordinator/",
            &["coordinator/src", "coordinator/tests"][..],
        ),
        (
            "runner-core/",
            &[
                "runner-core/src",
                "runner-core/cli/src",
                "runner-core/wire/src",
            ],
        ),
        ("desktop/", &["desktop/src", "desktop/tests"]),
        ("tests/", &["tests/src", "tests/tests"]),
    ];
    let (mut unnamed, mut every) = (Vec::new(), std::collections::HashSet::new());
    for (dir, roots) in trees {
        let named = names(entry(dir));
        for tree in roots {
            for (path, _) in sources(&root.join(tree)) {
                let file = path.file_name().unwrap().to_string_lossy().into_owned();
                every.insert(file.clone());
                let parent = path
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy();
                let shown = match file.as_str() {
                    "lib.rs" | "main.rs" => true,
                    "mod.rs" => entry(dir).contains(&format!("{parent}/")),
                    _ => named.contains(&file),
                };
                if !shown {
                    unnamed.push(path.strip_prefix(&root).unwrap().display().to_string());
                }
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "name these in ARCHITECTURE.md's codemap: {unnamed:#?}"
    );
    let gone: Vec<String> = names(&doc[start..end])
        .into_iter()
        .filter(|n| !every.contains(n))
        .collect();
    assert!(
        gone.is_empty(),
        "the codemap names files that are not there: {gone:?}"
    );
}
