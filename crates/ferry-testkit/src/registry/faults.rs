//! Fault knobs of the test registry: scripted rules, seeded random faults, and the token-bucket
//! rate limit, all decided on the tokio clock so a paused test clock drives them.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::metrics::OpKind;

/// How a `Retry-After` header is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// `Retry-After: N` (delay in whole seconds).
    Seconds(u64),
    /// `Retry-After: <HTTP-date>` that lies this far after the wall clock at answer time
    /// (rounded up to whole seconds, since the date form has one-second resolution).
    HttpDate(Duration),
}

impl RetryAfter {
    /// The header value this renders to at the moment of answering.
    pub fn header_value(&self) -> String {
        match self {
            RetryAfter::Seconds(secs) => secs.to_string(),
            RetryAfter::HttpDate(delay) => {
                let whole =
                    Duration::from_secs(delay.as_secs() + u64::from(delay.subsec_nanos() > 0));
                httpdate::fmt_http_date(SystemTime::now() + whole)
            }
        }
    }
}

/// Which `Retry-After` form the rate limiter writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterStyle {
    /// Whole seconds until a token is available (at least 1).
    Seconds,
    /// An HTTP date that many seconds ahead.
    HttpDate,
}

/// What a matching fault rule does to a request.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Answer `code` (with an OCI error body) before doing any work.
    Status {
        /// Status to answer.
        code: u16,
        /// Optional `Retry-After` header.
        retry_after: Option<RetryAfter>,
    },
    /// Do the work (store the manifest or blob, finish the upload, …), then answer `code`
    /// instead of the real answer: the lost-reply case.
    AfterCommit {
        /// Status to answer after the work is done (typically 502 or 504).
        code: u16,
    },
    /// Cut the connection mid-body. For requests that carry a body (uploads, manifest PUT):
    /// read up to `after_bytes` of it, then drop the connection without answering. For other
    /// requests: send the real status and headers (full `Content-Length`), then end the
    /// connection after `after_bytes` body bytes; if the answer has no body, drop the
    /// connection without answering.
    ResetBody {
        /// Body bytes to let through before cutting.
        after_bytes: usize,
    },
    /// Wait this long (tokio clock), then handle the request normally.
    Delay(Duration),
    /// Accept the request and never answer.
    Hang,
    /// Answer 503 with `Retry-After: base + uniform(0..=jitter)` seconds, before doing work.
    Shed {
        /// Smallest `Retry-After` in seconds.
        retry_after_base_secs: u64,
        /// Largest extra seconds added at random (seeded by the random-fault seed, or 0).
        jitter_secs: u64,
    },
}

/// A scripted fault: applies to the next `times` requests matching `op` and `repo`.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// Operation to match; `None` matches every operation.
    pub op: Option<OpKind>,
    /// Repository-name prefix to match; `None` matches every request (including ones without a
    /// repository, such as ping and token).
    pub repo: Option<String>,
    /// How many matching requests this rule still applies to.
    pub times: u32,
    /// What to do.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule for one operation kind, applying once.
    pub fn on(op: OpKind, action: FaultAction) -> Self {
        FaultRule {
            op: Some(op),
            repo: None,
            times: 1,
            action,
        }
    }

    /// A rule for every operation kind, applying once.
    pub fn any(action: FaultAction) -> Self {
        FaultRule {
            op: None,
            repo: None,
            times: 1,
            action,
        }
    }

    /// Restricts the rule to repositories whose name starts with `prefix`.
    pub fn repo(mut self, prefix: impl Into<String>) -> Self {
        self.repo = Some(prefix.into());
        self
    }

    /// Sets how many matching requests the rule applies to; [`FaultRule::FOREVER`] never runs out.
    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    /// A `times` that is never used up: the rule applies to every matching request.
    pub const FOREVER: u32 = u32::MAX;

    /// Makes the rule apply to every matching request, for good (a persistent fault, such as
    /// one repository that answers every manifest request with 429).
    pub fn forever(self) -> Self {
        self.times(Self::FOREVER)
    }

    /// Rules that answer 429 with `Retry-After: retry_after_secs` to every manifest request
    /// (HEAD and GET) of repositories starting with `prefix`, for good; other repositories and
    /// operations are untouched. Push both with [`FaultsHandle::push`].
    pub fn throttle_manifests(prefix: &str, retry_after_secs: u64) -> [FaultRule; 2] {
        let throttle = FaultAction::Status {
            code: 429,
            retry_after: Some(RetryAfter::Seconds(retry_after_secs)),
        };
        [OpKind::ManifestHead, OpKind::ManifestGet]
            .map(|op| FaultRule::on(op, throttle.clone()).repo(prefix).forever())
    }

    fn matches(&self, op: OpKind, repo: Option<&str>) -> bool {
        if self.times == 0 {
            return false;
        }
        if let Some(want) = self.op
            && want != op
        {
            return false;
        }
        match (&self.repo, repo) {
            (None, _) => true,
            (Some(prefix), Some(name)) => name.starts_with(prefix.as_str()),
            (Some(_), None) => false,
        }
    }
}

