use super::path::{hex_value, is_unreserved, params_start};
use super::*;
use crate::request::authority::request_host;
use proptest::prelude::*;

mod allocation;
mod pingora_contract;
mod properties;

/// What a target must become: (forwarded origin-form, match path), or a refusal.
type Expected = Result<(&'static str, &'static str), Refusal>;

fn ok(forward: &'static str, match_path: &'static str) -> Expected {
    Ok((forward, match_path))
}

fn check(method: &Method, raw: &[u8], expected: Expected) {
    let label = String::from_utf8_lossy(raw);
    let got = canonical_target(method, raw);
    match (&got, expected) {
        (Ok(target), Ok((forward, match_path))) => {
            assert_eq!(
                target.origin_form(),
                forward,
                "forwarded target of {label:?}"
            );
            assert_eq!(target.match_path(), match_path, "match path of {label:?}");
        }
        (Err(refusal), Err(want)) => assert_eq!(*refusal, want, "refusal of {label:?}"),
        _ => panic!("{label:?}: got {got:?}, want {expected:?}"),
    }
}

/// The gate of the issue's examples: rooms `/drop` and `/checkout`, bypass `/static/*`, `*.css`.
/// The gate's own matching (a room on `/drop`, and a room on `/` with the bypass list of
/// config/drop.toml) on our match path.
fn gate_protects(match_path: &str) -> bool {
    use crate::request::route::{PathPattern, Route};
    let drop_room = Route {
        host: None,
        path: "/drop".into(),
    };
    let bypass = ["/favicon.ico", "/static/*", "*.css", "*.js"]
        .map(|p| PathPattern::parse(p).expect("a shipped pattern"));
    drop_room.covers(None, match_path)
        || (match_path.starts_with("/checkout") && !bypass.iter().any(|p| p.matches(match_path)))
}

#[test]
fn every_bypass_of_the_issue_is_protected_or_refused() {
    for raw in [
        "/static/../checkout",
        "/static/%2e%2e/checkout",
        "/static/..;/checkout",
        "/checkout;x.css",
        "/./drop",
        "/x/../drop",
        "/%64rop",
        "//drop",
    ] {
        match canonical_target(&Method::GET, raw.as_bytes()) {
            Ok(target) => assert!(
                gate_protects(target.match_path()),
                "{raw:?} passes the gate as {:?}",
                target.match_path()
            ),
            Err(refusal) => assert_eq!(refusal.status(), 400, "{raw:?}"),
        }
    }
}

#[test]
fn dot_segments_plain_and_encoded_are_resolved() {
    let get = Method::GET;
    for (raw, expected) in [
        ("/static/../checkout", ok("/checkout", "/checkout")),
        ("/static/%2e%2e/checkout", ok("/checkout", "/checkout")),
        ("/static/%2E%2e/checkout", ok("/checkout", "/checkout")),
        ("/static/.%2E/checkout", ok("/checkout", "/checkout")),
        ("/static/%2e./checkout", ok("/checkout", "/checkout")),
        ("/static/.%2e/", ok("/", "/")),
        ("/./drop", ok("/drop", "/drop")),
        ("/%2e/drop", ok("/drop", "/drop")),
        ("/x/../drop", ok("/drop", "/drop")),
        ("/a/b/..", ok("/a/", "/a/")),
        ("/a/b/%2E%2E", ok("/a/", "/a/")),
        ("/a/./b/.", ok("/a/b/", "/a/b/")),
        ("/.", ok("/", "/")),
        ("/a/..", ok("/", "/")),
        ("/drop/..", ok("/", "/")),
        ("/a/b/../../drop?x=1", ok("/drop?x=1", "/drop")),
        ("/...", ok("/...", "/...")),
        ("/..a/.b/a..", ok("/..a/.b/a..", "/..a/.b/a..")),
        ("/drop;v=1/../checkout", ok("/checkout", "/checkout")),
        ("/..", Err(Refusal::AboveRoot)),
        ("/a/../..", Err(Refusal::AboveRoot)),
        ("/%2e%2e/drop", Err(Refusal::AboveRoot)),
        ("/./../drop", Err(Refusal::AboveRoot)),
    ] {
        check(&get, raw.as_bytes(), expected);
    }
}

