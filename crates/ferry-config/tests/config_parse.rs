//! mirror.yaml parsing: the resolved model, defaults, target groups, and errors that name file,
//! line, column and field without echoing secrets.

use std::path::Path;
use std::time::Duration;

use ferry_config::{AuthSettings, ConfigError, Target, parse};

fn env(name: &str) -> Option<String> {
    match name {
        "REG_PASSWORD" => Some("s3cr3t-pa55".into()),
        "REG_USER" => Some("robot".into()),
        _ => None,
    }
}

fn load(text: &str) -> Result<ferry_config::Config, ConfigError> {
    parse(text, Path::new("mirror.yaml"), &env)
}

/// The single problem of a failed parse, as `line:column: field: message`.
fn error(text: &str) -> String {
    let err = load(text).unwrap_err();
    let problems = err.problems();
    assert_eq!(problems.len(), 1, "{err}");
    let p = &problems[0];
    assert_eq!(p.file, Path::new("mirror.yaml"));
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("mirror.yaml:{}:{}: ", p.line, p.column)),
        "{shown}"
    );
    shown.trim_start_matches("mirror.yaml:").to_string()
}

const FULL: &str = r#"version: 1
concurrency: 4
engine: { images_in_flight: 2, blobs_in_flight: 3, chunk_size: "4MiB", monolithic_limit: 1MB }
defaults:
  tags: { include: ["3.*"] }
  platforms: [linux/amd64]
  referrers: true
registries:
  - host: index.docker.io
    url: https://registry-1.docker.io
    auth: { type: basic, username: "${REG_USER}", password: "${REG_PASSWORD}" }
    retry: { attempts: 3, base: 200ms, cap: 30s, retry_after_cap: 2m, deadline: 10m }
  - host: registry.local:5000
    insecure: true
    max_concurrent: 4
    requests_per_second: 2.5
    auth: { type: token, token: tok-xyzzy }
target_groups:
  mirrors: ["registry.local:5000/mirror", "oci:./mirror/"]
