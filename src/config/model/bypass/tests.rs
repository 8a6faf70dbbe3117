use super::*;

const SECRET: &str = "s3cret-0123456789";

#[test]
fn a_header_rule_needs_a_long_secret_and_says_how_to_write_one() {
    let alone = HeaderRule::parse("x-staff").unwrap_err();
    assert!(
        alone.contains("any visitor can send") && alone.contains("\"x-staff: <secret>\""),
        "{alone}"
    );
    let short = HeaderRule::parse("X-Staff: s3cret").unwrap_err();
    assert!(short.contains("at least 16 characters"), "{short}");
    assert!(HeaderRule::parse("bad header: 0123456789abcdef").is_err());
    assert!(HeaderRule::parse(": 0123456789abcdef").is_err());
    assert!(HeaderRule::parse("X-Staff: 0123456789abcdé").is_err());
    let rule = HeaderRule::parse(&format!(" X-Staff-Key :  {SECRET} ")).unwrap();
    assert_eq!(rule.name, "x-staff-key");
    assert_eq!(rule.value, SECRET);
    // Sixteen characters exactly is long enough; a colon may be part of the secret.
    assert!(HeaderRule::parse("X-A: 0123456789abcdef").is_ok());
    assert_eq!(
        HeaderRule::parse("X-A: bearer:0123456789abcdef")
            .unwrap()
            .value,
        "bearer:0123456789abcdef"
    );
}

#[test]
fn a_header_rule_matches_the_secret_only() {
    let rule = HeaderRule::parse(&format!("X-Staff-Key: {SECRET}")).unwrap();
    let headers = |pairs: &[(&'static str, &str)]| {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, http::HeaderValue::from_str(value).unwrap());
        }
        map
    };
    assert!(rule.matches(&headers(&[("x-staff-key", SECRET)])));
    assert!(rule.matches(&headers(&[("X-Staff-Key", &format!(" {SECRET} "))])));
    assert!(rule.matches(&headers(&[
        ("x-staff-key", "guess"),
        ("x-staff-key", SECRET)
    ])));
    assert!(!rule.matches(&headers(&[("x-staff-key", "s3cret-012345678")])));
    assert!(!rule.matches(&headers(&[("x-staff-key", &format!("{SECRET}9"))])));
    assert!(!rule.matches(&headers(&[("x-other", SECRET)])));
    assert!(!rule.matches(&headers(&[])));
}

#[test]
fn a_cookie_rule_needs_a_long_secret_and_matches_it_only() {
    let alone = CookieRule::parse("staff_cookie").unwrap_err();
    assert!(
        alone.contains("any visitor can set") && alone.contains("\"staff_cookie=<secret>\""),
        "{alone}"
    );
    assert!(
        CookieRule::parse("staff=short")
            .unwrap_err()
            .contains("at least 16")
    );
    assert!(CookieRule::parse("a;b=0123456789abcdef").is_err());
    assert!(CookieRule::parse("=0123456789abcdef").is_err());
    assert!(CookieRule::parse("staff=0123456789 abcdef").is_err());
    assert!(CookieRule::parse("staff=\"0123456789abcdef\"").is_err());
    let rule = CookieRule::parse(&format!("staff_session={SECRET}")).unwrap();
    assert_eq!(
        (rule.name.as_str(), rule.value.as_str()),
        ("staff_session", SECRET)
    );
    assert!(rule.matches(SECRET));
    assert!(!rule.matches("s3cret-012345678"));
    assert!(!rule.matches(""));
    // A secret may hold '=' (base64 padding).
    assert_eq!(
        CookieRule::parse("k=0123456789abcdef==").unwrap().value,
        "0123456789abcdef=="
    );
}

#[test]
fn secrets_never_show_in_debug_prints_or_masked_rules() {
    let header = HeaderRule::parse(&format!("X-Staff-Key: {SECRET}")).unwrap();
    let cookie = CookieRule::parse(&format!("staff={SECRET}")).unwrap();
    for printed in [format!("{header:?}"), format!("{cookie:?}")] {
        assert!(!printed.contains(SECRET), "{printed}");
    }
    assert_eq!(
        masked(&format!("X-Staff-Key: {SECRET}"), ':'),
        "X-Staff-Key: ********"
    );
    assert_eq!(masked(&format!("staff={SECRET}"), '='), "staff=********");
}
