//! Certificates made for a test (a CA and leaves it signs, as PEM files), and a TLS front: a TLS
//! listener that records the SNI it was asked for and relays the bytes to a plain stub origin.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct TestCa {
    pub dir: tempfile::TempDir,
    pub ca_file: PathBuf,
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A leaf certificate signed by the test CA.
pub struct Leaf {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
}

impl TestCa {
    pub fn new() -> Self {
        waitroom::service::tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "waitroom test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let ca_pem = cert.pem();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, &ca_pem).unwrap();
        Self {
            dir,
            ca_file,
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (DNS names or IP addresses), written as `<stem>.pem`
    /// and `<stem>.key`.
    pub fn leaf(&self, names: &[&str], stem: &str) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or(stem));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let certificate = self.dir.path().join(format!("{stem}.pem"));
        let key_path = self.dir.path().join(format!("{stem}.key"));
        std::fs::write(&certificate, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        Leaf {
            certificate,
            key: key_path,
            der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }
}

/// TLS in front of a plain origin, on its own thread and runtime.
#[derive(Clone)]
pub struct TlsFront {
    pub addr: SocketAddr,
    /// The server name each handshake asked for.
    pub sni: Arc<Mutex<Vec<Option<String>>>>,
}

impl TlsFront {
    pub fn start(leaf: &Leaf, backend: SocketAddr) -> Self {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key_der.clone()));
        let config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der.clone()], key)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let sni = Arc::new(Mutex::new(Vec::new()));
        let seen = sni.clone();
        let addr = super::origin::serve_in_background(move |stream| {
            let acceptor = acceptor.clone();
            let seen = seen.clone();
            async move {
                // A refused handshake (the client distrusts us) just ends here.
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let name = tls.get_ref().1.server_name().map(str::to_owned);
                seen.lock().unwrap().push(name);
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            }
        });
        Self { addr, sni }
    }

    pub fn names_seen(&self) -> Vec<Option<String>> {
        self.sni.lock().unwrap().clone()
    }
}