mappings:
  - source: alpine
    target_group: mirrors
  - source: docker.io/library/busybox
    targets: ["registry.local:5000/bb", "oci:./out/bb"]
    tags: { exact: [latest] }
    platforms: []
    referrers: false
  - source: ghcr.io/org/app
    target_group: mirrors
    rename: apps/app
    digests: ["sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]
"#;

#[test]
fn resolves_the_full_shape() {
    let config = load(FULL).unwrap();
    assert_eq!(config.concurrency, 4);
    assert_eq!(config.engine.chunk_size, 4 << 20);
    assert_eq!(config.engine.monolithic_limit, 1_000_000);
    assert_eq!(config.engine.images_in_flight, 2);

    let hub = config.registry_for("docker.io");
    assert_eq!(hub.host, "docker.io");
    assert_eq!(hub.url.as_deref(), Some("https://registry-1.docker.io"));
    match &hub.auth {
        AuthSettings::Basic { username, password } => {
            assert_eq!(username, "robot");
            assert_eq!(password.expose(), "s3cr3t-pa55");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(hub.retry.attempts, Some(3));
    assert_eq!(hub.retry.base, Some(Duration::from_millis(200)));
    assert_eq!(hub.retry.retry_after_cap, Some(Duration::from_secs(120)));
    assert_eq!(hub.retry.deadline, Some(Duration::from_secs(600)));
    assert_eq!(hub.max_concurrent, 16);

    let local = config.registry_for("registry.local:5000");
    assert!(local.insecure);
    assert_eq!(local.max_concurrent, 4);
    assert_eq!(local.requests_per_second, Some(2.5));

    let other = config.registry_for("quay.io");
    assert_eq!(other.auth, AuthSettings::Discover);
    assert!(!other.insecure);

    let [alpine, busybox, app] = config.mappings.as_slice() else {
        panic!("three mappings expected")
    };
    assert_eq!(alpine.source, "docker.io/library/alpine");
    assert_eq!(alpine.line, 21);
    assert_eq!(
        alpine.targets,
        vec![
            Target::Registry {
                registry: "registry.local:5000".into(),
                repository: "mirror/library/alpine".into()
            },
            Target::OciLayout {
                path: "./mirror/library/alpine".into()
            },
        ]
    );
    // defaults inherited
    assert_eq!(alpine.platforms, vec!["linux/amd64".to_string()]);
    assert!(alpine.referrers);
    let listed: Vec<String> = ["3.19", "edge", "latest"].map(String::from).to_vec();
    assert_eq!(
        alpine.tags.select(&listed).selected,
        vec!["3.19".to_string()]
    );
    // overrides
    assert_eq!(busybox.index, 1);
    assert!(busybox.platforms.is_empty());
    assert!(!busybox.referrers);
    assert_eq!(
        busybox.tags.select(&listed).selected,
        vec!["latest".to_string()]
    );
    assert_eq!(
        busybox.targets[1],
        Target::OciLayout {
            path: "./out/bb".into()
        }
    );
    // rename with a group; digests alone select no tags
    assert_eq!(
        app.targets[0],
        Target::Registry {
            registry: "registry.local:5000".into(),
            repository: "mirror/apps/app".into()
        }
    );
    assert!(app.tags.select(&listed).selected.is_empty());
    assert_eq!(app.digests.len(), 1);
}

#[test]
fn debug_output_hides_secrets() {
    let config = load(FULL).unwrap();
    let debug = format!("{config:?}");
    assert!(!debug.contains("s3cr3t-pa55"), "{debug}");
    assert!(!debug.contains("tok-xyzzy"), "{debug}");
}

#[test]
fn minimal_config_takes_defaults() {
    let config =
        load("version: 1\nmappings:\n  - { source: alpine, targets: ['oci:out'] }\n").unwrap();
    assert_eq!(config.concurrency, 16);
    assert_eq!(config.engine.chunk_size, 64 << 20);
    assert_eq!(config.engine.monolithic_limit, 64 << 20);
    let m = &config.mappings[0];
    assert!(m.referrers, "referrers are copied by default");
    assert!(m.platforms.is_empty());
    let listed: Vec<String> = vec!["a".into(), "1.0".into()];
    assert_eq!(m.tags.select(&listed).selected.len(), 2);
}

const HEAD: &str = "version: 1\nmappings:\n";

#[test]
fn semantic_errors_name_position_and_field() {
    assert_eq!(
        error(&format!(
            "{HEAD}  - source: docker.io/library/alpine\n    targets: ['oci:x']\n    tags:\n      semver: '>=3.x.y'\n"
        )),
        "6:15: mappings[0] (source docker.io/library/alpine): tags.semver: invalid range \">=3.x.y\": unexpected character 'y' after patch version number"
            .replace("unexpected character 'y' after patch version number", &semver_message(">=3.x.y"))
    );
    let e = error(&format!("{HEAD}  - source: a\n    target_group: nope\n"));
    assert!(
        e.starts_with("4:19: mappings[0] (source a): target_group: unknown target group \"nope\""),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: [x]\n    target_group: g\ntarget_groups: {{ g: [oci:y] }}\n"
    ));
    assert!(
        e.starts_with(
            "5:5: mappings[0] (source a): target_group: set either targets or target_group"
        ),
        "{e}"
    );
    let e = error(&format!("{HEAD}  - source: Bad/Name\n    targets: [x]\n"));
    assert!(
        e.starts_with("3:13: mappings[0] (source Bad/Name): source: "),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - source: alpine:3.19\n    targets: [x]\n"
    ));
    assert!(e.contains("names a tag or digest"), "{e}");
    let e = error(&format!(
        "concurrency: 0\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(
        e.starts_with("1:14: concurrency: must be at least 1"),
        "{e}"
    );
    let e = error(&format!(
        "registries:\n  - host: docker.io\n  - host: index.docker.io\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(e.starts_with("3:11: registries[1] (host index.docker.io): host: duplicate registry host docker.io (first listed as registries[0] on line 2)"), "{e}");
    let e = error(&format!(
        "registries:\n  - host: ghcr.io\n    retry: {{ base: 30 }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(
        e.starts_with(
            "3:20: registries[0] (host ghcr.io): retry.base: invalid duration \"30\": missing unit"
        ),
        "{e}"
    );
    let e = error(&format!(
        "engine: {{ chunk_size: 8QB }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(
        e.starts_with("1:23: engine.chunk_size: invalid size"),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], digests: [sha256:12] }}\n"
    ));
    assert!(
        e.starts_with("3:42: mappings[0] (source a): digests[0]: "),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], platforms: [linux] }}\n"
    ));
    assert!(
        e.starts_with("3:44: mappings[0] (source a): platforms[0]: platform \"linux\""),
        "{e}"
    );
    let e = error("version: 2\nmappings:\n  - { source: a, targets: [x] }\n");
    assert!(e.starts_with("1:10: version: unsupported version 2"), "{e}");
    let e = error("version: 1\nmappings: []\n");
    assert!(e.starts_with("2:11: mappings: no mappings"), "{e}");
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [reg.io/x] }}\n  - {{ source: b, targets: [reg.io/x] }}\n"
    ));
    assert!(e.starts_with("4:28: mappings[1] (source b): targets[0]: target reg.io/x is also written by mappings[0] (source docker.io/library/a)"), "{e}");
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], rename: y }}\n"
    ));
    assert!(e.contains("rename applies to target_group only"), "{e}");
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], tags: {{ latest: 0 }} }}\n"
    ));
    assert!(
        e.starts_with("3:48: mappings[0] (source a): tags.latest: "),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], tags: {{ exclude: [ok, '[bad'] }} }}\n"
    ));
    assert!(
        e.starts_with("3:54: mappings[0] (source a): tags.exclude[1]: invalid glob"),
        "{e}"
    );
}

