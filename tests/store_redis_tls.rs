//! `rediss://`: the Redis store over TLS, against a `redis-server` that only speaks TLS with a
//! certificate from a CA made for the test. Alone in its binary: it points SSL_CERT_FILE (read by
//! the TLS client for its roots) at that CA before any thread starts.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use waitroom::store::Store;
use waitroom::store::redis::{RedisOptions, RedisStore};

use common::conformance::limits;
use common::redis_server::RedisServer;

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl not found: install it (apt-get install -y openssl)");
    assert!(status.success(), "openssl {args:?} failed");
}

#[test]
fn rediss_urls_connect_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        dir.path(),
        &[
            &["req", "-x509"][..],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.crt"][..],
        ]
        .concat()
        .iter()
        .chain(&[
            "-days",
            "1",
            "-subj",
            "/CN=waitroom test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ])
        .copied()
        .collect::<Vec<_>>(),
    );
    openssl(
        dir.path(),
        &[
            &["req"][..],
            &ec[..],
            &["-keyout", "server.key", "-out", "server.csr"][..],
        ]
        .concat()
        .iter()
        .chain(&["-subj", "/CN=127.0.0.1"])
        .copied()
        .collect::<Vec<_>>(),
    );
    std::fs::write(dir.path().join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir.path(),
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "1",
            "-extfile",
            "san.ext",
        ],
    );
    // SAFETY: the only test of this binary, and no other thread has started yet.
    unsafe { std::env::set_var("SSL_CERT_FILE", dir.path().join("ca.crt")) };

    let server = RedisServer::start_tls(
        dir.path().join("server.crt"),
        dir.path().join("server.key"),
        dir.path().join("ca.crt"),
    );
    // As the proxy does at start: rustls has two crypto backends in this build.
    waitroom::service::tls::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut options = RedisOptions::new(format!("rediss://127.0.0.1:{}", server.port()), "tls");
        options.connect_timeout = Duration::from_secs(5);
        let store = RedisStore::connect(options.clone()).await.unwrap();
        store.ping().await.unwrap();
        let l = limits(1, 100);
        assert_eq!(store.join("v", None, &l).await.unwrap().position, 1);

        options.url = format!("redis://127.0.0.1:{}", server.port());
        assert!(
            RedisStore::connect(options).await.is_err(),
            "plain text is refused"
        );
    });
}
