//! What `ferry verify` found, by name: per mapping and target, each tag, child, referrer or blob
//! missing, each tag drifted (both digests), each extra tag, each answer it could not check.

use std::fmt::Write as _;

use serde::Serialize;

use ferry_distribution::error::Error;

/// Everything a verify found, in config order, with the sums.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// `verify --bundle`: whether the bundle is signed, only recorded, or not authenticated
    /// (absent for any other verify).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authenticity: Option<crate::bundle_trust::Authenticity>,
    /// Whether blobs were checked too (`--deep`).
    pub deep: bool,
    /// Whether signatures were checked too (`--signatures`).
    pub signatures: bool,
    /// Every mapping, in config order.
    pub mappings: Vec<MappingVerify>,
    /// Sums over the mappings.
    pub totals: VerifyTotals,
}

/// One mapping: what could not be read of it, and each target's findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MappingVerify {
    /// Position of the mapping in the config.
    pub index: usize,
    /// The source as the config names it.
    pub source: String,
    /// Findings about the mapping as a whole (unreadable: the source or a target could not be
    /// listed, a listed tag's manifest was not served); nothing of it was checked past them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Each target, in config order.
    pub targets: Vec<TargetVerify>,
}

/// One target of one mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TargetVerify {
    /// The target as reports name it (`host/repository`, `oci:<dir>`).
    pub target: String,
    /// Tags (and pinned digests, referrers) checked on it.
    pub checked: u64,
    /// What is wrong on it; empty when it is complete.
    pub findings: Vec<Finding>,
}

/// What kind of thing is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// A tag the source lists and the filter selects (or a pinned digest).
    Tag,
    /// A child manifest of an index the target holds.
    Child,
    /// A referrer or signature (cosign `.sig`/`.att`/`.sbom`, the referrers tag schema, or one
    /// found through the referrers API) the mapping copies.
    Referrer,
    /// A blob a manifest on the target references (`--deep`).
    Blob,
}

impl Missing {
    fn word(self) -> &'static str {
        match self {
            Missing::Tag => "tag",
            Missing::Child => "child",
            Missing::Referrer => "referrer",
            Missing::Blob => "blob",
        }
    }
}

/// One thing wrong, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "finding", rename_all = "snake_case")]
pub enum Finding {
    /// Something a sync would leave on the target is not there.
    Missing {
        /// What kind of thing.
        kind: Missing,
        /// The tag, or the digest of a child, pin, referrer or blob.
        name: String,
        /// The digest expected (for a tag, the one a sync would leave).
        digest: String,
        /// For a child or blob: the tag (or pin) whose manifests reference it.
        #[serde(skip_serializing_if = "Option::is_none")]
        of: Option<String>,
        /// Why, where more can be said (a layout blob whose bytes hash to another digest).
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The target's tag points at other content than a sync would leave.
    Drifted {
        /// The tag.
        tag: String,
        /// The digest a sync would leave there.
        expected: String,
        /// The digest the target's tag names.
        found: String,
    },
    /// A target tag the filter selects that the source does not list: what `--prune` deletes.
    Extra {
        /// The tag.
        tag: String,
    },
    /// `--signatures`: an image on the target with no signature verifying under its
    /// mapping's policy.
    Unsigned {
        /// The tag, or the digest of a pin.
        name: String,
        /// The digest the target holds.
        digest: String,
        /// Why, for the first signature found (or `no_signature`).
        reason: crate::plan::RefusalReason,
        /// Every signature tried and why it failed.
        detail: String,
    },
    /// An answer ferry could not check.
    Unreadable {
        /// What was being read (a tag, a listing, a blob).
        what: String,
        /// The HTTP status, when a registry answered.
        #[serde(skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        /// Whether it was an authentication failure.
        auth: bool,
        /// The error, as a message.
        error: String,
    },
}

impl Finding {
    /// An unreadable finding for `what` from `error`.
    pub fn unreadable(what: impl Into<String>, error: &Error) -> Finding {
        Finding::Unreadable {
            what: what.into(),
            http_status: error.status(),
            auth: error.is_auth(),
            error: error.to_string(),
        }
    }

    /// One line for people.
    fn line(&self) -> String {
        match self {
            Finding::Missing {
                kind,
                name,
                digest,
                of,
                detail,
            } => {
                let of = of.as_ref().map(|o| format!(" of {o}")).unwrap_or_default();
                let at = match name == digest {
                    true => String::new(),
                    false => format!(" ({digest})"),
                };
                let detail = detail
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                format!("MISSING   {} {name}{at}{of}{detail}", kind.word())
            }
            Finding::Drifted {
                tag,
                expected,
                found,
            } => format!("DRIFTED   {tag}: target has {found}, a sync would leave {expected}"),
            Finding::Extra { tag } => {
                format!("extra     {tag} (the source does not list it; --prune would delete it)")
            }
            Finding::Unreadable { what, error, .. } => format!("UNREADABLE {what}: {error}"),
            Finding::Unsigned {
                name,
                digest,
                reason,
                detail,
            } => format!("UNSIGNED  {name} ({digest}): {}: {detail}", reason.as_str()),
        }
    }
}

/// Sums over every mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyTotals {
    /// Mappings verified (a whole-registry mapping counts each repository it expanded to).
    pub mappings: u64,
    /// (tag, target) pairs checked.
    pub checked: u64,
    /// Tags, children, referrers and blobs missing.
    pub missing: u64,
    /// Tags pointing at other content.
    pub drifted: u64,
    /// Target tags the source does not list.
    pub extra: u64,
    /// Answers that could not be checked.
    pub unreadable: u64,
    /// `--signatures`: images on targets with no signature verifying.
    pub unsigned: u64,
    /// `--signatures`: (image, target) pairs whose signatures were read from the target.
    pub signatures_checked: u64,
    /// Child manifests checked on targets.
    pub children_checked: u64,
    /// Unique (repository, blob) pairs checked (`--deep`).
    pub blobs_checked: u64,
}

