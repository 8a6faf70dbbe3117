//! TLS through Pingora's rustls backend: the public listener's certificate, and the CAs trusted
//! for the origin. Pingora panics inside a service task on a bad certificate file, so the files
//! are checked here first, at start and by `--test`.

use std::path::Path;

use pingora_core::listeners::tls::TlsSettings;
use pingora_core::tls::{RootCertStore, load_ca_file_into_store, load_certs_and_key_files};

use crate::config::model::ListenTls;

#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct TlsError {
    pub key: &'static str,
    pub reason: String,
}

/// rustls is built with two crypto backends here (ring for Pingora, aws-lc-rs for the HTTP
/// client), and then refuses to pick one itself: every TLS user in the process (the proxy, a
/// `rediss://` store) needs this called first. Later calls do nothing.
pub fn install_crypto_provider() {
    pingora_core::tls::install_default_crypto_provider();
}

fn path_text<'a>(key: &'static str, path: &'a Path) -> Result<&'a str, TlsError> {
    path.to_str().ok_or_else(|| TlsError {
        key,
        reason: format!("{} is not a UTF-8 path", path.display()),
    })
}

/// Where a listener's TLS files are named in the file: `listen` or `admin`.
#[derive(Debug, Clone, Copy)]
pub struct TlsKeys {
    pub certificate: &'static str,
    pub key: &'static str,
}

impl TlsKeys {
    pub const LISTEN: Self = Self {
        certificate: "listen.certificate",
        key: "listen.key",
    };
    pub const ADMIN: Self = Self {
        certificate: "admin.certificate",
        key: "admin.key",
    };
}

/// A listener's TLS settings, its files checked first ([`check_listener`]'s words).
pub fn listener_settings(tls: &ListenTls, keys: TlsKeys) -> Result<TlsSettings, TlsError> {
    let certificate = path_text(keys.certificate, &tls.certificate)?;
    let key = path_text(keys.key, &tls.key)?;
    TlsSettings::intermediate(certificate, key).map_err(|e| TlsError {
        key: keys.certificate,
        reason: e.to_string(),
    })
}

/// The listener's certificate chain and private key load, and belong to each other.
pub fn check_listener(tls: &ListenTls, keys: TlsKeys) -> Result<(), TlsError> {
    let certificate = path_text(keys.certificate, &tls.certificate)?;
    let key = path_text(keys.key, &tls.key)?;
    let (chain, private_key) = match load_certs_and_key_files(certificate, key) {
        Ok(Some(loaded)) => loaded,
        Ok(None) => {
            return Err(TlsError {
                key: keys.certificate,
                reason: format!(
                    "{certificate} and {key} must hold a PEM certificate chain and a PEM \
                     private key"
                ),
            });
        }
        Err(e) => {
            return Err(TlsError {
                key: keys.certificate,
                reason: format!("cannot load {certificate} / {key}: {e}"),
            });
        }
    };
    install_crypto_provider();
    pingora_core::tls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map(drop)
        .map_err(|e| TlsError {
            key: keys.key,
            reason: format!("does not fit the certificate in {certificate}: {e}"),
        })
}

/// The origin's CA file holds at least one certificate.
pub fn check_ca_file(path: &Path) -> Result<(), TlsError> {
    let text = path_text("origin.ca_file", path)?;
    let mut store = RootCertStore::empty();
    load_ca_file_into_store(text, &mut store).map_err(|e| TlsError {
        key: "origin.ca_file",
        reason: format!("cannot load {text}: {e}"),
    })?;
    if store.is_empty() {
        return Err(TlsError {
            key: "origin.ca_file",
            reason: format!("{text} holds no PEM certificate"),
        });
    }
    Ok(())
}