#[test]
fn dot_segments_with_parameters_are_refused() {
    for raw in [
        "/static/..;/checkout",
        "/static/..;x/checkout",
        "/static/..;/",
        "/.;x/drop",
        "/.;/drop",
        "/static/%2e%2e;/checkout",
        "/static/.%2E;jsessionid=1/checkout",
        "/static/..%3B/checkout",
        "/static/..%3b/checkout",
        "/static/%2E%2E%3Bx/checkout",
        "/drop/..;",
    ] {
        check(
            &Method::GET,
            raw.as_bytes(),
            Err(Refusal::DotSegmentWithParameters),
        );
    }
}

#[test]
fn a_dot_dot_whose_meaning_depends_on_merging_empty_segments_is_refused() {
    // WHATWG keeps the empty segment and pops it; nginx, Tomcat and Python merge it first.
    for raw in [
        "/x//../drop",
        "/x//./../drop",
        "//../drop",
        "/x/;a/../drop",
        "/x/;a/./../drop",
        "/x/;a/;b/../drop",
        "/x/%3Ba/../drop",
        // The empty segment comes back next to the second `..` once the first popped the
        // segment after it: WHATWG gives /drop/, merging first gives /.
        "/drop//drop/../..",
        "/drop//a/./../..",
    ] {
        check(
            &Method::GET,
            raw.as_bytes(),
            Err(Refusal::AmbiguousDotSegment),
        );
    }
    // A segment with a name and parameters is popped like any other.
    check(&Method::GET, b"/x/a;/../drop", ok("/x/drop", "/x/drop"));
    // One `..` after the segment that follows an empty one means the same both ways.
    check(&Method::GET, b"/drop//a/../x", ok("/drop/x", "/drop/x"));
}

#[test]
fn parameters_are_kept_in_the_path_and_removed_from_the_match_path() {
    let get = Method::GET;
    for (raw, expected) in [
        ("/checkout;x.css", ok("/checkout;x.css", "/checkout")),
        ("/checkout%3Bx.css", ok("/checkout%3Bx.css", "/checkout")),
        ("/checkout%3bx.css", ok("/checkout%3Bx.css", "/checkout")),
        (
            "/drop;a=1/shoes;b=2",
            ok("/drop;a=1/shoes;b=2", "/drop/shoes"),
        ),
        ("/;jsessionid=1", ok("/;jsessionid=1", "/")),
        ("/;x/drop", ok("/;x/drop", "/drop")),
        ("/;x/;y/drop", ok("/;x/;y/drop", "/drop")),
        ("/drop/;x", ok("/drop/;x", "/drop/")),
        ("/drop/;x?y=;z", ok("/drop/;x?y=;z", "/drop/")),
        ("/static;x/app.js", ok("/static;x/app.js", "/static/app.js")),
        (
            "/__waitroom;x/status",
            ok("/__waitroom;x/status", "/__waitroom/status"),
        ),
        ("/a;/b", ok("/a;/b", "/a/b")),
    ] {
        check(&get, raw.as_bytes(), expected);
    }
}

#[test]
fn slashes_are_merged() {
    let get = Method::GET;
    for (raw, expected) in [
        ("//drop", ok("/drop", "/drop")),
        ("///drop", ok("/drop", "/drop")),
        ("/drop///x", ok("/drop/x", "/drop/x")),
        ("/drop//", ok("/drop/", "/drop/")),
        ("//", ok("/", "/")),
        ("//?a=//", ok("/?a=//", "/")),
        ("/a/b//../c", Err(Refusal::AmbiguousDotSegment)),
    ] {
        check(&get, raw.as_bytes(), expected);
    }
}

#[test]
fn escapes_are_normalised() {
    let get = Method::GET;
    for (raw, expected) in [
        ("/%64rop", ok("/drop", "/drop")),
        ("/%64%72%6F%70", ok("/drop", "/drop")),
        ("/%44ROP", ok("/DROP", "/DROP")),
        ("/%41%7e%2D%5f%2E%30", ok("/A~-_.0", "/A~-_.0")),
        ("/a%3a", ok("/a%3A", "/a%3A")),
        ("/a%3A", ok("/a%3A", "/a%3A")),
        ("/shoes%20red", ok("/shoes%20red", "/shoes%20red")),
        ("/%c3%a9t%C3%A9", ok("/%C3%A9t%C3%A9", "/%C3%A9t%C3%A9")),
        ("/%25", ok("/%25", "/%25")),
        (
            "/%252e%252e/drop",
            ok("/%252e%252e/drop", "/%252e%252e/drop"),
        ),
        ("/a%3fb%23c", ok("/a%3Fb%23c", "/a%3Fb%23c")),
        ("/%80%ff", ok("/%80%FF", "/%80%FF")),
        ("/a%", Err(Refusal::MalformedEscape)),
        ("/a%2", Err(Refusal::MalformedEscape)),
        ("/a%zz", Err(Refusal::MalformedEscape)),
        ("/a%g0", Err(Refusal::MalformedEscape)),
        ("/a%u002e", Err(Refusal::MalformedEscape)),
        ("/%%32%65", Err(Refusal::MalformedEscape)),
    ] {
        check(&get, raw.as_bytes(), expected);
    }
}

