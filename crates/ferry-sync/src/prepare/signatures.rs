//! `signatures:`: before an image is copied, its cosign `.sig` layers and Sigstore bundle
//! referrers for its exact source digest are read (bounded) and verified with ferry-trust.
//!
//! Signatures are found as referrers are (`prepare::referrers`): the `sha256-<hex>.sig` tag in
//! the listing (or by a HEAD), and bundles through the referrers API or, where the source has
//! none, the tag-schema index `sha256-<hex>`. Every read goes through the `Source`, so through
//! ferry-distribution's retry; nothing here retries.

use std::collections::BTreeMap;

use ferry_config::SignaturePolicy;
use ferry_distribution::Digest;
use ferry_distribution::error::Error;
use ferry_distribution::ops::Referrer;
use ferry_trust::{CosignLayer, TrustError, Verified};
use futures::StreamExt as _;
use serde::Serialize;

use crate::prepare::referrers::{Listing, index_entries};
use crate::source::Source;

/// Layers of one `.sig` manifest read at most: cosign appends one per signing, so a real one
/// holds a few; a manifest with more is refused whole rather than read.
pub const MAX_SIG_LAYERS: usize = 64;
/// Bundle referrers of one image read at most.
pub const MAX_BUNDLES: usize = 16;
/// The artifact type prefix of Sigstore bundles (v0.1 to v0.3).
const BUNDLE_PREFIX: &str = "application/vnd.dev.sigstore.bundle";

/// Why `signatures:` refused an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// No `.sig` layer or bundle for the digest on the source.
    NoSignature,
    /// Signed, but by no key of the policy.
    WrongKey,
    /// A certificate whose issuer and subject no identity of the policy accepts.
    IdentityMismatch,
    /// A signature over another digest.
    DigestMismatch,
    /// The Rekor entry is missing, from a log not in the trusted root, or does not cover the
    /// signature.
    TlogUntrusted,
    /// A certificate that does not chain to a CA of the trusted root.
    UntrustedCertificate,
    /// A certificate outside its validity at the logged time.
    CertificateExpired,
    /// A signature or bundle that does not parse, is too large, or does not verify.
    Invalid,
    /// The signature could not be read from the source.
    Unreadable,
}

impl RefusalReason {
    /// The reason as reports print it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RefusalReason::NoSignature => "no signature",
            RefusalReason::WrongKey => "wrong key",
            RefusalReason::IdentityMismatch => "identity mismatch",
            RefusalReason::DigestMismatch => "digest mismatch",
            RefusalReason::TlogUntrusted => "Rekor entry missing or not trusted",
            RefusalReason::UntrustedCertificate => "certificate not trusted",
            RefusalReason::CertificateExpired => "certificate expired",
            RefusalReason::Invalid => "invalid signature",
            RefusalReason::Unreadable => "signature unreadable",
        }
    }

    fn of(e: &TrustError) -> RefusalReason {
        match e {
            TrustError::WrongKey => RefusalReason::WrongKey,
            TrustError::IdentityMismatch { .. } => RefusalReason::IdentityMismatch,
            TrustError::DigestMismatch { .. } => RefusalReason::DigestMismatch,
            TrustError::Tlog(_) => RefusalReason::TlogUntrusted,
            TrustError::UntrustedCertificate(_) => RefusalReason::UntrustedCertificate,
            TrustError::CertificateExpired { .. } => RefusalReason::CertificateExpired,
            TrustError::Io { .. } => RefusalReason::Unreadable,
            _ => RefusalReason::Invalid,
        }
    }
}

/// An image `signatures:` refused: nothing of it is copied, on any target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignatureRefusal {
    /// The tag, or the digest of a pin.
    pub image: String,
    /// The source digest the signatures had to name.
    pub digest: String,
    /// Why, for the first signature found (or `no_signature`).
    pub reason: RefusalReason,
    /// Every signature tried and why it failed (`<where>: <error>`), joined with `; `.
    pub detail: String,
}

impl std::fmt::Display for SignatureRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "signature refused ({}): {} ({}): {}",
            self.reason.as_str(),
            self.image,
            self.digest,
            self.detail
        )
    }
}

/// An image whose signature verified but is younger than `min_age`: not copied in this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldImage {
    /// The tag, or the digest of a pin.
    pub image: String,
    /// Its source digest.
    pub digest: String,
    /// When it was signed (Rekor integrated time; Unix seconds).
    pub signed_at: i64,
    /// When it becomes mirrorable: `signed_at + min_age` (Unix seconds).
    pub mirrorable_at: i64,
}

