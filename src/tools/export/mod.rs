//! `waitroom-proxy export-terraform`: drop.toml as the variables of infra/cloudflare, so the
//! managed room runs on the same numbers, and a list of what Cloudflare cannot express.
//!
//! Pure: a parsed file in, the tfvars text and the notes out. Every list the Terraform iterates
//! (bypass rules, scheduled events) is a list of HCL objects built by `objects`, so a new kind of
//! entry only needs its own fields.

mod room;
mod rules;
#[cfg(test)]
mod tests;

use hcl::{Attribute, Body, Expression, ObjectKey};

use crate::config::file::{ConfigFile, PageSection, RoomSection};
use crate::config::model::{ConfigError, RoomPlace, SameSite, invalid, same_site};
use room::{TurnstileSettings, room_vars, text};

pub use rules::bypass_expression;

/// Every `default_template_language` the provider (v5) accepts, spelt as it spells them.
/// infra/cloudflare/room/variables.tf validates against the same list, and the proxy's pages
/// speak each (tests keep the three equal).
pub const CLOUDFLARE_LANGUAGES: [&str; 38] = [
    "en-US", "es-ES", "de-DE", "fr-FR", "it-IT", "ja-JP", "ko-KR", "pt-BR", "zh-CN", "zh-TW",
    "nl-NL", "pl-PL", "id-ID", "tr-TR", "ar-EG", "ru-RU", "fa-IR", "bg-BG", "hr-HR", "cs-CZ",
    "da-DK", "fi-FI", "lt-LT", "ms-MY", "nb-NO", "ro-RO", "el-GR", "he-IL", "hi-IN", "hu-HU",
    "sr-BA", "sk-SK", "sl-SI", "sv-SE", "tl-PH", "th-TH", "uk-UA", "vi-VN",
];

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot write HCL: {0}")]
    Hcl(#[from] hcl::Error),
}

#[derive(Debug)]
pub struct TerraformExport {
    /// terraform.tfvars for infra/cloudflare, the notes repeated at the top as comments.
    pub tfvars: String,
    /// What Cloudflare cannot express or does differently, one sentence each.
    pub notes: Vec<String>,
    /// The file's settings that need Cloudflare's Waiting Room Advanced plan (each also a
    /// note); when there are any the tfvars set `advanced_plan = true`, else they leave it out.
    pub advanced: Vec<String>,
}