#[test]
fn raw_bytes_a_uri_cannot_hold_are_encoded() {
    let get = Method::GET;
    for (raw, expected) in [
        ("/é", ok("/%C3%A9", "/%C3%A9")),
        ("/a b", ok("/a%20b", "/a%20b")),
        ("/a\"b", ok("/a%22b", "/a%22b")),
        ("/<a>", ok("/%3Ca%3E", "/%3Ca%3E")),
        ("/a[b]", ok("/a%5Bb%5D", "/a%5Bb%5D")),
        ("/{a}|^`", ok("/%7Ba%7D%7C%5E%60", "/%7Ba%7D%7C%5E%60")),
        (
            "/!$&'()*+,=:@-._~",
            ok("/!$&'()*+,=:@-._~", "/!$&'()*+,=:@-._~"),
        ),
    ] {
        check(&get, raw.as_bytes(), expected);
    }
    check(&get, b"/\xff\xfe", ok("/%FF%FE", "/%FF%FE"));
}

#[test]
fn separators_controls_and_fragments_are_refused() {
    let get = Method::GET;
    for (raw, refusal) in [
        (&b"/static/..%2fcheckout"[..], Refusal::EncodedSeparator),
        (b"/static/..%2Fcheckout", Refusal::EncodedSeparator),
        (b"/static/..%5ccheckout", Refusal::EncodedSeparator),
        (b"/static/..%5Ccheckout", Refusal::EncodedSeparator),
        (b"/drop%2f", Refusal::EncodedSeparator),
        (b"/static/..\\checkout", Refusal::Backslash),
        (b"/static\\..\\checkout", Refusal::Backslash),
        (b"\\drop", Refusal::UnsupportedForm),
        (b"/drop%00", Refusal::EncodedControlCharacter),
        (b"/drop%0a", Refusal::EncodedControlCharacter),
        (b"/drop%0D%0A", Refusal::EncodedControlCharacter),
        (b"/drop%09", Refusal::EncodedControlCharacter),
        (b"/drop%1f", Refusal::EncodedControlCharacter),
        (b"/drop%7F", Refusal::EncodedControlCharacter),
        (b"/drop\x00", Refusal::ControlCharacter),
        (b"/dr\top", Refusal::ControlCharacter),
        (b"/drop\x7f", Refusal::ControlCharacter),
        (b"/drop?a=\nb", Refusal::ControlCharacter),
        (b"/drop?a=\x00", Refusal::ControlCharacter),
        (b"/drop#x", Refusal::Fragment),
        (b"/drop?a#b", Refusal::Fragment),
        (b"/#/../drop", Refusal::Fragment),
        (b"/?q=%", Refusal::MalformedEscape),
        (b"/?q=50%off", Refusal::MalformedEscape),
        (b"/?q=%zz", Refusal::MalformedEscape),
    ] {
        check(&get, raw, Err(refusal));
    }
}

