//! `[[room.rules]]` as Cloudflare's waiting room rules (`cloudflare_waiting_room_rules`), whose
//! only action is to bypass the room. A bypass rule is written as its expression; a protect or
//! block rule cannot be, but the first-match order can: every bypass rule after one (the
//! room's own, and the bypass lists after all rules) is written with `and not (...)` of it, so
//! that the edge lets through no request the proxy would hold or refuse. Blocking itself is a
//! WAF custom rule's job; the note gives its expression. The Rules language's pieces the room's
//! own export writes too (a string literal, a bypass path's expression) are here.

use crate::request::route::PathPattern;
use crate::request::rules::{Action, Conditions, Expected, Named, Rule};

/// The rules as Cloudflare can have them.
#[derive(Debug, Default)]
pub(super) struct ExportedRules {
    /// (description, expression) of each bypass rule, in order.
    pub bypass: Vec<(String, String)>,
    /// `not (...)` of every protect and block rule: what each later bypass rule needs too.
    pub guards: Vec<String>,
    pub notes: Vec<String>,
}

impl ExportedRules {
    /// `expression`, kept off the requests a protect or block rule takes.
    pub fn guarded(&self, expression: &str) -> String {
        if self.guards.is_empty() {
            return expression.to_owned();
        }
        format!("({expression}) and {}", self.guards.join(" and "))
    }
}

pub(super) fn export_rules(rules: &[Rule]) -> ExportedRules {
    let mut out = ExportedRules::default();
    for rule in rules {
        let expression = expression(&rule.when);
        match rule.action {
            Action::Bypass => {
                let guarded = out.guarded(&expression);
                out.bypass.push((format!("rule {}", rule.label), guarded));
            }
            Action::Protect => {
                out.notes.push(format!(
                    "room.rules {:?} (protect): Cloudflare's waiting room rules only bypass; \
                     written as `not (...)` on every bypass rule after it, so none lets its \
                     requests through",
                    rule.label
                ));
                out.guards.push(format!("not ({expression})"));
            }
            Action::Block => {
                out.notes.push(format!(
                    "room.rules {:?} (block): Cloudflare's waiting room cannot block; not \
                     exported (a WAF custom rule with action block does it at the edge: {}); \
                     the bypass rules after it are written with `not (...)` of it",
                    rule.label, expression
                ));
                out.guards.push(format!("not ({expression})"));
            }
        }
    }
    out
}

/// One rule's conditions as a Rules-language expression, each condition in parentheses.
fn expression(when: &Conditions) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !when.paths.is_empty() {
        let each: Vec<String> = when.paths.iter().map(bypass_expression).collect();
        parts.push(format!("({})", each.join(" or ")));
    }
    if !when.methods.is_empty() {
        let each: Vec<String> = when
            .methods
            .iter()
            .map(|m| rules_string(m.as_str()))
            .collect();
        parts.push(format!("http.request.method in {{{}}}", each.join(" ")));
    }
    for (field, named) in [
        ("http.request.uri.args", &when.query),
        ("http.request.headers", &when.headers),
        ("http.request.cookies", &when.cookies),
    ] {
        parts.extend(named.iter().map(|n| values(field, n)));
    }
    if !when.networks.is_empty() {
        let each: Vec<String> = when.networks.iter().map(ToString::to_string).collect();
        parts.push(format!("ip.src in {{{}}}", each.join(" ")));
    }
    if !when.countries.is_empty() {
        let each: Vec<String> = when.countries.iter().map(|c| rules_string(c)).collect();
        parts.push(format!("ip.src.country in {{{}}}", each.join(" ")));
    }
    parts.join(" and ")
}

/// A value condition: a secret must be every value of the name (and there is one), as the
/// proxy reads a bypass; a pattern any value, as it reads a protect or block rule.
fn values(field: &str, named: &Named) -> String {
    let values = format!("{field}[{}][*]", rules_string(&named.name));
    match &named.value {
        Expected::Secret(secret) => {
            let is = format!("{values} eq {}", rules_string(secret));
            format!("(any({is}) and all({is}))")
        }
        Expected::Pattern(pattern) if pattern.contains('*') => format!(
            "any({values} strict wildcard {})",
            rules_string(&pattern.replace('\\', "\\\\"))
        ),
        Expected::Pattern(pattern) => format!("any({values} eq {})", rules_string(pattern)),
    }
}

/// A Cloudflare Rules-language string literal.
pub(super) fn rules_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Our bypass pattern as a Cloudflare rule expression on the same path, case-sensitive like ours:
/// an exact path, a prefix, a suffix, or else a strict wildcard (where `*` matches slashes too,
/// as in ours).
pub fn bypass_expression(pattern: &PathPattern) -> String {
    let text = pattern.as_str();
    const PATH: &str = "http.request.uri.path";
    let stars = text.matches('*').count();
    match (stars, text.strip_suffix('*'), text.strip_prefix('*')) {
        (0, _, _) => format!("{PATH} eq {}", rules_string(text)),
        (1, Some(prefix), _) if !prefix.is_empty() => {
            format!("starts_with({PATH}, {})", rules_string(prefix))
        }
        (1, _, Some(suffix)) if !suffix.is_empty() => {
            format!("ends_with({PATH}, {})", rules_string(suffix))
        }
        // In a wildcard value a backslash escapes the next character.
        _ => format!(
            "{PATH} strict wildcard {}",
            rules_string(&text.replace('\\', "\\\\"))
        ),
    }
}
