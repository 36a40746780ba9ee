//! The watch listener's TLS: the `listener.tls` certificate chain and key read once at start into
//! a rustls server setup (TLS 1.2 and 1.3, HTTP/1.1 only); errors name the file, never its bytes.

use std::sync::Arc;

use ferry_config::ListenerTls;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

/// The acceptor for `tls`, or why its files cannot serve.
pub fn acceptor(tls: &ListenerTls) -> Result<TlsAcceptor, String> {
    let certificate = tls.certificate.display();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&tls.certificate)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("listener.tls.certificate {certificate}: {e}"))?;
    if chain.is_empty() {
        return Err(format!(
            "listener.tls.certificate {certificate}: no PEM certificate in it"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .map_err(|e| format!("listener.tls.key {}: {e}", tls.key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("listener TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| {
            format!(
                "listener.tls: the key {} does not serve the certificate {certificate}: {e}",
                tls.key.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
