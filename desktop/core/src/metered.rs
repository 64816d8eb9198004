//! Is this machine on a metered network (a phone's hotspot, a capped
//! plan)? On Linux, NetworkManager says so on the system bus: its
//! `Metered` property, `NMMetered` (1 yes, 3 guessed yes: e.g. a phone
//! that announces itself as metered). Where there is no NetworkManager, or
//! on macOS and Windows, never (the app does not ask them yet).

/// Whether NetworkManager calls the machine's connection metered now.
/// Blocking (a D-Bus call of at most 2 s): call it off the async threads.
pub fn metered_now() -> bool {
    #[cfg(target_os = "linux")]
    return network_manager().is_some_and(is_metered);
    #[cfg(not(target_os = "linux"))]
    return false;
}

#[cfg(target_os = "linux")]
fn network_manager() -> Option<u32> {
    use dbus::blocking::Connection;
    use dbus::blocking::stdintf::org_freedesktop_dbus::Properties as _;
    let bus = Connection::new_system().ok()?;
    let nm = bus.with_proxy(
        "org.freedesktop.NetworkManager",
        "/org/freedesktop/NetworkManager",
        std::time::Duration::from_secs(2),
    );
    nm.get::<u32>("org.freedesktop.NetworkManager", "Metered")
        .ok()
}

/// NMMetered: 0 unknown, 1 yes, 2 no, 3 guessed yes, 4 guessed no.
pub fn is_metered(value: u32) -> bool {
    matches!(value, 1 | 3)
}

#[cfg(test)]
mod tests {
    #[test]
    fn yes_and_guessed_yes_are_metered() {
        let metered: Vec<u32> = (0..6).filter(|v| super::is_metered(*v)).collect();
        assert_eq!(metered, [1, 3]);
    }
}
