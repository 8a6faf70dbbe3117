//! The rooms: `[room]`, the one-room shorthand, or `[[rooms]]`, each with everything a `[room]`
//! has and its own page and autopilot. Each is validated on its own (its errors name
//! `rooms[i].key`), then together: ids and (host, path) pairs are unique.

use std::path::Path;

use super::Branding;
use super::autopilot::{self, AutopilotConfig};
use super::room::check_room_id;
use super::{ConfigError, PageTemplate, RoomSettings, canonical, invalid, page, page_template};
use crate::config::file::{AutopilotSection, ConfigFile, PageSection, RoomEntry, RoomSection};
use crate::request::route::Route;

/// One room, validated.
#[derive(Debug, Clone)]
pub struct RoomConfig {
    pub id: String,
    pub route: Route,
    /// As configured (file); the admin API changes them live.
    pub settings: RoomSettings,
    pub branding: Branding,
    /// `page.template`: replaces the built-in waiting and closed pages.
    pub template: Option<PageTemplate>,
    pub autopilot: AutopilotConfig,
    /// The room's cookie: `pass.cookie_name` for `[room]`; `{cookie_name}-{id}` with `[[rooms]]`,
    /// so that one room's cookie never overwrites another's.
    pub cookie_name: String,
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

fn one_room(
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
    match (id, host, path, settings, branding, template, pilot) {
        (
            Some(id),
            Some(host),
            Some(path),
            Some(settings),
            Some(branding),
            Some(template),
            Some(autopilot),
        ) if errors.is_empty() => Ok(RoomConfig {
            id,
            route: Route { host, path },
            branding,
            template,
            autopilot,
            settings,
            cookie_name,
        }),
        _ => Err(ConfigError::all(errors)),
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

/// Two rooms with one id would share their keys in the store; two with one host and path would
/// leave a request to a coin toss.
fn distinct(rooms: &[RoomConfig]) -> Result<(), ConfigError> {
    for (j, later) in rooms.iter().enumerate() {
        for (i, earlier) in rooms[..j].iter().enumerate() {
            if later.id == earlier.id {
                return Err(invalid(
                    &format!("rooms[{j}].id"),
                    format!("{:?} is the id of rooms[{i}] too", later.id),
                ));
            }
            if later.route == earlier.route {
                return Err(invalid(
                    &format!("rooms[{j}].path"),
                    format!(
                        "rooms[{i}] covers the same host ({}) and path ({:?})",
                        later.route.host.as_deref().unwrap_or("any"),
                        later.route.path
                    ),
                ));
            }
        }
    }
    Ok(())
}