/// One kind of random fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandomFaultKind {
    /// 429 with `Retry-After: secs`, before work.
    TooManyRequests {
        /// `Retry-After` seconds.
        retry_after_secs: u64,
    },
    /// 500 before doing work.
    InternalErrorBeforeCommit,
    /// 502 before doing work.
    BadGatewayBeforeCommit,
    /// Do the work, then answer 502.
    BadGatewayAfterCommit,
    /// 503 with a jittered `Retry-After`.
    Shed {
        /// Smallest `Retry-After` in seconds.
        retry_after_base_secs: u64,
        /// Largest extra seconds.
        jitter_secs: u64,
    },
    /// Cut the body (see [`FaultAction::ResetBody`]) after this many bytes.
    ResetBody {
        /// Body bytes to let through.
        after_bytes: usize,
    },
}

/// Seeded random faults: each request (not already hit by a scripted rule) is faulted with
/// probability `rate`, the kind picked uniformly from `kinds`. Same seed and same request
/// order give the same faults.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomFaults {
    /// Probability in `0.0..=1.0`.
    pub rate: f64,
    /// Seed of the generator.
    pub seed: u64,
    /// Kinds to choose from; empty disables random faults.
    pub kinds: Vec<RandomFaultKind>,
    /// Operations eligible for random faults; empty means every operation except `Token`.
    pub ops: Vec<OpKind>,
}

/// Token-bucket rate limit over all requests to the registry listener.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    /// Refill rate in tokens per second.
    pub per_second: f64,
    /// Bucket capacity (and starting fill).
    pub burst: u32,
    /// How `Retry-After` is written on 429.
    pub retry_after: RetryAfterStyle,
    /// When set to a window of `w` seconds, every answer the bucket admits or refuses carries
    /// `ratelimit-limit: N;w=W` (N = `per_second` x `w`, rounded) and `ratelimit-remaining:
    /// R;w=W` (R = whole tokens left after this request, 0 on a refusal), as Docker Hub does.
    pub announce_window_secs: Option<u64>,
}

impl TokenBucket {
    /// `per_second` tokens a second, `burst` capacity, `Retry-After` in seconds, no headers.
    pub fn new(per_second: f64, burst: u32) -> Self {
        TokenBucket {
            per_second,
            burst,
            retry_after: RetryAfterStyle::Seconds,
            announce_window_secs: None,
        }
    }

    /// Announces the limit in `ratelimit-*` headers over a window of `window_secs` seconds.
    pub fn announced(mut self, window_secs: u64) -> Self {
        self.announce_window_secs = Some(window_secs);
        self
    }

    /// The `(name, value)` headers announcing this bucket with `tokens` left.
    fn announcement(&self, tokens: f64) -> Vec<(&'static str, String)> {
        let Some(window) = self.announce_window_secs else {
            return Vec::new();
        };
        // Saturating float-to-int casts: hostile knob values give large numbers, not panics.
        let limit = (self.per_second * window as f64).round().max(0.0) as u64;
        let remaining = tokens.floor().max(0.0) as u64;
        vec![
            ("ratelimit-limit", format!("{limit};w={window}")),
            ("ratelimit-remaining", format!("{remaining};w={window}")),
        ]
    }
}

