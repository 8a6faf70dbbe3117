use std::net::IpAddr;

use super::*;
use crate::request::view::{Canonical, Head, Sites};

const SECRET: &str = "preview-0123456789";

struct Asked {
    method: http::Method,
    target: &'static str,
    headers: http::HeaderMap,
    ip: Option<IpAddr>,
    country: Option<&'static str>,
}

fn asked(target: &'static str) -> Asked {
    Asked {
        method: http::Method::GET,
        target,
        headers: http::HeaderMap::new(),
        ip: None,
        country: None,
    }
}

impl Asked {
    fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.append(name, value.parse().unwrap());
        self
    }

    fn holds(&self, rule: &Rule) -> bool {
        let head = Head {
            method: &self.method,
            target: self.target.as_bytes(),
            host_lines: &[b"shop.example"],
            authority: None,
            needs_host: true,
        };
        let canonical = Canonical::read(head, &Sites::default()).unwrap();
        let mut request =
            Request::new(&canonical, &self.headers, self.ip).with_method(&self.method);
        request.country = self.country;
        rule.holds(&request)
    }
}

fn rule(action: Action, when: Conditions) -> Rule {
    Rule {
        label: "test".into(),
        action,
        when,
    }
}

fn named(name: &str, value: Expected) -> Vec<Named> {
    vec![Named {
        name: name.into(),
        value,
    }]
}

fn secret() -> Expected {
    Expected::Secret(SECRET.into())
}

fn paths(list: &[&str]) -> Vec<PathPattern> {
    list.iter()
        .map(|p| PathPattern::parse(p).unwrap())
        .collect()
}

#[test]
fn a_bypass_on_a_query_secret_reads_the_decoded_query_and_every_occurrence() {
    let preview = rule(
        Action::Bypass,
        Conditions {
            query: named("preview", secret()),
            ..Conditions::default()
        },
    );
    assert!(asked("/drop?preview=preview-0123456789").holds(&preview));
    assert!(
        asked("/drop?a=1&%70review=preview%2D0123456789").holds(&preview),
        "names and values decoded"
    );
    assert!(!asked("/drop").holds(&preview));
    assert!(
        !asked("/drop?preview=preview-012345678").holds(&preview),
        "one character short"
    );
    assert!(
        !asked("/drop?Preview=preview-0123456789").holds(&preview),
        "names are case-sensitive"
    );
    // An origin reading the last value would be handed the other one.
    assert!(!asked("/drop?preview=preview-0123456789&preview=x").holds(&preview));
    assert!(!asked("/drop?preview=x&preview=preview-0123456789").holds(&preview));
    assert!(asked("/drop?preview=preview-0123456789&preview=preview-0123456789").holds(&preview));
}

#[test]
fn a_block_holds_when_any_occurrence_matches() {
    let debug = rule(
        Action::Block,
        Conditions {
            query: named("debug", Expected::Pattern("1".into())),
            ..Conditions::default()
        },
    );
    assert!(asked("/drop?debug=0&debug=1").holds(&debug));
    assert!(asked("/drop?debug=1&debug=0").holds(&debug));
    assert!(asked("/drop?%64ebug=%31").holds(&debug));
    assert!(!asked("/drop?debug=0").holds(&debug));

    let bad_bot = rule(
        Action::Block,
        Conditions {
            headers: named("user-agent", Expected::Pattern("*BadBot*".into())),
            ..Conditions::default()
        },
    );
    assert!(
        asked("/")
            .header("user-agent", "Mozilla/5.0 BadBot/2")
            .holds(&bad_bot)
    );
    assert!(
        asked("/")
            .header("user-agent", "Firefox")
            .header("user-agent", "BadBot")
            .holds(&bad_bot)
    );
    assert!(!asked("/").header("user-agent", "Firefox").holds(&bad_bot));
    assert!(!asked("/").holds(&bad_bot));
}

