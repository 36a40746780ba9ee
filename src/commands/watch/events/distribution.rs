//! distribution's notification envelope, and ACR's webhook, which posts one event of the same
//! shape alone, or inside Azure Event Grid's array (with its subscription handshake).

use serde_json::Value;

use super::{Notice, Parsed, owned, text, url_host};

const MANIFEST_TYPES: [&str; 4] = [
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// distribution's envelope (`application/vnd.docker.distribution.events.v1+json`; source:
/// distribution's docs/notifications.md, "Events"): manifest pushes and deletes, blob pushes and
/// pulls left out.
pub fn envelope(events: &[Value]) -> Vec<Notice> {
    events.iter().filter_map(event).collect()
}

/// One event of the envelope's shape: `action`, `target.{repository,tag,digest,mediaType,url}`,
/// `request.host`.
pub fn event(e: &Value) -> Option<Notice> {
    let delete = match text(e, &["action"])? {
        "push" => false,
        "delete" => true,
        _ => return None,
    };
    let tag = owned(e, &["target", "tag"]);
    let media = text(e, &["target", "mediaType"]);
    if tag.is_none() && !media.is_some_and(|m| MANIFEST_TYPES.contains(&m)) {
        return None;
    }
    let host = text(e, &["target", "url"])
        .and_then(url_host)
        .or_else(|| owned(e, &["request", "host"]));
    Some(Notice {
        host,
        repository: owned(e, &["target", "repository"])?,
        tag,
        digest: owned(e, &["target", "digest"]),
        delete,
    })
}

/// ACR's webhook: one event object, `action` `push` or `delete` (source: Microsoft Learn,
/// "Azure Container Registry webhook reference", push event payload). `chart_push` and
/// quarantine actions are left out.
pub fn acr(v: &Value) -> Vec<Notice> {
    event(v).into_iter().collect()
}

/// Azure Event Grid's array of events (source: Microsoft Learn, "Azure Container Registry as an
/// Event Grid source": `eventType` `Microsoft.ContainerRegistry.ImagePushed` / `ImageDeleted`,
/// `data` the ACR event; "Endpoint validation with Event Grid events": a
/// `Microsoft.EventGrid.SubscriptionValidationEvent` whose `data.validationCode` is answered as
/// `{"validationResponse": code}`).
pub fn event_grid(items: &[Value]) -> Result<Parsed, String> {
    let mut notices = Vec::new();
    for item in items {
        match text(item, &["eventType"]) {
            Some("Microsoft.EventGrid.SubscriptionValidationEvent") => {
                let code = text(item, &["data", "validationCode"])
                    .filter(|c| c.len() <= 128 && c.bytes().all(|b| b.is_ascii_graphic()))
                    .ok_or("an Event Grid validation event without a usable validationCode")?;
                return Ok(Parsed::Validation(code.to_owned()));
            }
            Some("Microsoft.ContainerRegistry.ImagePushed")
            | Some("Microsoft.ContainerRegistry.ImageDeleted") => {
                if let Some(data) = item.get("data") {
                    notices.extend(event(data));
                }
            }
            _ => {}
        }
    }
    Ok(Parsed::Notices(notices, 0))
}