/// The bucket's verdict on one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Admission {
    /// `Some(Retry-After value)` when the request is refused with 429.
    pub(crate) refused: Option<String>,
    /// Headers every answer to this request carries (the `ratelimit-*` announcement).
    pub(crate) headers: Vec<(&'static str, String)>,
}

#[derive(Debug)]
struct BucketState {
    config: TokenBucket,
    tokens: f64,
    last: Instant,
}

#[derive(Debug, Default)]
pub(crate) struct FaultState {
    rules: Vec<FaultRule>,
    random: Vec<(RandomFaults, StdRng)>,
    bucket: Option<BucketState>,
    jitter_rng: Option<StdRng>,
}

/// Runtime handle to the registry's fault knobs; cheap to clone, shared with the server.
#[derive(Debug, Clone, Default)]
pub struct FaultsHandle {
    inner: Arc<Mutex<FaultState>>,
}

/// What the server decided to do with one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Answer this status now, with an optional `Retry-After` value.
    Reject {
        code: u16,
        retry_after: Option<String>,
    },
    /// Do the work, then answer this status.
    AfterCommit { code: u16 },
    /// Cut the body after this many bytes.
    ResetBody { after_bytes: usize },
    /// Sleep, then proceed normally.
    Delay(Duration),
    /// Never answer.
    Hang,
}

impl FaultsHandle {
    fn lock(&self) -> MutexGuard<'_, FaultState> {
        match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Appends a scripted rule; earlier rules win when several match.
    pub fn push(&self, rule: FaultRule) {
        self.lock().rules.push(rule);
    }

    /// Removes all scripted rules.
    pub fn clear_rules(&self) {
        self.lock().rules.clear();
    }

    /// Scripted rules not yet used up.
    pub fn pending_rules(&self) -> Vec<FaultRule> {
        self.lock()
            .rules
            .iter()
            .filter(|r| r.times > 0)
            .cloned()
            .collect()
    }

    /// Turns on seeded random faults (replacing earlier settings, including added ones).
    pub fn set_random(&self, random: RandomFaults) {
        let rng = StdRng::seed_from_u64(random.seed);
        let mut state = self.lock();
        state.jitter_rng = Some(StdRng::seed_from_u64(random.seed ^ 0x5eed_5eed));
        state.random = vec![(random, rng)];
    }

    /// Adds a further independent source of seeded random faults (its own rate, kinds and
    /// operations, e.g. body resets on blob GETs only). Sources roll in the order added; the
    /// first that hits decides.
    pub fn add_random(&self, random: RandomFaults) {
        let rng = StdRng::seed_from_u64(random.seed);
        let mut state = self.lock();
        if state.jitter_rng.is_none() {
            state.jitter_rng = Some(StdRng::seed_from_u64(random.seed ^ 0x5eed_5eed));
        }
        state.random.push((random, rng));
    }

    /// Turns random faults off.
    pub fn clear_random(&self) {
        self.lock().random.clear();
    }

    /// Sets (or with `None` removes) the token-bucket rate limit; a new bucket starts full.
    pub fn set_rate_limit(&self, bucket: Option<TokenBucket>) {
        self.lock().bucket = bucket.map(|config| BucketState {
            config,
            tokens: f64::from(config.burst),
            last: Instant::now(),
        });
    }

