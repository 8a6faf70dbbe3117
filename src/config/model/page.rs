//! `[page]`: the branding of the built-in pages, or an operator's own page template.

use std::path::Path;
use std::sync::Arc;

use super::{ConfigError, invalid};
use crate::config::file::PageSection;
use crate::language::PageLanguage;
use crate::respond::custom_page::CustomPage;
use crate::respond::page::Branding;

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

/// Reads and compiles `[page] template`; a relative path is taken from `base_dir`.
pub(crate) fn custom_page(
    page: &PageSection,
    base_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<Arc<CustomPage>>, ConfigError> {
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
    let (compiled, lint) = CustomPage::compile(source)
        .map_err(|e| invalid("page.template", format!("{}: {e}", path.display())))?;
    warnings.extend(
        lint.into_iter()
            .map(|w| format!("page.template: {}: {w}", path.display())),
    );
    Ok(Some(Arc::new(compiled)))
}
