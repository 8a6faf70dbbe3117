use super::*;

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

#[test]
fn settings_are_checked_key_by_key() {
    assert_eq!(Settings::default().validate(), Ok(()));
    let bad: Vec<(&str, Settings)> = vec![
        (
            "latency_target",
            Settings {
                latency_target: Duration::ZERO,
                ..Default::default()
            },
        ),
        (
            "latency_target",
            Settings {
                latency_target: Duration::from_secs(61),
                ..Default::default()
            },
        ),
        (
            "error_rate_max",
            Settings {
                error_rate_max: 0.0,
                ..Default::default()
            },
        ),
        (
            "error_rate_max",
            Settings {
                error_rate_max: 1.0,
                ..Default::default()
            },
        ),
        (
            "error_rate_max",
            Settings {
                error_rate_max: f64::NAN,
                ..Default::default()
            },
        ),
        (
            "window",
            Settings {
                window: Duration::from_millis(999),
                ..Default::default()
            },
        ),
        (
            "min_active_users",
            Settings {
                min_active_users: 0,
                ..Default::default()
            },
        ),
        (
            "max_active_users",
            Settings {
                max_active_users: 9,
                ..Default::default()
            },
        ),
        (
            "min_interval",
            Settings {
                min_interval: Duration::from_secs(3601),
                ..Default::default()
            },
        ),
        (
            "hysteresis",
            Settings {
                hysteresis: 0.95,
                ..Default::default()
            },
        ),
        (
            "hysteresis",
            Settings {
                hysteresis: -0.1,
                ..Default::default()
            },
        ),
        (
            "min_requests",
            Settings {
                min_requests: 19,
                ..Default::default()
            },
        ),
    ];
    for (key, settings) in bad {
        let err = settings.validate().unwrap_err();
        assert_eq!(err.key, key, "{err}");
        assert!(
            err.to_string().starts_with(&format!("autopilot.{key}: ")),
            "{err}"
        );
        assert!(Controller::new(settings, start(100), T0).is_err());
    }
}