/// The config takes lowercase letters, digits and `_` in each part, stricter than what a
/// `Platform` itself refuses (empty parts, more than three, control characters, whitespace).
#[test]
fn a_platform_outside_the_config_s_characters_is_refused_with_the_same_message() {
    for (platform, yaml) in [
        ("Linux/amd64", "Linux/amd64"),
        ("linux/amd-64", "linux/amd-64"),
        ("linux/amd64.1", "linux/amd64.1"),
        ("linux/amd64 ", "\"linux/amd64 \""),
        ("linux//amd64", "linux//amd64"),
        ("linux/arm64/v8/x", "linux/arm64/v8/x"),
    ] {
        let e = error(&format!(
            "{HEAD}  - {{ source: a, targets: [x], platforms: [{yaml}] }}\n"
        ));
        assert!(
            e.starts_with(&format!(
                "3:44: mappings[0] (source a): platforms[0]: platform \"{platform}\" is not \
                 os/arch or os/arch/variant (e.g. linux/arm64/v8)"
            )),
            "{e}"
        );
    }
    let config = load(&format!(
        "{HEAD}  - {{ source: a, targets: [x], platforms: [linux/arm64/v8, windows/amd64, a_1/b_2] }}\n"
    ))
    .unwrap();
    let shown: Vec<String> = config.mappings[0]
        .platforms
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["linux/arm64/v8", "windows/amd64", "a_1/b_2"]);
}

fn semver_message(range: &str) -> String {
    semver::VersionReq::parse(range).unwrap_err().to_string()
}

#[test]
fn several_semantic_problems_are_all_reported_in_file_order() {
    let err = load("version: 1\nconcurrency: 0\nmappings:\n  - { source: a, target_group: g }\n  - { source: b }\n")
        .unwrap_err();
    let lines: Vec<usize> = err.problems().iter().map(|p| p.line).collect();
    assert_eq!(lines, vec![2, 4, 5], "{err}");
}

