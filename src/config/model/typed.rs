//! The file read into its types (`ConfigFile`), every type error named by its key and said in
//! plain words, all of them in one run: serde stops at the first error and speaks of `u64`, so
//! the key is found from the error's place in the text (the document parsed with its spans), the
//! message is rewritten, and the key is blanked out (same length: the other places stay) to read
//! on. The admin API says the same words through `plain`.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{ConfigError, invalid};
use crate::config::file::ConfigFile;

/// More than any real file has; a bound in case blanking a key made no progress.
const MAX_ERRORS: usize = 50;

/// The file, and the errors met on the way; `None` when it cannot be read into its types even
/// with the bad keys left out.
pub(crate) fn read(text: &str) -> (Option<ConfigFile>, Vec<ConfigError>) {
    let mut text = text.to_owned();
    let mut errors = Vec::new();
    while errors.len() < MAX_ERRORS {
        let bad = match next_error(&text) {
            Next::Read(file) => return (Some(*file), errors),
            Next::Unreadable(error) => {
                errors.push(error);
                return (None, errors);
            }
            Next::Bad(bad) => bad,
        };
        errors.push(invalid(&bad.key, bad.reason.clone()));
        let Some(range) = bad.pair.filter(|r| blankable(&text, r)) else {
            return (None, errors);
        };
        // Left out, or (a required key) replaced by a value of some other type, whichever lets
        // the reading go on past this key; the model's complaints about a stand-in are not
        // reported (`Config::from_text_in` keeps the first error of a key).
        let value_start = range.start + text[range.clone()].find('=').map_or(0, |i| i + 1);
        let stand_ins = ["", "1", "\"\"", "false", "[]", "{}"];
        let mut moved_on = None;
        for stand_in in stand_ins {
            let candidate = if stand_in.is_empty() {
                format!("{}{}", &text[..range.start], &text[range.end..])
            } else {
                format!("{} {stand_in}{}", &text[..value_start], &text[range.end..])
            };
            let stuck = match next_error(&candidate) {
                Next::Bad(next) => next.key == bad.key,
                _ => false,
            };
            if !stuck {
                moved_on = Some(candidate);
                break;
            }
        }
        let Some(next) = moved_on else {
            return (None, errors);
        };
        text = next;
    }
    (None, errors)
}

/// A type error: the key it is about, in plain words, and the key-value pair's place when it
/// is one (not a table).
struct Bad {
    key: String,
    reason: String,
    pair: Option<Range<usize>>,
}

enum Next {
    Read(Box<ConfigFile>),
    Bad(Bad),
    /// A syntax error, or one that names no key.
    Unreadable(ConfigError),
}

fn next_error(text: &str) -> Next {
    let error = match toml::from_str::<ConfigFile>(text) {
        Ok(file) => return Next::Read(Box::new(file)),
        Err(error) => error,
    };
    // A syntax error: the document has no keys to name, toml's message shows the line.
    let (Ok(document), Some(span)) = (DeTable::parse(text), error.span()) else {
        return Next::Unreadable(ConfigError::Syntax(error.to_string()));
    };
    let mut path = Vec::new();
    let pair = if error.message().starts_with("missing field") {
        // Said of the table that lacks it: the one spanning exactly the error.
        if document.span() != span {
            locate_table(document.get_ref(), &span, &mut path);
        }
        None
    } else {
        locate(document.get_ref(), span.start, &mut path)
    };
    let (key, reason) = plain(&path.join(""), error.message());
    Next::Bad(Bad { key, reason, pair })
}

