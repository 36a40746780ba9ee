//! Tests of the report's statuses: a failure keeps its typed error and renders where and what
//! in JSON; a held image says when it becomes mirrorable.

use super::*;
use ferry_distribution::{ErrorKind, Operation};

fn registry_failure(status: u16) -> ImageStatus {
    let kind = ErrorKind::Status {
        status,
        code: None,
        message: None,
    };
    ImageStatus::failed(
        &Error::new("r.example", Some("app"), Operation::BlobGet, kind).with_attempts(3),
    )
}

#[test]
fn a_failure_keeps_its_typed_error_and_renders_where_and_what_in_json() {
    let failed = registry_failure(503);
    let error = failed.error().expect("failed").to_string();
    assert_eq!(
        serde_json::to_value(&failed).unwrap(),
        serde_json::json!({"status": "failed", "registry": "r.example", "repository": "app",
            "operation": "blob GET", "http_status": 503, "attempts": 3, "error": error})
    );
    let io = std::io::Error::other("disk full");
    let store = ImageStatus::failed_sync(&SyncError::Store(ferry_store::StoreError::new(
        "/m", "blob", io,
    )));
    let json = serde_json::to_value(&store).unwrap();
    assert_eq!(json["registry"], "oci:/m");
    assert_eq!(json["operation"], "layout write (blob)");
    assert_eq!(
        (json["http_status"].clone(), json["attempts"].clone()),
        (serde_json::Value::Null, 0.into())
    );
    assert_eq!(
        serde_json::to_value(ImageStatus::UpToDate).unwrap(),
        serde_json::json!({"status": "up_to_date"})
    );
    assert!(registry_failure(401).error().unwrap().is_auth());
    assert!(!registry_failure(503).error().unwrap().is_auth());
    assert_ne!(registry_failure(401), registry_failure(503));
}
