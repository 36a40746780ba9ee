//! Rekor inclusion proofs checked offline: the RFC 6962 Merkle path from an entry's leaf to the
//! proof's root hash, and the checkpoint (a signed note) naming that root, signed by the log.

use sha2::{Digest as _, Sha256};

use crate::error::{Result, TrustError, b64};
use crate::root::TrustedRoot;

/// The most hashes ferry accepts in one proof (a tree of 2^64 leaves needs 64).
const MAX_PROOF_HASHES: usize = 64;

/// An inclusion proof as a bundle carries it.
#[derive(Debug, Clone)]
pub struct Proof {
    /// The entry's index in the tree the proof is for.
    pub log_index: u64,
    /// That tree's size.
    pub tree_size: u64,
    /// That tree's root hash.
    pub root_hash: Vec<u8>,
    /// The audit path, leaf side first.
    pub hashes: Vec<Vec<u8>>,
    /// The checkpoint (signed note) text.
    pub checkpoint: String,
}

fn node(left: &[u8], right: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().to_vec()
}

/// The root hash the audit path gives for `leaf` (RFC 9162, 2.1.3.2), or None if it is malformed.
fn root_from_path(index: u64, size: u64, leaf: Vec<u8>, path: &[Vec<u8>]) -> Option<Vec<u8>> {
    if index >= size || path.len() > MAX_PROOF_HASHES {
        return None;
    }
    let (mut f, mut s, mut r) = (index, size - 1, leaf);
    for p in path {
        if s == 0 {
            return None;
        }
        if f & 1 == 1 || f == s {
            r = node(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    (s == 0).then_some(r)
}

/// Verifies that the entry body `body` (decoded) is in the tree of `proof`, and that the
/// checkpoint naming that tree is signed by the log `log_id` of the root.
pub fn verify(
    root: &TrustedRoot,
    log_id: &[u8],
    at: i64,
    body: &[u8],
    proof: &Proof,
) -> Result<()> {
    let mut leaf = Sha256::new();
    leaf.update([0u8]);
    leaf.update(body);
    let computed = root_from_path(
        proof.log_index,
        proof.tree_size,
        leaf.finalize().to_vec(),
        &proof.hashes,
    )
    .ok_or_else(|| TrustError::Tlog("the inclusion proof is malformed".into()))?;
    if computed != proof.root_hash {
        return Err(TrustError::Tlog(
            "the inclusion proof does not lead to its root hash".into(),
        ));
    }
    let log = root.tlog(log_id, at).ok_or_else(|| {
        TrustError::Tlog(format!(
            "log id {} is not a log of the trusted root",
            hex::encode(log_id)
        ))
    })?;
    // A signed note: the text up to a blank line, then lines "— <name> <base64(hint || sig)>".
    let (text, sigs) = proof
        .checkpoint
        .split_once("\n\n")
        .ok_or_else(|| TrustError::Tlog("the checkpoint has no signature".into()))?;
    let text = format!("{text}\n");
    let mut lines = text.lines();
    let (_origin, size, hash) = (lines.next(), lines.next(), lines.next());
    if size.and_then(|s| s.parse::<u64>().ok()) != Some(proof.tree_size)
        || hash
            .map(|h| b64("checkpoint root hash", h))
            .transpose()?
            .as_deref()
            != Some(&proof.root_hash[..])
    {
        return Err(TrustError::Tlog("the checkpoint names another tree".into()));
    }
    for line in sigs.lines() {
        let Some(sig_b64) = line
            .strip_prefix("\u{2014} ")
            .and_then(|l| l.rsplit(' ').next())
        else {
            continue;
        };
        let Ok(raw) = b64("checkpoint signature", sig_b64) else {
            continue;
        };
        if raw.len() > 4
            && raw[..4] == log.log_id[..4.min(log.log_id.len())]
            && log.key.verify(text.as_bytes(), &raw[4..]).is_ok()
        {
            return Ok(());
        }
    }
    Err(TrustError::Tlog(format!(
        "the checkpoint is not signed by {}",
        log.base_url
    )))
}
