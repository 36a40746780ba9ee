//! Probes that prove a right without changing anything: `ferry auth check` opens an upload
//! session and abandons it, the cheapest request a registry must authorise as a push.

use crate::client::RegistryClient;
use crate::error::Error;
use crate::operation::Operation;
use crate::retry::Call;

impl RegistryClient {
    /// Proves the credentials may push to `repository`: opens an upload session (`POST
    /// …/blobs/uploads/`, retried as [`Operation::UploadStart`]) and abandons it (`DELETE`,
    /// best effort), so nothing is left behind. A refusal is the registry's error (an auth
    /// failure for a refused or missing credential).
    pub async fn check_push(&self, repository: &str) -> Result<(), Error> {
        let session = self
            .run(Call::new(Operation::UploadStart, Some(repository)), |_| {
                self.start_upload_once(repository)
            })
            .await?;
        // An abandoned session the registry keeps expires on its own; the push right is proven.
        let _ = self
            .run(Call::new(Operation::UploadCancel, Some(repository)), |_| {
                self.cancel_upload_once(&session)
            })
            .await;
        Ok(())
    }
}
