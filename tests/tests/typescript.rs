//! The desktop front end's wire types are not written by hand: they are
//! `src-ui/src/wire.ts`, which openapi-typescript (an npm dev dependency,
//! pinned in package.json) makes from the coordinator's `/openapi.json`.
//! This test makes it again from a running coordinator and fails when the
//! checked-in file differs; `DROVER_UPDATE_TS=1` writes the new one instead.

use std::path::Path;
use std::process::Command;

use drover_tests::*;

#[tokio::test]
async fn the_front_ends_wire_types_are_made_from_the_current_document() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let generator = root.join("node_modules/.bin/openapi-typescript");
    assert!(
        generator.exists(),
        "{} is missing: run `npm ci` at the repository's root (tests/run.sh does)",
        generator.display()
    );
    let c = Coordinator::start().await;
    let document = reqwest::get(format!("{}/openapi.json", c.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dir = TempDir::new("ts");
    let (input, output) = (dir.path().join("openapi.json"), dir.path().join("wire.ts"));
    std::fs::write(&input, document).unwrap();
    let out = Command::new(&generator)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .expect("run openapi-typescript");
    assert!(
        out.status.success(),
        "openapi-typescript failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = std::fs::read_to_string(&output).unwrap();
    assert!(fresh.contains("Job: {"), "{fresh}");
    let checked_in = root.join("src-ui/src/wire.ts");
    if std::env::var_os("DROVER_UPDATE_TS").is_some() {
        std::fs::write(&checked_in, &fresh).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&checked_in).unwrap_or_default();
    assert!(
        current == fresh,
        "src-ui/src/wire.ts is stale: the coordinator's document changed. Make it again with \
         DROVER_UPDATE_TS=1 cargo nextest run -p drover-tests --test typescript"
    );
}
