use super::*;

/// Segments mixing every spelling of the bypass classes.
const SEGMENTS: &[&str] = &[
    "",
    "",
    ".",
    "..",
    "%2e",
    "%2E",
    "%2e%2E",
    ".%2e",
    "%2E.",
    "..;",
    ".;x",
    "..;x",
    ";x",
    "%3Bx",
    "..%3B",
    "%2e%2e%3b",
    "drop",
    "drop",
    "%64rop",
    "%64ROP",
    "dr%6fp",
    "drop;v=1",
    "static",
    "static",
    "static;x",
    "checkout",
    "checkout",
    "checkout;x.css",
    "checkout%3Bx.css",
    "x.css",
    "a",
    "b",
    "\\",
    "..\\",
    "%2f",
    "%2F",
    "%5c",
    "..%2f",
    "é",
    "%C3%A9",
    "a b",
    "%",
    "%zz",
    "%00",
    "%0a",
    "%25",
    "%252e",
    "~",
    "%7E",
    ".x",
    "x.",
    "...",
    "%c3%a9",
    "%3a",
    "%2c",
    ";",
    "%3b",
    "..%2e",
    "%2e%2e%2e",
];

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(SEGMENTS).prop_map(str::to_owned),
        1 => "[a-z0-9A-F.;%/\\\\]{0,6}",
    ]
}

fn origin_target() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec(segment(), 0..8),
        proptest::option::of("[a-z=&%2e./;?]{0,6}"),
    )
        .prop_map(|(segments, query)| {
            let mut target = format!("/{}", segments.join("/"));
            if let Some(query) = query {
                target.push('?');
                target.push_str(&query);
            }
            target
        })
}