#[test]
fn a_bypass_on_a_header_or_cookie_needs_every_copy_to_hold_the_secret() {
    let header = rule(
        Action::Bypass,
        Conditions {
            headers: named("x-preview", secret()),
            ..Conditions::default()
        },
    );
    assert!(
        asked("/")
            .header("x-preview", " preview-0123456789 ")
            .holds(&header)
    );
    assert!(
        !asked("/")
            .header("x-preview", SECRET)
            .header("x-preview", "other")
            .holds(&header)
    );
    assert!(
        !asked("/")
            .header("x-preview", "preview-0123456789x")
            .holds(&header)
    );
    let cookie = rule(
        Action::Bypass,
        Conditions {
            cookies: named("staff", secret()),
            ..Conditions::default()
        },
    );
    assert!(
        asked("/")
            .header("cookie", "a=1; staff=\"preview-0123456789\"")
            .holds(&cookie)
    );
    assert!(
        !asked("/")
            .header("cookie", "staff=preview-0123456789; staff=x")
            .holds(&cookie)
    );
    assert!(
        !asked("/")
            .header("cookie", "a=1")
            .header("cookie", "staffx=preview-0123456789")
            .holds(&cookie)
    );
}

#[test]
fn every_condition_of_a_rule_must_hold() {
    let checkout_posts_from_the_office = rule(
        Action::Protect,
        Conditions {
            paths: paths(&["/checkout/*"]),
            methods: vec![http::Method::POST],
            networks: vec![Cidr::parse("10.0.0.0/8").unwrap()],
            countries: vec!["DE".into()],
            ..Conditions::default()
        },
    );
    let mut post = asked("/checkout/pay");
    post.method = http::Method::POST;
    post.ip = Some("10.1.2.3".parse().unwrap());
    post.country = Some("de");
    assert!(post.holds(&checkout_posts_from_the_office));
    let mut other_country = asked("/checkout/pay");
    other_country.method = http::Method::POST;
    other_country.ip = post.ip;
    other_country.country = Some("FR");
    assert!(!other_country.holds(&checkout_posts_from_the_office));
    let mut no_country = asked("/checkout/pay");
    no_country.method = http::Method::POST;
    no_country.ip = post.ip;
    assert!(
        !no_country.holds(&checkout_posts_from_the_office),
        "unknown is not DE"
    );
    let mut get = asked("/checkout/pay");
    get.ip = post.ip;
    get.country = Some("DE");
    assert!(!get.holds(&checkout_posts_from_the_office));
    let mut outside = asked("/checkout/pay");
    outside.method = http::Method::POST;
    outside.ip = Some("192.0.2.1".parse().unwrap());
    outside.country = Some("DE");
    assert!(!outside.holds(&checkout_posts_from_the_office));
    let mut unknown_address = asked("/checkout/pay");
    unknown_address.method = http::Method::POST;
    unknown_address.country = Some("DE");
    assert!(!unknown_address.holds(&checkout_posts_from_the_office));
}

#[test]
fn paths_are_matched_on_the_canonical_path_so_spellings_do_not_escape_a_rule() {
    let protect = rule(
        Action::Protect,
        Conditions {
            paths: paths(&["/static/checkout/*"]),
            ..Conditions::default()
        },
    );
    for target in [
        "/static/checkout/pay",
        "/static//checkout/pay",
        "/static/x/../checkout/pay",
        "/static/%63heckout/pay",
        "/static/checkout;jsessionid=1/pay",
        "/static/./checkout/pay",
    ] {
        assert!(asked(target).holds(&protect), "{target}");
    }
    assert!(!asked("/static/Checkout/pay").holds(&protect));
}

