//! The client certificate a registry that requires mutual TLS is shown: PEM files read, checked
//! and turned into a TLS identity, with errors naming which file is wrong (never its contents).

use std::path::{Path, PathBuf};

/// A client certificate and its private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate (chain), leaf first.
    pub certificate: PathBuf,
    /// The certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Which of the two files a problem is with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityFile {
    /// The certificate.
    Certificate,
    /// The private key.
    Key,
}

/// Why a client identity cannot be used; names the file, never its contents.
#[derive(Debug, thiserror::Error)]
#[error("{}", message)]
pub struct IdentityError {
    /// The file at fault.
    pub file: IdentityFile,
    /// What is wrong with it.
    pub message: String,
}

impl ClientIdentity {
    /// Reads and checks both files: each readable, the certificate holding a PEM certificate,
    /// the key a PEM private key, and the two usable together.
    pub fn load(&self) -> Result<reqwest::Identity, IdentityError> {
        let cert = read(
            &self.certificate,
            IdentityFile::Certificate,
            "client certificate",
        )?;
        let key = read(&self.key, IdentityFile::Key, "client key")?;
        if !has_section(&cert, |label| label == "CERTIFICATE") {
            return Err(IdentityError {
                file: IdentityFile::Certificate,
                message: format!(
                    "client certificate {} holds no PEM certificate",
                    self.certificate.display()
                ),
            });
        }
        if !has_section(&key, |label| label.ends_with("PRIVATE KEY")) {
            return Err(IdentityError {
                file: IdentityFile::Key,
                message: format!("client key {} holds no PEM private key", self.key.display()),
            });
        }
        let mut pem = cert;
        pem.push(b'\n');
        pem.extend_from_slice(&key);
        reqwest::Identity::from_pem(&pem).map_err(|e| IdentityError {
            file: IdentityFile::Key,
            message: format!(
                "client key {} with certificate {} is not usable: {e}",
                self.key.display(),
                self.certificate.display()
            ),
        })
    }
}

fn read(path: &Path, file: IdentityFile, what: &str) -> Result<Vec<u8>, IdentityError> {
    std::fs::read(path).map_err(|e| IdentityError {
        file,
        message: format!("cannot read {what} {}: {e}", path.display()),
    })
}

/// Whether `pem` has a `-----BEGIN <label>-----` line whose label `wanted` accepts.
fn has_section(pem: &[u8], wanted: impl Fn(&str) -> bool) -> bool {
    String::from_utf8_lossy(pem).lines().any(|line| {
        line.trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|rest| rest.strip_suffix("-----"))
            .is_some_and(&wanted)
    })
}