/// The path of the table spanning exactly `span`.
fn locate_table(table: &DeTable<'_>, span: &Range<usize>, path: &mut Vec<String>) -> bool {
    for (key, value) in table.iter() {
        let dot = if path.is_empty() { "" } else { "." };
        match value.get_ref() {
            DeValue::Table(inner) => {
                path.push(format!("{dot}{}", key.get_ref()));
                if value.span() == *span || locate_table(inner, span, path) {
                    return true;
                }
                path.pop();
            }
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let DeValue::Table(inner) = item.get_ref() {
                        path.push(format!("{dot}{}[{i}]", key.get_ref()));
                        if item.span() == *span || locate_table(inner, span, path) {
                            return true;
                        }
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// A key-value pair alone on its line (not a dotted key, not a table header) can go.
fn blankable(text: &str, range: &Range<usize>) -> bool {
    let line_start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..range.start].trim().is_empty()
}

/// The deepest key whose name or value holds `at`: its path is left in `path` (`room.`,
/// `events[0].`, ... joined), and its text (from the key to the end of the value) answered
/// when it is a plain key-value pair.
fn locate(table: &DeTable<'_>, at: usize, path: &mut Vec<String>) -> Option<Range<usize>> {
    for (key, value) in table.iter() {
        let dot = if path.is_empty() { "" } else { "." };
        let (key_span, value_span) = (key.span(), value.span());
        let here = key_span.contains(&at) || value_span.contains(&at);
        match value.get_ref() {
            DeValue::Table(inner) => {
                path.push(format!("{dot}{}", key.get_ref()));
                let depth = path.len();
                let found = locate(inner, at, path);
                if path.len() > depth || here {
                    // A table as a whole is never blanked: its header would be left dangling.
                    return found;
                }
                path.pop();
            }
            DeValue::Array(items) => {
                if let Some(found) = locate_in_array(items, at, path, dot, key) {
                    return found;
                }
                if here {
                    path.push(format!("{dot}{}", key.get_ref()));
                    return Some(key_span.start..value_span.end);
                }
            }
            _ if here => {
                path.push(format!("{dot}{}", key.get_ref()));
                return Some(key_span.start..value_span.end);
            }
            _ => {}
        }
    }
    None
}

/// Inside one of an array's tables (`[[rooms]]`, `[[room.events]]`); `Some(found)` once `at`
/// was placed in one.
fn locate_in_array(
    items: &[Spanned<DeValue<'_>>],
    at: usize,
    path: &mut Vec<String>,
    dot: &str,
    key: &Spanned<std::borrow::Cow<'_, str>>,
) -> Option<Option<Range<usize>>> {
    for (i, item) in items.iter().enumerate() {
        if let DeValue::Table(inner) = item.get_ref() {
            path.push(format!("{dot}{}[{i}]", key.get_ref()));
            let depth = path.len();
            let found = locate(inner, at, path);
            if path.len() > depth || item.span().contains(&at) {
                return Some(found);
            }
            path.pop();
        }
    }
    None
}

/// serde's message about `key` in plain words, and the key it is about (a missing key is named
/// in the message, not found in the text).
pub fn plain(key: &str, message: &str) -> (String, String) {
    let join = |field: &str| {
        if key.is_empty() {
            field.to_owned()
        } else {
            format!("{key}.{field}")
        }
    };
    // Through a flattened table (`[[rooms]]`) serde names the field in the message instead.
    if let Some((message, field)) = message.split_once("\nin `") {
        let field = field.split('`').next().unwrap_or(field);
        return plain(&join(field), message);
    }
    if let Some(field) = between(message, "missing field `", "`") {
        return (join(field), "is required".to_owned());
    }
    if message.starts_with("unknown field") {
        let known = message
            .split_once("expected one of ")
            .map(|(_, list)| format!(" (the keys here: {})", list.replace('`', "")))
            .unwrap_or_default();
        // Found by its place it is the key itself; through a flattened table, the table.
        let key = match between(message, "unknown field `", "`") {
            Some(field) if !key.ends_with(field) => join(field),
            _ => key.to_owned(),
        };
        return (key, format!("is not a known key, a misspelling?{known}"));
    }
    let rest = message
        .strip_prefix("invalid value: ")
        .or_else(|| message.strip_prefix("invalid type: "));
    let Some((got, expected)) = rest.and_then(|r| r.split_once(", expected ")) else {
        return (key.to_owned(), message.to_owned());
    };
    let got = shown(got);
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let wanted = match expected.trim() {
        "u64" | "u32" | "usize" => format!("a whole number of at least {}", minimum(leaf)),
        "u16" => format!("a whole number from {} to 65535", minimum(leaf)),
        "u8" => format!("a whole number from {} to 255", minimum(leaf)),
        "i64" | "i32" => "a whole number".to_owned(),
        "f64" | "f32" => "a number".to_owned(),
        "a boolean" => "true or false".to_owned(),
        "a string" => "a string in quotes".to_owned(),
        "a sequence" => "a list in brackets, like [\"a\", \"b\"]".to_owned(),
        "a map" | "struct" => "a table of keys".to_owned(),
        other if other.starts_with("struct ") => "a table of keys".to_owned(),
        other => other.to_owned(),
    };
    (key.to_owned(), format!("must be {wanted}, got {got}"))
}

/// The smallest value the model accepts for a key whose type alone allows 0.
fn minimum(leaf: &str) -> u64 {
    match leaf {
        "total_active_users" | "new_users_per_minute" => 1,
        _ => 0,
    }
}

/// serde's "integer `-5`" as `-5`, "string \"x\"" as `the string "x"`.
fn shown(got: &str) -> String {
    if let Some(value) = between(got, "`", "`") {
        return value.to_owned();
    }
    match got.split_once(' ') {
        Some(("string", s)) => format!("the string {s}"),
        _ => got.to_owned(),
    }
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    Some(&text[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        read(text).1.iter().map(ToString::to_string).collect()
    }

    const ROOM: &str = "[origin]\naddress = \"127.0.0.1:3000\"\n[room]\nid = \"r\"\ntotal_active_users = 2\nnew_users_per_minute = 2\n";

    #[test]
    fn a_negative_number_is_named_in_plain_words() {
        let text = ROOM.replace("total_active_users = 2", "total_active_users = -5");
        assert_eq!(
            errors(&text),
            ["room.total_active_users: must be a whole number of at least 1, got -5"]
        );
    }

    #[test]
    fn every_type_error_of_a_file_is_reported() {
        let text = format!(
            "[listen]\nthreads = \"four\"\n{}queue_all = 1\ncolour = \"red\"\n\
             [[room.events]]\nname = \"a\"\nevent_start_time = 5\nevent_end_time = \"x\"\n",
            ROOM.replace("new_users_per_minute = 2", "new_users_per_minute = 2.5")
        );
        let all = errors(&text);
        for needle in [
            "listen.threads: must be a whole number of at least 0, got the string \"four\"",
            "room.new_users_per_minute: must be a whole number of at least 1, got 2.5",
            "room.queue_all: must be true or false, got 1",
            "room.colour: is not a known key",
            "room.events[0].event_start_time: must be a string in quotes, got 5",
        ] {
            assert!(
                all.iter().any(|e| e.starts_with(needle)),
                "{needle}: {all:?}"
            );
        }
    }

    #[test]
    fn a_missing_key_and_a_syntax_error_are_said_as_such() {
        let missing = ROOM.replace("new_users_per_minute = 2\n", "");
        assert_eq!(errors(&missing), ["room.new_users_per_minute: is required"]);
        let broken = errors("[room\n");
        assert!(broken[0].contains("TOML"), "{broken:?}");
    }
}