/// One signature found for a digest, and what verifying it said.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Where it was found: `<tag> layer <n>` or `bundle <digest>`.
    pub place: String,
    /// The signer and log time, or why it was refused.
    pub result: Result<Verified, TrustError>,
    /// What carries it on the source: the `.sig` tag, or the bundle's referrer manifest.
    pub carrier: Carrier,
}

/// What carries a signature on the source, to copy with its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carrier {
    /// The cosign tag `sha256-<hex>.sig`.
    Tag(String),
    /// A bundle referrer manifest.
    Referrer(Referrer),
}

/// What the policy decided for one image.
#[derive(Debug, Clone)]
pub enum Decision {
    /// At least one signature verified (and, with `min_age`, is old enough).
    Verified,
    /// Refused.
    Refused(RefusalReason, String),
    /// Verified but too young.
    Held { signed_at: i64, mirrorable_at: i64 },
}

/// Every signature for `digest` on `source` (`.sig` layers, then bundles), each verified.
pub(crate) async fn find_and_verify(
    policy: &SignaturePolicy,
    source: &Source,
    digest: &Digest,
    listing: Listing<'_>,
) -> Result<Vec<Checked>, Error> {
    let mut fetched = Fetched::new();
    find_and_verify_with(policy, source, digest, listing, &mut fetched).await
}

/// `.sig` manifests the prepare phase already holds, by tag: one the run fetched (a tag the
/// filter selected) is not fetched again to verify, and one fetched to verify is not fetched
/// again to copy.
pub(crate) type Fetched = std::collections::HashMap<String, ferry_distribution::ops::Manifest>;

/// [`find_and_verify`], taking the `.sig` manifest from `fetched` when there and leaving the one
/// it fetched there.
pub(crate) async fn find_and_verify_with(
    policy: &SignaturePolicy,
    source: &Source,
    digest: &Digest,
    listing: Listing<'_>,
    fetched: &mut Fetched,
) -> Result<Vec<Checked>, Error> {
    let mut out = Vec::new();
    let sig_tag = format!("{}.sig", digest.fallback_tag());
    let sig_manifest = match fetched.get(&sig_tag) {
        Some(m) => Some(m.clone()),
        None => {
            let has_sig = if listing.listed {
                listing.tags.contains(sig_tag.as_str())
            } else {
                source.head_manifest(&sig_tag).await?.is_some()
            };
            match has_sig {
                true => source.find_manifest(&sig_tag).await?,
                false => None,
            }
        }
    };
    if let Some(m) = &sig_manifest {
        fetched.insert(sig_tag.clone(), m.clone());
    }
    if let Some(manifest) = sig_manifest {
        match layers(&manifest.bytes) {
            Err(e) => out.push(Checked {
                place: sig_tag.clone(),
                result: Err(e),
                carrier: Carrier::Tag(sig_tag.clone()),
            }),
            Ok(list) => {
                for (n, layer) in list.iter().enumerate() {
                    let place = format!("{sig_tag} layer {n}");
                    let result = match read_small(
                        source,
                        &layer.digest,
                        layer.size,
                        ferry_trust::tag::MAX_LAYER_BYTES as u64,
                        "cosign signature payload",
                    )
                    .await
                    {
                        Ok(payload) => policy.policy.verify_cosign_layer(
                            digest,
                            CosignLayer {
                                payload: &payload,
                                annotations: &layer.annotations,
                            },
                        ),
                        Err(e) => Err(e),
                    };
                    out.push(Checked {
                        place,
                        result,
                        carrier: Carrier::Tag(sig_tag.clone()),
                    });
                }
            }
        }
    }
    for r in bundle_referrers(source, digest, listing).await? {
        let place = format!("bundle {}", r.digest);
        let result = match source.find_manifest(&r.digest.to_string()).await? {
            None => Err(TrustError::Io {
                what: "Sigstore bundle",
                reason: "the referrer's manifest is not on the source".into(),
            }),
            Some(m) => read_bundle(source, &m.bytes, digest, policy).await,
        };
        out.push(Checked {
            place,
            result,
            carrier: Carrier::Referrer(r),
        });
    }
    Ok(out)
}

