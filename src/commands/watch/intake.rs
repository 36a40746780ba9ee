//! The events queue of `ferry watch`: a notice becomes a sync of that one tag of each mapping
//! whose source covers it and whose filter selects it; deduplicated, journaled, bounded.
//!
//! Events are hints, the registry is the truth: a sync copies what the source holds when it
//! runs. A key (mapping, tag) is queued once however many events name it; an event naming a
//! digest a sync of its key is queued or running for, or one that ended clean within
//! [`DEDUPE_WINDOW`] with no other event for the key since, is a duplicate (a redelivery); any
//! other event for a running key queues one more sync after it. An event without a digest
//! (Docker Hub, Quay, Nexus) is never a duplicate of a finished sync: the tag may have moved.
//! The digests an event names are checked (`sha256:` + 64 lowercase hex, or `sha512:` + 128)
//! and at most [`MAX_DIGESTS_PER_KEY`] kept per key; every notice ignored is logged at debug
//! with its reason and counted in `ferry_events_ignored_total{reason}`.
//!
//! Durable: a notice that asks for a sync is written to the state directory's event journal
//! (`ferry_store::event_journal`) before [`Intake::offer`] returns, so before the answer; the
//! journal is replayed at start ([`Intake::replay`], with the events' own arrival times) and an
//! entry removed once every key it asked for ended clean (its event sync, or a clean periodic
//! run of the mapping). A full queue or journal refuses the notice (503): the poll catches up.
//! A mapping's syncs (event or periodic) take its lock, so two syncs of one tag never overlap.
//! A delete asks a pruning mapping for a sync of that tag with pruning on; others ignore it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_config::{Config, Coverage, Narrow};
use ferry_distribution::Digest;
use ferry_distribution::reference::Tag;
use ferry_distribution::text::for_error;
use ferry_store::event_journal::{EventJournal, JournalEntry, unix_now};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::events::Notice;
use crate::metrics::WatchMetrics;

/// What is synced: one tag of a mapping, or the whole mapping where its filter needs the full
/// listing to judge a tag (`latest`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub mapping: usize,
    pub tag: Option<String>,
}

/// The most digests remembered per key (queued, running, or just synced): past it an event's
/// digest is not kept, so it is never taken for a duplicate (one more sync, never one fewer).
pub const MAX_DIGESTS_PER_KEY: usize = 8;
/// How long a clean sync's digests mark later deliveries of the same event as duplicates
/// (Pub/Sub redelivers within its 600 s ack deadline; distribution retries within minutes).
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(600);

#[derive(Debug, Default)]
struct KeyState {
    /// When the first event not yet synced arrived.
    queued: Option<Instant>,
    running: bool,
    /// Digests the queued or running sync was asked for (at most [`MAX_DIGESTS_PER_KEY`]).
    digests: HashSet<Digest>,
    /// An event came during the running sync that it may not cover: one more after it.
    again: Option<(Instant, HashSet<Digest>)>,
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
    /// Notices covered by a sync already queued, running or just done (duplicates).
    pub coalesced: usize,
    /// Notices no mapping covers (another repository, a tag the filter leaves out, a delete
    /// for a mapping that does not prune), or whose digest is malformed.
    pub ignored: usize,
    /// Notices refused because the queue or the journal was full (or not writable).
    pub refused: usize,
}

/// Why a notice asks for nothing (the `reason` of `ferry_events_ignored_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// Events arrived before a config was read.
    NoConfig,
    /// No tag, or not a valid one (a push by digest only, a child manifest of an index).
    NoTag,
    /// The digest is not `sha256:<64 hex>` or `sha512:<128 hex>`.
    BadDigest,
    /// No mapping's source is that repository, or no filter selects that tag.
    NoMapping,
    /// A delete, and no mapping covering it prunes.
    DeleteNotPruned,
}

impl Ignored {
    pub fn label(self) -> &'static str {
        match self {
            Ignored::NoConfig => "no_config",
            Ignored::NoTag => "no_tag",
            Ignored::BadDigest => "bad_digest",
            Ignored::NoMapping => "no_mapping",
            Ignored::DeleteNotPruned => "delete_not_pruned",
        }
    }
}

/// What the intake holds, for /metrics and the flood test.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Keys queued, running, or waiting for one more sync.
    pub keys: usize,
    /// Digests remembered (queued, running and just synced keys).
    pub digests: usize,
    /// Bytes of tags and digests held.
    pub bytes: usize,
    /// Journal entries not yet removed.
    pub journal: usize,
}