#[test]
fn structural_errors_name_position_and_field() {
    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: [x]\n    tags: {{ incude: ['*'] }}\n"
    ));
    assert!(e.starts_with("5:13: mappings[0] (source a): tags"), "{e}");
    assert!(e.contains("unknown field `incude`"), "{e}");
    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: [x]\n    referrers: maybe\n"
    ));
    assert!(
        e.starts_with("5:16: mappings[0] (source a): referrers: invalid type"),
        "{e}"
    );
    let e = error(&format!(
        "colour: blue\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(e.starts_with("1:1: "), "{e}");
    assert!(e.contains("unknown field `colour`"), "{e}");
    let e = error("mappings: []\n");
    assert!(e.contains("missing field `version`"), "{e}");
    let e = error("version: 1\nmappings: [\n");
    assert!(e.starts_with("3:1: "), "{e}");
    let e = error(&format!(
        "registries:\n  - host: ghcr.io\n    auth: {{ type: magic }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(e.starts_with("3:"), "{e}");
    assert!(e.contains("registries[0] (host ghcr.io): auth"), "{e}");
    assert!(e.contains("magic"), "{e}");
}

#[test]
fn interpolation_errors_and_secret_redaction() {
    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: ['${{TARGET_DIR}}']\n"
    ));
    assert!(e.starts_with("4:16: "), "{e}");
    assert!(e.contains("TARGET_DIR is not set"), "{e}");
    let e = error("version: 1\npassword: ${NEED:?set NEED to the registry password}\n");
    assert!(e.contains("set NEED to the registry password"), "{e}");
    // a secret that lands in a bad place is never echoed
    let e = error(&format!(
        "concurrency: ${{REG_PASSWORD}}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(!e.contains("s3cr3t-pa55"), "{e}");
    assert!(e.starts_with("1:14: concurrency:"), "{e}");
    // a literal password in a broken registry entry is not echoed either
    let e = error(&format!(
        "registries:\n  - host: ghcr.io\n    auth: {{ type: basic, username: u, password: hunter2, extra: 1 }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(!e.contains("hunter2"), "{e}");
    // comments are not interpolated; $$ escapes
    let config = load(&format!(
        "# ${{NOT_SET}} in a comment\n{HEAD}  - {{ source: a, targets: ['oci:out$$dir'] }}\n"
    ))
    .unwrap();
    assert_eq!(
        config.mappings[0].targets[0],
        Target::OciLayout {
            path: "out$dir".into()
        }
    );
}

#[test]
fn load_names_unreadable_files() {
    let err = ferry_config::load(Path::new("/nonexistent/mirror.yaml")).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    assert!(err.to_string().contains("/nonexistent/mirror.yaml"));
}

#[test]
fn a_layout_source_is_read_from_its_directory_and_names_its_target_group_path() {
    let c = load(&format!(
        "{HEAD}  - source: oci:./images/app\n    target_group: mirrors\ntarget_groups:\n  mirrors: [registry.local/mirror]\n"
    ))
    .unwrap();
    let m = &c.mappings[0];
    assert_eq!(m.source, "oci:./images/app");
    assert_eq!(
        m.origin,
        ferry_config::Origin::OciLayout {
            path: "./images/app".into()
        }
    );
    assert_eq!(
        m.targets,
        vec![Target::Registry {
            registry: "registry.local".into(),
            repository: "mirror/app".into()
        }]
    );
    let e = error(&format!("{HEAD}  - source: 'oci:'\n    targets: [x]\n"));
    assert!(
        e.starts_with(
            "3:13: mappings[0] (source oci:): source: source \"oci:\" names no directory"
        ),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - source: oci:./same\n    targets: ['oci:./same']\n"
    ));
    assert!(
        e.contains("oci:./same is both the source and a target"),
        "{e}"
    );
    // A directory name that is not a repository path cannot name a group's path by itself.
    let e = error(&format!(
        "{HEAD}  - source: oci:./Images_UPPER\n    target_group: g\ntarget_groups: {{ g: [r.local] }}\n"
    ));
    assert!(e.contains("rename: a layout source"), "{e}");
    let c = load(&format!(
        "{HEAD}  - source: oci:./Images_UPPER\n    target_group: g\n    rename: lib/app\ntarget_groups: {{ g: [r.local] }}\n"
    ))
    .unwrap();
    assert_eq!(
        c.mappings[0].targets,
        vec![Target::Registry {
            registry: "r.local".into(),
            repository: "lib/app".into()
        }]
    );
}

#[test]
fn a_registry_budget_is_the_fleets_unless_it_says_per_shard() {
    use ferry_config::Budget;
    use ferry_config::shard::{Shard, select};
    let config = load(
        "version: 1\nregistries:\n  - { host: hub.example, max_concurrent: 16, requests_per_second: 8 }\n  - { host: own.example, max_concurrent: 6, requests_per_second: 3, budget: per_shard }\n  - { host: tiny.example, max_concurrent: 3 }\nmappings:\n  - { source: hub.example/a, targets: ['own.example/a'] }\n",
    )
    .unwrap();
    assert_eq!(config.registry_for("hub.example").budget, Budget::Fleet);
    assert_eq!(config.registry_for("own.example").budget, Budget::PerShard);

    let shard = select(&config, Shard::new(1, 4).unwrap());
    let hub = shard.registry_for("hub.example");
    assert_eq!(hub.max_concurrent, 4, "16 for the fleet, 4 shards");
    assert_eq!(hub.requests_per_second, Some(2.0));
    let own = shard.registry_for("own.example");
    assert_eq!(own.max_concurrent, 6, "per shard: as written");
    assert_eq!(own.requests_per_second, Some(3.0));
    let tiny = shard.registry_for("tiny.example");
    assert_eq!(tiny.max_concurrent, 1, "never below one in flight");
    assert_eq!(tiny.requests_per_second, None);
    // One shard of one is the whole fleet.
    let whole = select(&config, Shard::new(0, 1).unwrap());
    assert_eq!(whole.registry_for("hub.example").max_concurrent, 16);

    let e = error(&format!(
        "registries:\n  - {{ host: ghcr.io, budget: per_pod }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(e.starts_with("2:"), "{e}");
    assert!(e.contains("registries[0] (host ghcr.io): budget"), "{e}");
    assert!(e.contains("per_pod") && e.contains("per_shard"), "{e}");
}

#[test]
fn immutable_tags_are_globs_a_mapping_replaces_the_defaults_and_a_bad_one_is_named() {
    let c = load(&format!(
        "defaults:\n  immutable: ['v*.*.*']\n{HEAD}  - {{ source: a, targets: [x] }}\n  - {{ source: b, targets: [y], immutable: ['sha-*', '1.?'] }}\n  - {{ source: c, targets: [z], immutable: [] }}\n"
    ))
    .unwrap();
    let [a, b, c] = &c.mappings[..] else {
        panic!("three mappings")
    };
    assert_eq!(a.immutable.patterns(), ["v*.*.*"], "the default");
    assert!(a.immutable.matches("v1.2.3") && !a.immutable.matches("latest"));
    assert_eq!(
        b.immutable.patterns(),
        ["sha-*", "1.?"],
        "replaced, not merged"
    );
    assert!(b.immutable.matches("1.2") && !b.immutable.matches("v1.2.3"));
    assert!(c.immutable.is_empty() && !c.immutable.matches("v1.2.3"));
    let none = load(&format!("{HEAD}  - {{ source: a, targets: [x] }}\n")).unwrap();
    assert!(none.mappings[0].immutable.is_empty(), "none by default");

    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: [x]\n    immutable: ['v*', '[bad']\n"
    ));
    assert!(
        e.starts_with("5:23: mappings[0] (source a): immutable[1]: invalid glob \"[bad\""),
        "{e}"
    );
    let e = error(&format!(
        "defaults: {{ immutable: ['{{a,b'] }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ));
    assert!(
        e.starts_with("1:25: defaults.immutable[0]: invalid glob \"{a,b\""),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], immutable: v1 }}\n"
    ));
    assert!(
        e.starts_with("3:43: mappings[0] (source a): immutable: invalid type"),
        "{e}"
    );
}

#[test]
fn a_mapping_s_own_watch_schedule_is_an_interval_or_a_cron_expression_not_both() {
    use ferry_config::Schedule;
    let c = load(&format!(
        "{HEAD}  - {{ source: a, targets: [x], interval: 6h }}\n  - {{ source: b, targets: [y], schedule: \"0 3 * * 1-5\" }}\n  - {{ source: c, targets: [z] }}\n"
    ))
    .unwrap();
    assert_eq!(
        c.mappings[0].schedule,
        Some(Schedule::Every(Duration::from_secs(6 * 3600)))
    );
    assert!(
        matches!(&c.mappings[1].schedule, Some(Schedule::Cron(cron)) if cron.as_str() == "0 3 * * 1-5")
    );
    assert_eq!(c.mappings[2].schedule, None, "every --interval");

    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: [x]\n    interval: 1h\n    schedule: \"0 3 * * *\"\n"
    ));
    assert!(
        e.starts_with(
            "6:15: mappings[0] (source a): schedule: a mapping takes interval or schedule, not both"
        ),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - source: a\n    targets: [x]\n    schedule: \"0 25 * * *\"\n"
    ));
    assert!(
        e.starts_with(
            "5:15: mappings[0] (source a): schedule: \"0 25 * * *\" is not a cron expression"
        ),
        "{e}"
    );
    let e = error(&format!(
        "{HEAD}  - {{ source: a, targets: [x], interval: 100ms }}\n"
    ));
    assert!(
        e.contains("interval: interval \"100ms\" is shorter than a second"),
        "{e}"
    );
}

