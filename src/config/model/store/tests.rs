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

fn sentinel_section(username: Option<&str>, password: Option<&str>) -> StoreSection {
    StoreSection {
        sentinels: vec!["s1:26379".into(), "s2:26379".into()],
        master_name: Some("shop".into()),
        sentinel_username: username.map(str::to_owned),
        sentinel_password: password.map(str::to_owned),
        ..redis_section(None)
    }
}

fn error(section: &mut StoreSection, env: &[(&'static str, &'static str)]) -> (String, String) {
    match read(section, env).0 {
        Err(ConfigError::Invalid { key, reason }) => (key, reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_sentinels_password_comes_from_the_file_or_the_variable_which_wins() {
    let mut section = sentinel_section(Some("watcher"), Some("from-the-file"));
    let auth = read(&mut section, &[]).0.unwrap().sentinel_auth;
    assert_eq!(auth.username.as_deref(), Some("watcher"));
    assert_eq!(auth.password.as_deref(), Some("from-the-file"));

    let env = [(ENV_SENTINEL_PASSWORD, "from-the-env")];
    let mut section = sentinel_section(None, Some("from-the-file"));
    let store = read(&mut section, &env).0.unwrap();
    assert_eq!(
        store.sentinel_auth.password.as_deref(),
        Some("from-the-env")
    );
    assert_eq!(
        section.sentinel_password.as_deref(),
        Some("from-the-env"),
        "a reload keeps it"
    );
    // The variable alone; an empty one is unset.
    let mut section = sentinel_section(None, None);
    let store = read(&mut section, &env).0.unwrap();
    assert_eq!(
        store.sentinel_auth.password.as_deref(),
        Some("from-the-env")
    );
    let mut section = sentinel_section(None, None);
    let store = read(&mut section, &[(ENV_SENTINEL_PASSWORD, "")])
        .0
        .unwrap();
    assert_eq!(store.sentinel_auth, SentinelAuth::default());
    // The Sentinels named by one URL (WR_REDIS_URL's form) take it too.
    let mut section = StoreSection {
        sentinel_password: Some("pw".into()),
        ..redis_section(Some("redis+sentinel://s1:26379/shop"))
    };
    assert!(read(&mut section, &[]).0.is_ok());
}

#[test]
fn sentinel_credentials_without_sentinels_are_refused_naming_the_key() {
    for (username, password, key) in [
        (None, Some("pw"), "store.sentinel_password"),
        (Some("watcher"), Some("pw"), "store.sentinel_username"),
    ] {
        let mut section = StoreSection {
            sentinel_username: username.map(str::to_owned),
            sentinel_password: password.map(str::to_owned),
            ..redis_section(Some("redis://127.0.0.1:6379/0"))
        };
        let (named, reason) = error(&mut section, &[]);
        assert_eq!(named, key);
        assert!(reason.starts_with("needs store.sentinels"), "{reason}");
    }
    // Set by the variable, the key is the same.
    let mut section = redis_section(Some("redis://127.0.0.1:6379/0"));
    let (key, reason) = error(&mut section, &[(ENV_SENTINEL_PASSWORD, "pw")]);
    assert_eq!(key, "store.sentinel_password");
    assert!(reason.contains(ENV_SENTINEL_PASSWORD), "{reason}");

    let (key, reason) = error(&mut sentinel_section(Some("watcher"), None), &[]);
    assert_eq!(key, "store.sentinel_username");
    assert!(
        reason.starts_with("needs store.sentinel_password"),
        "{reason}"
    );
    let (key, _) = error(&mut sentinel_section(None, Some("")), &[]);
    assert_eq!(key, "store.sentinel_password");

    // The memory store has no Sentinels: the variable is ignored, said once.
    let mut section = StoreSection::default();
    let (store, warnings) = read(&mut section, &[(ENV_SENTINEL_PASSWORD, "pw")]);
    assert_eq!(store.unwrap().sentinel_auth, SentinelAuth::default());
    assert_eq!(
        warnings,
        ["WR_SENTINEL_PASSWORD is set but store.backend = \"memory\": ignored"]
    );
}

#[test]
fn the_sentinels_password_is_never_printed() {
    let mut section = sentinel_section(Some("watcher"), Some("hunter2-sentinel"));
    let store = read(&mut section, &[]).0.unwrap();
    let printed = format!("{section:?} {store:?}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(
        printed.contains("watcher") && printed.contains("****"),
        "{printed}"
    );
    let url = url_of(Ok(store));
    assert!(!url.contains("hunter2"), "never in the URL: {url}");
}

#[test]
fn replica_acks_are_off_by_default_and_checked_where_they_can_hold() {
    let mut section = redis_section(Some("redis://127.0.0.1:6379/0"));
    let store = read(&mut section, &[]).0.unwrap();
    assert_eq!(store.replica_acks, 0);
    assert_eq!(store.replica_ack_timeout, Duration::from_millis(100));

    let mut section = StoreSection {
        replica_acks: 1,
        replica_ack_timeout: "50ms".into(),
        ..sentinel_section(None, None)
    };
    let (store, warnings) = read(&mut section, &[]);
    let store = store.unwrap();
    assert_eq!(
        (store.replica_acks, store.replica_ack_timeout),
        (1, Duration::from_millis(50))
    );
    assert!(warnings.is_empty(), "{warnings:?}");

    let mut section = StoreSection {
        replica_acks: 1,
        ..redis_section(Some("redis+cluster://h1:6379,h2:6379"))
    };
    assert_eq!(error(&mut section, &[]).0, "store.replica_acks");
    for timeout in ["500ms", "2s"] {
        let mut section = StoreSection {
            replica_acks: 1,
            replica_ack_timeout: timeout.into(),
            ..redis_section(Some("redis://127.0.0.1:6379/0"))
        };
        let (key, reason) = error(&mut section, &[]);
        assert_eq!(key, "store.replica_ack_timeout");
        assert!(reason.contains("store.command_timeout (500ms)"), "{reason}");
    }
    let mut section = StoreSection {
        replica_ack_timeout: "soon".into(),
        ..redis_section(Some("redis://127.0.0.1:6379/0"))
    };
    assert_eq!(error(&mut section, &[]).0, "store.replica_ack_timeout");

    let mut section = StoreSection {
        replica_acks: 2,
        ..StoreSection::default()
    };
    let (store, warnings) = read(&mut section, &[]);
    assert!(store.is_ok());
    assert!(
        warnings.len() == 1 && warnings[0].starts_with("store.replica_acks has no effect"),
        "{warnings:?}"
    );
}