/// What the policy makes of the signatures found, at `now` (Unix seconds); `seen` is when the
/// digest was first seen, the age of a signature no log entry dates (`tlog: skip`).
pub(crate) fn decide(
    policy: &SignaturePolicy,
    checked: &[Checked],
    now: i64,
    seen: Option<i64>,
) -> Decision {
    let verified: Vec<&Verified> = checked
        .iter()
        .filter_map(|c| c.result.as_ref().ok())
        .collect();
    if verified.is_empty() {
        let Some(first) = checked.iter().find_map(|c| c.result.as_ref().err()) else {
            return Decision::Refused(
                RefusalReason::NoSignature,
                "no cosign signature (.sig tag) and no Sigstore bundle referrer names this digest"
                    .into(),
            );
        };
        let detail = checked
            .iter()
            .filter_map(|c| c.result.as_ref().err().map(|e| format!("{}: {e}", c.place)))
            .collect::<Vec<_>>()
            .join("; ");
        return Decision::Refused(RefusalReason::of(first), detail);
    }
    let signed_at = verified
        .iter()
        .filter_map(|v| v.integrated_time)
        .min()
        .or(seen);
    match (policy.min_age, signed_at) {
        (Some(age), Some(at)) => {
            let ready = at.saturating_add(i64::try_from(age.as_secs()).unwrap_or(i64::MAX));
            if now < ready {
                return Decision::Held {
                    signed_at: at,
                    mirrorable_at: ready,
                };
            }
            Decision::Verified
        }
        _ => Decision::Verified,
    }
}

/// A `.sig` manifest's layer descriptors (at most [`MAX_SIG_LAYERS`]).
struct SigLayer {
    digest: Digest,
    size: u64,
    annotations: BTreeMap<String, String>,
}

fn layers(bytes: &[u8]) -> Result<Vec<SigLayer>, TrustError> {
    #[derive(serde::Deserialize)]
    struct Raw {
        #[serde(default)]
        layers: Vec<RawLayer>,
    }
    #[derive(serde::Deserialize)]
    struct RawLayer {
        digest: Digest,
        size: u64,
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    }
    let raw: Raw = serde_json::from_slice(bytes).map_err(|e| TrustError::Json {
        what: "cosign signature manifest",
        reason: e.to_string(),
    })?;
    if raw.layers.len() > MAX_SIG_LAYERS {
        return Err(TrustError::TooLarge {
            what: "cosign signature manifest (layers)",
            limit: MAX_SIG_LAYERS as u64,
        });
    }
    Ok(raw
        .layers
        .into_iter()
        .map(|l| SigLayer {
            digest: l.digest,
            size: l.size,
            annotations: l.annotations,
        })
        .collect())
}

/// The bundle referrers of `digest`: the referrers API's, or the tag-schema index's entries.
async fn bundle_referrers(
    source: &Source,
    digest: &Digest,
    listing: Listing<'_>,
) -> Result<Vec<Referrer>, Error> {
    let all = match source.list_referrers(digest).await? {
        Some(list) => list,
        None => {
            let tag = digest.fallback_tag();
            let exists = if listing.listed {
                listing.tags.contains(tag.as_str())
            } else {
                source.head_manifest(&tag).await?.is_some()
            };
            if exists {
                index_entries(source, &tag).await?
            } else {
                Vec::new()
            }
        }
    };
    Ok(all
        .into_iter()
        .filter(|r| {
            r.artifact_type
                .as_deref()
                .is_some_and(|t| t.starts_with(BUNDLE_PREFIX))
        })
        .take(MAX_BUNDLES)
        .collect())
}

/// The bundle a referrer manifest carries as its first bundle layer, read bounded and verified.
async fn read_bundle(
    source: &Source,
    manifest: &[u8],
    digest: &Digest,
    policy: &SignaturePolicy,
) -> Result<Verified, TrustError> {
    let list = layers(manifest)?;
    let layer = list.first().ok_or_else(|| TrustError::Json {
        what: "Sigstore bundle referrer",
        reason: "no layer".into(),
    })?;
    ferry_trust::bundle::check_declared_size(layer.size)?;
    let bytes = read_small(
        source,
        &layer.digest,
        layer.size,
        ferry_trust::bundle::MAX_BUNDLE_BYTES,
        "Sigstore bundle",
    )
    .await?;
    policy.policy.verify_bundle(digest, &bytes)
}

/// A small blob read whole: refused before the read when its declared size is over `limit`, cut
/// off past it while reading, and checked against its digest.
async fn read_small(
    source: &Source,
    digest: &Digest,
    size: u64,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, TrustError> {
    if size > limit {
        return Err(TrustError::TooLarge { what, limit });
    }
    let io = |reason: String| TrustError::Io { what, reason };
    let mut stream = source
        .open_blob(digest, size, 0)
        .await
        .map_err(|e| io(e.to_string()))?;
    let mut bytes = Vec::new();
    let mut digester = digest.digester();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| io(e.to_string()))?;
        if bytes.len() as u64 + chunk.len() as u64 > size {
            return Err(io(format!(
                "more bytes than the {size} its descriptor declares"
            )));
        }
        digester.update(&chunk);
        bytes.extend_from_slice(&chunk);
    }
    let got = digester.finish();
    if got != *digest {
        return Err(io(format!("its bytes hash to {got}, not {digest}")));
    }
    Ok(bytes)
}