/// Decodes the escapes of unreserved characters only.
fn decode_unreserved(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| {
                let hi = hex_value(*bytes.get(i + 1)?)?;
                let lo = hex_value(*bytes.get(i + 2)?)?;
                Some((hi << 4) | lo)
            })
            .flatten();
        match escape {
            Some(decoded) if is_unreserved(decoded) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes every escape (what a decode-before-routing origin sees).
fn decode_all(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = (bytes[i] == b'%')
            .then(|| {
                let hi = hex_value(*bytes.get(i + 1)?)?;
                let lo = hex_value(*bytes.get(i + 2)?)?;
                Some((hi << 4) | lo)
            })
            .flatten();
        match escape {
            Some(decoded) => {
                out.push(decoded);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn drop_params(path: &str) -> String {
    path.split('/')
        .map(|segment| segment.split(';').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("/")
}

/// The path without its query (a reference resolver's input).
fn path_of(target: &str) -> &str {
    target.split('?').next().unwrap_or(target)
}

/// Reference 1: the WHATWG URL parser (`url` crate), then unreserved escapes decoded and
/// `;parameters` dropped per segment.
fn whatwg_reference(target: &str) -> Option<String> {
    let url = url::Url::parse(&format!("http://h{target}")).ok()?;
    Some(drop_params(&decode_unreserved(url.path())))
}

/// Reference 2: every escape decoded, then Python's `posixpath.normpath` (empty and `.`
/// segments dropped, `..` popping, clamped at the root), with or without `;parameters` dropped
/// first (Tomcat and Spring drop them, Python and most others do not).
fn normpath_reference(target: &str, strip: bool) -> String {
    let decoded = decode_all(path_of(target));
    let decoded = if strip {
        drop_params(&decoded)
    } else {
        decoded
    };
    let mut stack: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            other => stack.push(other),
        }
    }
    format!("/{}", stack.join("/"))
}

fn reference_protects(path: &str) -> bool {
    path.starts_with("/drop") || path == "/checkout"
}

/// What the property demands of our answer when a reference reaches a protected page.
fn assert_protected(target: &str, reference: &str, which: &str) -> Result<(), TestCaseError> {
    if !reference_protects(reference) {
        return Ok(());
    }
    let Ok(canonical) = canonical_target(&Method::GET, target.as_bytes()) else {
        return Ok(());
    };
    let ours = canonical.match_path();
    if reference.starts_with("/drop") {
        prop_assert!(
            ours.starts_with("/drop"),
            "{which} resolves {target:?} to {reference:?}, we match {ours:?}"
        );
    } else {
        prop_assert!(
            gate_protects(ours) && ours.starts_with("/checkout"),
            "{which} resolves {target:?} to {reference:?}, we match {ours:?} (bypassed)"
        );
    }
    Ok(())
}

fn has_dot_segment_or_double_slash(path: &str) -> bool {
    path.contains("//")
        || path.split('/').any(|segment| {
            let name = &segment[..params_start(segment)];
            matches!(name, "." | "..")
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn a_path_a_reference_resolves_to_a_protected_page_is_protected(target in origin_target()) {
        if let Some(reference) = whatwg_reference(&target) {
            assert_protected(&target, &reference, "WHATWG")?;
        }
        assert_protected(&target, &normpath_reference(&target, true), "normpath without params")?;
        assert_protected(&target, &normpath_reference(&target, false), "normpath")?;
    }

    #[test]
    fn canonicalisation_is_idempotent_and_its_output_clean(target in origin_target()) {
        let Ok(first) = canonical_target(&Method::GET, target.as_bytes()) else {
            return Ok(());
        };
        let forwarded = first.origin_form();
        prop_assert!(forwarded.is_ascii());
        prop_assert!(!has_dot_segment_or_double_slash(first.path()), "{forwarded:?}");
        prop_assert!(!has_dot_segment_or_double_slash(first.match_path()), "{:?}", first.match_path());
        prop_assert!(first.path().starts_with('/') && first.match_path().starts_with('/'));
        let parsed = http::uri::PathAndQuery::try_from(forwarded);
        prop_assert!(parsed.is_ok(), "http refuses {forwarded:?}");
        if let Ok(parsed) = parsed {
            prop_assert_eq!(parsed.path(), first.path());
            prop_assert_eq!(parsed.query(), first.query());
        }
        let second = canonical_target(&Method::GET, forwarded.as_bytes());
        prop_assert!(second.is_ok(), "{forwarded:?} refused: {second:?}");
        if let Ok(second) = second {
            prop_assert!(second.is_verbatim(), "{forwarded:?} changed again");
            prop_assert_eq!(second.path(), first.path());
            prop_assert_eq!(second.match_path(), first.match_path());
            prop_assert_eq!(second.query(), first.query());
        }
        prop_assert_eq!(first.is_verbatim(), forwarded == target);
    }

    #[test]
    fn the_fast_path_agrees_with_the_slow_path(target in origin_target()) {
        let path = path_of(&target).as_bytes();
        let mut slow = String::new();
        let slow = normalise_path(path, &mut slow).map(|()| slow);
        if let PathScan::Clean { has_params } = scan_path(path) {
            prop_assert_eq!(slow.as_deref(), Ok(path_of(&target)));
            prop_assert_eq!(has_params, has_parameters(path_of(&target)));
        }
    }

    #[test]
    fn absolute_form_is_its_origin_form_with_an_authority(target in origin_target()) {
        let absolute = format!("hTTp://Shop.Example.com.:8080{target}");
        let origin = canonical_target(&Method::GET, target.as_bytes());
        let absolute = canonical_target(&Method::GET, absolute.as_bytes());
        match (origin, absolute) {
            (Ok(origin), Ok(absolute)) => {
                prop_assert_eq!(origin.origin_form(), absolute.origin_form());
                prop_assert_eq!(origin.match_path(), absolute.match_path());
                prop_assert_eq!(
                    absolute.authority().map(Authority::to_host_header),
                    Some("shop.example.com:8080".to_owned())
                );
            }
            (Err(origin), Err(absolute)) => prop_assert_eq!(origin, absolute),
            (origin, absolute) => prop_assert!(false, "{origin:?} vs {absolute:?}"),
        }
    }

    #[test]
    fn authorities_are_canonical_and_round_trip(
        labels in proptest::collection::vec("[a-zA-Z0-9_-]{1,8}", 1..5),
        trailing_dot in any::<bool>(),
        port in proptest::option::of(1u16..),
    ) {
        let mut raw = labels.join(".");
        if trailing_dot {
            raw.push('.');
        }
        if let Some(port) = port {
            raw.push_str(&format!(":{port}"));
        }
        let Ok(authority) = Authority::parse(raw.as_bytes()) else {
            // Only a numeric last label that is not an IPv4 address is refused.
            let last = labels.last().map(String::as_str).unwrap_or("");
            prop_assert!(
                last.bytes().all(|b| b.is_ascii_digit()) || last.to_ascii_lowercase().starts_with("0x"),
                "{raw:?} refused"
            );
            return Ok(());
        };
        prop_assert_eq!(authority.host(), labels.join(".").to_ascii_lowercase());
        prop_assert_eq!(authority.port(), port);
        let written = authority.to_host_header();
        prop_assert_eq!(Authority::parse(written.as_bytes()), Ok(authority.clone()));
        let upper = raw.to_ascii_uppercase();
        prop_assert_eq!(Authority::parse(upper.as_bytes()), Ok(authority));
    }
}
