//! `[page]`: the branding of the built-in pages (the operator's own template: `page_template`).

use super::{ConfigError, invalid};
use crate::config::file::PageSection;
use crate::language::PageLanguage;

/// `[page]` validated: what the built-in pages show and in which language.
#[derive(Debug, Clone)]
pub struct Branding {
    /// e.g. "Sneaker drop"; used in `<title>` and the page header.
    pub title: String,
    /// The shop's own logo URL: the only external resource, and only when configured.
    pub logo_url: Option<String>,
    /// CSS colour, `#rgb` or `#rrggbb`.
    pub primary_color: String,
    pub background_color: String,
    pub text_color: String,
    /// Texts the operator set in [page]: they replace the locale's own in every language, so
    /// they are None unless set.
    pub heading: Option<String>,
    pub message: Option<String>,
    pub closed_heading: Option<String>,
    pub closed_message: Option<String>,
    /// The language of the built-in pages.
    pub language: PageLanguage,
}

fn colour(key: &str, text: &str) -> Result<String, ConfigError> {
    let hex = text.strip_prefix('#').unwrap_or("");
    if (hex.len() == 3 || hex.len() == 6) && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_owned())
    } else {
        Err(invalid(
            key,
            format!("{text:?} is not a colour like \"#1d4ed8\""),
        ))
    }
}

pub(crate) fn branding(page: &PageSection, room_name: &str) -> Result<Branding, ConfigError> {
    if let Some(url) = &page.logo_url
        && !(url.starts_with("https://") || url.starts_with('/'))
    {
        return Err(invalid(
            "page.logo_url",
            "must be an https:// URL or a path on the shop",
        ));
    }
    Ok(Branding {
        title: page.title.clone().unwrap_or_else(|| room_name.to_owned()),
        logo_url: page.logo_url.clone(),
        primary_color: colour("page.primary_color", &page.primary_color)?,
        background_color: colour("page.background_color", &page.background_color)?,
        text_color: colour("page.text_color", &page.text_color)?,
        heading: page.heading.clone(),
        message: page.message.clone(),
        closed_heading: page.closed_heading.clone(),
        closed_message: page.closed_message.clone(),
        language: PageLanguage::parse(&page.default_template_language)
            .map_err(|e| invalid("page.default_template_language", e))?,
    })
}
