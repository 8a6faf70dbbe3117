//! A room's rules (`[[room.rules]]`): conditions on the request as the gate sees it (the
//! canonical path, the query's parameters decoded, the method, headers, cookies, the client's
//! network, the country a trusted proxy named) and what follows when all of a rule's hold.
//! The first rule that holds decides; `config/model/rules.rs` reads them from the file.
//!
//! A value that appears more than once (`?preview=a&preview=b`, a header sent twice, two cookies
//! of one name) is read the way that favours the shop: a `bypass` rule holds only when every
//! occurrence matches (an origin that reads the last one cannot be handed another), a `protect`
//! or `block` rule when any does (an origin that reads the first one cannot be handed a clean
//! one to look past the rule).

use std::net::IpAddr;

use subtle::ConstantTimeEq;

use crate::request::client::Cidr;
use crate::request::route::{PathPattern, glob_match};
use crate::request::view::{Request, cookies_in};

/// What follows when a rule holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Straight to the origin, not counted, whatever the room's state.
    Bypass,
    /// The room applies, whatever the room's bypass lists (`bypass`, `bypass_ips`, ...) say.
    Protect,
    /// 403, the branded page; nothing reaches the origin.
    Block,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Bypass => "bypass",
            Action::Protect => "protect",
            Action::Block => "block",
        }
    }
}

/// How a value condition compares: a bypass rule's values are secrets (whoever knows one skips
/// the line), compared whole in constant time; the others are patterns where `*` matches any
/// run of characters.
#[derive(Clone, PartialEq, Eq)]
pub enum Expected {
    Secret(String),
    Pattern(String),
}

impl Expected {
    fn matches(&self, got: &str) -> bool {
        match self {
            Expected::Secret(want) => got.as_bytes().ct_eq(want.as_bytes()).into(),
            Expected::Pattern(want) => glob_match(want.as_bytes(), got.as_bytes()),
        }
    }

    /// The value as `--test` and the admin API may show it.
    pub fn shown(&self) -> &str {
        match self {
            Expected::Secret(_) => "********",
            Expected::Pattern(p) => p,
        }
    }

    /// The value itself, for the Terraform export (which writes the secrets it is given).
    pub fn raw(&self) -> &str {
        match self {
            Expected::Secret(s) | Expected::Pattern(s) => s,
        }
    }
}

/// By hand, so that printing the settings never shows a secret.
impl std::fmt::Debug for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.shown())
    }
}

/// `name` must hold `value`: a query parameter (name decoded, case-sensitive), a header (name
/// lower case) or a cookie (case-sensitive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub name: String,
    pub value: Expected,
}

/// A rule's conditions; an empty list is no condition (the file refuses an empty list written
/// out, which would match nothing). All that are set must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions {
    /// The canonical path matches one of these.
    pub paths: Vec<PathPattern>,
    /// The method is one of these.
    pub methods: Vec<http::Method>,
    /// Each parameter holds its value.
    pub query: Vec<Named>,
    pub headers: Vec<Named>,
    pub cookies: Vec<Named>,
    /// The client address (as resolved through trusted proxies) is in one of these.
    pub networks: Vec<Cidr>,
    /// The country a trusted proxy named (`listen.country_header`) is one of these, upper case.
    pub countries: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Its `name`, or `rules[i]`: how metrics and `--test` call it.
    pub label: String,
    pub action: Action,
    pub when: Conditions,
}

/// How the occurrences of one name are read (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Every occurrence matches, and there is at least one.
    Every,
    /// At least one occurrence matches.
    Any,
}

impl Reading {
    fn of<S: AsRef<str>>(self, mut values: impl Iterator<Item = S>, expected: &Expected) -> bool {
        match self {
            Reading::Any => values.any(|v| expected.matches(v.as_ref())),
            Reading::Every => {
                let mut seen = false;
                for value in values {
                    if !expected.matches(value.as_ref()) {
                        return false;
                    }
                    seen = true;
                }
                seen
            }
        }
    }
}

impl Rule {
    /// Whether every condition holds for `req`.
    pub fn holds(&self, req: &Request<'_>) -> bool {
        let when = &self.when;
        let reading = match self.action {
            Action::Bypass => Reading::Every,
            Action::Protect | Action::Block => Reading::Any,
        };
        (when.paths.is_empty() || when.paths.iter().any(|p| p.matches(req.path)))
            && (when.methods.is_empty() || when.methods.contains(req.method))
            && when
                .query
                .iter()
                .all(|c| reading.of(query_values(req.query, &c.name), &c.value))
            && when
                .headers
                .iter()
                .all(|c| reading.of(header_values(req.headers, &c.name), &c.value))
            && when
                .cookies
                .iter()
                .all(|c| reading.of(cookies_in(req.headers, &c.name), &c.value))
            && (when.networks.is_empty()
                || req.client_ip.is_some_and(|ip| in_any(&when.networks, ip)))
            && (when.countries.is_empty()
                || req
                    .country
                    .is_some_and(|c| when.countries.iter().any(|w| w.eq_ignore_ascii_case(c))))
    }

