//! `[[room.rules]]` read into `request::rules::Rule`, refused when a rule could never hold, and
//! each said in words for `--test`.
//!
//! A bypass rule's query, header and cookie values are secrets, like `bypass_headers`': anyone
//! can send any of them, so each needs a value long enough not to be guessed
//! (`MIN_BYPASS_SECRET_CHARS`), compared in constant time and masked wherever the settings are
//! shown. A protect or block rule's values are patterns (`*` any run of characters).

use std::collections::BTreeMap;

use super::bypass::MIN_BYPASS_SECRET_CHARS;
use super::{ConfigError, canonical, invalid};
use crate::config::file::RuleSection;
use crate::request::client::Cidr;
use crate::request::route::{PathPattern, Route};
use crate::request::rules::{Action, Conditions, Expected, Named, Rule};

/// What a masked secret shows.
const MASK: &str = "********";

/// Every rule of a room, each error named `room.rules[i].key`.
pub(crate) fn rules(sections: &[RuleSection]) -> Result<Vec<Rule>, ConfigError> {
    sections
        .iter()
        .enumerate()
        .map(|(i, section)| rule(i, section))
        .collect()
}

fn rule(i: usize, s: &RuleSection) -> Result<Rule, ConfigError> {
    let key = |k: &str| format!("room.rules[{i}].{k}");
    let action = match s.action.as_str() {
        "bypass" => Action::Bypass,
        "protect" => Action::Protect,
        "block" => Action::Block,
        other => {
            return Err(invalid(
                &key("action"),
                format!("{other:?} is not one of bypass, protect, block"),
            ));
        }
    };
    let label = match &s.name {
        Some(name) if name.trim().is_empty() => {
            return Err(invalid(&key("name"), "cannot be empty"));
        }
        Some(name) => name.trim().to_owned(),
        None => format!("rules[{i}]"),
    };
    let paths = match &s.paths {
        Some(list) => canonical::patterns(&key("paths"), non_empty(&key("paths"), list)?)?,
        None => Vec::new(),
    };
    let methods = match &s.methods {
        Some(list) => non_empty(&key("methods"), list)?
            .iter()
            .map(|m| method(&key("methods"), m))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let secret = action == Action::Bypass;
    let query = values(&key("query"), s.query.as_ref(), secret, query_name)?;
    let headers = values(&key("headers"), s.headers.as_ref(), secret, header_name)?;
    let cookies = values(&key("cookies"), s.cookies.as_ref(), secret, cookie_name)?;
    let networks = match &s.networks {
        Some(list) => non_empty(&key("networks"), list)?
            .iter()
            .map(|c| Cidr::parse(c).map_err(|e| invalid(&key("networks"), e)))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let countries = match &s.countries {
        Some(list) => non_empty(&key("countries"), list)?
            .iter()
            .map(|c| country(&key("countries"), c))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let when = Conditions {
        paths,
        methods,
        query,
        headers,
        cookies,
        networks,
        countries,
    };
    if when == Conditions::default() {
        return Err(invalid(
            &format!("room.rules[{i}]"),
            format!(
                "has no condition: it would {} every request of the room; give it paths, \
                 methods, query, headers, cookies, networks or countries",
                action.as_str()
            ),
        ));
    }
    Ok(Rule {
        label,
        action,
        when,
    })
}

fn non_empty<'a>(key: &str, list: &'a [String]) -> Result<&'a [String], ConfigError> {
    if list.is_empty() {
        return Err(invalid(
            key,
            "is empty, so the rule could never hold: leave it out to mean any",
        ));
    }
    Ok(list)
}

fn method(key: &str, text: &str) -> Result<http::Method, ConfigError> {
    let upper = text.trim().to_ascii_uppercase();
    http::Method::from_bytes(upper.as_bytes())
        .ok()
        .filter(|_| !upper.is_empty())
        .ok_or_else(|| invalid(key, format!("{text:?} is not an HTTP method")))
}

fn country(key: &str, text: &str) -> Result<String, ConfigError> {
    let code = text.trim();
    if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(invalid(
            key,
            format!("{text:?} is not a two-letter country code (ISO 3166-1, like \"DE\")"),
        ));
    }
    Ok(code.to_ascii_uppercase())
}

fn query_name(name: &str) -> Result<String, String> {
    match name.is_empty() {
        true => Err("a parameter needs a name".into()),
        false => Ok(name.to_owned()),
    }
}

fn header_name(name: &str) -> Result<String, String> {
    http::HeaderName::from_bytes(name.trim().as_bytes())
        .map(|n| n.as_str().to_owned())
        .map_err(|_| format!("{name:?} is not a header name"))
}

fn cookie_name(name: &str) -> Result<String, String> {
    match !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b";=,".contains(&b))
    {
        true => Ok(name.to_owned()),
        false => Err(format!("{name:?} is not a cookie name")),
    }
}

