//! The mapping → pull rule computation: which mappings keep their path (prefix rules), which
//! rename (exact rules), which a format refuses and why, and what is no rule at all.

use std::path::Path;

use super::{Format, Scope, pull_rules};

fn rules(mappings: &str) -> super::PullRules {
    let text = format!(
        "version: 1\nregistries:\n  - host: mirror.local:5000\n    insecure: true\n\
         target_groups:\n  m: [\"mirror.local:5000/m\"]\nmappings:\n{mappings}"
    );
    let config = crate::parse(&text, Path::new("mirror.yaml"), &|_| None).expect("config");
    pull_rules(&config)
}

#[test]
fn a_mapping_keeping_its_path_is_a_prefix_rule_every_format_says() {
    let r = rules(
        "  - source: docker.io/library/alpine\n    targets: [mirror.local:5000/library/alpine]\n",
    );
    assert_eq!(r.rules.len(), 1, "{r:?}");
    let rule = &r.rules[0];
    assert_eq!(rule.source(), "docker.io/library/alpine");
    assert_eq!(rule.mirror(), "mirror.local:5000/library/alpine");
    assert_eq!(rule.scope, Scope::Prefix);
    assert!(rule.digests_kept && rule.mirror_insecure && !rule.source_insecure);
    for format in [
        Format::Containerd,
        Format::RegistriesConf,
        Format::Idms,
        Format::Itms,
    ] {
        assert_eq!(format.reason_refused(rule), None, "{format:?}");
    }
}

#[test]
fn a_renaming_mapping_is_exact_and_containerd_names_why_it_cannot() {
    let r = rules(
        "  - source: docker.io/a/b\n    targets: [mirror.local:5000/m/c]\n\
         \x20 - source: docker.io/library/nginx\n    target_group: m\n",
    );
    assert_eq!(r.rules.len(), 2, "{r:?}");
    for rule in &r.rules {
        assert_eq!(rule.scope, Scope::Exact, "{rule:?}");
        let why = Format::Containerd.reason_refused(rule).expect("refused");
        assert!(why.contains(&rule.mirror()), "{why}");
        assert_eq!(Format::RegistriesConf.reason_refused(rule), None);
        assert_eq!(Format::Itms.reason_refused(rule), None);
    }
    assert_eq!(r.rules[1].mirror(), "mirror.local:5000/m/library/nginx");
}

#[test]
fn digest_mirrors_only_where_the_mapping_keeps_digests() {
    let r = rules(
        "  - source: docker.io/library/a\n    targets: [mirror.local:5000/library/a]\n    platforms: [linux/amd64]\n\
         \x20 - source: docker.io/library/b\n    targets: [mirror.local:5000/library/b]\n    platforms: [linux/amd64]\n    platforms_keep_digest: true\n",
    );
    let filtered = &r.rules[0];
    assert!(!filtered.digests_kept);
    let why = Format::Idms.reason_refused(filtered).expect("refused");
    assert!(why.contains("platforms_keep_digest"), "{why}");
    assert_eq!(Format::Itms.reason_refused(filtered), None);
    assert!(r.rules[1].digests_kept);
    assert_eq!(Format::Idms.reason_refused(&r.rules[1]), None);
}

#[test]
fn layouts_and_archives_are_named_not_ruled() {
    let r = rules(
        "  - source: oci:./layout/app\n    targets: [mirror.local:5000/app]\n\
         \x20 - source: docker.io/library/c\n    targets: [mirror.local:5000/library/c, \"oci:./out/c\"]\n",
    );
    assert_eq!(r.rules.len(), 1, "{r:?}");
    assert_eq!(r.unexpressed.len(), 2, "{r:?}");
    assert_eq!(r.unexpressed[0].mapping, 0);
    assert!(r.unexpressed[0].reason.contains("not a registry"));
    assert_eq!(r.unexpressed[1].target.as_deref(), Some("oci:./out/c"));
}

#[test]
fn a_whole_registry_mapping_is_a_prefix_rule_below_its_prefix() {
    let r = rules(
        "  - source: \"ghcr.io/team/**\"\n    targets: [mirror.local:5000]\n\
         \x20 - source: \"quay.io/org/*\"\n    target_group: m\n",
    );
    assert_eq!(r.rules.len(), 2, "{r:?}");
    let deep = &r.rules[0];
    assert_eq!(
        (deep.source().as_str(), deep.mirror().as_str()),
        ("ghcr.io/team", "mirror.local:5000")
    );
    assert_eq!(deep.scope, Scope::Prefix);
    let one_level = &r.rules[1];
    assert_eq!(one_level.mirror(), "mirror.local:5000/m/org");
    assert_eq!(one_level.scope, Scope::Exact);
}
