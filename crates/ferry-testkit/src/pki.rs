//! A private certificate authority for tests, made fresh per test: a CA, a server certificate
//! for `127.0.0.1` and `localhost`, and a client certificate, written as PEM files in a temp dir.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

/// Why the certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused the parameters or could not sign.
    #[error("making the {what}: {source}")]
    Generate {
        /// Which certificate.
        what: &'static str,
        /// rcgen's error.
        source: rcgen::Error,
    },
    /// A PEM file could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// PEM files of a private CA, a server certificate and a client certificate it signed. The
/// directory is removed when this drops.
#[derive(Debug)]
pub struct TestPki {
    dir: TempDir,
}

impl TestPki {
    /// Makes the CA and both certificates.
    pub fn new() -> Result<TestPki, PkiError> {
        let dir = tempfile::Builder::new()
            .prefix("ferry-test-pki-")
            .tempdir()
            .map_err(|source| PkiError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        let pki = TestPki { dir };
        let generate = |what| move |source| PkiError::Generate { what, source };

        let ca_key = KeyPair::generate().map_err(generate("CA key"))?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(generate("CA"))?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.distinguished_name = named("ferry test CA");
        let ca_cert = ca.self_signed(&ca_key).map_err(generate("CA"))?;
        pki.write("ca.pem", &ca_cert.pem())?;
        let issuer = Issuer::new(ca, ca_key);

        let server_key = KeyPair::generate().map_err(generate("server key"))?;
        let mut server =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .map_err(generate("server certificate"))?;
        server.distinguished_name = named("ferry test registry");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server
            .signed_by(&server_key, &issuer)
            .map_err(generate("server certificate"))?;
        pki.write("server.pem", &server_cert.pem())?;
        pki.write("server.key", &server_key.serialize_pem())?;

        let client_key = KeyPair::generate().map_err(generate("client key"))?;
        let mut client =
            CertificateParams::new(Vec::<String>::new()).map_err(generate("client certificate"))?;
        client.distinguished_name = named("ferry test client");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client
            .signed_by(&client_key, &issuer)
            .map_err(generate("client certificate"))?;
        pki.write("client.pem", &client_cert.pem())?;
        pki.write("client.key", &client_key.serialize_pem())?;
        Ok(pki)
    }

    fn write(&self, name: &str, pem: &str) -> Result<(), PkiError> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, pem).map_err(|source| PkiError::Write { path, source })
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA certificate (PEM): trust it to verify the server, or require clients signed by it.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server certificate (PEM), for `127.0.0.1` and `localhost`.
    pub fn server_cert(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server's private key (PEM, PKCS#8).
    pub fn server_key(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// The client certificate (PEM).
    pub fn client_cert(&self) -> PathBuf {
        self.dir.path().join("client.pem")
    }

    /// The client's private key (PEM, PKCS#8).
    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client.key")
    }
}

fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}
