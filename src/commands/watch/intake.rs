//! The events queue of `ferry watch`: a notice becomes a sync of that one tag of each mapping
//! whose source covers it and whose filter selects it; coalesced, bounded, never two at once.
//!
//! A key (mapping, tag) is queued once however many events name it; events for a key whose
//! sync is running are covered by it when they name a digest it was started for, else they
//! queue one more sync after it. A full queue refuses the event (503): the next poll catches up.
//! A mapping's syncs (event or periodic) take its lock, so two syncs of one tag never overlap.
//! A delete asks a pruning mapping for a sync of that tag with pruning on (the same listing and
//! safety checks as `--prune`); other mappings ignore it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ferry_config::{Config, Coverage, Narrow};
use ferry_distribution::reference::Tag;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::events::Notice;

/// What is synced: one tag of a mapping, or the whole mapping where its filter needs the full
/// listing to judge a tag (`latest`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub mapping: usize,
    pub tag: Option<String>,
}

#[derive(Debug, Default)]
struct KeyState {
    /// When the first event not yet synced arrived.
    queued: Option<Instant>,
    running: bool,
    /// Digests the queued or running sync was asked for.
    digests: HashSet<String>,
    /// An event came during the running sync that it may not cover: one more after it.
    again: Option<(Instant, HashSet<String>)>,
    /// Syncs of this key that did not end clean, in a row.
    unclean: u32,
    /// A delete was announced: the next sync prunes (the mapping does).
    prune: bool,
    /// When the oldest event not yet on every target arrived: kept until a sync of the key
    /// ends clean with nothing after it.
    since: Option<Instant>,
}

/// Syncs queued again for a key whose sync did not end clean: distribution notifies when it has
/// written a manifest and links the tag just after, so the first sync can find no tag yet.
pub const LATE_TAG_REQUEUES: u32 = 2;

/// What became of one request's notices.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Offered {
    /// Notices that queued a sync.
    pub queued: usize,
    /// Notices covered by a sync already queued or running.
    pub coalesced: usize,
    /// Notices no mapping covers (another repository, a tag the filter leaves out, a delete
    /// for a mapping that does not prune).
    pub ignored: usize,
    /// Notices refused because the queue was full.
    pub refused: usize,
}

/// The queue between the listener and the event syncs.
#[derive(Debug)]
pub struct Intake {
    config: Mutex<Option<Arc<Config>>>,
    states: Mutex<HashMap<Key, KeyState>>,
    tx: mpsc::Sender<Key>,
    locks: Mutex<HashMap<usize, Arc<tokio::sync::Mutex<()>>>>,
    /// Mappings whose event syncs ended unclean past [`LATE_TAG_REQUEUES`]: when the oldest such
    /// event arrived, until a periodic run of the mapping ends clean.
    stranded: Mutex<HashMap<usize, Instant>>,
    /// Keys of `events.oidc` senders fetched from their `jwks_url`.
    jwks: super::jwks::JwksCache,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Intake {
    /// An intake holding at most `queue` keys, and the receiving end for the worker.
    pub fn new(queue: usize) -> (Arc<Intake>, mpsc::Receiver<Key>) {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let intake = Intake {
            config: Mutex::new(None),
            states: Mutex::new(HashMap::new()),
            tx,
            locks: Mutex::new(HashMap::new()),
            stranded: Mutex::new(HashMap::new()),
            jwks: Default::default(),
        };
        (Arc::new(intake), rx)
    }

    /// The config events are matched against from now on (the watch re-reads it each run).
    pub fn set_config(&self, config: &Config) {
        *lock(&self.config) = Some(Arc::new(config.clone()));
    }

    /// Who may post events, from the config's `events:`; `None`: events are off.
    pub fn events(&self) -> Option<ferry_config::EventsSettings> {
        let config = lock(&self.config).clone()?;
        config.events.clone()
    }

    /// The keys fetched from `jwks_url`s of the config's `events.oidc`.
    pub fn jwks(&self) -> &super::jwks::JwksCache {
        &self.jwks
    }

    /// The lock every sync of mapping `index` holds.
    pub fn mapping_lock(&self, index: usize) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(lock(&self.locks).entry(index).or_default())
    }

    /// Matches `notices` against the config's mappings and queues what they ask for.
    pub fn offer(&self, notices: &[Notice], now: Instant) -> Offered {
        let mut out = Offered::default();
        let Some(config) = lock(&self.config).clone() else {
            out.ignored = notices.len();
            return out;
        };
        for notice in notices {
            let keys = keys_for(&config, notice);
            if keys.is_empty() {
                out.ignored += 1;
                continue;
            }
            for key in keys {
                match self.offer_key(key, notice.digest.as_deref(), notice.delete, now) {
                    Some(true) => out.queued += 1,
                    Some(false) => out.coalesced += 1,
                    None => out.refused += 1,
                }
            }
        }
        out
    }

