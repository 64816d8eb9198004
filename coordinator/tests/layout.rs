//! The coordinator's source keeps the shape ARCHITECTURE.md describes: these
//! read the source files, so a change that breaks a boundary fails here.
//! Over 500 lines: one check per boundary, and the module graph and cycle
//! finder they share, read best side by side.

use std::collections::{BTreeMap, BTreeSet};
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
    // What both speak of (`Wake`, `Signal`) is in the domain crate, which
    // depends on neither (see `the_domain_does_no_io`).
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The store speaks in the domain's types: outside its tests it names no
/// crate of the API's surface (the wire shapes, HTTP, MCP) by any path,
/// and of the coordinator's own modules only itself, the domain's (which
/// the coordinator re-exports) and the key ring that seals job env, read
/// from the module graph of its `crate::…`/`super::…` paths. (The domain
/// crate's manifest names no such crate: `the_domain_does_no_io`.)
#[test]
fn the_store_imports_neither_the_wire_nor_http() {
    let surface = [
        "drover_wire",
        "axum",
        "hyper",
        "rmcp",
        "reqwest",
        "prometheus",
    ];
    let mut bad = Vec::new();
    for (path, text) in sources(&src().join("store")) {
        if is_test_file(&path) {
            continue;
        }
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        for krate in surface {
            for (at, _) in code.match_indices(krate) {
                let before = code[..at].chars().next_back();
                let after = &code[at + krate.len()..];
                let whole = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    && (after.starts_with("::")
                        || after.starts_with(" as ")
                        || after.starts_with(';'));
                if whole {
                    let line = code[..at].lines().count();
                    bad.push(format!("{}:{line}: names {krate}", path.display()));
                }
            }
        }
    }
    let allowed = [
        "store", "ids", "caps", "refs", "billing", "wake", "clock", "secrets",
    ];
    for (module, names) in module_graph(&src()) {
        if module != "store" && !module.starts_with("store::") {
            continue;
        }
        for target in names {
            let top = target.split("::").next().unwrap_or_default();
            if !allowed.contains(&top) {
                bad.push(format!("{module} imports crate::{target}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "the store takes and returns domain types; wire shapes are built in service::dto and drover_wire: {bad:#?}"
    );
}

/// Which database a store runs on is told apart in `store/backend/` only:
/// its `Engine` (the hot paths) and its `Dialect`s. Elsewhere the store
/// asks the engine, or reads a named field of the dialect.
#[test]
fn only_the_backend_modules_name_a_backend() {
    let store = src().join("store");
    let backend = store.join("backend");
    let mut bad = Vec::new();
    let mut seen = 0;
    for (path, text) in sources(&store) {
        if path.starts_with(&backend) {
            seen += text.matches("Engine::").count();
            continue;
        }
        if is_test_file(&path) || path == store.join("mod.rs") {
            continue;
        }
        for word in [
            "Backend::",
            ".backend ==",
            "Engine::",
            "Engine {",
            ".sqlite",
            "inline_reads",
        ] {
            if text.contains(word) {
                bad.push(format!("{} names {word:?}", path.display()));
            }
        }
    }
    assert!(seen > 0, "the engines are in store/backend/");
    assert!(
        bad.is_empty(),
        "tell the backends apart in store/backend/ (the Engine, or a Dialect field): {bad:#?}"
    );
}

#[test]
fn long_files_say_why() {
    // Every Rust file of the workspace, not only the coordinator's.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = [
        "coordinator/src",
        "coordinator/tests",
        "coordinator/domain/src",
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
            &[
                "coordinator/src",
                "coordinator/tests",
                "coordinator/domain/src",
            ][..],
        ),
        (
            "runner-core/",
            &[
                "runner-core/src",
                "runner-core/cli/src",
                "runner-core/wire/src",
            ],
        ),
        ("desktop/", &["desktop/src"]),
        ("desktop/core/", &["desktop/core/src", "desktop/core/tests"]),
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

/// A crate's modules, by path (`store::jobs`), and the modules each names
/// (`crate::…` and `super::…` paths outside its tests). A module naming
/// its own ancestor or descendant is not an edge: that is one module.
/// The end-to-end tests and the desktop core's are one test binary each
/// (`tests/main.rs`, `autotests = false`): a file in their directory that
/// `main.rs` does not declare as a module would never be compiled or run.
#[test]
fn every_test_file_is_a_module_of_its_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut missing = Vec::new();
    for dir in ["tests/tests", "desktop/core/tests"] {
        let dir = root.join(dir);
        let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
        let declared: BTreeSet<&str> = main
            .lines()
            .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
            .collect();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let module = match name.strip_suffix(".rs") {
                Some("main") => continue,
                Some(stem) => stem.to_owned(),
                None if path.is_dir() => name,
                None => continue,
            };
            if !declared.contains(module.as_str()) {
                missing.push(path.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not a `mod` of its directory's main.rs, so never built or run: {missing:?}"
    );
}

fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let module_of = |path: &Path| -> Vec<String> {
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        parts
    };
    let files: Vec<(Vec<String>, String)> = sources(src)
        .into_iter()
        .map(|(path, text)| {
            // An inline test module (the file's tail) is not the module's
            // own imports; a `#[cfg(test)] mod x;` line above is only a line.
            let code = text
                .split("#[cfg(test)]\nmod tests {")
                .next()
                .unwrap_or_default()
                .to_owned();
            (module_of(&path), code)
        })
        .collect();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let resolve = |mut parts: Vec<String>| -> Option<Vec<String>> {
        while !parts.is_empty() {
            if known.contains(&parts) {
                return Some(parts);
            }
            parts.pop();
        }
        None
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut graph = BTreeMap::new();
    for (module, code) in &files {
        let mut names = BTreeSet::new();
        for (start, anchor) in [("crate::", None), ("super::", Some(()))] {
            for (at, _) in code.match_indices(start) {
                if code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                {
                    continue; // `super::super::…` is read from its first `super::`
                }
                let tail: String = code[at..].chars().take_while(|c| ident(*c)).collect();
                let mut segments: Vec<&str> = tail.split("::").filter(|s| !s.is_empty()).collect();
                let mut base = match anchor {
                    None => Vec::new(),
                    Some(()) => module.clone(),
                };
                segments.remove(0); // `crate` or the first `super`
                if anchor.is_some() {
                    base.pop();
                    while segments.first() == Some(&"super") {
                        segments.remove(0);
                        base.pop();
                    }
                }
                base.extend(
                    segments
                        .iter()
                        .take_while(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
                        .map(|s| (*s).to_owned()),
                );
                if let Some(target) = resolve(base) {
                    let related = target.starts_with(module) || module.starts_with(&target);
                    if !related {
                        names.insert(target.join("::"));
                    }
                }
            }
        }
        graph.insert(module.join("::"), names);
    }
    graph
}

/// The strongly connected groups of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        for u in &w.graph[v] {
            let u = u.as_str();
            if !w.graph.contains_key(u) {
                continue;
            }
            if !w.index.contains_key(u) {
                visit(w, u);
                let low = w.low[v].min(w.low[u]);
                w.low.insert(v, low);
            } else if w.stack.contains(&u) {
                let low = w.low[v].min(w.index[u]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let at = w.stack.iter().position(|x| *x == v).unwrap();
            let mut group: Vec<String> = w.stack.drain(at..).map(str::to_owned).collect();
            if group.len() > 1 {
                group.sort();
                w.found.push(group);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.found.sort();
    w.found
}

/// No import cycle between modules, but the ones named here, which may
/// only shrink (none is left). A new cycle, or a module joining one,
/// fails; so does a cycle listed here that is gone (take it off the list).
#[test]
fn no_import_cycles_but_the_known_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let known: &[(&str, &[&str])] = &[
        ("coordinator/src", &[]),
        ("coordinator/domain/src", &[]),
        ("runner-core/src", &[]),
        ("runner-core/cli/src", &[]),
        ("runner-core/wire/src", &[]),
    ];
    for (dir, expected) in known {
        let graph = module_graph(&root.join(dir));
        assert!(graph.len() > 3, "{dir}: read its modules: {graph:?}");
        let found: Vec<String> = cycles(&graph).into_iter().map(|g| g.join(" ")).collect();
        assert_eq!(
            found, *expected,
            "{dir}: import cycles (strongly connected modules) differ from the known ones"
        );
    }
}

/// Every route comes from a declaration in `drover_wire::op` (through
/// `http::Routes::at`), and the typed client calls declarations too: a
/// path written as a literal in a router or in the client is a second
/// source of truth, and fails here.
#[test]
fn routes_and_client_calls_name_declared_operations() {
    let mut bad = Vec::new();
    for (path, text) in sources(&src().join("http")) {
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if code.contains(".route(\"") || code.contains(".route(r") {
                bad.push(format!("{}:{}: {code}", path.display(), n + 1));
            }
        }
        // A `.route(` whose path is on the next line.
        if text.contains(".route(\n") {
            bad.push(format!("{}: .route( with a literal path", path.display()));
        }
    }
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runner-core/src/client.rs");
    let client = std::fs::read_to_string(client).unwrap();
    for (n, line) in client.lines().enumerate() {
        let code = line.trim_start();
        if !code.starts_with("//") && code.contains("\"/v1") {
            bad.push(format!("client.rs:{}: {code}", n + 1));
        }
    }
    assert!(bad.is_empty(), "paths not from drover_wire::op: {bad:#?}");
}

/// The services (and the background tasks, which call them) know nothing
/// of HTTP: REST and MCP are two ways to reach them.
#[test]
fn services_and_background_tasks_know_nothing_of_http() {
    let mut files = sources(&src().join("service"));
    assert!(files.len() >= 4, "the service modules are where they were");
    let retention = src().join("retention.rs");
    let text = std::fs::read_to_string(&retention).unwrap();
    files.push((retention, text));
    let mut bad = Vec::new();
    for (path, text) in files {
        for word in ["crate::http", "super::http", "axum", "hyper", "rmcp"] {
            if text.contains(word) {
                bad.push(format!("{} names {word}", path.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The domain crate does no I/O and knows no surface: its manifest names
/// no database, HTTP, async runtime or wire crate, and its code no
/// `drover_wire`, `sqlx`, `axum`, `tokio` or `std::fs`/`std::net`.
#[test]
fn the_domain_does_no_io() {
    let domain = Path::new(env!("CARGO_MANIFEST_DIR")).join("domain");
    let manifest = std::fs::read_to_string(domain.join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table");
    let forbidden = [
        "drover-wire",
        "sqlx",
        "rusqlite",
        "axum",
        "hyper",
        "tokio",
        "reqwest",
        "rmcp",
    ];
    let mut bad: Vec<String> = forbidden
        .iter()
        .filter(|d| deps.lines().any(|l| l.trim_start().starts_with(*d)))
        .map(|d| format!("Cargo.toml depends on {d}"))
        .collect();
    let files = sources(&domain.join("src"));
    assert!(files.len() >= 8, "the domain's files: {}", files.len());
    for (path, text) in files {
        for word in [
            "drover_wire",
            "sqlx",
            "axum",
            "tokio",
            "std::fs",
            "std::net",
        ] {
            if text.contains(word) {
                bad.push(format!("{} names {word}", path.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