/// A map of names to values: secrets for a bypass rule (long enough, printable), patterns
/// otherwise.
fn values(
    key: &str,
    map: Option<&BTreeMap<String, String>>,
    secret: bool,
    name_of: fn(&str) -> Result<String, String>,
) -> Result<Vec<Named>, ConfigError> {
    let Some(map) = map else {
        return Ok(Vec::new());
    };
    if map.is_empty() {
        return Err(invalid(
            key,
            "is empty: leave it out, or name what must hold",
        ));
    }
    let mut out: Vec<Named> = Vec::new();
    for (name, value) in map {
        let name = name_of(name).map_err(|e| invalid(key, e))?;
        let value = if secret {
            if value.chars().count() < MIN_BYPASS_SECRET_CHARS {
                return Err(invalid(
                    &format!("{key}.{name}"),
                    format!(
                        "a bypass rule's value is a secret (anyone can send any {what}), and \
                         must be at least {MIN_BYPASS_SECRET_CHARS} characters long: a short \
                         one is guessed, and anyone who guesses it skips the line",
                        what = key.rsplit('.').next().unwrap_or("value")
                    ),
                ));
            }
            if !value.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(invalid(
                    &format!("{key}.{name}"),
                    "a secret must be printable ASCII without spaces",
                ));
            }
            Expected::Secret(value.clone())
        } else {
            Expected::Pattern(value.clone())
        };
        // Header names are case-insensitive: two spellings of one name are one header, whose
        // lines a bypass must all match, so two different secrets for it could never hold. Two
        // patterns for it are two conditions, each held by any line.
        if let Some(twice) = out.iter().find(|n| n.name == name) {
            if twice.value == value {
                continue;
            }
            if secret {
                return Err(invalid(
                    key,
                    format!("{name:?} is given two different secrets: the rule could never hold"),
                ));
            }
        }
        out.push(Named { name, value });
    }
    Ok(out)
}

/// A rule's path patterns that no request of the room's routes can match: the rule only ever
/// sees the room's requests, so such a pattern would never hold.
pub(crate) fn unreachable_paths<'r>(rule: &'r Rule, routes: &[Route]) -> Vec<&'r PathPattern> {
    rule.when
        .paths
        .iter()
        .filter(|p| !routes.iter().any(|r| could_meet(p.as_str(), &r.path)))
        .collect()
}

/// Whether some path starting with `prefix` can match `pattern`.
fn could_meet(pattern: &str, prefix: &str) -> bool {
    let literal = pattern.split('*').next().unwrap_or("");
    if pattern.contains('*') {
        literal.starts_with(prefix) || prefix.starts_with(literal)
    } else {
        pattern.starts_with(prefix)
    }
}

/// A rule in words, secrets masked: what `--test` prints.
pub fn explain(rule: &Rule) -> String {
    let when = &rule.when;
    let mut parts: Vec<String> = Vec::new();
    let list = |items: Vec<String>| items.join(" or ");
    if !when.paths.is_empty() {
        parts.push(format!(
            "the path matches {}",
            list(
                when.paths
                    .iter()
                    .map(|p| format!("{:?}", p.as_str()))
                    .collect()
            )
        ));
    }
    if !when.methods.is_empty() {
        parts.push(format!(
            "the method is {}",
            list(when.methods.iter().map(ToString::to_string).collect())
        ));
    }
    let reading = match rule.action {
        Action::Bypass => "every",
        Action::Protect | Action::Block => "any",
    };
    for (what, named) in [
        ("query parameter", &when.query),
        ("header", &when.headers),
        ("cookie", &when.cookies),
    ] {
        for n in named {
            let value = match &n.value {
                Expected::Secret(_) => format!("the secret {MASK}"),
                Expected::Pattern(p) => format!("{p:?}"),
            };
            parts.push(format!("{reading} {what} {:?} is {value}", n.name));
        }
    }
    if !when.networks.is_empty() {
        parts.push(format!(
            "the client is in {}",
            list(when.networks.iter().map(ToString::to_string).collect())
        ));
    }
    if !when.countries.is_empty() {
        parts.push(format!(
            "the trusted proxy's country is {}",
            list(when.countries.clone())
        ));
    }
    let then = match rule.action {
        Action::Bypass => "goes straight to the origin, not counted",
        Action::Protect => "waits in the room like any, whatever the bypass lists say",
        Action::Block => "is refused with 403 and the blocked page; nothing reaches the origin",
    };
    format!(
        "rule {:?}: a request where {} {then}",
        rule.label,
        parts.join(" and ")
    )
}

