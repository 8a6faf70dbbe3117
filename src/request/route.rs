//! Which requests a room covers: its routes, each an optional host and a path prefix (on the
//! canonical request), and the path patterns of bypass rules.

/// A path pattern where `*` matches any run of characters (slashes included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    source: String,
}

impl PathPattern {
    pub fn parse(source: &str) -> Result<Self, String> {
        if source.is_empty() {
            return Err("a bypass pattern cannot be empty".into());
        }
        if !source.starts_with('/') && !source.starts_with('*') {
            return Err(format!(
                "bypass pattern {source:?} must start with '/' or '*'"
            ));
        }
        Ok(Self {
            source: source.to_owned(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn matches(&self, path: &str) -> bool {
        glob_match(self.source.as_bytes(), path.as_bytes())
    }
}

/// Iterative wildcard match with single-star backtracking: linear in practice, no recursion.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == b'*')
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Canonical host (lower case, no port, no trailing dot); None protects every host.
    pub host: Option<String>,
    /// Case-sensitive path prefix.
    pub path: String,
}

impl Route {
    /// `host` is the request's canonical host (no port, no trailing dot), `path` its match path.
    pub fn covers(&self, host: Option<&str>, path: &str) -> bool {
        self.serves(host) && path.starts_with(&self.path)
    }

    /// Whether the route's host is `host` (or any host), whatever the path.
    pub fn serves(&self, host: Option<&str>) -> bool {
        match (&self.host, host) {
            (None, _) => true,
            (Some(want), Some(got)) => got.eq_ignore_ascii_case(want),
            (Some(_), None) => false,
        }
    }
}

/// The rooms' routes, most specific first: a request belongs to the first that covers it, so a
/// route naming the request's host comes before one for any host, then the longest path prefix,
/// whichever room each belongs to (a room's routes are ranked one by one, not as a block).
#[derive(Debug, Clone, Default)]
pub struct Routes {
    /// (room index, route), most specific first.
    ordered: Vec<(usize, Route)>,
}

impl Routes {
    /// `rooms`: each room's routes, in the rooms' order (the index a match answers).
    pub fn new<R: IntoIterator<Item = Route>>(rooms: impl IntoIterator<Item = R>) -> Self {
        let mut ordered: Vec<(usize, Route)> = rooms
            .into_iter()
            .enumerate()
            .flat_map(|(i, routes)| routes.into_iter().map(move |r| (i, r)))
            .collect();
        ordered.sort_by_key(|(i, r)| (r.host.is_none(), std::cmp::Reverse(r.path.len()), *i));
        Self { ordered }
    }

    /// The room the request belongs to, if any covers it.
    pub fn room_for(&self, host: Option<&str>, path: &str) -> Option<usize> {
        self.ordered
            .iter()
            .find(|(_, route)| route.covers(host, path))
            .map(|(i, _)| *i)
    }

    /// The rooms on `host` (naming it, or any host), whatever their path.
    pub fn rooms_on<'a>(&'a self, host: Option<&'a str>) -> impl Iterator<Item = usize> + 'a {
        self.ordered
            .iter()
            .filter(move |(_, route)| route.serves(host))
            .map(|(i, _)| *i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_prefixes_suffixes_and_exact_paths() {
        let p = |s: &str| PathPattern::parse(s).unwrap_or_else(|e| panic!("{e}"));
        assert!(p("/static/*").matches("/static/app.js"));
        assert!(p("/static/*").matches("/static/"));
        assert!(!p("/static/*").matches("/staticx"));
        assert!(p("*.css").matches("/a/b/site.css"));
        assert!(!p("*.css").matches("/a/site.css.map"));
        assert!(p("/health").matches("/health"));
        assert!(!p("/health").matches("/healthz"));
        assert!(p("/a/*/c*").matches("/a/b/x/cd"));
        assert!(PathPattern::parse("static/*").is_err());
        assert!(PathPattern::parse("").is_err());
    }

    #[test]
    fn long_inputs_do_not_blow_up() {
        let p = PathPattern::parse("/*a*a*a*a*b").unwrap_or_else(|e| panic!("{e}"));
        let text = format!("/{}", "a".repeat(5000));
        assert!(!p.matches(&text));
    }

    #[test]
    fn routes_match_host_without_port_and_path_prefix() {
        let r = Route {
            host: Some("shop.example".into()),
            path: "/drop".into(),
        };
        assert!(r.covers(Some("shop.example"), "/drop/shoes"));
        assert!(!r.covers(Some("other.example"), "/drop"));
        assert!(!r.covers(Some("shop.example"), "/Drop"));
        assert!(!r.covers(None, "/drop"));
        let any = Route {
            host: None,
            path: "/".into(),
        };
        assert!(any.covers(None, "/x"));
    }

    #[test]
    fn a_request_belongs_to_the_most_specific_room() {
        let route = |host: Option<&str>, path: &str| Route {
            host: host.map(str::to_owned),
            path: path.into(),
        };
        let routes = Routes::new([
            [route(None, "/")],
            [route(None, "/drop")],
            [route(None, "/drop/sneakers")],
            [route(Some("tickets.example"), "/")],
            [route(Some("shop.example"), "/drop")],
        ]);
        assert_eq!(
            routes.room_for(Some("shop.example"), "/drop/sneakers/42"),
            Some(4)
        );
        assert_eq!(
            routes.room_for(Some("other.example"), "/drop/sneakers/42"),
            Some(2)
        );
        assert_eq!(routes.room_for(None, "/drop/shirts"), Some(1));
        assert_eq!(routes.room_for(Some("tickets.example"), "/drop"), Some(3));
        assert_eq!(routes.room_for(Some("shop.example"), "/cart"), Some(0));
        let narrow = Routes::new([[route(Some("shop.example"), "/drop")]]);
        assert_eq!(narrow.room_for(Some("shop.example"), "/cart"), None);
        assert_eq!(narrow.room_for(None, "/drop"), None);
    }

    #[test]
    fn every_route_of_a_room_leads_to_it_and_the_most_specific_wins_across_rooms() {
        let route = |path: &str| Route {
            host: Some("shop.example".into()),
            path: path.into(),
        };
        // Room 0 holds the drop and its checkout; room 1 the whole shop; room 2 one product
        // inside room 0's prefix.
        let routes = Routes::new(vec![
            vec![route("/drop"), route("/cart"), route("/checkout")],
            vec![route("/")],
            vec![route("/drop/raffle")],
        ]);
        let room = |path| routes.room_for(Some("shop.example"), path);
        assert_eq!(room("/drop/shoes"), Some(0));
        assert_eq!(room("/cart"), Some(0));
        assert_eq!(room("/checkout/pay"), Some(0));
        assert_eq!(room("/drop/raffle/1"), Some(2));
        assert_eq!(room("/account"), Some(1));
        assert_eq!(room("/Cart"), Some(1), "prefixes are case-sensitive");
        assert_eq!(
            routes
                .rooms_on(Some("shop.example"))
                .filter(|i| *i == 0)
                .count(),
            3
        );
    }
}
