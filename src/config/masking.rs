//! Secrets kept out of what is printed: the file's `Debug`, `--test`'s output, log lines.

/// A store URL with its password (or its whole user information, when it has no `:`) replaced
/// by `****`: `redis://user:****@host:6379/0`. The last `@` ends the user information, so a
/// password holding an unescaped `@` or `/` is masked whole too.
pub fn masked_url(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let Some(at) = url[start..].rfind('@').map(|i| i + start) else {
        return url.to_owned();
    };
    let user = match url[start..at].split_once(':') {
        Some((user, _)) => format!("{user}:"),
        None => String::new(),
    };
    format!("{}{user}****{}", &url[..start], &url[at..])
}

/// A secret as printed: whether it is set, never what it is.
pub fn masked_secret(secret: Option<&str>) -> Option<&'static str> {
    secret.map(|_| "****")
}