/// The variables of infra/cloudflare from a drop.toml; `source` names it in the header. Each
/// room of the file becomes one entry of `rooms`, keyed by its id; a note every room shares is
/// said once, one that concerns some rooms names them.
pub fn terraform_vars(file: &ConfigFile, source: &str) -> Result<TerraformExport, ExportError> {
    let rooms: Vec<(&RoomSection, &PageSection, RoomPlace)> =
        match (&file.room, file.rooms.as_slice()) {
            (Some(room), []) => vec![(room, &file.page, RoomPlace::one())],
            (None, []) => return Err(invalid("room", "is required: [room] or [[rooms]]").into()),
            (Some(_), [_, ..]) => {
                return Err(invalid(
                    "rooms",
                    "a file holds [room] (one room) or [[rooms]] (several), not both",
                )
                .into());
            }
            (None, entries) => entries
                .iter()
                .enumerate()
                .map(|(i, entry)| {
                    (
                        &entry.room,
                        entry.page.as_ref().unwrap_or(&file.page),
                        RoomPlace::of(i, entry),
                    )
                })
                .collect(),
        };
    let samesite = same_site(&file.pass.cookie_samesite)?;
    if samesite == SameSite::None && !file.pass.cookie_secure {
        return Err(invalid(
            "pass.cookie_samesite",
            "\"None\" needs pass.cookie_secure = true: Cloudflare refuses samesite = \"none\" \
             with secure = \"never\"",
        )
        .into());
    }
    let turnstile = TurnstileSettings::from_file(file)?;

    let mut exports: Vec<RoomExport> = Vec::with_capacity(rooms.len());
    for (room, page, place) in &rooms {
        if let Some(other) = exports.iter().find(|e| e.id == room.id) {
            return Err(invalid(
                &format!("{}.id", place.room),
                format!(
                    "{:?} is the id of {} too: Cloudflare names rooms uniquely",
                    room.id, other.place
                ),
            )
            .into());
        }
        let export =
            room_vars(file, room, page, samesite, &turnstile).map_err(|e| place.rename(e))?;
        exports.push(RoomExport {
            id: room.id.clone(),
            place: place.room.clone(),
            ..export
        });
    }

    let several = exports.len() > 1;
    let mut notes = merged(&exports, |e| &e.notes, several);
    let advanced = merged(&exports, |e| &e.advanced, several);
    let crawlers: Vec<String> = exports
        .iter()
        .filter(|e| e.crawler_bypass)
        .map(|e| e.id.clone())
        .collect();
    if !crawlers.is_empty() {
        notes.push(format!(
            "room.bypass_verified_crawlers ({}): Cloudflare's search_engine_crawler_bypass is a \
             zone setting: it applies to every waiting room of the zone, and Cloudflare keeps its \
             own crawler list (room.crawler_ranges has no counterpart)",
            crawlers.join(", ")
        ));
    }

    let events_ask_for_proof = rooms
        .iter()
        .any(|(room, _, _)| room.events.iter().any(|e| e.proof_of_work == Some(true)));
    if file.proof_of_work.enabled || events_ask_for_proof {
        notes.push(
            "[proof_of_work]: not exported; the Cloudflare waiting room has no proof of work \
             (its Turnstile challenge, [turnstile], is the nearest)"
                .to_owned(),
        );
    }
    if file.entry.require_token {
        notes.push(
            "[entry] require_token: not exported; the Cloudflare waiting room takes no entry \
             tokens, so at the edge the line is open to everyone (a Worker in front would have \
             to check them)"
                .to_owned(),
        );
    }

    let mut vars = vec![
        Attribute::new(
            "rooms",
            Expression::Object(
                exports
                    .into_iter()
                    .map(|e| {
                        let fields = e
                            .vars
                            .into_iter()
                            .map(|a| (ObjectKey::from(a.key), a.expr))
                            .collect();
                        (
                            ObjectKey::Expression(text(e.id)),
                            Expression::Object(fields),
                        )
                    })
                    .collect(),
            ),
        ),
        Attribute::new("search_engine_crawler_bypass", !crawlers.is_empty()),
    ];

    if advanced.is_empty() {
        notes.push(
            "JSON for `Accept: application/json` (json_response_enabled) and waiting.html need \
             Cloudflare's Waiting Room Advanced plan, so infra/cloudflare sends them only with \
             advanced_plan = true (set it in terraform.tfvars if the zone has the plan); \
             without it JSON clients get Cloudflare's HTML page"
                .to_owned(),
        );
    } else {
        for setting in &advanced {
            notes.push(format!(
                "Advanced plan: {setting} needs Cloudflare's Waiting Room Advanced plan \
                 (advanced_plan = true is written; terraform apply fails on a zone without it)"
            ));
        }
        // Last, so that it reads as the conclusion of the notes above it.
        vars.push(Attribute::new("advanced_plan", true));
    }

    let body = Body::builder().add_attributes(vars).build();
    let mut tfvars = header(source, &notes);
    tfvars.push_str(&hcl::format::to_string(&body)?);
    Ok(TerraformExport {
        tfvars,
        notes,
        advanced,
    })
}

/// One room's entry of `rooms`, with what Cloudflare cannot express of it.
#[derive(Default)]
struct RoomExport {
    id: String,
    /// `room` or `rooms[i]`: how errors name it.
    place: String,
    vars: Vec<Attribute>,
    notes: Vec<String>,
    advanced: Vec<String>,
    crawler_bypass: bool,
}

/// Said once when every room says it; else named by the room it concerns.
fn merged(
    exports: &[RoomExport],
    list: impl Fn(&RoomExport) -> &Vec<String>,
    several: bool,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for export in exports {
        for item in list(export) {
            let shared = exports.iter().all(|e| list(e).contains(item));
            let item = if shared || !several {
                item.clone()
            } else {
                format!("room {:?}: {item}", export.id)
            };
            if !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

fn header(source: &str, notes: &[String]) -> String {
    let mut text = format!(
        "# Written by `waitroom-proxy export-terraform` from {source}: change {source} and \
         export again.\n# zone_id is not in it: set zone_id in another .tfvars file or \
         TF_VAR_zone_id.\n#\n# What Cloudflare cannot express or does differently:\n"
    );
    for note in notes {
        text.push_str(&format!("# - {note}\n"));
    }
    text.push('\n');
    text
}
