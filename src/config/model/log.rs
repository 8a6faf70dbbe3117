//! `[log]`: the format of the log lines, and the access log.

use super::ConfigError;
use super::values::choice;
use crate::config::file::LogSection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    pub format: LogFormat,
    /// One line per request on the public listener.
    pub access: bool,
}

pub(crate) fn log(section: &LogSection) -> Result<LogConfig, ConfigError> {
    Ok(LogConfig {
        format: choice(
            "log.format",
            &section.format,
            &[("text", LogFormat::Text), ("json", LogFormat::Json)],
        )?,
        access: section.access,
    })
}
