//! Sharding a config across processes: [`select`] keeps the mappings whose stable hash (sha256
//! of the source and the sorted targets) falls in one shard, so N runs split the work disjointly.
//!
//! The hash depends only on what a mapping copies, never on its position in the file or on the
//! process (std's hasher is randomised per process, so it is not used): every run, on every
//! machine, puts a mapping in the same shard, and reordering the config moves nothing.

use std::fmt;
use std::str::FromStr;

use ferry_distribution::{Algorithm, Digest};

use crate::{Budget, Config, Mapping, RegistrySettings};

/// One shard of N: `index` in `0..count` (0-based, as Kubernetes' `JOB_COMPLETION_INDEX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    index: u32,
    count: u32,
}

/// A shard that cannot exist.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not `I/N` with two whole numbers.
    #[error("shard \"{0}\" is not I/N (e.g. 0/4)")]
    Syntax(String),
    /// `N` is 0.
    #[error("the shard count must be at least 1")]
    NoShards,
    /// `I` is not below `N`.
    #[error("shard index {index} is outside 0..{count} (indexes start at 0)")]
    OutOfRange {
        /// The index given.
        index: u32,
        /// The shard count given.
        count: u32,
    },
}

impl Shard {
    /// Shard `index` of `count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if index >= count {
            return Err(ShardError::OutOfRange { index, count });
        }
        Ok(Shard { index, count })
    }

    /// This shard's index, from 0.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many shards there are.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether `mapping` belongs to this shard.
    pub fn contains(&self, mapping: &Mapping) -> bool {
        shard_of(mapping, self.count) == self.index
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    /// `I/N`, e.g. `0/4`.
    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax(text.to_string());
        let (index, count) = text.trim().split_once('/').ok_or_else(syntax)?;
        let index: u32 = index.trim().parse().map_err(|_| syntax())?;
        let count: u32 = count.trim().parse().map_err(|_| syntax())?;
        Shard::new(index, count)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The stable hash of a mapping: the first 8 bytes of sha256 over the source and the sorted
/// targets, one per line.
pub fn mapping_hash(mapping: &Mapping) -> u64 {
    let mut targets: Vec<String> = mapping.targets.iter().map(ToString::to_string).collect();
    targets.sort();
    let mut text = mapping.source.clone();
    for t in &targets {
        text.push('\n');
        text.push_str(t);
    }
    let digest = Digest::of_bytes(Algorithm::Sha256, text.as_bytes());
    // A sha256 hex is 64 hex digits, so its first 16 always parse.
    digest
        .hex()
        .get(..16)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

/// The shard (of `count`) a mapping falls in.
pub fn shard_of(mapping: &Mapping, count: u32) -> u32 {
    (mapping_hash(mapping) % u64::from(count.max(1))) as u32
}

/// `config` with only the mappings of `shard` (each keeps its `index` in the full config, so
/// reports still name positions in the file), and each listed registry's fleet budget divided
/// among the shards ([`share_budget`]). Everything else is kept as is.
pub fn select(config: &Config, shard: Shard) -> Config {
    Config {
        mappings: config
            .mappings
            .iter()
            .filter(|m| shard.contains(m))
            .cloned()
            .collect(),
        registries: config
            .registries
            .iter()
            .map(|r| share_budget(r, shard.count()))
            .collect(),
        ..config.clone()
    }
}

/// One shard's share of a registry's limits: with `budget: fleet` (the default),
/// `max_concurrent` and `requests_per_second` are the total of all `count` shards, so each
/// takes `1/count` (`max_concurrent` rounded down, never below 1); with `budget: per_shard`
/// they stay as written.
pub fn share_budget(registry: &RegistrySettings, count: u32) -> RegistrySettings {
    let count = count.max(1);
    let mut shared = registry.clone();
    if registry.budget == Budget::Fleet {
        shared.max_concurrent = (registry.max_concurrent / count as usize).max(1);
        shared.requests_per_second = registry.requests_per_second.map(|r| r / f64::from(count));
    }
    shared
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate as config;

    fn config_of(mappings: &[(String, Vec<String>)]) -> Config {
        let mut text = String::from("version: 1\nmappings:\n");
        for (source, targets) in mappings {
            let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
            text.push_str(&format!(
                "  - source: \"{source}\"\n    targets: [{}]\n",
                targets.join(", ")
            ));
        }
        config::parse(&text, Path::new("shard.yaml"), &|_| None).unwrap()
    }

    /// Distinct mappings: each source gets its own targets, so no two write one target.
    fn mappings_strategy() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
        proptest::collection::btree_set("[a-z]{1,8}", 1..40).prop_flat_map(|names| {
            let names: Vec<String> = names.into_iter().collect();
            let n = names.len();
            (
                Just(names),
                proptest::collection::vec(1usize..4, n),
                proptest::collection::vec(any::<bool>(), n),
            )
                .prop_map(|(names, fanout, layout)| {
                    names
                        .iter()
                        .zip(fanout)
                        .zip(layout)
                        .map(|((name, k), oci)| {
                            let targets = (0..k)
                                .map(|t| {
                                    if oci && t == 0 {
                                        format!("oci:./out/{name}")
                                    } else {
                                        format!("registry.local:5000/m{t}/{name}")
                                    }
                                })
                                .collect();
                            (format!("ghcr.io/org/{name}"), targets)
                        })
                        .collect()
                })
        })
    }

    fn key(m: &Mapping) -> (String, Vec<String>) {
        let mut t: Vec<String> = m.targets.iter().map(ToString::to_string).collect();
        t.sort();
        (m.source.clone(), t)
    }

    proptest! {
        #[test]
        fn shards_are_disjoint_and_cover_every_mapping(
            mappings in mappings_strategy(),
            count in 1u32..9,
        ) {
            let config = config_of(&mappings);
            let mut seen = vec![0usize; config.mappings.len()];
            for index in 0..count {
                let part = select(&config, Shard::new(index, count).unwrap());
                for m in &part.mappings {
                    seen[m.index] += 1;
                    prop_assert_eq!(&config.mappings[m.index], m);
                }
                prop_assert_eq!(part.registries.len(), config.registries.len());
            }
            prop_assert!(seen.iter().all(|&n| n == 1), "each mapping in exactly one shard: {:?}", seen);
        }

        #[test]
        fn a_mappings_shard_ignores_config_order_and_target_order(
            mappings in mappings_strategy(),
            count in 1u32..9,
            rotate in 0usize..40,
        ) {
            let config = config_of(&mappings);
            let mut shuffled = mappings.clone();
            let by = rotate % shuffled.len();
            shuffled.rotate_left(by);
            for (_, targets) in &mut shuffled {
                targets.reverse();
            }
            let other = config_of(&shuffled);
            for index in 0..count {
                let shard = Shard::new(index, count).unwrap();
                let mut a: Vec<_> = select(&config, shard).mappings.iter().map(key).collect();
                let mut b: Vec<_> = select(&other, shard).mappings.iter().map(key).collect();
                a.sort();
                b.sort();
                prop_assert_eq!(a, b);
            }
        }
    }

    /// Pinned values: the hash must be the same in every process and every release, or a
    /// fleet upgraded one pod at a time would copy some mappings twice and some never.
    #[test]
    fn the_hash_is_stable_across_processes() {
        let config = config_of(&[
            (
                "docker.io/library/alpine".into(),
                vec![
                    "registry.local:5000/mirror/alpine".into(),
                    "oci:./out/alpine".into(),
                ],
            ),
            (
                "ghcr.io/org/app".into(),
                vec!["registry.local:5000/app".into()],
            ),
        ]);
        // sha256("docker.io/library/alpine\noci:./out/alpine\nregistry.local:5000/mirror/alpine")
        assert_eq!(mapping_hash(&config.mappings[0]), 0xb40b_b8e7_3e2a_a81c);
        assert_eq!(mapping_hash(&config.mappings[1]), 0x9f54_9806_6ab8_b373);
    }

    #[test]
    fn a_shard_is_parsed_from_i_slash_n_and_checked() {
        assert_eq!("2/4".parse::<Shard>().unwrap(), Shard::new(2, 4).unwrap());
        assert_eq!("0/1".parse::<Shard>().unwrap().to_string(), "0/1");
        assert_eq!(
            "4/4".parse::<Shard>(),
            Err(ShardError::OutOfRange { index: 4, count: 4 })
        );
        assert_eq!("0/0".parse::<Shard>(), Err(ShardError::NoShards));
        for bad in ["", "1", "a/2", "1/b", "-1/2", "1/2/3"] {
            assert!(
                matches!(bad.parse::<Shard>(), Err(ShardError::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn several_shards_each_get_work_when_there_is_enough() {
        let mappings: Vec<(String, Vec<String>)> = (0..64)
            .map(|i| {
                (
                    format!("ghcr.io/org/app{i}"),
                    vec![format!("registry.local:5000/app{i}")],
                )
            })
            .collect();
        let config = config_of(&mappings);
        for index in 0..4 {
            let n = select(&config, Shard::new(index, 4).unwrap())
                .mappings
                .len();
            assert!((4..=28).contains(&n), "shard {index} of 4 got {n} of 64");
        }
    }
}