/// A journal entry's keys not yet synced clean.
#[derive(Debug, Default)]
struct Entry {
    keys: HashSet<Key>,
}

/// The queue between the listener and the event syncs.
#[derive(Debug)]
pub struct Intake {
    config: Mutex<Option<Arc<Config>>>,
    states: Mutex<HashMap<Key, KeyState>>,
    /// Keys whose last sync ended clean, with when and the digests it was asked for.
    recent: Mutex<HashMap<Key, (Instant, HashSet<Digest>)>>,
    tx: mpsc::Sender<Key>,
    /// The most keys queued (and entries journaled, and keys remembered as just synced).
    limit: usize,
    locks: Mutex<HashMap<usize, Arc<tokio::sync::Mutex<()>>>>,
    /// Mappings whose event syncs ended unclean past [`LATE_TAG_REQUEUES`]: when the oldest such
    /// event arrived, until a periodic run of the mapping ends clean.
    stranded: Mutex<HashMap<usize, Instant>>,
    /// Keys of `events.oidc` senders fetched from their `jwks_url`.
    jwks: super::jwks::JwksCache,
    journal: Option<EventJournal>,
    /// Journal entries written (by id), each with the keys it still waits for.
    journaled: Mutex<HashMap<String, Entry>>,
    /// Set once a journal write failed, so a full disk warns once until a write succeeds.
    journal_warned: AtomicBool,
    metrics: Option<Arc<WatchMetrics>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remembers `digest` in `set` while it holds fewer than [`MAX_DIGESTS_PER_KEY`].
fn remember(set: &mut HashSet<Digest>, digest: Option<&Digest>) {
    if let Some(d) = digest
        && set.len() < MAX_DIGESTS_PER_KEY
    {
        set.insert(d.clone());
    }
}

impl Intake {
    /// An intake holding at most `queue` keys, with no journal, and the receiving end.
    #[cfg(test)]
    pub fn new(queue: usize) -> (Arc<Intake>, mpsc::Receiver<Key>) {
        Intake::with(queue, None, None)
    }

