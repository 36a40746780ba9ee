use super::*;

fn platforms(texts: &[&str]) -> Vec<Platform> {
    texts.iter().map(|t| Platform::parse(t).unwrap()).collect()
}

fn index(platforms: &[(&str, &str, Option<&str>)]) -> Manifest {
    let children: Vec<_> = platforms
        .iter()
        .enumerate()
        .map(|(i, (os, arch, var))| {
            let mut p = serde_json::json!({"os": os, "architecture": arch});
            if let Some(v) = var {
                p["variant"] = serde_json::json!(v);
            }
            serde_json::json!({
                "mediaType": media::OCI_MANIFEST,
                "digest": format!("sha256:{:064x}", i),
                "size": 1,
                "platform": p
            })
        })
        .collect();
    let bytes = Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": media::OCI_INDEX, "manifests": children
        }))
        .unwrap(),
    );
    Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: media::OCI_INDEX.into(),
    }
}

#[test]
fn keeps_only_the_wanted_platforms_and_changes_the_digest() {
    let m = index(&[
        ("linux", "amd64", None),
        ("linux", "arm64", Some("v8")),
        ("linux", "arm", Some("v7")),
        ("windows", "amd64", None),
    ]);
    let wanted = platforms(&["linux/amd64", "linux/arm64"]);
    let f = filter_index(&m, &wanted).unwrap().expect("rewritten");
    assert_ne!(f.digest, m.digest);
    let v: serde_json::Value = serde_json::from_slice(&f.bytes).unwrap();
    let archs: Vec<_> = v["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["platform"]["architecture"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(archs, ["amd64", "arm64"]);
    // Deterministic.
    assert_eq!(filter_index(&m, &wanted).unwrap().unwrap().digest, f.digest);
}

#[test]
fn leaves_the_bytes_alone_when_everything_is_kept_or_nothing_is_asked() {
    let m = index(&[("linux", "amd64", None), ("linux", "arm64", Some("v8"))]);
    assert_eq!(filter_index(&m, &[]).unwrap(), None);
    let all = platforms(&["linux/amd64", "linux/arm64/v8"]);
    assert_eq!(filter_index(&m, &all).unwrap(), None);
    assert!(filter_index(&m, &platforms(&["linux/s390x"])).is_err());
}

fn problem(text: &str) -> PlatformProblem {
    match Platform::parse(text) {
        Ok(p) => panic!("{text:?} parsed as {p:?}"),
        Err(e) => {
            assert_eq!(e.input, text);
            e.problem
        }
    }
}

#[test]
fn parse_takes_os_arch_and_an_optional_variant_and_display_gives_the_text_back() {
    let p = Platform::parse("linux/amd64").unwrap();
    assert_eq!(
        (p.os(), p.architecture(), p.variant()),
        ("linux", "amd64", None)
    );
    assert_eq!(p.to_string(), "linux/amd64");
    let p = Platform::parse("linux/arm64/v8").unwrap();
    assert_eq!(
        (p.os(), p.architecture(), p.variant()),
        ("linux", "arm64", Some("v8"))
    );
    assert_eq!(p.to_string(), "linux/arm64/v8");
    // Equal to the text it came from, and to nothing else.
    assert_eq!(p, "linux/arm64/v8");
    assert_eq!(p, "linux/arm64/v8".to_owned());
    for other in [
        "linux/arm64",
        "linux/arm64/v8/",
        "linux/arm64/v8/x",
        "linux/arm64/v7",
        "",
    ] {
        assert_ne!(p, other);
    }
    assert_ne!(Platform::parse("linux/arm64").unwrap(), "linux/arm64/v8");
}

#[test]
fn parse_refuses_empty_parts() {
    for text in [
        "",
        "/",
        "//",
        "/amd64",
        "linux/",
        "linux//amd64",
        "linux/amd64/",
        "//v8",
    ] {
        let expected = if text.is_empty() {
            PlatformProblem::NoArchitecture
        } else {
            PlatformProblem::EmptyPart
        };
        assert_eq!(problem(text), expected, "{text:?}");
    }
    assert_eq!(problem("linux"), PlatformProblem::NoArchitecture);
}

#[test]
fn parse_refuses_more_than_three_parts() {
    for text in [
        "a/b/c/d",
        "linux/arm64/v8/",
        "linux/arm64/v8/extra",
        "a/b/c/d/e/f",
    ] {
        assert_eq!(problem(text), PlatformProblem::TooManyParts, "{text:?}");
    }
}

#[test]
fn parse_refuses_control_characters_and_whitespace_anywhere() {
    for text in [
        "linux/amd64\n",
        "linux\n/amd64",
        "linux/amd64\0",
        "linux/\tamd64",
        "linux/amd64/v8\r",
        "linux/amd64\u{7f}",
        "linux/amd64\u{85}",
        "\u{1b}[31mlinux/amd64",
        " linux/amd64",
        "linux/amd64 ",
        "linux/amd 64",
        "linux/amd64\u{a0}",
        "linux/amd64\u{2003}",
        "linux/amd64\u{3000}",
        // Checked before the parts are counted.
        "\n",
        "a/b/c/d\n",
    ] {
        assert_eq!(problem(text), PlatformProblem::Character, "{text:?}");
    }
    // The error shows the input escaped.
    let e = Platform::parse("linux/amd64\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid platform \"linux/amd64\\n\": it holds a control character or whitespace"
    );
}

#[test]
fn parse_handles_very_long_input() {
    let long = "a".repeat(1 << 20);
    let text = format!("linux/{long}/v8");
    let p = Platform::parse(&text).unwrap();
    assert_eq!(p.architecture(), long);
    assert_eq!(p.to_string(), text);
    assert_eq!(problem(&"/".repeat(1 << 20)), PlatformProblem::TooManyParts);
    assert_eq!(
        problem(&"a/".repeat(1 << 20)),
        PlatformProblem::TooManyParts
    );
    assert_eq!(problem(&format!("{text}\u{0}")), PlatformProblem::Character);
    assert_eq!(problem(&long), PlatformProblem::NoArchitecture);
}

fn child(os: &str, arch: &str, variant: Option<&str>) -> serde_json::Value {
    let mut p = serde_json::json!({"os": os, "architecture": arch});
    if let Some(v) = variant {
        p["variant"] = serde_json::json!(v);
    }
    p
}

/// containerd's normalization table (platforms/database.go `normalizeArch`, `normalizeOS`):
/// each row is what a user or an index may write, and what it is compared as.
#[test]
fn normalization_follows_containerds_table() {
    for ((os, arch, variant), (n_os, n_arch, n_variant)) in [
        (("linux", "amd64", ""), ("linux", "amd64", "")),
        (("linux", "x86_64", ""), ("linux", "amd64", "")),
        (("linux", "x86-64", ""), ("linux", "amd64", "")),
        (("linux", "amd64", "v1"), ("linux", "amd64", "")),
        (("linux", "amd64", "v3"), ("linux", "amd64", "v3")),
        (("linux", "i386", "v7"), ("linux", "386", "")),
        (("linux", "386", ""), ("linux", "386", "")),
        (("linux", "aarch64", ""), ("linux", "arm64", "")),
        (("linux", "arm64", "v8"), ("linux", "arm64", "")),
        (("linux", "arm64", "8"), ("linux", "arm64", "")),
        (("linux", "arm64", "v8.0"), ("linux", "arm64", "")),
        (("linux", "arm64", "9"), ("linux", "arm64", "v9")),
        (("linux", "arm64", "9.0"), ("linux", "arm64", "v9")),
        (("linux", "arm64", "v9.0"), ("linux", "arm64", "v9")),
        (("linux", "arm64", "v8.2"), ("linux", "arm64", "v8.2")),
        (("linux", "armhf", ""), ("linux", "arm", "v7")),
        (("linux", "armel", ""), ("linux", "arm", "v6")),
        (("linux", "arm", ""), ("linux", "arm", "v7")),
        (("linux", "arm", "7"), ("linux", "arm", "v7")),
        (("linux", "arm", "5"), ("linux", "arm", "v5")),
        (("linux", "arm", "6"), ("linux", "arm", "v6")),
        (("linux", "arm", "8"), ("linux", "arm", "v8")),
        (("linux", "arm", "v6"), ("linux", "arm", "v6")),
        (("linux", "arm", "V6"), ("linux", "arm", "v6")),
        (("Linux", "AMD64", ""), ("linux", "amd64", "")),
        (("macos", "arm64", ""), ("darwin", "arm64", "")),
        (("windows", "amd64", ""), ("windows", "amd64", "")),
        (("linux", "riscv64", "rva22"), ("linux", "riscv64", "rva22")),
        (("unknown", "unknown", ""), ("unknown", "unknown", "")),
    ] {
        assert_eq!(
            Normalized::of(os, arch, variant),
            Normalized {
                os: n_os.into(),
                architecture: n_arch.into(),
                variant: n_variant.into(),
            },
            "{os}/{arch}/{variant}"
        );
    }
}

#[test]
fn arm64_with_and_without_v8_select_the_same_child() {
    for wanted in ["linux/arm64", "linux/arm64/v8", "linux/aarch64"] {
        let wanted = Platform::parse(wanted).unwrap();
        assert!(wanted.matches(&child("linux", "arm64", None)), "{wanted}");
        assert!(
            wanted.matches(&child("linux", "arm64", Some("v8"))),
            "{wanted}"
        );
        assert!(
            !wanted.matches(&child("linux", "arm64", Some("v9"))),
            "{wanted}"
        );
        assert!(
            !wanted.matches(&child("linux", "arm", Some("v8"))),
            "{wanted}"
        );
    }
}

#[test]
fn arm_means_v7_unless_a_variant_is_given() {
    let arm = Platform::parse("linux/arm").unwrap();
    assert!(arm.matches(&child("linux", "arm", Some("v7"))));
    assert!(
        arm.matches(&child("linux", "arm", None)),
        "no variant is v7"
    );
    assert!(!arm.matches(&child("linux", "arm", Some("v6"))));
    assert!(!arm.matches(&child("linux", "arm", Some("v5"))));
    let v6 = Platform::parse("linux/arm/v6").unwrap();
    assert!(v6.matches(&child("linux", "arm", Some("v6"))));
    assert!(v6.matches(&child("linux", "armel", None)));
    assert!(!v6.matches(&child("linux", "arm", None)));
    // An arm/v7 filter selects a child that names no variant.
    let v7 = Platform::parse("linux/arm/v7").unwrap();
    assert!(v7.matches(&child("linux", "arm", None)));
    assert!(v7.matches(&child("linux", "armhf", None)));
}

#[test]
fn an_unknown_variant_is_kept_as_written_and_matches_only_itself() {
    let p = Platform::parse("linux/arm64/V8.2").unwrap();
    assert_eq!(p.to_string(), "linux/arm64/V8.2", "printed as written");
    assert_eq!(p.normalized().variant, "v8.2");
    assert!(p.matches(&child("linux", "arm64", Some("v8.2"))));
    assert!(!p.matches(&child("linux", "arm64", None)));
    assert!(!Platform::parse("linux/arm64").unwrap().matches(&child(
        "linux",
        "arm64",
        Some("v8.2")
    )));
    // amd64 micro-architecture levels are variants too: exact, as containerd compares them.
    let v3 = Platform::parse("linux/amd64/v3").unwrap();
    assert!(v3.matches(&child("linux", "amd64", Some("v3"))));
    assert!(!v3.matches(&child("linux", "amd64", None)));
    assert!(
        Platform::parse("linux/amd64")
            .unwrap()
            .matches(&child("linux", "amd64", Some("v1")))
    );
}

fn attestation(of: usize, n: usize) -> serde_json::Value {
    serde_json::json!({
        "mediaType": media::OCI_MANIFEST,
        "digest": format!("sha256:{:064x}", 100 + n),
        "size": 1,
        "platform": {"os": "unknown", "architecture": "unknown"},
        "annotations": {
            "vnd.docker.reference.type": "attestation-manifest",
            "vnd.docker.reference.digest": format!("sha256:{:064x}", of)
        }
    })
}

#[test]
fn a_buildx_attestation_follows_the_platform_it_attests() {
    let base = index(&[
        ("linux", "amd64", None),
        ("linux", "arm64", Some("v8")),
        ("linux", "arm", Some("v7")),
    ]);
    let mut value: serde_json::Value = serde_json::from_slice(&base.bytes).unwrap();
    let children = value["manifests"].as_array_mut().unwrap();
    children.push(attestation(0, 0));
    children.push(attestation(1, 1));
    children.push(attestation(2, 2));
    // An unknown/unknown child that is no attestation is not kept by any platform filter.
    children.push(serde_json::json!({
        "mediaType": media::OCI_MANIFEST,
        "digest": format!("sha256:{:064x}", 200),
        "size": 1,
        "platform": {"os": "unknown", "architecture": "unknown"}
    }));
    let bytes = Bytes::from(serde_json::to_vec(&value).unwrap());
    let m = Manifest {
        digest: Digest::of_bytes(Algorithm::Sha256, &bytes),
        bytes,
        media_type: media::OCI_INDEX.into(),
    };
    let f = filter_index(&m, &platforms(&["linux/arm64"]))
        .unwrap()
        .expect("rewritten");
    let v: serde_json::Value = serde_json::from_slice(&f.bytes).unwrap();
    let kept: Vec<_> = v["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["digest"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kept,
        [format!("sha256:{:064x}", 1), format!("sha256:{:064x}", 101)],
        "arm64 and its attestation only"
    );
    // Only attestations left is no match.
    assert!(filter_index(&m, &platforms(&["unknown/unknown"])).is_ok());
    assert!(filter_index(&m, &platforms(&["linux/s390x"])).is_err());
}

#[test]
fn a_platform_with_a_variant_matches_only_that_variant() {
    let wanted = Platform::parse("linux/arm/v7").unwrap();
    assert!(wanted.matches(&serde_json::json!(
        {"os": "linux", "architecture": "arm", "variant": "v7"}
    )));
    for p in [
        serde_json::json!({"os": "linux", "architecture": "arm", "variant": "v6"}),
        serde_json::json!({"os": "linux", "architecture": "arm", "variant": 7}),
    ] {
        assert!(!wanted.matches(&p), "{p}");
    }
}

#[test]
fn os_and_architecture_must_both_match() {
    let wanted = Platform::parse("linux/amd64").unwrap();
    for p in [
        serde_json::json!({"os": "windows", "architecture": "amd64"}),
        serde_json::json!({"os": "linux", "architecture": "arm64"}),
        serde_json::json!({"architecture": "amd64"}),
        serde_json::json!({"os": "linux"}),
        serde_json::json!({"os": "linux", "architecture": null}),
        serde_json::json!({}),
        serde_json::json!("linux/amd64"),
        serde_json::json!(null),
    ] {
        assert!(!wanted.matches(&p), "{p}");
    }
    assert!(wanted.matches(&serde_json::json!(
        {"os": "linux", "architecture": "amd64", "os.version": "10"}
    )));
}
