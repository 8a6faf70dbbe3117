//! What Pingora 0.9.1 hands the proxy and what it writes upstream: the facts the proxy's use of
//! this module rests on, checked against the real HTTP/1 server session and the real upstream
//! request writer.

use super::*;
use pingora_core::protocols::http::v1::client::http_req_header_to_wire;
use pingora_core::protocols::http::v1::server::HttpSession;
use pingora_http::RequestHeader;

/// Reads one request head with Pingora's HTTP/1 server session: the header, or `None` when
/// Pingora refuses it before any filter runs.
async fn ingress(head: &[u8]) -> Option<RequestHeader> {
    let stream = std::io::Cursor::new(head.to_vec());
    let mut session = HttpSession::new(Box::new(stream));
    match session.read_request().await {
        Ok(Some(_)) => Some(session.req_header().clone()),
        _ => None,
    }
}

fn request(target: &[u8], hosts: &[&[u8]]) -> Vec<u8> {
    let mut head = b"GET ".to_vec();
    head.extend_from_slice(target);
    head.extend_from_slice(b" HTTP/1.1\r\n");
    for host in hosts {
        head.extend_from_slice(b"Host: ");
        head.extend_from_slice(host);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[tokio::test]
async fn http1_targets_reach_the_proxy_as_raw_path() {
    let shop: &[&[u8]] = &[b"shop.example.com"];
    for (target, raw_path) in [
        // Verbatim: the bypass spellings arrive as sent.
        (
            &b"/static/%2e%2e/checkout"[..],
            &b"/static/%2e%2e/checkout"[..],
        ),
        (b"/static/..;/checkout", b"/static/..;/checkout"),
        (b"//drop", b"//drop"),
        (b"/static/..\\checkout", b"/static/..\\checkout"),
        (b"/a[b]{c}|^\"", b"/a[b]{c}|^\""),
        (b"/\xc3\xa9", b"/\xc3\xa9"),
        // The fragment is cut off by RequestHeader::set_raw_path.
        (b"/drop#/../x", b"/drop"),
        // httparse refuses, Pingora percent-encodes the request line and parses it again.
        (b"/a b", b"/a%20b"),
        (b"/dr\top", b"/dr%09op"),
        (b"/drop\x7f", b"/drop%7F"),
        // Absolute-form is kept whole.
        (
            b"http://shop.example.com/drop",
            b"http://shop.example.com/drop",
        ),
    ] {
        let label = String::from_utf8_lossy(target);
        let req = ingress(&request(target, shop))
            .await
            .unwrap_or_else(|| panic!("Pingora refused {label:?}"));
        assert_eq!(req.raw_path(), raw_path, "{label:?}");
    }
    // Refused by Pingora before any filter: invalid UTF-8, bytes `http` will not hold in a
    // path, a second Host, an absolute-form authority other than Host's.
    for head in [
        request(b"/\xff", shop),
        request(b"/a<b", shop),
        request(b"/a`b", shop),
        request(b"/drop", &[b"shop.example.com", b"shop.example.com"]),
        request(b"http://other.example/drop", shop),
        request(b"http://u@shop.example.com/drop", shop),
        request(b"http:/\\shop.example.com/drop", shop),
    ] {
        let label = String::from_utf8_lossy(&head).into_owned();
        assert!(ingress(&head).await.is_none(), "Pingora accepted {label:?}");
    }
    // Let through by Pingora, refused here: absolute-form without Host, HTTP/1.1 without
    // Host (the caller's 400), a Host that differs from the absolute-form one only in case.
    let req = ingress(&request(b"http://shop.example.com/drop", &[]))
        .await
        .unwrap_or_else(|| panic!("refused"));
    let target = canonical_target(&req.method, req.raw_path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        request_host(&[], None, target.authority()),
        Err(Refusal::MissingHost)
    );
    let req = ingress(&request(b"/drop", &[]))
        .await
        .unwrap_or_else(|| panic!("refused"));
    assert!(req.headers.get(http::header::HOST).is_none());
    assert_eq!(request_host(&[], None, None), Ok(None));
    let req = ingress(&request(b"http://SHOP.example.com/drop", shop)).await;
    assert!(
        req.is_none(),
        "Pingora compares the authority byte for byte"
    );
}

#[tokio::test]
async fn the_canonical_target_is_what_pingora_writes_upstream() {
    for (target, line) in [
        (
            &b"/static/%2e%2e/checkout?a=%2e"[..],
            &b"GET /checkout?a=%2e HTTP/1.1\r\n"[..],
        ),
        (b"http://shop.example.com/%64rop", b"GET /drop HTTP/1.1\r\n"),
        (b"/\xc3\xa9", b"GET /%C3%A9 HTTP/1.1\r\n"),
        (b"/checkout;x.css", b"GET /checkout;x.css HTTP/1.1\r\n"),
    ] {
        let label = String::from_utf8_lossy(target);
        let downstream = ingress(&request(target, &[b"shop.example.com"]))
            .await
            .unwrap_or_else(|| panic!("refused {label:?}"));
        let canonical = canonical_target(&downstream.method, downstream.raw_path())
            .unwrap_or_else(|e| panic!("{label:?}: {e}"));
        // What upstream_request_filter does with the clone Pingora hands it.
        let mut upstream = downstream.clone();
        if let Some(rewritten) = canonical.rewritten() {
            let uri = http::Uri::try_from(rewritten).unwrap_or_else(|e| panic!("{e}"));
            upstream.set_uri(uri);
        }
        assert_eq!(
            upstream.raw_path(),
            canonical.origin_form().as_bytes(),
            "{label:?}"
        );
        let wire = http_req_header_to_wire(&upstream).unwrap_or_else(|| panic!("unwritable"));
        assert!(
            wire.starts_with(line),
            "{label:?}: {:?}",
            wire.escape_ascii().to_string()
        );
        assert!(
            wire.windows(26)
                .any(|w| w == b"Host: shop.example.com\r\n\r\n"),
            "{label:?}: Host kept"
        );
    }
}

#[test]
fn http2_pseudo_headers_arrive_in_the_uri_and_host_is_not_added() {
    // What h2 builds from :scheme, :authority and :path (h2 server.rs convert_poll_message)
    // and Pingora turns into a RequestHeader (From<ReqParts>).
    let parts = http::Request::builder()
        .method("GET")
        .uri("https://Shop.Example.com./static/%2e%2e/checkout?x")
        .version(http::Version::HTTP_2)
        .body(())
        .unwrap_or_else(|e| panic!("{e}"))
        .into_parts()
        .0;
    let req = RequestHeader::from(parts);
    assert_eq!(req.raw_path(), b"/static/%2e%2e/checkout?x");
    assert!(req.headers.get(http::header::HOST).is_none());
    let authority = req.uri.authority().map(|a| a.as_str().as_bytes());
    assert_eq!(authority, Some(&b"Shop.Example.com."[..]));
    let target = canonical_target(&req.method, req.raw_path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(target.origin_form(), "/checkout?x");
    let host = request_host(&[], authority, target.authority()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        host.map(|h| h.to_host_header()),
        Some("shop.example.com".to_owned())
    );
}