    /// Whether this rule holds for every request `later` holds for, so that `later`, after it,
    /// can never decide (the first rule that holds does). Sure when it says so: each of this
    /// rule's conditions is absent, or implied by one of `later`'s; a rule it cannot prove
    /// shadowed (two patterns that overlap without one containing the other) is left alone.
    pub fn covers(&self, later: &Rule) -> bool {
        let (mine, theirs) = (&self.when, &later.when);
        // A pattern matches the other as text, its `*` as characters, only when every path the
        // other matches is its too: a `*` of the other is spanned by one of its own.
        let paths = covered(&mine.paths, &theirs.paths, |q, p| q.matches(p.as_str()));
        let methods = covered(&mine.methods, &theirs.methods, |m, t| m == t);
        let named = |mine: &[Named], theirs: &[Named]| {
            mine.iter().all(|want| {
                theirs
                    .iter()
                    .any(|got| got.name == want.name && implies(&got.value, &want.value))
            })
        };
        let networks = covered(&mine.networks, &theirs.networks, |m, n| m.covers(n));
        let countries = covered(&mine.countries, &theirs.countries, |m, c| m == c);
        paths
            && methods
            && named(&mine.query, &theirs.query)
            && named(&mine.headers, &theirs.headers)
            && named(&mine.cookies, &theirs.cookies)
            && networks
            && countries
    }

    /// Whether the rule speaks of who asks, never of where: such a block rule holds for the
    /// room's own `/__waitroom/` requests too (a blocked network cannot join through them).
    pub fn about_the_visitor_alone(&self) -> bool {
        self.when.paths.is_empty()
    }
}

/// Whether a list condition of an earlier rule (any of `mine`, none meaning any request) holds
/// whenever the later rule's (any of `theirs`) does: each of theirs is covered by one of mine.
fn covered<T>(mine: &[T], theirs: &[T], covers: impl Fn(&T, &T) -> bool) -> bool {
    mine.is_empty()
        || (!theirs.is_empty() && theirs.iter().all(|t| mine.iter().any(|m| covers(m, t))))
}

/// Whether a name holding `got` (as a later rule reads it) always holds `want` (as an earlier
/// one does). A secret is read as "every occurrence is it" (bypass), a pattern as "one
/// occurrence matches" (protect, block): a secret implies a pattern it matches and the same
/// secret; a pattern implies a pattern that contains it, never a secret (one matching
/// occurrence says nothing of the others).
fn implies(got: &Expected, want: &Expected) -> bool {
    match (got, want) {
        (Expected::Secret(g), Expected::Secret(w)) => g == w,
        (Expected::Secret(g), Expected::Pattern(w)) => glob_match(w.as_bytes(), g.as_bytes()),
        (Expected::Pattern(g), Expected::Pattern(w)) => glob_match(w.as_bytes(), g.as_bytes()),
        (Expected::Pattern(_), Expected::Secret(_)) => false,
    }
}

fn in_any(networks: &[Cidr], ip: IpAddr) -> bool {
    networks.iter().any(|n| n.contains(ip))
}

/// The values of parameter `name` in the query, names and values decoded (`%70review` is
/// `preview`, `+` a space), as an origin's parser reads them.
fn query_values<'a>(
    query: Option<&'a str>,
    name: &'a str,
) -> impl Iterator<Item = std::borrow::Cow<'a, str>> + 'a {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(move |(n, _)| n == name)
        .map(|(_, v)| v)
}

/// Every line of header `name`, surrounding spaces aside. A line that is not text is kept as a
/// value no condition matches, so that it counts against a bypass's "every".
fn header_values<'a>(headers: &'a http::HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().map(str::trim).unwrap_or("\u{0}"))
}

/// The first rule that holds for `req`, and its place.
pub fn first_holding<'r>(rules: &'r [Rule], req: &Request<'_>) -> Option<(usize, &'r Rule)> {
    rules.iter().enumerate().find(|(_, rule)| rule.holds(req))
}

#[cfg(test)]
mod tests;
