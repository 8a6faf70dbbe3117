use std::collections::HashMap;

use redis::IntoConnectionInfo;

use super::*;
use crate::config::model::secrets::NonEmpty;

struct Env(HashMap<&'static str, &'static str>);

impl Environment for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| (*v).to_owned())
    }
}

fn redis_section(url: Option<&str>) -> StoreSection {
    StoreSection {
        backend: "redis".into(),
        url: url.map(str::to_owned),
        ..StoreSection::default()
    }
}

/// `store()` as `Config` calls it: through `NonEmpty`.
fn read(
    section: &mut StoreSection,
    env: &[(&'static str, &'static str)],
) -> (Result<StoreConfig, ConfigError>, Vec<String>) {
    let env = Env(env.iter().copied().collect());
    let mut warnings = Vec::new();
    let store = store(section, &NonEmpty(&env), &mut warnings);
    (store, warnings)
}

fn url_of(store: Result<StoreConfig, ConfigError>) -> String {
    match store.map(|s| s.backend) {
        Ok(Backend::Redis { url }) => url,
        other => panic!("{other:?}"),
    }
}

const ENV_URL: &str = "redis://:pw-from-env@waitroom-redis:6379/0";

#[test]
fn the_variable_replaces_store_url_and_is_kept_in_the_file() {
    let mut section = redis_section(Some("redis://waitroom-redis:6379/0"));
    let (store, warnings) = read(&mut section, &[(ENV_REDIS_URL, ENV_URL)]);
    assert_eq!(url_of(store), ENV_URL);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(section.url.as_deref(), Some(ENV_URL), "a reload keeps it");
    // Without a URL in the file at all.
    let mut section = redis_section(None);
    assert_eq!(
        url_of(read(&mut section, &[(ENV_REDIS_URL, ENV_URL)]).0),
        ENV_URL
    );
}

#[test]
fn an_empty_variable_is_unset() {
    let file_url = "redis://127.0.0.1:6379/0";
    let mut section = redis_section(Some(file_url));
    assert_eq!(
        url_of(read(&mut section, &[(ENV_REDIS_URL, "")]).0),
        file_url
    );
    let mut section = redis_section(None);
    let (store, _) = read(&mut section, &[(ENV_REDIS_URL, "")]);
    assert!(store.is_err(), "an empty variable is no URL");
}

#[test]
fn without_a_url_the_error_names_the_key_and_the_variable() {
    let mut section = redis_section(None);
    match read(&mut section, &[]).0 {
        Err(ConfigError::Invalid { key, reason }) => {
            assert_eq!(key, "store.url");
            assert!(reason.contains(ENV_REDIS_URL), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_variable_with_a_memory_store_is_a_warning() {
    let mut section = StoreSection::default();
    let (store, warnings) = read(&mut section, &[(ENV_REDIS_URL, ENV_URL)]);
    assert_eq!(store.map(|s| s.backend).ok(), Some(Backend::Memory));
    assert_eq!(
        warnings,
        ["WR_REDIS_URL is set but store.backend = \"memory\": ignored"]
    );
}

#[test]
fn passwords_are_masked_and_reach_redis_decoded() {
    for (url, masked, password) in [
        (
            "redis://user:password@host:6379/0",
            "redis://user:****@host:6379/0",
            Some("password"),
        ),
        (
            "redis://:password@host:6379/0",
            "redis://:****@host:6379/0",
            Some("password"),
        ),
        (
            "rediss://:p%40ss@host:6380/0",
            "rediss://:****@host:6380/0",
            Some("p@ss"),
        ),
        ("redis://host:6379/0", "redis://host:6379/0", None),
    ] {
        assert_eq!(masked_url(url), masked);
        let info = url.into_connection_info().unwrap();
        assert_eq!(info.redis_settings().password(), password, "{url}");
    }
    // Whatever the password holds, nothing of it is left.
    for (url, masked) in [
        ("redis://:a@b/c@host/0", "redis://:****@host/0"),
        ("redis://secret@host", "redis://****@host"),
        (
            "redis+cluster://u:pw@h1:6379,h2:6379",
            "redis+cluster://u:****@h1:6379,h2:6379",
        ),
        ("not a url", "not a url"),
    ] {
        assert_eq!(masked_url(url), masked);
    }
    let backend = Backend::Redis {
        url: "redis://u:hunter2-hunter2@host".into(),
    };
    let printed = format!(
        "{backend:?} {:?}",
        redis_section(Some("redis://:hunter2@h"))
    );
    assert!(!printed.contains("hunter2"), "{printed}");
}

#[test]
fn sentinels_and_a_master_name_make_a_sentinel_url() {
    let sentinel_section =
        |url: Option<&str>, sentinels: &[&str], master: Option<&str>| StoreSection {
            sentinels: sentinels.iter().map(|s| (*s).to_owned()).collect(),
            master_name: master.map(str::to_owned),
            ..redis_section(url)
        };
    let mut section = sentinel_section(None, &["s1:26379", "s2:26379"], Some("shop"));
    assert_eq!(
        url_of(read(&mut section, &[]).0),
        "redis+sentinel://s1:26379,s2:26379/shop"
    );
    let mut section = sentinel_section(Some("rediss://:pw@ignored/2"), &["s1:26379"], Some("shop"));
    assert_eq!(
        url_of(read(&mut section, &[]).0),
        "rediss+sentinel://:pw@s1:26379/shop/2"
    );
    let error = |section: &mut StoreSection| match read(section, &[]).0 {
        Err(e) => e.to_string(),
        Ok(s) => panic!("{:?}", s.backend),
    };
    assert!(
        error(&mut sentinel_section(None, &["s1:26379"], None)).starts_with("store.master_name")
    );
    assert!(error(&mut sentinel_section(None, &[], Some("shop"))).starts_with("store.master_name"));
    assert!(
        error(&mut sentinel_section(None, &["s1"], Some("shop"))).starts_with("store.sentinels")
    );
    assert!(
        error(&mut sentinel_section(
            Some("http://x"),
            &["s1:26379"],
            Some("shop")
        ))
        .starts_with("store.url")
    );
}