    /// Takes one token from the bucket: the refusal (with its `Retry-After` value), if any, and
    /// the announcement headers the answer carries.
    pub(crate) fn admit(&self) -> Admission {
        let mut state = self.lock();
        let Some(bucket) = state.bucket.as_mut() else {
            return Admission::default();
        };
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.last = now;
        let capacity = f64::from(bucket.config.burst);
        bucket.tokens = (bucket.tokens + elapsed * bucket.config.per_second).min(capacity);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Admission {
                refused: None,
                headers: bucket.config.announcement(bucket.tokens),
            };
        }
        let missing = 1.0 - bucket.tokens;
        let wait_secs = if bucket.config.per_second > 0.0 {
            (missing / bucket.config.per_second)
                .ceil()
                .clamp(1.0, 3600.0)
        } else {
            3600.0
        };
        // `wait_secs` is a whole number of seconds in 1..=3600 here.
        let wait = Duration::from_secs_f64(wait_secs);
        let value = match bucket.config.retry_after {
            RetryAfterStyle::Seconds => RetryAfter::Seconds(wait.as_secs()),
            RetryAfterStyle::HttpDate => RetryAfter::HttpDate(wait),
        };
        Admission {
            refused: Some(value.header_value()),
            headers: bucket.config.announcement(0.0),
        }
    }

    /// Decides the fault (if any) for one request: scripted rules first, then random faults.
    pub(crate) fn decide(&self, op: OpKind, repo: Option<&str>) -> Option<Decision> {
        let mut state = self.lock();
        if let Some(rule) = state.rules.iter_mut().find(|r| r.matches(op, repo)) {
            if rule.times != FaultRule::FOREVER {
                rule.times -= 1;
            }
            let action = rule.action.clone();
            return Some(state.scripted(action));
        }
        state
            .random
            .iter_mut()
            .find_map(|(random, rng)| roll(random, rng, op))
    }
}

/// One random-fault source's roll for one request.
fn roll(random: &RandomFaults, rng: &mut StdRng, op: OpKind) -> Option<Decision> {
    let eligible = if random.ops.is_empty() {
        op != OpKind::Token
    } else {
        random.ops.contains(&op)
    };
    if !eligible || random.kinds.is_empty() {
        return None;
    }
    let draw: f64 = rng.random();
    if draw >= random.rate {
        return None;
    }
    let index = rng.random_range(0..random.kinds.len());
    let decision = match random.kinds[index] {
        RandomFaultKind::TooManyRequests { retry_after_secs } => Decision::Reject {
            code: 429,
            retry_after: Some(retry_after_secs.to_string()),
        },
        RandomFaultKind::InternalErrorBeforeCommit => Decision::Reject {
            code: 500,
            retry_after: None,
        },
        RandomFaultKind::BadGatewayBeforeCommit => Decision::Reject {
            code: 502,
            retry_after: None,
        },
        RandomFaultKind::BadGatewayAfterCommit => Decision::AfterCommit { code: 502 },
        RandomFaultKind::Shed {
            retry_after_base_secs,
            jitter_secs,
        } => {
            let extra = if jitter_secs == 0 {
                0
            } else {
                rng.random_range(0..=jitter_secs)
            };
            Decision::Reject {
                code: 503,
                retry_after: Some(retry_after_base_secs.saturating_add(extra).to_string()),
            }
        }
        RandomFaultKind::ResetBody { after_bytes } => Decision::ResetBody { after_bytes },
    };
    Some(decision)
}

impl FaultState {
    fn scripted(&mut self, action: FaultAction) -> Decision {
        match action {
            FaultAction::Status { code, retry_after } => Decision::Reject {
                code,
                retry_after: retry_after.map(|r| r.header_value()),
            },
            FaultAction::AfterCommit { code } => Decision::AfterCommit { code },
            FaultAction::ResetBody { after_bytes } => Decision::ResetBody { after_bytes },
            FaultAction::Delay(delay) => Decision::Delay(delay),
            FaultAction::Hang => Decision::Hang,
            FaultAction::Shed {
                retry_after_base_secs,
                jitter_secs,
            } => {
                let rng = self
                    .jitter_rng
                    .get_or_insert_with(|| StdRng::seed_from_u64(0x5eed_5eed));
                let extra = if jitter_secs == 0 {
                    0
                } else {
                    rng.random_range(0..=jitter_secs)
                };
                Decision::Reject {
                    code: 503,
                    retry_after: Some(retry_after_base_secs.saturating_add(extra).to_string()),
                }
            }
        }
    }
}
