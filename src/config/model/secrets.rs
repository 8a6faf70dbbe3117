//! Secrets: read from the environment (which wins over the file) or the file, generated for one
//! run with `--dev`, and masked whenever the configuration is printed.

use super::bypass;
use super::{Config, ConfigError, Environment, invalid};
use crate::config::file::RoomSection;
use crate::config::masking::masked_url;

/// The minimum length of the pass-signing secret and of the admin token.
pub const MIN_SECRET_BYTES: usize = 32;

/// The environment variables the proxy reads its secrets from (deploy files name them too).
pub const ENV_JWT_SECRET: &str = "WR_JWT_SECRET";
pub const ENV_ADMIN_TOKEN: &str = "WR_ADMIN_TOKEN";
pub const ENV_TURNSTILE_SECRET: &str = "WR_TURNSTILE_SECRET";
pub const ENV_ENTRY_SECRET: &str = "WR_ENTRY_SECRET";
pub const ENV_NOTIFY_SECRET: &str = "WR_NOTIFY_SECRET";

const MASK: &str = "********";

/// An environment where a variable set to the empty string is unset, whatever `Environment` the
/// caller passed: a deploy file's `WR_REDIS_URL=` (left blank) must not replace the file's URL
/// with nothing.
pub(crate) struct NonEmpty<'a>(pub &'a dyn Environment);

impl Environment for NonEmpty<'_> {
    fn var(&self, name: &str) -> Option<String> {
        self.0.var(name).filter(|v| !v.is_empty())
    }
}

/// Whether a secret generated for a `--dev` run is shown in its warning: the admin token is (the
/// person trying the proxy signs in to the console with it), the signing keys are not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Generated {
    Shown,
    Hidden,
}

/// A secret from the environment or the file, or in dev mode a random one. The variable, when
/// set, is written into the parsed file, so a reload that reads the file again keeps it.
pub(crate) fn secret(
    key: &str,
    env_name: &str,
    from_file: &mut Option<String>,
    env: &dyn Environment,
    dev: bool,
    generated_is: Generated,
    warnings: &mut Vec<String>,
) -> Result<String, ConfigError> {
    if let Some(value) = env.var(env_name) {
        *from_file = Some(value);
    }
    match from_file {
        Some(value) if value.len() >= MIN_SECRET_BYTES => Ok(value.clone()),
        _ if dev => {
            let generated: String = (0..MIN_SECRET_BYTES)
                .map(|_| format!("{:02x}", rand::random::<u8>()))
                .collect();
            let shown = match generated_is {
                Generated::Shown => format!(": {generated}"),
                Generated::Hidden => String::new(),
            };
            warnings.push(format!(
                "INSECURE (--dev): {key} is missing or shorter than {MIN_SECRET_BYTES} bytes; \
                 using a random one for this run only{shown}"
            ));
            *from_file = Some(generated.clone());
            Ok(generated)
        }
        Some(_) => Err(invalid(
            key,
            format!("must be at least {MIN_SECRET_BYTES} bytes (or set {env_name})"),
        )),
        None => Err(invalid(
            key,
            format!(
                "is required: set it in the file or in {env_name} (at least {MIN_SECRET_BYTES} \
                 bytes), or run with --dev to try the proxy insecurely"
            ),
        )),
    }
}

impl Config {
    /// The effective configuration as TOML for `--test`: secrets, bypass secrets, the store
    /// URL's password and the Sentinels' masked.
    pub fn masked_toml(&self) -> String {
        let mut file = self.file.clone();
        let mask = |s: &mut Option<String>| {
            if s.is_some() {
                *s = Some(MASK.into());
            }
        };
        mask(&mut file.pass.secret);
        mask(&mut file.admin.token);
        if let Some(t) = &mut file.turnstile {
            mask(&mut t.secret);
        }
        mask(&mut file.store.sentinel_password);
        mask(&mut file.entry.secret);
        mask(&mut file.notify.secret);
        file.store.url = file.store.url.as_deref().map(masked_url);
        let rooms = file
            .room
            .iter_mut()
            .chain(file.rooms.iter_mut().map(|entry| &mut entry.room));
        for room in rooms {
            mask_room(room);
        }
        toml::to_string_pretty(&file).unwrap_or_else(|e| format!("# cannot print: {e}\n"))
    }
}

/// A room's bypass secrets masked, wherever its settings are shown.
pub fn mask_room(room: &mut RoomSection) {
    for rule in &mut room.bypass_headers {
        *rule = bypass::masked(rule, ':');
    }
    for rule in &mut room.bypass_cookies {
        *rule = bypass::masked(rule, '=');
    }
    for rule in &mut room.rules {
        super::rules::mask(rule);
    }
}
