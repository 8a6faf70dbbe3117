//! `[autopilot]`: the controller that steers total_active_users (and the rate with it) from the
//! origin's latency and errors (`crate::core::autopilot`). Off by default.

use super::values::{duration, duration_or_zero};
use super::{ConfigError, canonical, invalid};
use crate::config::file::AutopilotSection;
use crate::core::autopilot::Settings;
use crate::request::route::PathPattern;

/// `[autopilot]`, validated whether or not it is enabled, so that `--test` finds its mistakes
/// before someone turns it on.
///
/// The bounds need not contain the room's own total_active_users (nor an event's): the
/// controller starts from those limits clamped into `min_active_users..=max_active_users`, so a
/// room configured at 5000 with `max_active_users = 2000` starts at 2000.
#[derive(Debug, Clone, PartialEq)]
pub struct AutopilotConfig {
    pub enabled: bool,
    pub settings: Settings,
    /// Paths whose origin exchanges the controller does not judge (static files, slow exports),
    /// matched like `room.bypass`.
    pub exclude: Vec<PathPattern>,
}

/// Off, with the controller's defaults (what an absent `[autopilot]` gives).
impl Default for AutopilotConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            settings: Settings::default(),
            exclude: Vec::new(),
        }
    }
}

pub(crate) fn autopilot(section: &AutopilotSection) -> Result<AutopilotConfig, ConfigError> {
    let settings = Settings {
        latency_target: duration("autopilot.latency_target", &section.latency_target)?,
        error_rate_max: section.error_rate_max,
        window: duration("autopilot.window", &section.window)?,
        min_active_users: section.min_active_users,
        max_active_users: section.max_active_users,
        min_interval: duration_or_zero("autopilot.min_interval", &section.min_interval)?,
        hysteresis: section.hysteresis,
        min_requests: section.min_requests,
    };
    settings
        .validate()
        .map_err(|e| invalid(&format!("autopilot.{}", e.key), e.message))?;
    Ok(AutopilotConfig {
        enabled: section.enabled,
        settings,
        exclude: canonical::patterns("autopilot.exclude", &section.exclude)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(change: impl FnOnce(&mut AutopilotSection)) -> String {
        let mut section = AutopilotSection::default();
        change(&mut section);
        match autopilot(&section) {
            Ok(config) => panic!("accepted: {config:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_defaults_are_the_controllers_and_off() {
        let config = autopilot(&AutopilotSection::default()).unwrap();
        assert!(!config.enabled);
        assert_eq!(config.settings, Settings::default());
        assert!(config.exclude.is_empty());
    }

    type Change = Box<dyn FnOnce(&mut AutopilotSection)>;

    #[test]
    fn every_error_names_its_autopilot_key() {
        let cases: [(&str, Change); 11] = [
            (
                "autopilot.latency_target",
                Box::new(|s| s.latency_target = "soon".into()),
            ),
            (
                "autopilot.latency_target",
                Box::new(|s| s.latency_target = "2m".into()),
            ),
            (
                "autopilot.error_rate_max",
                Box::new(|s| s.error_rate_max = 1.5),
            ),
            (
                "autopilot.error_rate_max",
                Box::new(|s| s.error_rate_max = f64::NAN),
            ),
            ("autopilot.window", Box::new(|s| s.window = "500ms".into())),
            (
                "autopilot.min_active_users",
                Box::new(|s| s.min_active_users = 0),
            ),
            (
                "autopilot.max_active_users",
                Box::new(|s| s.max_active_users = 5),
            ),
            (
                "autopilot.min_interval",
                Box::new(|s| s.min_interval = "2h".into()),
            ),
            ("autopilot.hysteresis", Box::new(|s| s.hysteresis = 0.95)),
            ("autopilot.min_requests", Box::new(|s| s.min_requests = 3)),
            (
                "autopilot.exclude",
                Box::new(|s| s.exclude = vec!["/static//*".into()]),
            ),
        ];
        for (key, change) in cases {
            let e = error(change);
            assert!(e.starts_with(&format!("{key}: ")), "{key}: {e}");
        }
    }

    #[test]
    fn settings_map_onto_the_controllers() {
        let section = AutopilotSection {
            enabled: true,
            latency_target: "400ms".into(),
            error_rate_max: 0.05,
            window: "15s".into(),
            min_active_users: 20,
            max_active_users: 900,
            min_interval: "0s".into(),
            hysteresis: 0.1,
            min_requests: 100,
            exclude: vec!["/static/*".into(), "*.mp4".into()],
        };
        let config = autopilot(&section).unwrap();
        assert!(config.enabled);
        let s = &config.settings;
        assert_eq!(s.latency_target.as_millis(), 400);
        assert_eq!(s.window.as_secs(), 15);
        assert!(s.min_interval.is_zero());
        assert_eq!((s.min_active_users, s.max_active_users), (20, 900));
        assert_eq!(
            (s.error_rate_max, s.hysteresis, s.min_requests),
            (0.05, 0.1, 100)
        );
        assert!(config.exclude[1].matches("/videos/intro.mp4"));
    }
}