#[test]
fn the_query_is_kept_as_received() {
    let get = Method::GET;
    for (raw, forward, query) in [
        (
            "/drop?a=1&b=%2e%2E",
            "/drop?a=1&b=%2e%2E",
            Some("a=1&b=%2e%2E"),
        ),
        (
            "/drop?a=%0a&b=%2f",
            "/drop?a=%0a&b=%2f",
            Some("a=%0a&b=%2f"),
        ),
        (
            "/drop?a=/../x;y\\z",
            "/drop?a=/../x;y\\z",
            Some("a=/../x;y\\z"),
        ),
        (
            "/drop?a[]=1&b={}|^`'",
            "/drop?a[]=1&b={}|^`'",
            Some("a[]=1&b={}|^`'"),
        ),
        ("/drop?q=a b", "/drop?q=a%20b", Some("q=a%20b")),
        (
            "/drop?q=é\"<>",
            "/drop?q=%C3%A9%22%3C%3E",
            Some("q=%C3%A9%22%3C%3E"),
        ),
        ("/drop?", "/drop?", Some("")),
        ("/drop??", "/drop??", Some("?")),
        ("/drop", "/drop", None),
        ("/./drop?a=%2e", "/drop?a=%2e", Some("a=%2e")),
    ] {
        let target =
            canonical_target(&get, raw.as_bytes()).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!(target.origin_form(), forward, "{raw}");
        assert_eq!(target.query(), query, "{raw}");
        assert_eq!(target.path(), "/drop", "{raw}");
    }
}

#[test]
fn target_forms() {
    let get = Method::GET;
    let options = Method::OPTIONS;
    check(&options, b"*", ok("*", "*"));
    check(&get, b"*", Err(Refusal::AsteriskNotOptions));
    check(&Method::POST, b"*", Err(Refusal::AsteriskNotOptions));
    check(&options, b"*x", Err(Refusal::UnsupportedForm));
    check(&options, b"/", ok("/", "/"));
    check(&get, b"", Err(Refusal::EmptyTarget));
    check(
        &Method::CONNECT,
        b"shop.example.com:443",
        Err(Refusal::UnsupportedForm),
    );
    // Extended CONNECT (RFC 8441) carries an origin-form :path.
    check(&Method::CONNECT, b"/ws", ok("/ws", "/ws"));
    for raw in [
        "drop",
        "?a=1",
        "./drop",
        "ws://shop.example.com/drop",
        "ftp://shop.example.com/drop",
        "http:/\\shop.example.com/drop",
        "http:shop.example.com/drop",
        "http:/shop.example.com/drop",
        "//shop.example.com/drop/../x/..",
        "mailto:a@b",
    ] {
        let expected = if raw.starts_with("//") {
            ok("/shop.example.com/", "/shop.example.com/")
        } else {
            Err(Refusal::UnsupportedForm)
        };
        check(&get, raw.as_bytes(), expected);
    }

    let asterisk = canonical_target(&options, b"*").unwrap_or_else(|e| panic!("{e}"));
    assert!(asterisk.is_asterisk() && asterisk.is_verbatim() && asterisk.query().is_none());
}

#[test]
fn absolute_form_is_reduced_to_origin_form_with_its_authority() {
    let get = Method::GET;
    for (raw, forward, match_path, host, port) in [
        (
            "http://shop.example.com/drop",
            "/drop",
            "/drop",
            "shop.example.com",
            None,
        ),
        (
            "HTTP://Shop.Example.COM./drop?x",
            "/drop?x",
            "/drop",
            "shop.example.com",
            None,
        ),
        (
            "https://shop.example.com",
            "/",
            "/",
            "shop.example.com",
            None,
        ),
        (
            "HttpS://shop.example.com:8443?x=1",
            "/?x=1",
            "/",
            "shop.example.com",
            Some(8443),
        ),
        (
            "http://h/static/../checkout",
            "/checkout",
            "/checkout",
            "h",
            None,
        ),
        ("http://h//drop;x", "/drop;x", "/drop", "h", None),
        (
            "http://[::1]:8080/%64rop",
            "/drop",
            "/drop",
            "[::1]",
            Some(8080),
        ),
        ("http://127.0.0.1/", "/", "/", "127.0.0.1", None),
    ] {
        let target =
            canonical_target(&get, raw.as_bytes()).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!(target.origin_form(), forward, "{raw}");
        assert_eq!(target.match_path(), match_path, "{raw}");
        let authority = target
            .authority()
            .unwrap_or_else(|| panic!("{raw}: no authority"));
        assert_eq!((authority.host(), authority.port()), (host, port), "{raw}");
        assert!(!target.is_verbatim(), "{raw} is rewritten to origin-form");
        assert_eq!(target.rewritten(), Some(forward), "{raw}");
    }
    for (raw, refusal) in [
        ("http://", Refusal::EmptyHost),
        ("http:///drop", Refusal::EmptyHost),
        ("http://:80/drop", Refusal::EmptyHost),
        ("http://user@shop.example.com/drop", Refusal::UserInfo),
        (
            "http://shop.example.com@evil.example/drop",
            Refusal::UserInfo,
        ),
        ("http://shop.example.com\\@evil/drop", Refusal::UserInfo),
        ("http://shop.example.com\\drop", Refusal::InvalidHostName),
        ("http://shop.example.com:0/", Refusal::InvalidPort),
        ("http://shop.example.com:/", Refusal::InvalidPort),
        ("http://shop.example.com#x", Refusal::Fragment),
        ("http://shop.example.com/..", Refusal::AboveRoot),
        ("http://shop.example.com/%2f", Refusal::EncodedSeparator),
        ("http://shop example/", Refusal::InvalidHostName),
    ] {
        check(&get, raw.as_bytes(), Err(refusal));
    }
}

