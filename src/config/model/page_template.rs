//! `[page] template`: the operator's Cloudflare-style Mustache page, read and checked when the
//! config is: its tags walked once to report mistakes with their line (ramhorns, which renders
//! it, gives none) and to warn about names nobody fills, which Mustache would silently render
//! empty. The names are Cloudflare's `custom_page_html` variables plus ours; `respond` compiles
//! the checked source and fills them.

use std::path::{Path, PathBuf};

use super::{ConfigError, invalid};
use crate::config::file::PageSection;

/// Every name the proxy fills: Cloudflare's cfWaitingRoom fields, the starter template's derived
/// values, `turnstile` and `infiniteQueue`, then ours (empty at Cloudflare's edge).
pub const VARIABLES: [&str; 37] = [
    "inWaitingRoom",
    "waitTimeKnown",
    "waitTime",
    "waitTime25Percentile",
    "waitTime50Percentile",
    "waitTime75Percentile",
    "waitTimeFormatted",
    "queueIsFull",
    "queueAll",
    "lastUpdated",
    "refreshIntervalSeconds",
    "queueingMethod",
    "isFIFOQueue",
    "isRandomQueue",
    "isPassthroughQueue",
    "isRejectQueue",
    "isEventActive",
    "isEventPrequeueing",
    "timeUntilEventStart",
    "timeUntilEventStartFormatted",
    "timeUntilEventEnd",
    "timeUntilEventEndFormatted",
    "shuffleAtEventStart",
    "waitTimeHours",
    "waitTimeHourMinutes",
    "timeUntilEventStartHours",
    "timeUntilEventStartHourMinutes",
    "turnstile",
    "infiniteQueue",
    "position",
    "queued",
    "roomName",
    "proofOfWork",
    "proofOfWorkSeed",
    "proofOfWorkDifficultyBits",
    "proofOfWorkExpires",
    "proofOfWorkUrl",
];

/// ramhorns keeps at most this many sections open at once.
const MAX_NESTING: usize = 16;

/// A mistake in a template, with its line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct TemplateError {
    pub line: usize,
    pub reason: String,
}

fn at(line: usize, reason: impl Into<String>) -> TemplateError {
    TemplateError {
        line,
        reason: reason.into(),
    }
}

/// A template read from the file `[page] template` names, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageTemplate {
    pub path: PathBuf,
    pub source: String,
}

