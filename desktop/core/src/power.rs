//! Is this machine on battery power? On Linux, read from the power-supply
//! class (`/sys/class/power_supply`): on battery when a battery is
//! discharging and no mains adapter is online. On macOS (IOKit) and
//! Windows (the system's battery devices), as the `starship-battery` crate
//! reads them: a battery discharging.

use std::path::Path;

/// Where the power supplies are described; `DROVER_POWER_SUPPLY_DIR`
/// overrides it (tests give a directory of their own).
pub fn supply_dir() -> std::path::PathBuf {
    std::env::var_os("DROVER_POWER_SUPPLY_DIR")
        .map(Into::into)
        .unwrap_or_else(|| "/sys/class/power_supply".into())
}

/// Whether this machine runs on battery now.
pub fn on_battery_now() -> bool {
    #[cfg(target_os = "linux")]
    return on_battery(&supply_dir());
    #[cfg(not(target_os = "linux"))]
    return starship_battery::Manager::new()
        .and_then(|m| m.batteries().map(|all| all.flatten().collect::<Vec<_>>()))
        .is_ok_and(|all| {
            all.iter()
                .any(|b| b.state() == starship_battery::State::Discharging)
        });
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn on_battery(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let read = |path: &Path, name: &str| {
        std::fs::read_to_string(path.join(name))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let mut discharging = false;
    for entry in entries.flatten() {
        let path = entry.path();
        match read(&path, "type").as_str() {
            "Mains" | "USB" if read(&path, "online") == "1" => return false,
            "Battery" if read(&path, "status") == "Discharging" => discharging = true,
            _ => {}
        }
    }
    discharging
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supply(dir: &Path, name: &str, files: &[(&str, &str)]) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        for (file, text) in files {
            std::fs::write(d.join(file), format!("{text}\n")).unwrap();
        }
    }

    #[test]
    fn a_discharging_battery_without_mains_is_battery_power() {
        let dir = std::env::temp_dir().join(format!("drover-power-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!on_battery(&dir), "no directory: mains");
        supply(
            &dir,
            "BAT0",
            &[("type", "Battery"), ("status", "Discharging")],
        );
        supply(&dir, "AC", &[("type", "Mains"), ("online", "0")]);
        assert!(on_battery(&dir));
        supply(&dir, "AC", &[("type", "Mains"), ("online", "1")]);
        assert!(!on_battery(&dir));
        supply(&dir, "AC", &[("type", "Mains"), ("online", "0")]);
        supply(&dir, "BAT0", &[("type", "Battery"), ("status", "Charging")]);
        assert!(!on_battery(&dir));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