    /// An intake holding at most `queue` keys, journaling into `journal`, counting ignored
    /// notices in `metrics`; and the receiving end for the worker.
    pub fn with(
        queue: usize,
        journal: Option<EventJournal>,
        metrics: Option<Arc<WatchMetrics>>,
    ) -> (Arc<Intake>, mpsc::Receiver<Key>) {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let intake = Intake {
            config: Mutex::new(None),
            states: Mutex::new(HashMap::new()),
            recent: Mutex::new(HashMap::new()),
            tx,
            limit: queue.max(1),
            locks: Mutex::new(HashMap::new()),
            stranded: Mutex::new(HashMap::new()),
            jwks: Default::default(),
            journal,
            journaled: Mutex::new(HashMap::new()),
            journal_warned: AtomicBool::new(false),
            metrics,
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

    fn ignore(&self, notice: &Notice, reason: Ignored) {
        tracing::debug!(
            reason = reason.label(),
            repository = %for_error(&notice.repository),
            tag = %for_error(notice.tag.as_deref().unwrap_or("")),
            "watch: event ignored"
        );
        if let Some(m) = &self.metrics {
            m.event_ignored(reason.label());
        }
    }

    /// Matches `notices` against the config's mappings, journals those that ask for a sync
    /// (durable when this returns), and queues what they ask for.
    pub async fn offer(&self, notices: &[Notice], now: Instant) -> Offered {
        self.offer_received(notices, now, unix_now()).await
    }

    async fn offer_received(&self, notices: &[Notice], now: Instant, received: u64) -> Offered {
        let mut out = Offered::default();
        let Some(config) = lock(&self.config).clone() else {
            out.ignored = notices.len();
            notices
                .iter()
                .for_each(|n| self.ignore(n, Ignored::NoConfig));
            return out;
        };
        let mut matched = Vec::new();
        let mut asked = Asked::new();
        for notice in notices {
            match asks(&config, notice, &mut asked) {
                Ok((digest, keys)) => matched.push((notice, digest, keys)),
                Err(reason) => {
                    out.ignored += 1;
                    self.ignore(notice, reason);
                }
            }
        }
        let (ids, refused, written) = self.journal_all(&matched, now, received).await;
        for (i, (notice, digest, keys)) in matched.iter().enumerate() {
            if refused[i] {
                out.refused += 1;
                continue;
            }
            for key in keys {
                match self.offer_key(key, digest.as_ref(), notice.delete, now, ids[i].as_deref()) {
                    Some(true) => out.queued += 1,
                    Some(false) => out.coalesced += 1,
                    None => out.refused += 1,
                }
            }
        }
        // Entries written for notices every key of which was refused ask for nothing.
        let mut unused = Vec::new();
        {
            let mut journaled = lock(&self.journaled);
            for id in written {
                if journaled.get(&id).is_some_and(|e| e.keys.is_empty()) {
                    journaled.remove(&id);
                    unused.push(id);
                }
            }
        }
        if let Some(j) = &self.journal {
            j.remove(unused).await;
        }
        out
    }

    /// Writes the journal entries `matched` needs: none for a notice every key of which is
    /// already queued, running for its digest, or just synced for it. Per notice: its entry's
    /// id (when journaled) and whether it is refused (journal full or not writable); and the
    /// ids written by this call.
    async fn journal_all(
        &self,
        matched: &[(&Notice, Option<Digest>, Vec<Key>)],
        now: Instant,
        received: u64,
    ) -> (Vec<Option<String>>, Vec<bool>, Vec<String>) {
        let mut ids = vec![None; matched.len()];
        let mut refused = vec![false; matched.len()];
        let Some(journal) = &self.journal else {
            return (ids, refused, Vec::new());
        };
        let mut to_write: Vec<(usize, JournalEntry)> = Vec::new();
        // Notices of one request that share an entry: written once, for all of them.
        let mut sharing: HashMap<String, Vec<usize>> = HashMap::new();
        {
            let states = lock(&self.states);
            let recent = lock(&self.recent);
            let journaled = lock(&self.journaled);
            for (i, (notice, digest, keys)) in matched.iter().enumerate() {
                let entry = JournalEntry::new(
                    notice.host.as_deref(),
                    &notice.repository,
                    notice.tag.as_deref(),
                    digest.as_ref().map(ToString::to_string).as_deref(),
                    notice.delete,
                    received,
                );
                let id = entry.id();
                if journaled.contains_key(&id) {
                    ids[i] = Some(id);
                } else if let Some(others) = sharing.get_mut(&id) {
                    others.push(i);
                } else if !notice.delete
                    && keys
                        .iter()
                        .all(|k| covered(&states, &recent, k, digest.as_ref(), now))
                {
                    // A duplicate: what it asks for is queued (and journaled) or done.
                } else if journaled.len() + to_write.len() >= journal.limit() {
                    refused[i] = true;
                } else {
                    sharing.insert(id, Vec::new());
                    to_write.push((i, entry));
                }
            }
        }
        let entries = to_write.iter().map(|(_, e)| e.clone()).collect();
        let results = journal.write(entries).await;
        let mut written = Vec::new();
        let mut journaled = lock(&self.journaled);
        for ((i, entry), result) in to_write.into_iter().zip(results) {
            let id = entry.id();
            let others = sharing.remove(&id).unwrap_or_default();
            match result {
                Ok(()) => {
                    self.journal_warned.store(false, Ordering::Relaxed);
                    journaled.entry(id.clone()).or_default();
                    written.push(id.clone());
                    for j in others.into_iter().chain([i]) {
                        ids[j] = Some(id.clone());
                    }
                }
                Err(e) => {
                    if !self.journal_warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            dir = %journal.dir().display(),
                            "watch: cannot write the event journal ({e}): events are refused (503) until it can be written"
                        );
                    }
                    for j in others.into_iter().chain([i]) {
                        refused[j] = true;
                    }
                }
            }
        }
        (ids, refused, written)
    }