/// What the gate kept out of a mapping's images.
#[derive(Debug, Default)]
pub struct Gated {
    /// Images refused, each with why.
    pub refused: Vec<SignatureRefusal>,
    /// Images held by `min_age`.
    pub held: Vec<HeldImage>,
    /// The carriers of the signatures that verified, by the subject digest: copied with their
    /// image even where the mapping copies no referrers.
    pub verified: Vec<(Digest, Carrier)>,
    /// The `.sig` manifests read (or found already read), by tag, for the copy to reuse.
    pub fetched: Fetched,
}

/// Applies `policy` to `images` (referrer tags aside): an image whose signatures do not verify,
/// or verify but are younger than `min_age`, leaves `images` with every referrer tag of its
/// digest. Each digest is checked once however many tags name it.
pub(crate) async fn gate(
    policy: &SignaturePolicy,
    source: &Source,
    images: &mut Vec<crate::plan::ImagePlan>,
    listing: Listing<'_>,
    now: i64,
    first_seen: Option<&ferry_store::resume::FirstSeen>,
) -> Result<Gated, Error> {
    let mut out = Gated::default();
    // `.sig` tags the filter selected were fetched whole already (no target had them).
    for i in images.iter() {
        if let (Some(tag), Some(root)) = (&i.tag, &i.root)
            && tag.as_str().ends_with(".sig")
        {
            out.fetched.insert(tag.to_string(), root.clone());
        }
    }
    let mut decided: std::collections::HashMap<Digest, Decision> = Default::default();
    for image in images.iter() {
        if image
            .tag
            .as_ref()
            .is_some_and(|t| crate::prune::is_referrer_tag(t))
        {
            continue;
        }
        let digest = &image.source_digest;
        let decision = match decided.get(digest) {
            Some(d) => d.clone(),
            None => {
                let checked =
                    find_and_verify_with(policy, source, digest, listing, &mut out.fetched).await?;
                // No log time to age by: the time ferry first saw the digest (now, without a
                // state directory, so the cooldown never ends early).
                let undated = policy.min_age.is_some()
                    && checked.iter().any(|c| c.result.is_ok())
                    && !checked
                        .iter()
                        .any(|c| c.result.as_ref().is_ok_and(|v| v.integrated_time.is_some()));
                let seen = match first_seen {
                    Some(f) if undated => Some(f.first_seen(digest, now).await),
                    _ if undated => Some(now),
                    _ => None,
                };
                let d = decide(policy, &checked, now, seen);
                if matches!(d, Decision::Verified) {
                    for c in checked.into_iter().filter(|c| c.result.is_ok()) {
                        let entry = (digest.clone(), c.carrier);
                        if !out.verified.contains(&entry) {
                            out.verified.push(entry);
                        }
                    }
                }
                decided.insert(digest.clone(), d.clone());
                d
            }
        };
        match decision {
            Decision::Verified => {}
            Decision::Refused(reason, detail) => out.refused.push(SignatureRefusal {
                image: image.name(),
                digest: digest.to_string(),
                reason,
                detail,
            }),
            Decision::Held {
                signed_at,
                mirrorable_at,
            } => out.held.push(HeldImage {
                image: image.name(),
                digest: digest.to_string(),
                signed_at,
                mirrorable_at,
            }),
        }
    }
    let blocked: Vec<String> = decided
        .iter()
        .filter(|(_, d)| !matches!(d, Decision::Verified))
        .map(|(digest, _)| digest.fallback_tag())
        .collect();
    images.retain(|i| {
        let own = blocked.contains(&i.source_digest.fallback_tag());
        let its_referrer = i
            .tag
            .as_ref()
            .is_some_and(|t| blocked.iter().any(|b| t.as_str().starts_with(b.as_str())));
        !own && !its_referrer
    });
    Ok(out)
}