    /// Some(true): queued; Some(false): covered by a sync queued or running; None: queue full.
    fn offer_key(
        &self,
        key: Key,
        digest: Option<&str>,
        delete: bool,
        now: Instant,
    ) -> Option<bool> {
        let mut states = lock(&self.states);
        let state = states.entry(key.clone()).or_default();
        let fresh = state.since.is_none();
        state.since.get_or_insert(now);
        // A delete is never covered by a sync started for a digest: the tag may have gone since.
        let digest = if delete { None } else { digest };
        if state.running {
            if delete {
                let again = state.again.get_or_insert_with(|| (now, HashSet::new()));
                again.1.clear();
                state.prune = true;
                return Some(false);
            }
            if digest.is_some_and(|d| state.digests.contains(d)) {
                return Some(false);
            }
            let again = state.again.get_or_insert_with(|| (now, HashSet::new()));
            again.1.extend(digest.map(str::to_owned));
            return Some(false);
        }
        state.prune |= delete;
        if state.queued.is_some() {
            state.digests.extend(digest.map(str::to_owned));
            return Some(false);
        }
        if self.tx.try_send(key.clone()).is_err() {
            if fresh {
                states.remove(&key);
            }
            return None;
        }
        state.queued = Some(now);
        state.digests.extend(digest.map(str::to_owned));
        Some(true)
    }

    /// The sync of `key` starts: when its first event arrived, and the config to run (the
    /// mapping narrowed to the tag), or `None` when the mapping is gone from the config.
    pub fn start(&self, key: &Key) -> Option<(Instant, Config)> {
        let (received, prune) = {
            let mut states = lock(&self.states);
            let state = states.entry(key.clone()).or_default();
            state.running = true;
            let received = state.queued.take().unwrap_or_else(Instant::now);
            (received, std::mem::take(&mut state.prune))
        };
        let config = lock(&self.config).clone()?;
        let mapping = config.mappings.iter().find(|m| m.index == key.mapping)?;
        // Pruning lists the source and targets in full (its safety checks need the listing),
        // so only a sync a delete asked for prunes, and only of the tag it is narrowed to.
        let prune = mapping.prune && prune;
        let mut mapping = match &key.tag {
            // A push names a tag that must be there (missing is reported, and queued once
            // more); a delete, one that should not, so it only selects the tag if listed.
            Some(tag) => {
                let how = if prune {
                    Narrow::IfListed
                } else {
                    Narrow::MustExist
                };
                mapping.narrowed_to(&Tag::parse(tag).ok()?, how)
            }
            None => mapping.clone(),
        };
        mapping.prune = prune;
        let mut narrowed = (*config).clone();
        narrowed.mappings = vec![mapping];
        Some((received, narrowed))
    }

    /// The sync of `key` ended (`clean`: exit 0); queues the one more that events during it
    /// asked for, or, after an unclean end, the same once more (at most [`LATE_TAG_REQUEUES`]
    /// in a row; the periodic run is the net after that). True when it queued one.
    pub fn finish(&self, key: &Key, clean: bool, now: Instant) -> bool {
        let mut states = lock(&self.states);
        let Some(state) = states.get_mut(key) else {
            return false;
        };
        state.running = false;
        let tried: HashSet<String> = std::mem::take(&mut state.digests);
        state.unclean = if clean { 0 } else { state.unclean + 1 };
        if !clean && state.unclean <= LATE_TAG_REQUEUES {
            let again = state.again.get_or_insert_with(|| (now, HashSet::new()));
            again.1.extend(tried);
        }
        let unclean = state.unclean;
        let again = state.again.take();
        let again_at = again.as_ref().map(|a| a.0);
        let queued = match again {
            Some((at, digests)) if self.tx.try_send(key.clone()).is_ok() => {
                state.queued = Some(at);
                state.digests = digests;
                true
            }
            _ => false,
        };
        if clean {
            // What the sync covered is on every target; an event during it is the next oldest.
            state.since = again_at;
        }
        if !queued {
            // Nothing more queued for the key: what is still not mirrored waits for the
            // mapping's next periodic run.
            if let Some(since) = state.since.take() {
                let mut stranded = lock(&self.stranded);
                let at = stranded.entry(key.mapping).or_insert(since);
                *at = (*at).min(since);
            }
            if clean || unclean > LATE_TAG_REQUEUES {
                states.remove(key);
            }
        }
        queued
    }

    /// A periodic run of these mappings ended clean: what their event syncs left behind is on
    /// every target now.
    pub fn mirrored(&self, mappings: impl IntoIterator<Item = usize>) {
        let mut stranded = lock(&self.stranded);
        for m in mappings {
            stranded.remove(&m);
        }
    }

    /// When the oldest accepted event not yet on every target arrived (queued, syncing, or
    /// left to the periodic run after its syncs failed), if any.
    pub fn oldest_unmirrored(&self) -> Option<Instant> {
        let states = lock(&self.states);
        let stranded = lock(&self.stranded);
        states
            .values()
            .filter_map(|s| s.since)
            .chain(stranded.values().copied())
            .min()
    }
}

/// The keys `notice` asks for: one per mapping the config says covers the pushed tag
/// ([`Config::mappings_for`]), of the tag, or of the whole mapping where its filter needs the
/// full listing to judge a tag (`latest`). A delete asks only a mapping that prunes (its sync
/// of the tag prunes with `--prune`'s checks). A notice without a valid tag asks for nothing.
fn keys_for(config: &Config, notice: &Notice) -> Vec<Key> {
    let Some(tag) = notice.tag.as_deref().and_then(|t| Tag::parse(t).ok()) else {
        return Vec::new();
    };
    config
        .mappings_for(notice.host.as_deref(), &notice.repository, &tag)
        .into_iter()
        .filter(|(m, _)| !notice.delete || m.prune)
        .map(|(m, coverage)| Key {
            mapping: m.index,
            tag: match coverage {
                Coverage::Tag => Some(tag.as_str().to_owned()),
                Coverage::Listing => None,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests;