#[test]
fn the_first_rule_that_holds_decides() {
    let rules = vec![
        rule(
            Action::Block,
            Conditions {
                networks: vec![Cidr::parse("203.0.113.0/24").unwrap()],
                ..Conditions::default()
            },
        ),
        rule(
            Action::Bypass,
            Conditions {
                query: named("preview", secret()),
                ..Conditions::default()
            },
        ),
    ];
    let mut blocked = asked("/drop?preview=preview-0123456789");
    blocked.ip = Some("203.0.113.9".parse().unwrap());
    let held = |a: &Asked| {
        let head = Head {
            method: &a.method,
            target: a.target.as_bytes(),
            host_lines: &[b"shop.example"],
            authority: None,
            needs_host: true,
        };
        let canonical = Canonical::read(head, &Sites::default()).unwrap();
        let request = Request::new(&canonical, &a.headers, a.ip);
        first_holding(&rules, &request).map(|(i, r)| (i, r.action))
    };
    assert_eq!(held(&blocked), Some((0, Action::Block)));
    assert_eq!(
        held(&asked("/drop?preview=preview-0123456789")),
        Some((1, Action::Bypass))
    );
    assert_eq!(held(&asked("/drop")), None);
}

#[test]
fn secrets_never_print() {
    let shown = format!("{:?}", named("preview", secret()));
    assert!(!shown.contains(SECRET), "{shown}");
}

#[test]
fn an_earlier_rule_covers_a_later_one_only_when_it_holds_wherever_that_one_would() {
    let block_range = |nets: &[&str]| {
        rule(
            Action::Block,
            Conditions {
                networks: nets.iter().map(|n| Cidr::parse(n).unwrap()).collect(),
                ..Conditions::default()
            },
        )
    };
    // A wider range first: the narrower can never decide; the other way round it can.
    let wide = block_range(&["203.0.113.0/24"]);
    let narrow = rule(
        Action::Bypass,
        Conditions {
            networks: vec![Cidr::parse("203.0.113.7").unwrap()],
            paths: paths(&["/drop/*"]),
            ..Conditions::default()
        },
    );
    assert!(wide.covers(&narrow));
    assert!(!narrow.covers(&wide));
    assert!(!block_range(&["198.51.100.0/24"]).covers(&narrow));

    // Paths: a pattern that contains the other's, `*` and all.
    let drop_all = rule(
        Action::Protect,
        Conditions {
            paths: paths(&["/drop/*"]),
            ..Conditions::default()
        },
    );
    let drop_x = |p: &str| {
        rule(
            Action::Block,
            Conditions {
                paths: paths(&[p]),
                methods: vec![http::Method::POST],
                ..Conditions::default()
            },
        )
    };
    assert!(drop_all.covers(&drop_x("/drop/x*")));
    assert!(drop_all.covers(&drop_x("/drop/a")));
    assert!(!drop_all.covers(&drop_x("/dro*")), "wider than the earlier");
    assert!(!drop_all.covers(&drop_x("*/drop/a")));
    assert!(
        !drop_x("/drop/a").covers(&drop_all),
        "a method the later lacks"
    );

    // Values: the same secret, or a pattern a secret or narrower pattern satisfies; one
    // matching occurrence never stands for a secret's "every occurrence".
    let with_query = |action, value| {
        rule(
            action,
            Conditions {
                query: named("preview", value),
                ..Conditions::default()
            },
        )
    };
    let bypass = with_query(Action::Bypass, secret());
    assert!(bypass.covers(&with_query(Action::Bypass, secret())));
    assert!(!bypass.covers(&with_query(
        Action::Bypass,
        Expected::Secret(format!("{SECRET}x"))
    )));
    assert!(with_query(Action::Block, Expected::Pattern("preview-*".into())).covers(&bypass));
    assert!(!bypass.covers(&with_query(Action::Block, Expected::Pattern(SECRET.into()))));
    assert!(!with_query(Action::Block, Expected::Pattern("other*".into())).covers(&bypass));
    // A condition the later rule does not have at all: it may hold without it.
    assert!(!bypass.covers(&drop_all));
    // No condition: holds for everything.
    assert!(rule(Action::Block, Conditions::default()).covers(&bypass));
}
