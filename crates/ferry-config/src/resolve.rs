//! Resolution of the checked raw config into `Config`: engine limits, registries, target groups
//! expanded into targets, mappings with their defaults; and the reference parsers it uses.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_distribution::Secret;
use ferry_distribution::digest::Digest;
use ferry_distribution::identity::{ClientIdentity, IdentityFile};

use super::check::Checker;
use super::glob::parse_prefix;
use super::glob::{RepositoryGlob, TargetPrefix};
use super::locate::FieldPath;
use super::overlap::{Clash, Writers};
use super::places::{parse_host, parse_place, parse_repository, parse_target};
use super::raw::{self, RawAuth, RawConfig, RawRegistry};
use super::{
    AuthSettings, Budget, Config, DEFAULT_CONCURRENCY, DEFAULT_MAX_CONCURRENT, EngineSettings,
    Mapping, Origin, ReferrerFilter, RegistrySettings, RepositoryCreation, RetryOverrides, Target,
};
use crate::filter::{TagFilter, TagGlobs};

impl Checker<'_> {
    pub fn resolve(&mut self, raw: RawConfig) -> Option<Config> {
        let root = FieldPath::root();
        if raw.version != 1 {
            self.fail(
                &root.key("version"),
                format!(
                    "unsupported version {} (this ferry reads version 1)",
                    raw.version
                ),
            );
        }
        let concurrency = self.at_least_one(
            &root.key("concurrency"),
            raw.concurrency,
            DEFAULT_CONCURRENCY,
        );
        let engine = self.resolve_engine(raw.engine.unwrap_or_default());
        let registries = self.resolve_registries(raw.registries);
        let groups = self.resolve_groups(&raw.target_groups);

        let defaults = raw.defaults.unwrap_or_default();
        let defaults_path = root.key("defaults");
        let default_tags = match &defaults.tags {
            None => Some(TagFilter::all()),
            Some(spec) => self.compile_tags(&defaults_path.key("tags"), spec),
        };
        let default_platforms = match &defaults.platforms {
            None => Vec::new(),
            Some(list) => self.check_platforms(&defaults_path.key("platforms"), list),
        };
        let default_keep_digest = defaults.platforms_keep_digest.unwrap_or(false);
        let default_referrers = match &defaults.referrers {
            None => (true, ReferrerFilter::default()),
            Some(r) => self.referrer_choice(&defaults_path.key("referrers"), r),
        };
        let default_required = defaults.require_referrers.clone().unwrap_or_default();
        let default_immutable = match &defaults.immutable {
            None => TagGlobs::default(),
            Some(list) => self.compile_globs(&defaults_path.key("immutable"), list),
        };
        // The built-in trusted root is parsed once for every policy that uses it.
        let mut public_good = None;
        let default_signatures = defaults
            .signatures
            .as_ref()
            .and_then(|s| self.signatures(&defaults_path.key("signatures"), s, &mut public_good));

        let mut mappings = Vec::new();
        let mut writers = Writers::new();
        for (index, mapping) in raw.mappings.into_iter().enumerate() {
            let path = root.key("mappings").index(index);
            let line = self.locator.value(&path).line;
            let referrers = match &mapping.referrers {
                None => default_referrers.clone(),
                Some(r) => self.referrer_choice(&path.key("referrers"), r),
            };
            let require_referrers = mapping
                .require_referrers
                .clone()
                .unwrap_or_else(|| default_required.clone());
            self.check_kinds(&path.key("require_referrers"), &require_referrers);
            let schedule = self.schedule(&path, &mapping.interval, &mapping.schedule);
            let signatures = match &mapping.signatures {
                Some(s) => self.signatures(&path.key("signatures"), s, &mut public_good),
                None => default_signatures.clone(),
            };
            let concurrency = mapping
                .concurrency
                .map(|n| self.at_least_one(&path.key("concurrency"), Some(n), 1));
            if mapping.source.starts_with("oci:")
                && (mapping.source.ends_with("/*") || mapping.source.ends_with("/**"))
            {
                self.fail(
                    &path.key("source"),
                    "a layout source cannot be a pattern (only a registry's catalog is \
                     expanded); write one mapping per layout directory",
                );
                continue;
            }
            if let Some(glob) = RepositoryGlob::parse(&mapping.source) {
                let glob = self.resolve_glob(&path, &mapping, glob, &groups);
                let tags = match &mapping.tags {
                    Some(spec) => self.compile_tags(&path.key("tags"), spec),
                    None => default_tags.clone(),
                };
                let platforms = match &mapping.platforms {
                    Some(list) => self.check_platforms(&path.key("platforms"), list),
                    None => default_platforms.clone(),
                };
                let immutable = match &mapping.immutable {
                    Some(list) => self.compile_globs(&path.key("immutable"), list),
                    None => default_immutable.clone(),
                };
                if let (Some(glob), Some(tags)) = (glob, tags) {
                    mappings.push(Mapping {
                        index,
                        source: glob.display(),
                        origin: Origin::Registry {
                            registry: glob.registry.clone(),
                            repository: glob.prefix.clone(),
                        },
                        targets: Vec::new(),
                        tags,
                        digests: Vec::new(),
                        platforms,
                        referrers: referrers.0,
                        referrer_filter: referrers.1,
                        require_referrers,
                        immutable,
                        prune: mapping.prune.unwrap_or(false),
                        retag: None,
                        platforms_keep_digest: mapping
                            .platforms_keep_digest
                            .unwrap_or(default_keep_digest),
                        schedule,
                        line,
                        repositories: Some(glob),
                        signatures,
                        concurrency,
                    });
                }
                continue;
            }
            if mapping.max_repositories.is_some() {
                self.fail_key(
                    &path.key("max_repositories"),
                    "max_repositories applies to a source ending in /* or /** only",
                );
            }
            let source = match parse_place(&mapping.source, "source") {
                Ok(origin) => Some(origin),
                Err(message) => {
                    self.fail(&path.key("source"), message);
                    None
                }
            };
            let targets = self.resolve_targets(&path, &mapping, source.as_ref(), &groups);
            let tags = match (&mapping.tags, mapping.digests.is_empty()) {
                (Some(spec), _) => self.compile_tags(&path.key("tags"), spec),
                (None, false) => Some(TagFilter::none()),
                (None, true) => default_tags.clone(),
            };
            let mut digests = Vec::new();
            for (i, text) in mapping.digests.iter().enumerate() {
                match Digest::parse(text) {
                    Ok(d) => digests.push(d),
                    Err(e) => self.fail(&path.key("digests").index(i), e.to_string()),
                }
            }
            let platforms = match &mapping.platforms {
                Some(list) => self.check_platforms(&path.key("platforms"), list),
                None => default_platforms.clone(),
            };
            let immutable = match &mapping.immutable {
                Some(list) => self.compile_globs(&path.key("immutable"), list),
                None => default_immutable.clone(),
            };
            let (Some(source), Some(tags)) = (source, tags) else {
                continue;
            };
            let origin = source;
            let source = origin.to_string();
            {
                // The source as a claim of its own: a target at it (a repository mirrored
                // onto itself), or a layout inside or above the source layout, would write
                // into what is being read.
                let mut read = Writers::new();
                read.claim(&origin, index, &source);
                for (target, _) in &targets {
                    match read.clash(target) {
                        Some(Clash::Same(_)) => self.fail(
                            &path.key("source"),
                            format!("{source} is both the source and a target"),
                        ),
                        Some(Clash::Inside(_) | Clash::Above(_)) => self.fail(
                            &path.key("source"),
                            format!(
                                "{source} and its target {target} are nested (a layout never \
                                 holds another layout)"
                            ),
                        ),
                        None => {}
                    }
                }
            }
            for (target, target_path) in &targets {
                match writers.clash(target) {
                    // Two mappings of one source may write one target (different tags, say).
                    Some(Clash::Same(w)) if w.source == source && w.index != index => {}
                    Some(clash) => {
                        let message = clash.describe(target);
                        self.fail(target_path, message);
                    }
                    None => writers.claim(target, index, &source),
                }
            }
            mappings.push(Mapping {
                index,
                source,
                origin,
                targets: targets.into_iter().map(|(t, _)| t).collect(),
                tags,
                digests,
                platforms,
                referrers: referrers.0,
                referrer_filter: referrers.1,
                require_referrers,
                immutable,
                prune: mapping.prune.unwrap_or(false),
                retag: None,
                platforms_keep_digest: mapping.platforms_keep_digest.unwrap_or(default_keep_digest),
                schedule,
                line,
                repositories: None,
                signatures,
                concurrency,
            });
        }
        let events = raw
            .events
            .and_then(|e| self.resolve_events(&root.key("events"), e));
        let listener_tls = raw
            .listener
            .and_then(|l| l.tls)
            .and_then(|t| self.listener_tls(&root.key("listener").key("tls"), t));
        let bundle_keys = match raw.bundles {
            Some(b) => {
                self.public_keys(&root.key("bundles").key("keys"), &b.keys)
                    .0
            }
            None => Vec::new(),
        };
        Some(Config {
            concurrency,
            engine,
            registries,
            mappings,
            events,
            listener_tls,
            state_dir: raw.state_dir,
            bundle_keys,
        })
    }

    fn resolve_engine(&mut self, raw: raw::RawEngine) -> EngineSettings {
        let path = FieldPath::root().key("engine");
        let d = EngineSettings::default();
        EngineSettings {
            images_in_flight: self.at_least_one(
                &path.key("images_in_flight"),
                raw.images_in_flight,
                d.images_in_flight,
            ),
            blobs_in_flight: self.at_least_one(
                &path.key("blobs_in_flight"),
                raw.blobs_in_flight,
                d.blobs_in_flight,
            ),
            chunk_size: self.size(
                &path.key("chunk_size"),
                raw.chunk_size.as_deref(),
                d.chunk_size,
            ),
            monolithic_limit: self.size(
                &path.key("monolithic_limit"),
                raw.monolithic_limit.as_deref(),
                d.monolithic_limit,
            ),
            tag_cache_ttl: self
                .duration(&path.key("tag_cache_ttl"), raw.tag_cache_ttl.as_deref())
                .unwrap_or(d.tag_cache_ttl),
        }
    }

    fn resolve_registries(&mut self, raw: Vec<RawRegistry>) -> Vec<RegistrySettings> {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut out = Vec::new();
        for (i, registry) in raw.into_iter().enumerate() {
            let path = FieldPath::root().key("registries").index(i);
            let host = match parse_host(&registry.host) {
                Ok(host) => host,
                Err(message) => {
                    self.fail(&path.key("host"), message);
                    continue;
                }
            };
            if let Some(first) = seen.get(&host) {
                let line = self
                    .locator
                    .value(&FieldPath::root().key("registries").index(*first))
                    .line;
                self.fail(
                    &path.key("host"),
                    format!("duplicate registry host {host} (first listed as registries[{first}] on line {line})"),
                );
                continue;
            }
            seen.insert(host.clone(), i);
            if let Some(url) = &registry.url
                && !(url.starts_with("https://") || url.starts_with("http://"))
            {
                self.fail(
                    &path.key("url"),
                    format!("url \"{url}\" must start with https:// or http://"),
                );
            }
            if let Some(url) = &registry.url
                && url.starts_with("http://")
                && !registry.insecure.unwrap_or(false)
            {
                // ferry sends plain http only to a registry configured insecure: say so here
                // rather than let every command fail at its first request.
                self.fail(
                    &path.key("url"),
                    format!(
                        "url \"{url}\" is plain http, which ferry uses only for a registry \
                         configured insecure: add insecure: true or use https://"
                    ),
                );
            }
            let auth = match registry.auth {
                None => AuthSettings::Discover,
                Some(RawAuth::Anonymous) => AuthSettings::Anonymous,
                Some(RawAuth::Basic { username, password }) => {
                    if username.is_empty() {
                        self.fail(&path.key("auth").key("username"), "username is empty");
                    }
                    AuthSettings::Basic {
                        username,
                        password: Secret::new(password.0),
                    }
                }
                Some(RawAuth::Token { token }) => {
                    if token.0.is_empty() {
                        self.fail(&path.key("auth").key("token"), "token is empty");
                    }
                    AuthSettings::Token {
                        token: Secret::new(token.0),
                    }
                }
                Some(RawAuth::DockerConfig { path }) => AuthSettings::DockerConfig { path },
                Some(RawAuth::Ecr { region, profile }) => AuthSettings::Ecr { region, profile },
            };
            let max_concurrent = self.at_least_one(
                &path.key("max_concurrent"),
                registry.max_concurrent,
                DEFAULT_MAX_CONCURRENT,
            );
            if let Some(rps) = registry.requests_per_second
                && !(rps.is_finite() && rps > 0.0)
            {
                self.fail(&path.key("requests_per_second"), "must be a number above 0");
            }
            let retry_path = path.key("retry");
            let raw_retry = registry.retry.unwrap_or_default();
            if raw_retry.attempts == Some(0) {
                self.fail(
                    &retry_path.key("attempts"),
                    "must be at least 1 (1 = no retries)",
                );
            }
            let retry = RetryOverrides {
                attempts: raw_retry.attempts,
                base: self.duration(&retry_path.key("base"), raw_retry.base.as_deref()),
                cap: self.duration(&retry_path.key("cap"), raw_retry.cap.as_deref()),
                retry_after_cap: self.duration(
                    &retry_path.key("retry_after_cap"),
                    raw_retry.retry_after_cap.as_deref(),
                ),
                deadline: self.duration(&retry_path.key("deadline"), raw_retry.deadline.as_deref()),
            };
            if let (Some(base), Some(cap)) = (retry.base, retry.cap)
                && base > cap
            {
                self.fail(&retry_path.key("cap"), "cap is shorter than base");
            }
            let client_identity =
                self.client_identity(&path, registry.client_cert, registry.client_key);
            let create_repositories = match &registry.create_repositories {
                None | Some(raw::RawCreateRepositories::Create(false)) => None,
                Some(raw::RawCreateRepositories::Create(true)) => {
                    Some(RepositoryCreation::default())
                }
                Some(raw::RawCreateRepositories::With(c)) => Some(RepositoryCreation {
                    tag_immutability: c.tag_immutability,
                    scan_on_push: c.scan_on_push,
                }),
            };
            if create_repositories.is_some() && crate::EcrHost::parse(&host).is_none() {
                self.fail_key(
                    &path.key("create_repositories"),
                    format!(
                        "create_repositories applies to ECR registries only \
                         (<account>.dkr.ecr.<region>.amazonaws.com), not {host}: other registries \
                         create a repository on its first push"
                    ),
                );
            }
            out.push(RegistrySettings {
                host,
                url: registry.url,
                auth,
                insecure: registry.insecure.unwrap_or(false),
                ca_bundle: registry.ca_bundle,
                client_identity,
                max_concurrent,
                requests_per_second: registry.requests_per_second,
                budget: match registry.budget {
                    None | Some(raw::RawBudget::Fleet) => Budget::Fleet,
                    Some(raw::RawBudget::PerShard) => Budget::PerShard,
                },
                retry,
                create_repositories,
            });
        }
        out
    }

    /// A registry's `client_cert` and `client_key`: both or neither, each a readable PEM file
    /// of the right kind. A problem is reported at the field whose file is at fault.
    fn client_identity(
        &mut self,
        path: &FieldPath,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> Option<ClientIdentity> {
        let identity = match (cert, key) {
            (None, None) => return None,
            (Some(_), None) => {
                self.fail(
                    &path.key("client_cert"),
                    "client_cert needs client_key beside it",
                );
                return None;
            }
            (None, Some(_)) => {
                self.fail(
                    &path.key("client_key"),
                    "client_key needs client_cert beside it",
                );
                return None;
            }
            (Some(certificate), Some(key)) => ClientIdentity { certificate, key },
        };
        match identity.load() {
            Ok(_) => Some(identity),
            Err(e) => {
                let field = match e.file {
                    IdentityFile::Certificate => "client_cert",
                    IdentityFile::Key => "client_key",
                };
                self.fail(&path.key(field), e.message);
                None
            }
        }
    }

    /// Checks each group's prefixes; returns the usable ones per group name.
    fn resolve_groups(
        &mut self,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<String, Vec<TargetPrefix>> {
        let mut groups = BTreeMap::new();
        for (name, prefixes) in raw {
            let path = FieldPath::root().key("target_groups").key(name);
            if prefixes.is_empty() {
                self.fail(&path, format!("target group {name} is empty"));
            }
            let mut out = Vec::new();
            for (i, prefix) in prefixes.iter().enumerate() {
                match parse_prefix(prefix) {
                    Ok(p) => out.push(p),
                    Err(message) => self.fail(&path.index(i), message),
                }
            }
            groups.insert(name.clone(), out);
        }
        groups
    }

    fn resolve_targets(
        &mut self,
        path: &FieldPath,
        mapping: &raw::RawMapping,
        source: Option<&Origin>,
        groups: &BTreeMap<String, Vec<TargetPrefix>>,
    ) -> Vec<(Target, FieldPath)> {
        let mut out: Vec<(Target, FieldPath)> = Vec::new();
        match (&mapping.targets, &mapping.target_group) {
            (Some(_), Some(_)) => {
                self.fail_key(
                    &path.key("target_group"),
                    "set either targets or target_group, not both",
                );
            }
            (None, None) => self.fail(path, "needs targets or target_group"),
            (Some(targets), None) => {
                if mapping.rename.is_some() {
                    self.fail_key(
                        &path.key("rename"),
                        "rename applies to target_group only; write the full name in targets",
                    );
                }
                if targets.is_empty() {
                    self.fail(&path.key("targets"), "targets is empty");
                }
                for (i, text) in targets.iter().enumerate() {
                    let target_path = path.key("targets").index(i);
                    match parse_target(text) {
                        Ok(t) if out.iter().any(|(o, _)| *o == t) => {
                            self.fail(&target_path, format!("target {t} is listed twice"))
                        }
                        Ok(t) => out.push((t, target_path)),
                        Err(message) => self.fail(&target_path, message),
                    }
                }
            }
            (None, Some(group)) => {
                let group_path = path.key("target_group");
                let Some(prefixes) = groups.get(group) else {
                    let known: Vec<&str> = groups.keys().map(String::as_str).collect();
                    let known = if known.is_empty() {
                        "none are defined".to_string()
                    } else {
                        format!("known: {}", known.join(", "))
                    };
                    self.fail(
                        &group_path,
                        format!("unknown target group \"{group}\" ({known})"),
                    );
                    return out;
                };
                let name = match &mapping.rename {
                    Some(rename) => match parse_repository(&format!("rename.invalid/{rename}")) {
                        Ok(r) if r.repository == *rename => rename.clone(),
                        Ok(_) | Err(_) => {
                            self.fail(
                                &path.key("rename"),
                                format!("rename \"{rename}\" is not a repository path (lowercase components separated by /)"),
                            );
                            return out;
                        }
                    },
                    None => match source.map(Origin::repository_name) {
                        Some(Some(name)) => name,
                        Some(None) => {
                            self.fail(
                                &path.key("rename"),
                                "a layout source whose directory name is not a repository path needs rename with target_group",
                            );
                            return out;
                        }
                        None => return out,
                    },
                };
                for prefix in prefixes {
                    match prefix.join(&name) {
                        Ok(t) if out.iter().any(|(o, _)| *o == t) => {}
                        Ok(t) => out.push((t, group_path.clone())),
                        Err(message) => self.fail(&group_path, message),
                    }
                }
            }
        }
        out
    }
}