/// A rule's secret values masked in the file's form, wherever the settings are shown.
pub(crate) fn mask(section: &mut RuleSection) {
    if section.action != "bypass" {
        return;
    }
    for map in [
        &mut section.query,
        &mut section.headers,
        &mut section.cookies,
    ]
    .into_iter()
    .flatten()
    {
        for value in map.values_mut() {
            *value = MASK.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml_text: &str) -> RuleSection {
        toml::from_str(toml_text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(toml_text: &str) -> String {
        match rules(&[section(toml_text)]) {
            Ok(r) => panic!("accepted: {r:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn rules_that_could_never_hold_are_refused_with_their_key() {
        for (text, start) in [
            (
                "action = \"block\"\nmethods = []",
                "room.rules[0].methods: is empty",
            ),
            (
                "action = \"block\"\npaths = []",
                "room.rules[0].paths: is empty",
            ),
            (
                "action = \"block\"\nnetworks = []",
                "room.rules[0].networks: is empty",
            ),
            (
                "action = \"block\"\ncountries = []",
                "room.rules[0].countries: is empty",
            ),
            (
                "action = \"block\"\nquery = {}",
                "room.rules[0].query: is empty",
            ),
            ("action = \"block\"", "room.rules[0]: has no condition"),
            (
                "action = \"allow\"\npaths = [\"/a\"]",
                "room.rules[0].action: \"allow\"",
            ),
            (
                "action = \"block\"\ncountries = [\"Germany\"]",
                "room.rules[0].countries:",
            ),
            (
                "action = \"block\"\nmethods = [\"GE T\"]",
                "room.rules[0].methods:",
            ),
            (
                "action = \"block\"\npaths = [\"/a/../b\"]",
                "room.rules[0].paths:",
            ),
            (
                "action = \"bypass\"\nquery = { preview = \"short\" }",
                "room.rules[0].query.preview: a bypass rule's value is a secret",
            ),
            (
                "action = \"bypass\"\nheaders = { \"X-Key\" = \"0123456789abcdef\", \"x-key\" = \"fedcba9876543210\" }",
                "room.rules[0].headers: \"x-key\" is given two different secrets",
            ),
        ] {
            let e = error(text);
            assert!(e.starts_with(start), "{text}: {e}");
        }
    }

    #[test]
    fn a_rule_reads_into_its_conditions_and_explains_itself_without_its_secret() {
        let read = rules(&[section(
            "name = \"preview\"\naction = \"bypass\"\nmethods = [\"get\", \"HEAD\"]\n\
             query = { preview = \"0123456789abcdef\" }",
        )])
        .unwrap();
        let rule = &read[0];
        assert_eq!(rule.label, "preview");
        assert_eq!(rule.when.methods, [http::Method::GET, http::Method::HEAD]);
        let words = explain(rule);
        assert!(!words.contains("0123456789abcdef"), "{words}");
        assert_eq!(
            words,
            "rule \"preview\": a request where the method is GET or HEAD and every query \
             parameter \"preview\" is the secret ******** goes straight to the origin, not counted"
        );
        let block = rules(&[section(
            "action = \"block\"\nnetworks = [\"203.0.113.0/24\"]\ncountries = [\"xx\"]",
        )])
        .unwrap();
        assert_eq!(block[0].label, "rules[0]");
        assert_eq!(block[0].when.countries, ["XX"]);
        assert!(
            explain(&block[0])
                .contains("the client is in 203.0.113.0/24 and the trusted proxy's country is XX")
        );
        // Two spellings of one header name with two patterns: both must hold.
        let both = rules(&[section(
            "action = \"block\"\nheaders = { \"X-A\" = \"1\", \"x-a\" = \"2\" }",
        )])
        .unwrap();
        assert_eq!(both[0].when.headers.len(), 2);
    }

    #[test]
    fn a_path_outside_every_route_of_the_room_is_found() {
        let route = |path: &str| Route {
            host: None,
            path: path.into(),
        };
        let rule = &rules(&[section(
            "action = \"protect\"\npaths = [\"/drop/static/*\", \"/cart/*\", \"*.css\", \"/dr*\"]",
        )])
        .unwrap()[0];
        let far: Vec<&str> = unreachable_paths(rule, &[route("/drop")])
            .iter()
            .map(|p| p.as_str())
            .collect();
        assert_eq!(far, ["/cart/*"]);
        assert!(unreachable_paths(rule, &[route("/drop"), route("/cart")]).is_empty());
    }

    #[test]
    fn masking_hides_a_bypass_rules_values_only() {
        let mut bypass = section("action = \"bypass\"\ncookies = { staff = \"0123456789abcdef\" }");
        mask(&mut bypass);
        assert_eq!(bypass.cookies.unwrap()["staff"], MASK);
        let mut block = section("action = \"block\"\nheaders = { \"user-agent\" = \"*bot*\" }");
        mask(&mut block);
        assert_eq!(block.headers.unwrap()["user-agent"], "*bot*");
    }
}
