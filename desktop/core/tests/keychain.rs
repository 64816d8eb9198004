//! The keychain store against a real Secret Service (GNOME Keyring on a
//! private session bus): items carry `service=drover`, survive a new
//! handle, and are gone once deleted.

use crate::support;

use drover_desktop_core::keychain::{self, Keychain};
use drover_tests::runner_core::credentials::{CredentialStore, StoredCredential};
use support::SecretService;

#[test]
fn secrets_round_trip_through_the_secret_service_under_service_drover() {
    let service = SecretService::start();
    let kc = Keychain;
    assert_eq!(kc.get(keychain::ACCOUNT).unwrap(), None);
    kc.set(keychain::ACCOUNT, "drv_secret_account").unwrap();
    assert_eq!(
        Keychain.get(keychain::ACCOUNT).unwrap().as_deref(),
        Some("drv_secret_account")
    );
    let listed = service.items();
    assert!(listed.contains("service = drover"), "{listed}");
    assert!(listed.contains("username = account"), "{listed}");
    assert!(
        listed.contains("drv_secret_account"),
        "secret-tool shows the secret: {listed}"
    );

    // Runner credentials, as runner-core's join_or_load stores them.
    let credential = StoredCredential {
        url: "http://127.0.0.1:1".into(),
        reference: "ws:acme:build".into(),
        runner_id: "rn_1".into(),
        runtime_id: Some("rt_1".into()),
        token: "rnr_secret_runner".into(),
    };
    kc.save("ws:acme:build-0", &credential).unwrap();
    let loaded = kc.load("ws:acme:build-0").unwrap().unwrap();
    assert_eq!(
        (loaded.runner_id.as_str(), loaded.token.as_str()),
        ("rn_1", "rnr_secret_runner")
    );
    assert!(
        service
            .items()
            .contains("username = runner:ws:acme:build-0")
    );
    assert!(!kc.describe("ws:acme:build-0").contains("rnr_"));

    kc.delete("ws:acme:build-0").unwrap();
    kc.delete("ws:acme:build-0").unwrap(); // deleting twice is no error
    kc.remove(keychain::ACCOUNT).unwrap();
    assert_eq!(
        kc.load("ws:acme:build-0").unwrap().map(|c| c.runner_id),
        None
    );
    assert_eq!(kc.get(keychain::ACCOUNT).unwrap(), None);
    let left = service.items();
    assert!(
        !left.contains("drv_secret_account") && !left.contains("rnr_secret_runner"),
        "{left}"
    );
}