/// Reads and checks `[page] template`; a relative path is taken from `base_dir`.
pub(crate) fn page_template(
    page: &PageSection,
    base_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<PageTemplate>, ConfigError> {
    let Some(name) = &page.template else {
        return Ok(None);
    };
    let path = base_dir.join(name);
    let source = std::fs::read_to_string(&path).map_err(|e| {
        invalid(
            "page.template",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let lint =
        check(&source).map_err(|e| invalid("page.template", format!("{}: {e}", path.display())))?;
    warnings.extend(
        lint.into_iter()
            .map(|w| format!("page.template: {}: {w}", path.display())),
    );
    Ok(Some(PageTemplate { path, source }))
}

/// The warnings of a template (line and name of tags nobody fills), or its first mistake.
/// Walks the tags as ramhorns reads them: `{{name}}`, `{{{raw}}}`, `{{&raw}}`, `{{#section}}`,
/// `{{^inverted}}`, `{{/close}}`, `{{! comment }}`. Partials and delimiter changes are refused:
/// Cloudflare's custom pages have neither.
pub fn check(source: &str) -> Result<Vec<String>, TemplateError> {
    let mut warnings = Vec::new();
    let mut open: Vec<(&str, usize)> = Vec::new();
    let mut rest = source;
    let mut line = 1;
    while let Some(start) = rest.find("{{") {
        line += rest[..start].matches('\n').count();
        let after = &rest[start + 2..];
        // The character after "{{" says what the tag is; a plain variable has none.
        let (sigil, closing) = match after.chars().next() {
            Some('{') => (Some('{'), "}}}"),
            Some(c @ ('&' | '#' | '^' | '/' | '!' | '>' | '=')) => (Some(c), "}}"),
            _ => (None, "}}"),
        };
        let body_start = usize::from(sigil.is_some());
        let Some(end) = after[body_start..].find(closing) else {
            return Err(at(
                line,
                format!("a tag opened here has no closing {closing:?}"),
            ));
        };
        let inner = &after[body_start..body_start + end];
        let tag_line = line;
        line += inner.matches('\n').count();
        rest = &after[body_start + end + closing.len()..];
        // ramhorns reads a tag as space-separated words ending at the first "}}".
        if inner.contains('}') {
            return Err(at(tag_line, "a '}' inside a tag (comments included)"));
        }
        if sigil == Some('!') {
            continue;
        }
        let name = inner.trim_matches(' ');
        match sigil {
            Some('>') => return Err(at(tag_line, "partials ({{>name}}) are not supported")),
            Some('=') => {
                return Err(at(
                    tag_line,
                    "changing delimiters ({{=...=}}) is not supported",
                ));
            }
            _ if name.is_empty() => return Err(at(tag_line, "an empty tag {{}}")),
            _ if name.contains(char::is_whitespace) => {
                return Err(at(
                    tag_line,
                    format!("a tag holds one name padded with spaces, not {{{{{inner}}}}}"),
                ));
            }
            Some('#' | '^') => {
                if open.len() >= MAX_NESTING {
                    return Err(at(
                        tag_line,
                        format!("sections nested deeper than {MAX_NESTING}"),
                    ));
                }
                open.push((name, tag_line));
            }
            Some('/') => {
                match open.pop() {
                    Some((opened, _)) if opened == name => {}
                    Some((opened, opened_line)) => {
                        return Err(at(
                            tag_line,
                            format!(
                                "{{{{/{name}}}}} closes {{{{#{opened}}}}} from line {opened_line}"
                            ),
                        ));
                    }
                    None => {
                        return Err(at(
                            tag_line,
                            format!("{{{{/{name}}}}} closes no open section"),
                        ));
                    }
                }
                continue;
            }
            _ => {}
        }
        if !VARIABLES.contains(&name) {
            warnings.push(format!(
                "line {tag_line}: {{{{{name}}}}} is not a variable the proxy fills (it renders empty)"
            ));
        }
    }
    match open.pop() {
        Some((name, line)) => Err(at(line, format!("{{{{#{name}}}}} is never closed"))),
        None => Ok(warnings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mistakes_are_reported_with_their_line() {
        let cases = [
            (
                "a\n{{#waitTimeKnown}}\nb",
                2,
                "{{#waitTimeKnown}} is never closed",
            ),
            (
                "a\nb\n{{/queueAll}}",
                3,
                "{{/queueAll}} closes no open section",
            ),
            (
                "{{#queueAll}}\n{{/queueIsFull}}",
                2,
                "{{/queueIsFull}} closes {{#queueAll}} from line 1",
            ),
            ("\n\n\n{{waitTime", 4, "no closing \"}}\""),
            ("{{{turnstile}}", 1, "no closing \"}}}\""),
            ("x\n{{> header}}", 2, "partials"),
            ("{{=<% %>=}}", 1, "delimiters"),
            ("{{}}", 1, "empty tag"),
            ("\n{{wait time}}", 2, "one name"),
            ("{{waitTime\n}}", 1, "one name"),
            ("\n{{! {x} }}", 2, "a '}' inside a tag"),
        ];
        for (source, line, needle) in cases {
            match check(source) {
                Err(TemplateError { line: got, reason }) => {
                    assert_eq!(got, line, "{source:?}: {reason}");
                    assert!(reason.contains(needle), "{source:?}: {reason}");
                }
                other => panic!("{source:?} gave {other:?}"),
            }
        }
        let deep = "{{#queueAll}}".repeat(17) + &"{{/queueAll}}".repeat(17);
        assert!(check(&deep).is_err());
    }

    #[test]
    fn unknown_names_warn_and_comments_do_not() {
        let warnings = check(
            "{{! a comment\n about waitTime }}\n\n{{waittime}}\n{{#isFifoQueue}}{{/isFifoQueue}}",
        )
        .unwrap();
        assert_eq!(
            warnings,
            [
                "line 4: {{waittime}} is not a variable the proxy fills (it renders empty)",
                "line 5: {{isFifoQueue}} is not a variable the proxy fills (it renders empty)",
            ]
        );
    }
}