/// A site config holding only `registries:` (docs/airgap.md, commands.md, getting-started.md)
/// is what `ferry import`, `copy`, `tags`, `inspect` and `doctor` read; `sync` still refuses it,
/// naming the field, because it would mirror nothing.
#[test]
fn a_registries_only_config_is_read_for_the_registries_and_refused_for_a_sync() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.yaml");
    std::fs::write(
        &path,
        "version: 1\nregistries:\n  - host: registry.internal:5000\n    insecure: true\n",
    )
    .unwrap();
    let site = ferry_config::load_registries(&path).expect("a registries-only config loads");
    assert!(site.mappings.is_empty());
    assert_eq!(site.registries.len(), 1);
    assert_eq!(site.registries[0].host, "registry.internal:5000");
    let refused = ferry_config::load(&path).unwrap_err().to_string();
    assert!(
        refused.contains("no mappings: nothing to mirror") && !refused.contains("missing field"),
        "{refused}"
    );
}

/// docs/airgap.md's site config, as written there (its YAML block under "The site config"):
/// `auth:` with `username` and `password` and no `type` is basic.
#[test]
fn the_airgap_site_config_parses_and_its_untyped_auth_is_basic() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/airgap.md"))
            .unwrap();
    let after = doc
        .split_once("### The site config")
        .expect("the section")
        .1;
    let block = after
        .split_once("```yaml\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a yaml block")
        .0;
    let env = |name: &str| (name == "MIRROR_PASSWORD").then(|| "site-s3cret".to_owned());
    let site = ferry_config::parse_registries(block, Path::new("site.yaml"), &env)
        .unwrap_or_else(|e| panic!("{e}\n{block}"));
    match &site.registry_for("registry.internal").auth {
        AuthSettings::Basic { username, password } => {
            assert_eq!(username, "mirror");
            assert_eq!(password.expose(), "site-s3cret");
        }
        other => panic!("{other:?}"),
    }
}