#[test]
fn canonical_targets_are_forwarded_verbatim() {
    for raw in [
        "/",
        "/drop",
        "/drop/shoes?size=42&colour=red",
        "/drop/",
        "/checkout;x.css",
        "/;jsessionid=1",
        "/shoes%20red%3B",
        "/a.b/.c/..d/...",
        "/drop?a=%2e%2E&b=%0a",
        "/drop?",
    ] {
        let target =
            canonical_target(&Method::GET, raw.as_bytes()).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert!(target.is_verbatim(), "{raw}");
        assert_eq!(target.rewritten(), None, "{raw}");
        assert_eq!(target.origin_form(), raw);
        assert!(matches!(target.forward, Cow::Borrowed(_)), "{raw}");
    }
    for raw in [
        "/./drop", "//drop", "/%64rop", "/%3b", "/a%3a", "/é", "/?q=a b",
    ] {
        let target =
            canonical_target(&Method::GET, raw.as_bytes()).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert!(!target.is_verbatim(), "{raw}");
        assert_eq!(target.rewritten(), Some(target.origin_form()), "{raw}");
    }
}

#[test]
fn the_target_length_is_bounded_by_what_http_can_hold() {
    let longest = format!("/{}", "a".repeat(MAX_TARGET_LEN - 1));
    let target =
        canonical_target(&Method::GET, longest.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert!(http::uri::PathAndQuery::try_from(target.origin_form()).is_ok());
    let too_long = format!("/{}", "a".repeat(MAX_TARGET_LEN));
    check(&Method::GET, too_long.as_bytes(), Err(Refusal::TooLong));
    // Encoding can make a short target too long.
    let encoded = format!("/{}", "é".repeat(MAX_TARGET_LEN / 5));
    check(&Method::GET, encoded.as_bytes(), Err(Refusal::TooLong));
    assert_eq!(Refusal::TooLong.status(), 414);
}

#[test]
fn authorities_are_validated_and_canonical() {
    for (raw, host, port) in [
        ("shop.example.com", "shop.example.com", None),
        ("SHOP.Example.com", "shop.example.com", None),
        ("shop.example.com.", "shop.example.com", None),
        ("Shop.Example.Com.:8080", "shop.example.com", Some(8080)),
        ("shop.example.com:1", "shop.example.com", Some(1)),
        ("shop.example.com:65535", "shop.example.com", Some(65535)),
        ("shop.example.com:080", "shop.example.com", Some(80)),
        ("localhost", "localhost", None),
        ("my_host.internal", "my_host.internal", None),
        ("xn--bcher-kva.example", "xn--bcher-kva.example", None),
        ("123shop.com", "123shop.com", None),
        ("127.0.0.1", "127.0.0.1", None),
        ("1.2.3.4.", "1.2.3.4", None),
        ("255.255.255.255:443", "255.255.255.255", Some(443)),
        ("[::1]", "[::1]", None),
        ("[0:0:0:0:0:0:0:1]:8443", "[::1]", Some(8443)),
        ("[2001:DB8::A]", "[2001:db8::a]", None),
        ("[::FFFF:1.2.3.4]", "[::ffff:1.2.3.4]", None),
    ] {
        let authority = Authority::parse(raw.as_bytes()).unwrap_or_else(|e| panic!("{raw}: {e}"));
        assert_eq!((authority.host(), authority.port()), (host, port), "{raw}");
        let written = authority.to_host_header();
        let again = Authority::parse(written.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, authority, "{raw} written back as {written}");
    }
    for (raw, refusal) in [
        ("", Refusal::EmptyHost),
        (":80", Refusal::EmptyHost),
        (".", Refusal::InvalidHostName),
        ("shop.example.com..", Refusal::InvalidHostName),
        (".shop.example.com", Refusal::InvalidHostName),
        ("shop..example.com", Refusal::InvalidHostName),
        ("shop example.com", Refusal::InvalidHostName),
        ("shop.example.com/x", Refusal::InvalidHostName),
        ("shop.example.com\\x", Refusal::InvalidHostName),
        ("shop.example.com\0", Refusal::InvalidHostName),
        ("shop%2eexample.com", Refusal::InvalidHostName),
        ("bücher.example", Refusal::InvalidHostName),
        ("127.1", Refusal::InvalidHostName),
        ("0x7f.0.0.1", Refusal::InvalidHostName),
        ("1.2.3.0x4", Refusal::InvalidHostName),
        ("1.2.3.256", Refusal::InvalidHostName),
        ("01.2.3.4", Refusal::InvalidHostName),
        ("1.2.3.4.5", Refusal::InvalidHostName),
        ("shop.123", Refusal::InvalidHostName),
        ("user@shop.example.com", Refusal::UserInfo),
        ("shop.example.com:0", Refusal::InvalidPort),
        ("shop.example.com:65536", Refusal::InvalidPort),
        ("shop.example.com:123456", Refusal::InvalidPort),
        ("shop.example.com:abc", Refusal::InvalidPort),
        ("shop.example.com:", Refusal::InvalidPort),
        ("shop.example.com:+80", Refusal::InvalidPort),
        ("shop.example.com:80:80", Refusal::InvalidPort),
        ("shop.example.com: 80", Refusal::InvalidPort),
        ("::1", Refusal::InvalidPort),
        ("[::1", Refusal::InvalidIpLiteral),
        ("[::1]x", Refusal::InvalidIpLiteral),
        ("[::1]:", Refusal::InvalidPort),
        ("[::1]:99999", Refusal::InvalidPort),
        ("[fe80::1%25eth0]", Refusal::InvalidIpLiteral),
        ("[v1.x]", Refusal::InvalidIpLiteral),
        ("[1.2.3.4]", Refusal::InvalidIpLiteral),
        ("[]", Refusal::InvalidIpLiteral),
    ] {
        assert_eq!(Authority::parse(raw.as_bytes()), Err(refusal), "{raw:?}");
    }
    let long_label = format!("{}.example", "a".repeat(64));
    assert_eq!(
        Authority::parse(long_label.as_bytes()),
        Err(Refusal::InvalidHostName)
    );
    let long_name = format!("{}a", "a.".repeat(127));
    assert_eq!(
        Authority::parse(long_name.as_bytes()),
        Err(Refusal::InvalidHostName)
    );
}

#[test]
fn authorities_compare_as_hosts() {
    let parse =
        |raw: &'static str| Authority::parse(raw.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parse("shop.example.com"), parse("SHOP.example.COM."));
    assert_ne!(parse("shop.example.com"), parse("shop.example.com:443"));
    assert_ne!(parse("shop.example.com:80"), parse("shop.example.com:443"));
    assert_eq!(
        parse("shop.example.com:443"),
        parse("Shop.Example.com.:443")
    );
    let shop = parse("Shop.Example.com.:8443");
    assert!(shop.is_host("shop.example.com"));
    assert!(shop.is_host("SHOP.EXAMPLE.COM."));
    assert!(!shop.is_host("example.com"));
    assert!(!shop.is_host("shop.example.com.."));
    assert_eq!(shop.to_host_header(), "shop.example.com:8443");
    assert_eq!(shop.to_string(), "shop.example.com:8443");
    // Already canonical: borrowed, no allocation.
    assert!(parse("shop.example.com:80").is_borrowed());
}

#[test]
fn request_host_reconciles_the_sources() {
    let shop = || Authority::parse(b"shop.example.com").unwrap_or_else(|e| panic!("{e}"));
    let host = |lines: &[&'static str], h2: Option<&'static str>, target: Option<&'static str>| {
        let lines: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let target =
            target.map(|t| Authority::parse(t.as_bytes()).unwrap_or_else(|e| panic!("{e}")));
        request_host(&lines, h2.map(str::as_bytes), target.as_ref())
            .map(|a| a.map(Authority::into_owned))
    };
    // HTTP/1 Host lines.
    assert_eq!(host(&[], None, None), Ok(None));
    assert_eq!(host(&["shop.example.com"], None, None), Ok(Some(shop())));
    assert_eq!(host(&["SHOP.example.com."], None, None), Ok(Some(shop())));
    assert_eq!(host(&[" shop.example.com\t"], None, None), Ok(Some(shop())));
    assert_eq!(host(&[""], None, None), Ok(None));
    assert_eq!(host(&["  "], None, None), Ok(None));
    assert_eq!(
        host(&["shop.example.com", "shop.example.com"], None, None),
        Err(Refusal::DuplicateHost)
    );
    assert_eq!(
        host(&["shop.example.com", "other.example"], None, None),
        Err(Refusal::DuplicateHost)
    );
    assert_eq!(
        host(&["shop example"], None, None),
        Err(Refusal::InvalidHostName)
    );
    assert_eq!(
        host(&["shop.example.com:99999"], None, None),
        Err(Refusal::InvalidPort)
    );
    assert_eq!(
        host(&["shop.example.com:"], None, None),
        Err(Refusal::InvalidPort)
    );
    assert_eq!(
        host(&["u@shop.example.com"], None, None),
        Err(Refusal::UserInfo)
    );
    // Absolute-form needs a Host that agrees.
    assert_eq!(
        host(&[], None, Some("shop.example.com")),
        Err(Refusal::MissingHost)
    );
    assert_eq!(
        host(&[""], None, Some("shop.example.com")),
        Err(Refusal::MissingHost)
    );
    assert_eq!(
        host(&["other.example"], None, Some("shop.example.com")),
        Err(Refusal::HostMismatch)
    );
    assert_eq!(
        host(&["shop.example.com:443"], None, Some("shop.example.com")),
        Err(Refusal::HostMismatch)
    );
    assert_eq!(
        host(&["Shop.Example.com."], None, Some("shop.example.com")),
        Ok(Some(shop()))
    );
    // HTTP/2 :authority, with or without a host field.
    assert_eq!(host(&[], Some("shop.example.com"), None), Ok(Some(shop())));
    assert_eq!(host(&[], Some("SHOP.example.com."), None), Ok(Some(shop())));
    assert_eq!(
        host(&["shop.example.com"], Some("shop.example.com."), None),
        Ok(Some(shop()))
    );
    assert_eq!(
        host(&["other.example"], Some("shop.example.com"), None),
        Err(Refusal::HostMismatch)
    );
    assert_eq!(
        host(&[""], Some("shop.example.com"), None),
        Err(Refusal::HostMismatch)
    );
    assert_eq!(host(&[], Some(""), None), Err(Refusal::EmptyHost));
    assert_eq!(
        host(&[], Some("shop.example.com:0"), None),
        Err(Refusal::InvalidPort)
    );
    assert_eq!(
        host(
            &["shop.example.com"],
            Some("shop.example.com"),
            Some("other.example")
        ),
        Err(Refusal::HostMismatch)
    );
}

#[test]
fn refusals_have_a_status_and_a_reason() {
    let all = [
        Refusal::EmptyTarget,
        Refusal::UnsupportedForm,
        Refusal::AsteriskNotOptions,
        Refusal::Fragment,
        Refusal::MalformedEscape,
        Refusal::EncodedSeparator,
        Refusal::Backslash,
        Refusal::ControlCharacter,
        Refusal::EncodedControlCharacter,
        Refusal::DotSegmentWithParameters,
        Refusal::AboveRoot,
        Refusal::AmbiguousDotSegment,
        Refusal::TooLong,
        Refusal::EmptyHost,
        Refusal::InvalidHostName,
        Refusal::InvalidIpLiteral,
        Refusal::InvalidPort,
        Refusal::UserInfo,
        Refusal::DuplicateHost,
        Refusal::MissingHost,
        Refusal::HostMismatch,
        Refusal::UnknownHost,
    ];
    let mut reasons = std::collections::HashSet::new();
    for refusal in all {
        let expected_status = match refusal {
            Refusal::UnknownHost => 421,
            Refusal::TooLong => 414,
            _ => 400,
        };
        assert_eq!(refusal.status(), expected_status, "{refusal:?}");
        assert_eq!(refusal.to_string(), refusal.reason());
        assert!(
            reasons.insert(refusal.reason()),
            "{refusal:?} shares its reason"
        );
        assert!(!refusal.reason().contains('\n'));
    }
}
