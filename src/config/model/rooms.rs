//! The rooms: `[room]`, the one-room shorthand, or `[[rooms]]`, each with everything a `[room]`
//! has and its own page and autopilot. Each is validated on its own (its errors name
//! `rooms[i].key`), then together: ids are unique, and no route (host and path prefix) is
//! claimed by two rooms.

use std::path::Path;

use super::Branding;
use super::autopilot::{self, AutopilotConfig};
use super::room::check_room_id;
use super::{
    ConfigError, PageTemplate, RoomSettings, canonical, invalid, page, page_template, rules,
};
use crate::config::file::{
    AutopilotSection, ConfigFile, ListenSection, PageSection, RoomEntry, RoomSection, RouteSection,
};
use crate::request::route::Route;
use crate::request::rules::Rule;

/// One room, validated.
#[derive(Debug, Clone)]
pub struct RoomConfig {
    pub id: String,
    /// The room's own host and path first, then `routes`: one line, capacity and pass over all.
    pub routes: Vec<Route>,
    /// As configured (file); the admin API changes them live.
    pub settings: RoomSettings,
    pub branding: Branding,
    /// `page.template`: replaces the built-in waiting and closed pages.
    pub template: Option<PageTemplate>,
    pub autopilot: AutopilotConfig,
    /// The room's cookie: `pass.cookie_name` for `[room]`; `{cookie_name}-{id}` with `[[rooms]]`,
    /// so that one room's cookie never overwrites another's.
    pub cookie_name: String,
    /// `room.cookie_domain`: the cookie's `Domain`, so that one pass serves the routes of every
    /// host under it; None: the cookie is the host's alone (every route on the room's host).
    pub cookie_domain: Option<String>,
}

impl RoomConfig {
    /// What the room covers and what each of its rules does, in words, for `--test`.
    pub fn explained(&self) -> Vec<String> {
        let routes: Vec<String> = self.routes.iter().map(describe).collect();
        let mut lines = vec![match routes.as_slice() {
            [one] => format!("room {:?} covers {one}", self.id),
            many => format!(
                "room {:?} covers {}: one line and one capacity; a pass got on any of them \
                 serves them all (its cookie is {}, Path=/)",
                self.id,
                many.join(", "),
                match &self.cookie_domain {
                    Some(domain) => format!("sent to every host under {domain}"),
                    None => "the host's".to_owned(),
                }
            ),
        }];
        lines.extend(
            self.settings
                .rules
                .iter()
                .map(|rule| format!("room {:?} {}", self.id, rules::explain(rule))),
        );
        lines
    }
}

/// Where a room's sections are in the file, for the keys its errors name: `room.x` of a
/// `[room]`, `rooms[2].x` of a `[[rooms]]` entry, and its page and autopilot keys under the room
/// when it has its own sections, at the top otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomPlace {
    /// `room` or `rooms[2]`.
    pub room: String,
    page: String,
    autopilot: String,
}

impl RoomPlace {
    /// The one room of a `[room]` file.
    pub fn one() -> Self {
        Self {
            room: "room".into(),
            page: "page".into(),
            autopilot: "autopilot".into(),
        }
    }

    /// Entry `index` of `[[rooms]]`.
    pub fn of(index: usize, entry: &RoomEntry) -> Self {
        let own = |has: bool, section: &str| {
            if has {
                format!("rooms[{index}].{section}")
            } else {
                section.to_owned()
            }
        };
        Self {
            room: format!("rooms[{index}]"),
            page: own(entry.page.is_some(), "page"),
            autopilot: own(entry.autopilot.is_some(), "autopilot"),
        }
    }

    /// The error of one section, its keys as the file spells them.
    pub fn rename(&self, error: ConfigError) -> ConfigError {
        if let ConfigError::Many(errors) = error {
            return ConfigError::Many(errors.into_iter().map(|e| self.rename(e)).collect());
        }
        let ConfigError::Invalid { key, reason } = error else {
            return error;
        };
        let key = if let Some(rest) = key.strip_prefix("room.") {
            format!("{}.{rest}", self.room)
        } else if let Some(rest) = key.strip_prefix("page.") {
            format!("{}.{rest}", self.page)
        } else if let Some(rest) = key.strip_prefix("autopilot.") {
            format!("{}.{rest}", self.autopilot)
        } else {
            key
        };
        ConfigError::Invalid { key, reason }
    }
}