/// An `auth:` whose fields do not fit its type (given or implied) is refused naming the field;
/// no `type` and no `username`/`password` asks for the type.
#[test]
fn an_auth_without_a_type_or_with_foreign_fields_is_refused_by_name() {
    let at = |auth: &str| {
        error(&format!(
            "registries:\n  - host: ghcr.io\n    auth: {auth}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
        ))
    };
    let e = at("{ username: u }");
    assert!(e.contains("missing field `password` (type basic)"), "{e}");
    let e = at("{ password: hunter2 }");
    assert!(
        e.contains("missing field `username`") && !e.contains("hunter2"),
        "{e}"
    );
    let e = at("{ token: t0ken-value }");
    assert!(e.contains("missing field `type`"), "{e}");
    let e = at("{ type: token, token: t0ken-value, username: u }");
    assert!(
        e.contains("unknown field `username` for type token, expected `token`"),
        "{e}"
    );
    let e = at("{ username: u, password: hunter2, region: eu-west-1 }");
    assert!(e.contains("unknown field `region` for type basic"), "{e}");
    assert!(e.contains("registries[0] (host ghcr.io): auth"), "{e}");
    let e = at("{ type: anonymous, path: /x }");
    assert!(e.contains("expected no other field"), "{e}");
    // A given type still decides: basic spelled out, token, anonymous.
    let config = load(&format!(
        "registries:\n  - host: ghcr.io\n    auth: {{ type: token, token: abc }}\n{HEAD}  - {{ source: a, targets: [x] }}\n"
    ))
    .unwrap();
    assert!(matches!(
        config.registry_for("ghcr.io").auth,
        AuthSettings::Token { .. }
    ));
}
