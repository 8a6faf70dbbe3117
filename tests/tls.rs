#![allow(clippy::unwrap_used)]
//! TLS with certificates made by the test: visitors speak HTTPS (HTTP/2 by ALPN) to the proxy;
//! the proxy speaks TLS to the origin, trusting a CA file, checking the name it asked for (SNI);
//! a certificate nobody vouches for gets the branded 502; an HTTP/2 connection that asks for
//! nothing is closed at `keepalive_timeout`; an event stream is served in front on HTTP/1.1.

mod common;

use std::net::SocketAddr;

use common::origin::StubOrigin;
use common::proxy::{Sections, TestProxy};
use common::tls::{TestCa, TlsFront};

fn https_client(ca: &TestCa, port: u16) -> reqwest::ClientBuilder {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.ca_pem.as_bytes()).unwrap()])
        .resolve("localhost", addr)
}

/// The proxy serving HTTPS with a certificate from `ca` for `names`; `listen` and `room` are more
/// lines of those sections.
fn https_proxy(ca: &TestCa, names: &[&str], listen: &str, room: &str) -> TestProxy {
    let leaf = ca.leaf(names, "proxy");
    let listen = format!(
        "certificate = \"{}\"\nkey = \"{}\"\n{listen}",
        leaf.certificate.display(),
        leaf.key.display()
    );
    let room = format!("total_active_users = 10\nnew_users_per_minute = 1000\n{room}");
    let origin = StubOrigin::start();
    TestProxy::start_sections(
        origin.addr,
        origin,
        Sections {
            listen: &listen,
            room: &room,
            ..Sections::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visitors_get_https_with_http2_and_http1_still_works() {
    let ca = TestCa::new();
    let proxy = https_proxy(&ca, &["localhost"], "", "");
    let url = format!("https://localhost:{}/shoes", proxy.port);

    let h2 = https_client(&ca, proxy.port).build().unwrap();
    let answer = h2.get(&url).send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_2, "ALPN picked h2");
    assert_eq!(answer.status(), 200);
    assert!(
        answer
            .headers()
            .get_all("set-cookie")
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("waitroom=")),
        "admitted over h2: the pass cookie comes with the origin's answer"
    );
    assert_eq!(answer.text().await.unwrap(), "origin:/shoes");

    // The waiting room's own answers over h2 as well.
    let status = h2
        .get(format!(
            "https://localhost:{}/__waitroom/status",
            proxy.port
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(status.version(), reqwest::Version::HTTP_2);
    let json: serde_json::Value = status.json().await.unwrap();
    assert!(json["cfWaitingRoom"].is_object());

    let h1 = https_client(&ca, proxy.port).http1_only().build().unwrap();
    let answer = h1.get(&url).send().await.unwrap();
    assert_eq!(answer.version(), reqwest::Version::HTTP_11);
    assert_eq!(answer.text().await.unwrap(), "origin:/shoes");

    let untrusting = reqwest::Client::builder()
        .tls_certs_only([])
        .resolve("localhost", ([127, 0, 0, 1], proxy.port).into())
        .build()
        .unwrap();
    assert!(
        untrusting.get(&url).send().await.is_err(),
        "the handshake fails for a client without the CA"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_over_https_is_served_in_front_on_http1_and_by_pingora_on_http2() {
    let ca = TestCa::new();
    let proxy = https_proxy(&ca, &["localhost"], "", "");
    let url = format!("https://localhost:{}/__waitroom/events", proxy.port);
    let in_front = || async {
        proxy.state().await["listener"]["connections"]["streams_in_front_total"]
            .as_u64()
            .unwrap()
    };
    for (client, version, served_in_front) in [
        (
            https_client(&ca, proxy.port).http1_only().build().unwrap(),
            reqwest::Version::HTTP_11,
            1,
        ),
        (
            https_client(&ca, proxy.port).build().unwrap(),
            reqwest::Version::HTTP_2,
            1,
        ),
    ] {
        let mut stream = client.get(&url).send().await.unwrap();
        assert_eq!(stream.version(), version);
        assert_eq!(stream.status(), 200);
        assert_eq!(
            stream.headers().get("content-type").unwrap(),
            "text/event-stream"
        );
        let first = stream.chunk().await.unwrap().unwrap();
        assert!(first.starts_with(b"retry: "), "{first:?}");
        assert_eq!(in_front().await, served_in_front, "{version:?}");
    }
}

/// A proxy whose origin is a TLS front (certificate for `origin.test`) before a stub origin.
fn behind_tls(front: &TlsFront, origin: StubOrigin, origin_lines: &str) -> TestProxy {
    TestProxy::start_sections(
        front.addr,
        origin,
        Sections {
            origin: origin_lines,
            room: "total_active_users = 10\nnew_users_per_minute = 1000",
            ..Sections::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_is_reached_over_tls_with_sni_and_a_custom_ca() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["origin.test"], "origin");
    let origin = StubOrigin::start();
    let front = TlsFront::start(&leaf, origin.addr);
    let lines = format!(
        "tls = true\nsni = \"origin.test\"\nca_file = \"{}\"",
        ca.ca_file.display()
    );
    let proxy = behind_tls(&front, origin, &lines);
    let answer = proxy.visitor().get("/cart").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body, "origin:/cart");
    assert!(front.names_seen().contains(&Some("origin.test".to_owned())));
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains("waitroom_origin_responses_total{class=\"2xx\",room=\"test-room\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("waitroom_origin_seconds_count{room=\"test-room\"} 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_certificate_nobody_vouches_for_gets_the_branded_502() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["origin.test"], "origin");
    let origin = StubOrigin::start();
    let front = TlsFront::start(&leaf, origin.addr);

    // Verification is on by default: the system's CAs do not know the test CA.
    let proxy = behind_tls(&front, origin.clone(), "tls = true\nsni = \"origin.test\"");
    let answer = proxy.visitor().get("/cart").await;
    assert_eq!(answer.status, 502);
    assert!(
        answer.body.contains("Test drop"),
        "branded: {}",
        answer.body
    );
    assert!(answer.body.contains("The shop is not answering right now"));
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains("waitroom_upstream_errors_total{kind=\"tls\",room=\"test-room\"} 1"),
        "{metrics}"
    );

    // The right CA but another name than the certificate's: refused too.
    let lines = format!(
        "tls = true\nsni = \"elsewhere.test\"\nca_file = \"{}\"",
        ca.ca_file.display()
    );
    let wrong_name = behind_tls(&front, origin.clone(), &lines);
    assert_eq!(wrong_name.visitor().get("/cart").await.status, 502);

    // Turned off on purpose (a test origin): through, whatever the certificate.
    let unchecked = behind_tls(
        &front,
        origin,
        "tls = true\nsni = \"origin.test\"\nverify = false",
    );
    let answer = unchecked.visitor().get("/cart").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, "origin:/cart");
}

#[test]
fn bad_tls_files_stop_the_start_naming_the_key() {
    let ca = TestCa::new();
    let leaf = ca.leaf(&["localhost"], "proxy");
    let other = ca.leaf(&["localhost"], "other");
    let origin = StubOrigin::start();
    let text = |listen: &str, origin_lines: &str, admin: &str| {
        common::proxy::config_with(
            common::proxy::free_port(),
            common::proxy::free_port(),
            origin.addr,
            Sections {
                listen,
                origin: origin_lines,
                room: "total_active_users = 1\nnew_users_per_minute = 1",
                rest: admin,
                ..Sections::default()
            },
        )
    };
    let start_with = |listen: String, origin_lines: String, admin: String| {
        let text = text(&listen, &origin_lines, &admin);
        let (config, _) =
            waitroom::config::Config::parse(&text, &common::proxy::NoEnvironment, false).unwrap();
        match waitroom::service::server::spawn(
            &config,
            waitroom::service::server::RunOptions::default(),
        ) {
            Ok(_) => panic!("started with {listen} {origin_lines} {admin}"),
            Err(e) => e.to_string(),
        }
    };
    let start =
        |listen: String, origin_lines: String| start_with(listen, origin_lines, String::new());
    let missing = start(
        "certificate = \"/nonexistent.pem\"\nkey = \"/nonexistent.key\"".into(),
        String::new(),
    );
    assert!(missing.starts_with("listen.certificate:"), "{missing}");
    let mismatched = start(
        format!(
            "certificate = \"{}\"\nkey = \"{}\"",
            leaf.certificate.display(),
            other.key.display()
        ),
        String::new(),
    );
    assert!(mismatched.starts_with("listen.key:"), "{mismatched}");
    let no_ca = start(
        String::new(),
        format!("tls = true\nca_file = \"{}\"", leaf.key.display()),
    );
    assert!(no_ca.starts_with("origin.ca_file:"), "{no_ca}");

    // The admin listener's own pair, named as its keys.
    let admin_missing = start_with(
        String::new(),
        String::new(),
        "certificate = \"/nonexistent.pem\"\nkey = \"/nonexistent.key\"".into(),
    );
    assert!(
        admin_missing.starts_with("admin.certificate:"),
        "{admin_missing}"
    );
    let admin_mismatched = start_with(
        String::new(),
        String::new(),
        format!(
            "certificate = \"{}\"\nkey = \"{}\"",
            leaf.certificate.display(),
            other.key.display()
        ),
    );
    assert!(
        admin_mismatched.starts_with("admin.key:"),
        "{admin_mismatched}"
    );
    let half = waitroom::config::Config::parse(
        &text(
            "",
            "",
            &format!("certificate = \"{}\"", leaf.certificate.display()),
        ),
        &common::proxy::NoEnvironment,
        false,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        half.contains("admin.key: is required with admin.certificate"),
        "{half}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_authority_for_another_host_never_reaches_the_origin() {
    let ca = TestCa::new();
    let proxy = https_proxy(
        &ca,
        &["shop.test", "other.test"],
        "",
        "host = \"shop.test\"",
    );
    let addr: SocketAddr = ([127, 0, 0, 1], proxy.port).into();
    let h2 = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.ca_pem.as_bytes()).unwrap()])
        .resolve("shop.test", addr)
        .resolve("other.test", addr)
        .build()
        .unwrap();
    let other = h2
        .get(format!("https://other.test:{}/shoes", proxy.port))
        .send()
        .await
        .unwrap();
    assert_eq!(other.version(), reqwest::Version::HTTP_2);
    assert_eq!(other.status(), 421);
    assert!(proxy.origin.received().is_empty());
    let shop = h2
        .get(format!("https://shop.test:{}/%73hoes", proxy.port))
        .send()
        .await
        .unwrap();
    assert_eq!(shop.status(), 200);
    let received = proxy.origin.received();
    let at_origin = received.last().unwrap();
    assert_eq!(at_origin.target(), "/shoes");
    assert_eq!(
        at_origin.header("host"),
        Some(format!("shop.test:{}", proxy.port).as_str()),
        "the HTTP/1.1 origin gets the request's authority as Host"
    );
}

/// An HTTP/2 connection that opens and then asks for nothing is closed at `keepalive_timeout`
/// (Pingora's `h2_idle_timeout`, which the proxy sets from it), not held for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http2_connection_is_closed_at_keepalive_timeout() {
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let ca = TestCa::new();
    let proxy = https_proxy(&ca, &["localhost"], "keepalive_timeout = \"2s\"", "");

    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut config = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
        .await
        .unwrap();
    let mut tls = TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    // The client preface and an empty SETTINGS frame: a valid HTTP/2 connection, no stream.
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    tls.write_all(&hello).await.unwrap();
    let opened = Instant::now();

    let mut sent = Vec::new();
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => sent.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let after = opened.elapsed();
    assert!(closed.is_ok(), "still open after 10 s");
    assert!(
        after >= Duration::from_millis(1500),
        "closed after {after:?}: before keepalive_timeout, so not for being idle"
    );
    // The server's SETTINGS came first (type 4 on stream 0): the connection was good.
    assert!(sent.len() >= 9 && sent[3] == 4, "{sent:?}");
}

/// A request body streamed over HTTP/2: `pieces` of `size` bytes, `gap` apart (the request's
/// `content-length` may announce more, so that the body is unfinished when they stop).
fn paced_body(pieces: usize, size: usize, gap: std::time::Duration) -> reqwest::Body {
    let stream = futures_util::stream::unfold(0, move |sent| async move {
        if sent == pieces {
            return None;
        }
        if sent > 0 {
            tokio::time::sleep(gap).await;
        }
        Some((Ok::<_, std::io::Error>(vec![b'x'; size]), sent + 1))
    });
    reqwest::Body::wrap_stream(stream)
}

/// HTTP/2 bodies are held to the same pace as HTTP/1.1 ones (`listen.min_body_rate`, checked on
/// each piece as it is forwarded), and a body the proxy reads itself to `listen.body_timeout`'s
/// silence (Pingora's read timeout does not reach HTTP/2): a steady upload arrives whole, a
/// trickle and a silent body are cut, counted, and the origin never gets them whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_bodies_must_keep_their_pace_and_the_proxys_own_their_deadline() {
    use std::time::{Duration, Instant};

    let ca = TestCa::new();
    let proxy = https_proxy(
        &ca,
        &["localhost"],
        "body_timeout = \"1s\"\nmin_body_rate = 20",
        "bypass = [\"/upload/*\"]",
    );
    let h2 = https_client(&ca, proxy.port).build().unwrap();
    let url = |path: &str| format!("https://localhost:{}{path}", proxy.port);

    // 10 bytes every 300 ms for 3 s (33 B/s): past the grace, above the rate.
    let steady = h2
        .post(url("/upload/steady"))
        .header("content-length", "100")
        .body(paced_body(10, 10, Duration::from_millis(300)))
        .send()
        .await
        .unwrap();
    assert_eq!(steady.version(), reqwest::Version::HTTP_2);
    assert_eq!(steady.status(), 200);
    let received = proxy.origin.received();
    let upload = received.iter().find(|r| r.target() == "/upload/steady");
    assert_eq!(upload.map(|r| r.body.len()), Some(100));

    // A byte every 300 ms, never silent for a second: 3 B/s, cut after the grace.
    let started = Instant::now();
    let trickle = h2
        .post(url("/upload/trickle"))
        .header("content-length", "1000")
        .body(paced_body(1000, 1, Duration::from_millis(300)))
        .send()
        .await;
    assert!(started.elapsed() < Duration::from_secs(6), "{trickle:?}");
    if let Ok(answer) = trickle {
        assert_eq!(answer.status(), 408);
    }
    // The proxy's own path: one byte, then silence.
    let started = Instant::now();
    let silent = h2
        .post(url("/__waitroom/leave"))
        .header("content-length", "100")
        .body(paced_body(2, 1, Duration::from_secs(3600)))
        .send()
        .await;
    assert!(started.elapsed() < Duration::from_secs(6), "{silent:?}");
    if let Ok(answer) = silent {
        assert_eq!(answer.status(), 408);
    }
    assert!(
        !proxy
            .origin
            .received()
            .iter()
            .any(|r| r.target() == "/upload/trickle"),
        "the trickle never reached the origin whole"
    );
    let metrics = proxy.metrics().await;
    assert!(
        metrics.contains("waitroom_body_timeouts_total{room=\"test-room\"} 2"),
        "{metrics}"
    );
}