    /// Some(true): queued; Some(false): covered by a sync queued, running or just done;
    /// None: queue full. The journal entry `id` (if any) waits for the key from now on.
    fn offer_key(
        &self,
        key: &Key,
        digest: Option<&Digest>,
        delete: bool,
        now: Instant,
        id: Option<&str>,
    ) -> Option<bool> {
        let mut states = lock(&self.states);
        let mut recent = lock(&self.recent);
        // A delete is never covered by a sync started for a digest: the tag may have gone since.
        let digest = if delete { None } else { digest };
        if !states.contains_key(key) && covered(&states, &recent, key, digest, now) {
            return Some(false);
        }
        // Any other event for the key: its last sync no longer says what the tag holds.
        recent.remove(key);
        drop(recent);
        let attach = || {
            if let Some(id) = id
                && let Some(entry) = lock(&self.journaled).get_mut(id)
            {
                entry.keys.insert(key.clone());
            }
        };
        let state = states.entry(key.clone()).or_default();
        let fresh = state.since.is_none();
        state.since.get_or_insert(now);
        if state.running {
            if delete {
                let again = state.again.get_or_insert_with(|| (now, HashSet::new()));
                again.1.clear();
                state.prune = true;
            } else if !digest.is_some_and(|d| state.digests.contains(d)) {
                let again = state.again.get_or_insert_with(|| (now, HashSet::new()));
                remember(&mut again.1, digest);
            }
            attach();
            return Some(false);
        }
        state.prune |= delete;
        if state.queued.is_some() {
            remember(&mut state.digests, digest);
            attach();
            return Some(false);
        }
        if self.tx.try_send(key.clone()).is_err() {
            if fresh {
                states.remove(key);
            }
            return None;
        }
        state.queued = Some(now);
        remember(&mut state.digests, digest);
        attach();
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
    /// in a row; the periodic run is the net after that). A clean end with nothing after it
    /// removes the journal entries that waited only for this key. True when it queued one.
    pub async fn finish(&self, key: &Key, clean: bool, now: Instant) -> bool {
        let (queued, done) = self.finish_state(key, clean, now);
        if done {
            self.settle(|k| k == key).await;
        }
        queued
    }

    /// [`finish`](Self::finish)'s bookkeeping: whether one more was queued, and whether the key
    /// is done (ended clean, nothing after it).
    fn finish_state(&self, key: &Key, clean: bool, now: Instant) -> (bool, bool) {
        let mut states = lock(&self.states);
        let Some(state) = states.get_mut(key) else {
            return (false, clean);
        };
        state.running = false;
        let tried: HashSet<Digest> = std::mem::take(&mut state.digests);
        state.unclean = if clean { 0 } else { state.unclean + 1 };
        if !clean && state.unclean <= LATE_TAG_REQUEUES {
            let again = state.again.get_or_insert_with(|| (now, HashSet::new()));
            for d in &tried {
                remember(&mut again.1, Some(d));
            }
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
        let done = clean && !queued;
        if done && !tried.is_empty() {
            let mut recent = lock(&self.recent);
            if recent.len() >= self.limit {
                recent.retain(|_, (at, _)| now.saturating_duration_since(*at) < DEDUPE_WINDOW);
            }
            if recent.len() >= self.limit
                && let Some(oldest) = recent.iter().min_by_key(|(_, (at, _))| *at)
            {
                let oldest = oldest.0.clone();
                recent.remove(&oldest);
            }
            recent.insert(key.clone(), (now, tried));
        }
        (queued, done)
    }

    /// Takes the keys `done` says are synced out of every journal entry waiting for them (keys
    /// still queued or running stay), and removes the entries left waiting for nothing.
    async fn settle(&self, done: impl Fn(&Key) -> bool) {
        let empty: Vec<String> = {
            let states = lock(&self.states);
            let mut journaled = lock(&self.journaled);
            for entry in journaled.values_mut() {
                entry.keys.retain(|k| !done(k) || states.contains_key(k));
            }
            let empty: Vec<String> = journaled
                .iter()
                .filter(|(_, e)| e.keys.is_empty())
                .map(|(id, _)| id.clone())
                .collect();
            for id in &empty {
                journaled.remove(id);
            }
            empty
        };
        if let Some(j) = &self.journal {
            j.remove(empty).await;
        }
    }

    /// A periodic run of these mappings ended clean: what their event syncs left behind is on
    /// every target now, and their journal entries are done.
    pub async fn mirrored(&self, mappings: impl IntoIterator<Item = usize>) {
        let mappings: HashSet<usize> = mappings.into_iter().collect();
        lock(&self.stranded).retain(|m, _| !mappings.contains(m));
        self.settle(|k| mappings.contains(&k.mapping)).await;
    }

    /// Offers again what the journal holds from before this process (at start, once the config
    /// is set), each with the time it was first accepted: their age counts in
    /// `ferry_event_oldest_unmirrored_seconds`. An entry no mapping covers any more is removed.
    /// How many were queued.
    pub async fn replay(&self) -> usize {
        let Some(journal) = &self.journal else {
            return 0;
        };
        let entries = journal.replay().await;
        let (now, unix) = (Instant::now(), unix_now());
        let mut queued = 0;
        for entry in entries {
            let id = entry.id();
            lock(&self.journaled).entry(id.clone()).or_default();
            let notice = Notice {
                host: entry.host,
                repository: entry.repository,
                tag: entry.tag,
                digest: entry.digest,
                delete: entry.delete,
            };
            let age = Duration::from_secs(unix.saturating_sub(entry.received));
            let at = now.checked_sub(age).unwrap_or(now);
            let out = self.offer_received(&[notice], at, entry.received).await;
            queued += out.queued;
            if out.queued + out.coalesced == 0 {
                lock(&self.journaled).remove(&id);
                journal.remove(vec![id]).await;
            }
        }
        queued
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

    /// What the intake holds now.
    pub fn footprint(&self) -> Footprint {
        let states = lock(&self.states);
        let recent = lock(&self.recent);
        let digest_bytes = |set: &HashSet<Digest>| -> usize {
            set.iter().map(|d| d.hex().len() + 7).sum::<usize>()
        };
        let mut f = Footprint::default();
        for (key, s) in states.iter() {
            f.keys += 1;
            let again = s.again.as_ref().map(|a| &a.1);
            f.digests += s.digests.len() + again.map_or(0, HashSet::len);
            f.bytes += key.tag.as_ref().map_or(0, String::len)
                + digest_bytes(&s.digests)
                + again.map_or(0, digest_bytes);
        }
        for (key, (_, digests)) in recent.iter() {
            f.digests += digests.len();
            f.bytes += key.tag.as_ref().map_or(0, String::len) + digest_bytes(digests);
        }
        f.journal = lock(&self.journaled).len();
        f
    }
}

/// Whether a notice of `digest` for `key` is covered: a sync of the key is queued, or running
/// for that digest, or ended clean for it within [`DEDUPE_WINDOW`] with no event since.
fn covered(
    states: &HashMap<Key, KeyState>,
    recent: &HashMap<Key, (Instant, HashSet<Digest>)>,
    key: &Key,
    digest: Option<&Digest>,
    now: Instant,
) -> bool {
    if let Some(s) = states.get(key) {
        return s.queued.is_some()
            || s.again.is_some()
            || s.running && digest.is_some_and(|d| s.digests.contains(d));
    }
    digest.is_some_and(|d| {
        recent.get(key).is_some_and(|(at, digests)| {
            now.saturating_duration_since(*at) < DEDUPE_WINDOW && digests.contains(d)
        })
    })
}

/// What one request's notices asked for, by (host, repository, tag, delete): a body of a
/// thousand notices for one tag matches the config once, not a thousand times.
type Asked = HashMap<(Option<String>, String, Option<String>, bool), Result<Vec<Key>, Ignored>>;

/// The digest `notice` names (checked) and the keys it asks for ([`keys_for`]), the keys
/// looked up in `asked` first.
fn asks(
    config: &Config,
    notice: &Notice,
    asked: &mut Asked,
) -> Result<(Option<Digest>, Vec<Key>), Ignored> {
    let digest = match notice.digest.as_deref() {
        None => None,
        Some(d) => Some(Digest::parse(d).map_err(|_| Ignored::BadDigest)?),
    };
    let what = (
        notice.host.clone(),
        notice.repository.clone(),
        notice.tag.clone(),
        notice.delete,
    );
    let keys = asked
        .entry(what)
        .or_insert_with(|| keys_for(config, notice))
        .clone()?;
    Ok((digest, keys))
}

/// The keys `notice` asks for: one per mapping the config says covers the pushed tag
/// ([`Config::mappings_for`]), of the tag, or of the whole mapping where its filter needs the
/// full listing to judge a tag (`latest`). A delete asks only a mapping that prunes (its sync
/// of the tag prunes with `--prune`'s checks).
fn keys_for(config: &Config, notice: &Notice) -> Result<Vec<Key>, Ignored> {
    let Some(tag) = notice.tag.as_deref().and_then(|t| Tag::parse(t).ok()) else {
        return Err(Ignored::NoTag);
    };
    let covering = config.mappings_for(notice.host.as_deref(), &notice.repository, &tag);
    if covering.is_empty() {
        return Err(Ignored::NoMapping);
    }
    let keys: Vec<Key> = covering
        .into_iter()
        .filter(|(m, _)| !notice.delete || m.prune)
        .map(|(m, coverage)| Key {
            mapping: m.index,
            tag: match coverage {
                Coverage::Tag => Some(tag.as_str().to_owned()),
                Coverage::Listing => None,
            },
        })
        .collect();
    if keys.is_empty() {
        return Err(Ignored::DeleteNotPruned);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests;