pub(crate) fn rooms(
    file: &ConfigFile,
    cookie_name: &str,
    base_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<RoomConfig>, ConfigError> {
    let country_known = country_known(&file.listen);
    let rooms = match (&file.room, file.rooms.as_slice()) {
        (Some(_), [_, ..]) => {
            return Err(invalid(
                "rooms",
                "a file holds [room] (one room) or [[rooms]] (several), not both",
            ));
        }
        (None, []) => {
            return Err(invalid(
                "room",
                "is required: [room] for one room, or [[rooms]] for several",
            ));
        }
        (Some(room), []) => vec![one_room(
            country_known,
            room,
            &file.page,
            &file.autopilot,
            RoomPlace::one(),
            cookie_name.to_owned(),
            base_dir,
            warnings,
        )?],
        (None, entries) => {
            let mut rooms = Vec::with_capacity(entries.len());
            let mut errors = Vec::new();
            for (i, entry) in entries.iter().enumerate() {
                match one_room(
                    country_known,
                    &entry.room,
                    entry.page.as_ref().unwrap_or(&file.page),
                    entry.autopilot.as_ref().unwrap_or(&file.autopilot),
                    RoomPlace::of(i, entry),
                    format!("{cookie_name}-{}", entry.room.id),
                    base_dir,
                    warnings,
                ) {
                    Ok(room) => rooms.push(room),
                    Err(e) => errors.extend(e.into_list()),
                }
            }
            if !errors.is_empty() {
                return Err(ConfigError::all(errors));
            }
            rooms
        }
    };
    distinct(&rooms)?;
    Ok(rooms)
}

#[allow(clippy::too_many_arguments)]
fn one_room(
    country_known: bool,
    section: &RoomSection,
    page_section: &PageSection,
    autopilot_section: &AutopilotSection,
    place: RoomPlace,
    cookie_name: String,
    base_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<RoomConfig, ConfigError> {
    // Each part is checked even when another failed: `--test` says everything at once.
    let mut errors = Vec::new();
    let mut keep = |result: Result<(), ConfigError>| {
        if let Err(e) = result {
            errors.extend(place.rename(e).into_list());
        }
    };
    let mut id = None;
    keep(check_room_id(&section.id).map(|()| id = Some(section.id.clone())));
    let mut host = None;
    keep(
        section
            .host
            .as_deref()
            .map(|h| canonical::host("room.host", h))
            .transpose()
            .map(|h| host = Some(h)),
    );
    let mut path = None;
    keep(canonical::room_path(&section.path).map(|p| path = Some(p)));
    let mut domain = None;
    keep(cookie_domain(section).map(|d| domain = Some(d)));
    let domain = domain.flatten();
    let mut more_routes: Vec<(usize, Route)> = Vec::new();
    for (i, route) in section.routes.iter().enumerate() {
        keep(
            more_route(section, domain.as_deref(), i, route)
                .and_then(|r| distinct_in_room(section, &more_routes, r, i))
                .map(|r| more_routes.push((i, r))),
        );
    }
    let mut settings = None;
    keep(RoomSettings::from_section_all(section).map(|s| settings = Some(s)));
    let mut branding = None;
    keep(page::branding(page_section, &section.name).map(|b| branding = Some(b)));
    let mut template = None;
    keep(
        page_template::page_template(page_section, base_dir, warnings).map(|t| template = Some(t)),
    );
    let mut pilot = None;
    keep(autopilot::autopilot(autopilot_section).map(|a| pilot = Some(a)));
    warnings.extend(unanchored(
        &format!("{}.bypass", place.room),
        &section.bypass,
        "lets through",
    ));
    warnings.extend(unanchored(
        &format!("{}.websocket_paths", place.room),
        &section.websocket_paths,
        "lets a tunnel open on",
    ));
    for (i, rule) in section.rules.iter().enumerate() {
        if let (Some(paths), "bypass") = (&rule.paths, rule.action.as_str()) {
            warnings.extend(unanchored(
                &format!("{}.rules[{i}].paths", place.room),
                paths,
                "lets through",
            ));
        }
    }
    match (id, host, path, settings, branding, template, pilot) {
        (
            Some(id),
            Some(host),
            Some(path),
            Some(settings),
            Some(branding),
            Some(template),
            Some(autopilot),
        ) if errors.is_empty() => {
            let room = RoomConfig {
                id,
                routes: std::iter::once(Route { host, path })
                    .chain(more_routes.into_iter().map(|(_, r)| r))
                    .collect(),
                branding,
                template,
                autopilot,
                settings,
                cookie_name,
                cookie_domain: domain,
            };
            rules_can_hold(&room.routes, &room.settings.rules, country_known)
                .map_err(|e| place.rename(e))?;
            Ok(room)
        }
        _ => Err(ConfigError::all(errors)),
    }
}

/// A rule sees only its room's requests, and a country only from a trusted proxy's header: a
/// rule whose paths lie outside every route of the room, or that asks for a country nobody
/// names, would never hold.
/// Whether a country can ever be known: a trusted proxy names it in `listen.country_header`.
fn country_known(listen: &ListenSection) -> bool {
    listen.country_header.is_some() && !listen.trusted_proxies.is_empty()
}

/// `rules` (the file's, or a live change's) refused where one could never hold in the room of
/// `room_routes`; `country_known`: some trusted proxy names a country.
pub fn rules_can_hold(
    room_routes: &[Route],
    rules: &[Rule],
    country_known: bool,
) -> Result<(), ConfigError> {
    let mut errors = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let far = rules::unreachable_paths(rule, room_routes);
        if !far.is_empty() {
            let routes: Vec<String> = room_routes.iter().map(describe).collect();
            errors.push(invalid(
                &format!("room.rules[{i}].paths"),
                format!(
                    "{} lie outside every route of the room ({}): the rule sees only the \
                     room's requests, so these could never match",
                    far.iter()
                        .map(|p| format!("{:?}", p.as_str()))
                        .collect::<Vec<_>>()
                        .join(", "),
                    routes.join("; ")
                ),
            ));
        }
        if let Some((j, earlier)) = rules[..i]
            .iter()
            .enumerate()
            .find(|(_, earlier)| earlier.covers(rule))
        {
            errors.push(invalid(
                &format!("room.rules[{i}]"),
                format!(
                    "can never hold: {} (room.rules[{j}]) holds for every request this one \
                     would, and the first rule that holds decides; put it before {}, narrow \
                     {}, or drop it",
                    earlier.label, earlier.label, earlier.label
                ),
            ));
        }
        if !rule.when.countries.is_empty() && !country_known {
            errors.push(invalid(
                &format!("room.rules[{i}].countries"),
                "no country is ever known: set listen.country_header (e.g. \"CF-IPCountry\") \
                 and list the proxy that sets it in listen.trusted_proxies; a country header \
                 from anyone else is not believed",
            ));
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(ConfigError::all(errors)),
    }
}

/// A pattern starting with `*` matches anywhere in a path: `*.css` is meant for stylesheets,
/// and matches `/checkout.css` too, which an origin that strips format suffixes (Rails,
/// Spring's suffix matching, many API routers) serves as `/checkout`. Not refused (the path may
/// be meant), but said at start and by `--test`, with what it lets through.
fn unanchored(key: &str, patterns: &[String], what: &str) -> Vec<String> {
    patterns
        .iter()
        .filter(|p| p.starts_with('*'))
        .map(|p| {
            let rest = p.trim_start_matches('*').replace('*', "x");
            format!(
                "{key} {p:?} matches anywhere in a path: it {what} /checkout{rest} too, which an \
                 origin that strips format suffixes or trailing segments serves as /checkout: \
                 anchor it, e.g. \"/static/{p}\""
            )
        })
        .collect()
}

/// `room.routes[i]`: a path prefix, on the room's host or, with `cookie_domain`, on another host
/// under that domain. A pass is a cookie: without `Domain` a browser never sends a pass got on
/// one host to another, so a route on a second host could share the room's line and capacity
/// but not its passes. Refused then, with what would make it work.
fn more_route(
    section: &RoomSection,
    cookie_domain: Option<&str>,
    i: usize,
    route: &RouteSection,
) -> Result<Route, ConfigError> {
    let key = format!("room.routes[{i}]");
    let host = route
        .host
        .as_deref()
        .map(|h| canonical::host(&format!("{key}.host"), h))
        .transpose()?;
    let room_host = section
        .host
        .as_deref()
        .map(|h| canonical::host("room.host", h))
        .transpose()?;
    let host = match (host, room_host, cookie_domain) {
        (None, room_host, _) => room_host,
        (Some(host), Some(room_host), _) if host == room_host => Some(host),
        (Some(host), Some(_), Some(domain)) if under_domain(&host, domain) => Some(host),
        (Some(host), Some(room_host), Some(domain)) => {
            return Err(invalid(
                &format!("{key}.host"),
                format!(
                    "{host:?} is not under room.cookie_domain ({domain:?}): the browser would \
                     not send it the pass got on {room_host}; give {host} a room of its own"
                ),
            ));
        }
        (Some(host), Some(room_host), None) => {
            return Err(invalid(
                &format!("{key}.host"),
                format!(
                    "{host:?} is not the room's host ({room_host}): a pass is a cookie of one \
                     host unless room.cookie_domain names a domain over both (for example \
                     {:?}), so a pass got on one would not serve the other; set \
                     cookie_domain, leave host out (the room's), or give {host} a room of its \
                     own",
                    parent_of(&host, &room_host).unwrap_or("example.com")
                ),
            ));
        }
        (Some(host), None, _) => {
            return Err(invalid(
                &format!("{key}.host"),
                format!(
                    "{host:?} on a room for any host: name the room's own host (room.host) \
                     first, or leave host out"
                ),
            ));
        }
    };
    let path = canonical::room_path(&route.path).map_err(|e| match e {
        ConfigError::Invalid { reason, .. } => invalid(&format!("{key}.path"), reason),
        other => other,
    })?;
    Ok(Route { host, path })
}

/// `room.cookie_domain`: a registrable-looking domain (two labels at least, not an address)
/// that the room's own host falls under. A public suffix (`co.uk`) would be refused by the
/// browser itself; that list is not shipped here, so the check stops at the form.
fn cookie_domain(section: &RoomSection) -> Result<Option<String>, ConfigError> {
    const KEY: &str = "room.cookie_domain";
    let Some(raw) = section.cookie_domain.as_deref() else {
        return Ok(None);
    };
    let domain = canonical::host(KEY, raw.strip_prefix('.').unwrap_or(raw))?;
    if domain.parse::<std::net::IpAddr>().is_ok() || domain.starts_with('[') {
        return Err(invalid(
            KEY,
            format!("{raw:?} is an address: a cookie's Domain is a name (the host alone then)"),
        ));
    }
    if !domain.contains('.') {
        return Err(invalid(
            KEY,
            format!(
                "{raw:?} is a single label: browsers refuse a cookie for a whole top-level \
                 domain; name the shop's own domain, e.g. \"example.com\""
            ),
        ));
    }
    let Some(host) = section.host.as_deref() else {
        return Err(invalid(
            KEY,
            "needs room.host: a room for any host has no host it could share its pass from",
        ));
    };
    let host = canonical::host("room.host", host)?;
    if !under_domain(&host, &domain) {
        return Err(invalid(
            KEY,
            format!("{domain:?} is not room.host ({host:?}) nor a domain above it"),
        ));
    }
    Ok(Some(domain))
}

/// Whether a browser sends a cookie of `domain` to `host` (RFC 6265 5.1.3, both canonical).
fn under_domain(host: &str, domain: &str) -> bool {
    host == domain
        || host
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// The longest domain of two labels or more above both hosts, to suggest as `cookie_domain`.
fn parent_of<'a>(host: &'a str, other: &str) -> Option<&'a str> {
    let mut at = 0;
    loop {
        let candidate = &host[at..];
        if candidate.contains('.') && under_domain(other, candidate) {
            return Some(candidate);
        }
        at += candidate.find('.')? + 1;
    }
}

/// A route the room already has (its own or an earlier one of `routes`) would say nothing new:
/// refused as the slip it is.
fn distinct_in_room(
    section: &RoomSection,
    earlier: &[(usize, Route)],
    route: Route,
    i: usize,
) -> Result<Route, ConfigError> {
    let key = format!("room.routes[{i}]");
    let own_host = section
        .host
        .as_deref()
        .and_then(|h| canonical::host("room.host", h).ok());
    if route.path == section.path && route.host == own_host {
        return Err(invalid(
            &key,
            format!(
                "repeats the room's own host and path ({})",
                describe(&route)
            ),
        ));
    }
    match earlier.iter().find(|(_, r)| *r == route) {
        Some((j, _)) => Err(invalid(
            &key,
            format!("repeats room.routes[{j}] ({})", describe(&route)),
        )),
        None => Ok(route),
    }
}

/// A route in words: `shop.example/cart`, or `/cart (any host)`.
pub fn describe(route: &Route) -> String {
    match &route.host {
        Some(host) => format!("{host}{}", route.path),
        None => format!("{} (any host)", route.path),
    }
}

/// Two rooms with one id would share their keys in the store; two claiming one route (the same
/// host and path prefix) would leave a request to a coin toss.
fn distinct(rooms: &[RoomConfig]) -> Result<(), ConfigError> {
    let mut errors = Vec::new();
    for (j, later) in rooms.iter().enumerate() {
        for (i, earlier) in rooms[..j].iter().enumerate() {
            if later.id == earlier.id {
                errors.push(invalid(
                    &format!("rooms[{j}].id"),
                    format!("{:?} is the id of rooms[{i}] too", later.id),
                ));
            }
            for (k, route) in later.routes.iter().enumerate() {
                let Some(m) = earlier.routes.iter().position(|r| r == route) else {
                    continue;
                };
                errors.push(invalid(
                    &route_key(j, k),
                    format!(
                        "{} is claimed by {} of room {:?} too: a request there would belong to \
                         two rooms; give it to one of them",
                        describe(route),
                        route_key(i, m),
                        earlier.id
                    ),
                ));
            }
        }
    }
    match errors.is_empty() {
        true => Ok(()),
        false => Err(ConfigError::all(errors)),
    }
}

/// Where route `k` of room `j` is written: the room's own `path`, or an entry of its `routes`.
fn route_key(j: usize, k: usize) -> String {
    match k {
        0 => format!("rooms[{j}].path"),
        k => format!("rooms[{j}].routes[{}]", k - 1),
    }
}