/// Now, in Unix seconds (the clock min_age is measured on).
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One signature of an image as `ferry inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignatureCheck {
    /// Where it was found: `<tag> layer <n>` or `bundle <digest>`.
    pub place: String,
    /// Who signed: `key sha256:<fingerprint>` or `<subject> (issuer <issuer>)`, when known (a
    /// key signature is known only by a key of the policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// Whether it verifies under the policy.
    pub verified: bool,
    /// The Rekor integrated time of a verified signature (RFC 3339), if logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged_at: Option<String>,
    /// Why it does not verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every signature of `digest` on `source` (`.sig` layers, bundle referrers), each verified
/// under `policy`; without one, under an empty policy on the built-in root, so each is shown
/// unverified with the signer a certificate names.
pub async fn inspect(
    source: &Source,
    digest: &Digest,
    policy: Option<&SignaturePolicy>,
) -> Result<Vec<SignatureCheck>, Error> {
    let empty;
    let policy = match policy {
        Some(p) => p,
        None => {
            let root = ferry_trust::TrustedRoot::public_good().map_err(|e| {
                source.error(
                    ferry_distribution::Operation::ManifestGet,
                    ferry_distribution::ErrorKind::Local(format!("the built-in trusted root: {e}")),
                )
            })?;
            empty = SignaturePolicy {
                policy: std::sync::Arc::new(ferry_trust::Policy {
                    keys: Vec::new(),
                    identities: Vec::new(),
                    root: std::sync::Arc::new(root),
                    tlog: ferry_trust::TlogPolicy::Skip,
                }),
                min_age: None,
                trusted_root: None,
            };
            &empty
        }
    };
    let none = std::collections::HashSet::new();
    let listing = Listing {
        listed: false,
        tags: &none,
    };
    let checked = find_and_verify(policy, source, digest, listing).await?;
    Ok(checked
        .into_iter()
        .map(|c| match c.result {
            Ok(v) => SignatureCheck {
                place: c.place,
                signer: Some(v.signer.to_string()),
                verified: true,
                logged_at: v.integrated_time.map(crate::report::rfc3339),
                error: None,
            },
            Err(e) => SignatureCheck {
                place: c.place,
                signer: match &e {
                    TrustError::IdentityMismatch { issuer, subject } => {
                        Some(format!("{subject} (issuer {issuer})"))
                    }
                    _ => None,
                },
                verified: false,
                logged_at: None,
                error: Some(e.to_string()),
            },
        })
        .collect())
}

/// The carriers of verified signatures as what to copy: `.sig` tags to resolve, and bundle
/// referrers to copy by digest (each naming its subject). `compare`: some target lists the tag.
pub(crate) fn carriers(
    verified: Vec<(Digest, Carrier)>,
    compare: &dyn Fn(&str) -> bool,
) -> (
    Vec<crate::prepare::source::Wanted>,
    Vec<crate::plan::ImagePlan>,
) {
    let mut tags = Vec::new();
    let mut referrers = Vec::new();
    for (subject, carrier) in verified {
        match carrier {
            Carrier::Tag(name) => {
                if let Ok(tag) = ferry_distribution::reference::Tag::parse(&name) {
                    tags.push(crate::prepare::source::Wanted {
                        compare: compare(tag.as_str()),
                        reference: tag.to_string(),
                        tag: Some(tag),
                    });
                }
            }
            Carrier::Referrer(r) => referrers.push(crate::plan::ImagePlan {
                tag: None,
                digest: r.digest.clone(),
                retagged_from: None,
                fallback_digest: None,
                source_digest: r.digest,
                subject: Some(subject),
                media_type: r.media_type,
                root: None,
                targets: Vec::new(),
            }),
        }
    }
    (tags, referrers)
}

/// Takes out of `wanted` the `.sig` tags whose manifest `fetched` holds, as images with that
/// manifest as their root (the engine then does not fetch it); the rest are to be resolved.
pub(crate) fn already_fetched(
    wanted: Vec<crate::prepare::source::Wanted>,
    fetched: &Fetched,
) -> (
    Vec<crate::prepare::source::Wanted>,
    Vec<crate::plan::ImagePlan>,
) {
    let mut rest = Vec::new();
    let mut images = Vec::new();
    for w in wanted {
        match w.tag.as_ref().and_then(|t| fetched.get(t.as_str())) {
            Some(m) => images.push(crate::plan::ImagePlan {
                tag: w.tag.clone(),
                digest: m.digest.clone(),
                retagged_from: None,
                fallback_digest: None,
                source_digest: m.digest.clone(),
                subject: None,
                media_type: m.media_type.clone(),
                root: Some(m.clone()),
                targets: Vec::new(),
            }),
            None => rest.push(w),
        }
    }
    (rest, images)
}
