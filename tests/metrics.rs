#![allow(clippy::unwrap_used)]
//! What Prometheus scrapes from a freshly started proxy: every error kind and status class at 0
//! before anything failed (so `rate()` sees the first failure), and the process metrics.

mod common;

use common::origin::StubOrigin;
use common::proxy::{RefusingPort, TestProxy};
use waitroom::observe::{ORIGIN_CLASSES, PROCESS_NAMES, UPSTREAM_ERROR_KINDS};

/// The value of the one series `name{label="value",room="r"}`, if the text has it.
fn series(text: &str, name: &str, label: &str, value: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| l.contains(&format!("{label}=\"{value}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .map(|v| v.parse().unwrap())
}

fn plain(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .and_then(|l| l.rsplit(' ').next())
        .map(|v| v.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_proxy_exports_every_error_series_at_zero_and_its_process() {
    // Nothing listens where the origin should be: the first visitor meets a connect error.
    let dead_origin = RefusingPort::bind();
    let proxy = TestProxy::start_before(
        dead_origin.addr,
        "total_active_users = 100\nnew_users_per_minute = 100",
        "",
        StubOrigin::start(),
    );

    let fresh = proxy.metrics().await;
    for kind in UPSTREAM_ERROR_KINDS {
        assert_eq!(
            series(&fresh, "waitroom_upstream_errors_total", "kind", kind),
            Some(0.0),
            "kind {kind} before any error:\n{fresh}"
        );
    }
    for class in ORIGIN_CLASSES {
        assert_eq!(
            series(&fresh, "waitroom_origin_responses_total", "class", class),
            Some(0.0),
            "class {class} before any response:\n{fresh}"
        );
    }
    for name in PROCESS_NAMES {
        assert!(plain(&fresh, name).is_some(), "{name} missing:\n{fresh}");
    }
    if cfg!(target_os = "linux") {
        assert!(plain(&fresh, "process_resident_memory_bytes").unwrap() > 1e6);
        assert!(plain(&fresh, "process_open_fds").unwrap() >= 3.0);
        assert!(
            plain(&fresh, "process_max_fds").unwrap() >= plain(&fresh, "process_open_fds").unwrap()
        );
    }

    let answer = proxy.visitor().get("/").await;
    assert_eq!(answer.status, 502);
    let after = proxy.metrics().await;
    assert_eq!(
        series(&after, "waitroom_upstream_errors_total", "kind", "connect"),
        Some(1.0),
        "{after}"
    );
    for kind in UPSTREAM_ERROR_KINDS.iter().filter(|k| **k != "connect") {
        assert_eq!(
            series(&after, "waitroom_upstream_errors_total", "kind", kind),
            Some(0.0)
        );
    }
}
