//! Parsers of the kinds of value the file holds (durations, addresses, paths, names from a
//! fixed list), each error naming its key.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigError, invalid};

/// One of the names in `table`, exactly as written there: `"x" is not one of a, b, c` otherwise.
/// Every setting with a fixed list of values is read through this (or [`choice_any_case`]).
pub(crate) fn choice<T: Copy>(
    key: &str,
    text: &str,
    table: &[(&str, T)],
) -> Result<T, ConfigError> {
    pick(key, text, table, |name| name == text)
}

/// [`choice`] for the settings whose values are matched without regard to ASCII case (the
/// cookie attributes, which browsers read that way).
pub(crate) fn choice_any_case<T: Copy>(
    key: &str,
    text: &str,
    table: &[(&str, T)],
) -> Result<T, ConfigError> {
    pick(key, text, table, |name| name.eq_ignore_ascii_case(text))
}

fn pick<T: Copy>(
    key: &str,
    text: &str,
    table: &[(&str, T)],
    same: impl Fn(&str) -> bool,
) -> Result<T, ConfigError> {
    table
        .iter()
        .find(|(name, _)| same(name))
        .map(|&(_, value)| value)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|&(name, _)| name).collect();
            invalid(key, format!("{text:?} is not one of {}", names.join(", ")))
        })
}

/// A duration longer than zero, like "90s" or "5m".
pub(crate) fn duration(key: &str, text: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        invalid(
            key,
            format!("{text:?} is not a duration like \"90s\" or \"5m\" ({e})"),
        )
    })?;
    if d.is_zero() {
        return Err(invalid(key, "must be longer than zero"));
    }
    Ok(d)
}

/// A duration that may be zero (a grace period of "0s" means: stop at once).
pub(crate) fn duration_or_zero(key: &str, text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        invalid(
            key,
            format!("{text:?} is not a duration like \"10s\" or \"0s\" ({e})"),
        )
    })
}

pub(crate) fn socket_addr(key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    let (host, _) = host_port(key, text)?;
    let address: SocketAddr = text.parse().map_err(|_| {
        invalid(
            key,
            format!(
                "{host:?} is not an IP address: a listener binds an address like 127.0.0.1:8080 \
                 or [::]:8080, not a name"
            ),
        )
    })?;
    Ok(address)
}

/// `host:port` (`[v6]:port` for an IPv6 address) with a host and a port of 1-65535, said in
/// plain words when not: answers the host and the port.
pub(crate) fn host_port(key: &str, text: &str) -> Result<(String, u16), ConfigError> {
    let example = "like 127.0.0.1:8080 or shop.internal:443";
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(invalid(
            key,
            format!("{text:?} has no port: write host:port, {example}"),
        ));
    };
    if host.is_empty() || host == "[]" {
        return Err(invalid(
            key,
            format!("{text:?} has no host: write host:port, {example}"),
        ));
    }
    // A bare IPv6 address (`::1:8080`) cannot be told from its port.
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(invalid(
            key,
            format!("{text:?}: an IPv6 address goes in brackets, like [::1]:8080"),
        ));
    }
    if host
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b"/@?#".contains(&b))
    {
        return Err(invalid(
            key,
            format!("{host:?} is not a host name or an IP address"),
        ));
    }
    match port.parse::<u32>() {
        Ok(port @ 1..=65535) => Ok((host.to_owned(), port as u16)),
        Ok(port) => Err(invalid(
            key,
            format!("port {port} is not between 1 and 65535"),
        )),
        Err(_) => Err(invalid(
            key,
            format!("port {port:?} is not a number between 1 and 65535"),
        )),
    }
}

/// An optional file name that, when given, is not blank.
pub(crate) fn non_empty_path(
    key: &str,
    text: Option<&str>,
) -> Result<Option<PathBuf>, ConfigError> {
    match text {
        Some(t) if t.trim().is_empty() => Err(invalid(key, "cannot be empty")),
        Some(t) => Ok(Some(PathBuf::from(t))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Red,
        Green,
    }

    const COLOURS: &[(&str, Colour)] = &[("red", Colour::Red), ("green", Colour::Green)];

    fn message(result: Result<Colour, ConfigError>) -> String {
        match result {
            Ok(value) => panic!("accepted as {value:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_choice_is_one_of_the_table_and_the_error_lists_them_in_order() {
        assert_eq!(choice("k", "green", COLOURS).ok(), Some(Colour::Green));
        assert_eq!(
            message(choice("a.key", "blue", COLOURS)),
            "a.key: \"blue\" is not one of red, green"
        );
        assert!(message(choice("k", "Red", COLOURS)).contains("\"Red\""));
        assert!(message(choice("k", "", COLOURS)).contains("\"\" is not one of"));
    }

    #[test]
    fn a_choice_any_case_ignores_ascii_case_only() {
        assert_eq!(choice_any_case("k", "rED", COLOURS).ok(), Some(Colour::Red));
        assert!(message(choice_any_case("k", "rød", COLOURS)).starts_with("k: "));
    }

    #[test]
    fn durations_name_their_key_and_zero_is_refused_unless_allowed() {
        assert_eq!(duration("k", " 90s ").ok(), Some(Duration::from_secs(90)));
        let zero = duration("a.key", "0s").map(|_| ()).unwrap_err().to_string();
        assert_eq!(zero, "a.key: must be longer than zero");
        assert_eq!(duration_or_zero("k", "0s").ok(), Some(Duration::ZERO));
        let soon = duration("a.key", "soon")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            soon.starts_with("a.key: \"soon\" is not a duration"),
            "{soon}"
        );
    }
}