/// How a verify ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyVerdict {
    /// Everything checked is there with the digest a sync would leave.
    Complete,
    /// Something is missing or drifted, or some answers could not be checked.
    Incomplete,
    /// Nothing could be checked at all.
    Unchecked,
}

impl VerifyReport {
    /// Fills `totals` from the mappings' findings; `children` and `blobs` are the counts of
    /// checks made.
    pub(crate) fn count(&mut self, children: u64, blobs: u64) {
        let mut t = VerifyTotals {
            children_checked: children,
            blobs_checked: blobs,
            ..VerifyTotals::default()
        };
        for m in &self.mappings {
            t.mappings += 1;
            let targets = m.targets.iter().flat_map(|t| &t.findings);
            for f in m.findings.iter().chain(targets) {
                match f {
                    Finding::Missing { .. } => t.missing += 1,
                    Finding::Drifted { .. } => t.drifted += 1,
                    Finding::Extra { .. } => t.extra += 1,
                    Finding::Unreadable { .. } => t.unreadable += 1,
                    Finding::Unsigned { .. } => t.unsigned += 1,
                }
            }
            t.checked += m.targets.iter().map(|t| t.checked).sum::<u64>();
        }
        self.totals = t;
    }

    /// Complete, incomplete, or unchecked (nothing checked, and something could not be read).
    /// Extra tags alone leave a mirror complete.
    pub fn verdict(&self) -> VerifyVerdict {
        let t = &self.totals;
        if t.missing + t.drifted + t.unsigned > 0 {
            VerifyVerdict::Incomplete
        } else if t.unreadable > 0 && t.checked == 0 {
            VerifyVerdict::Unchecked
        } else if t.unreadable > 0 {
            VerifyVerdict::Incomplete
        } else {
            VerifyVerdict::Complete
        }
    }

    /// Every unreadable finding, for the exit code (all auth: exit 4).
    pub fn unreadable(&self) -> impl Iterator<Item = &Finding> {
        self.mappings
            .iter()
            .flat_map(|m| {
                m.findings
                    .iter()
                    .chain(m.targets.iter().flat_map(|t| &t.findings))
            })
            .filter(|f| matches!(f, Finding::Unreadable { .. }))
    }

    /// Whether every finding that stopped a check was an authentication failure.
    pub fn all_unreadable_are_auth(&self) -> bool {
        let mut any = false;
        for f in self.unreadable() {
            any = true;
            if !matches!(f, Finding::Unreadable { auth: true, .. }) {
                return false;
            }
        }
        any
    }

    /// The JSON report.
    pub fn to_json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct WithVerdict<'a> {
            verdict: VerifyVerdict,
            #[serde(flatten)]
            report: &'a VerifyReport,
        }
        serde_json::to_string_pretty(&WithVerdict {
            verdict: self.verdict(),
            report: self,
        })
    }

    /// For people: a block per mapping, a line per target and per finding, one verdict line.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for m in &self.mappings {
            let _ = writeln!(out, "mapping {} {}", m.index, m.source);
            for f in &m.findings {
                let _ = writeln!(out, "  {}", f.line());
            }
            for t in &m.targets {
                let state = match t
                    .findings
                    .iter()
                    .all(|f| matches!(f, Finding::Extra { .. }))
                {
                    true => "complete",
                    false => "INCOMPLETE",
                };
                let _ = writeln!(out, "  -> {}  {} checked, {state}", t.target, t.checked);
                for f in &t.findings {
                    let _ = writeln!(out, "     {}", f.line());
                }
            }
        }
        let t = &self.totals;
        let verdict = match self.verdict() {
            VerifyVerdict::Complete => "complete",
            VerifyVerdict::Incomplete => "INCOMPLETE",
            VerifyVerdict::Unchecked => "NOTHING CHECKED",
        };
        let deep = match self.deep {
            true => format!(", {} blobs", t.blobs_checked),
            false => String::new(),
        };
        let _ = writeln!(
            out,
            "verify: {verdict}: {} checked ({} children{deep}) in {} mappings; {} missing, {} drifted, {} extra, {} unreadable{}",
            t.checked,
            t.children_checked,
            t.mappings,
            t.missing,
            t.drifted,
            t.extra,
            t.unreadable,
            match self.signatures {
                true => format!(
                    "; signatures: {} images checked, {} unsigned",
                    t.signatures_checked, t.unsigned
                ),
                false => String::new(),
            }
        );
        out
    }
}
