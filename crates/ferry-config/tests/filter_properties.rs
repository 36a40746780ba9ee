//! Property tests for lenient tag versions and the tag filter pipeline.

use std::collections::BTreeSet;

use ferry_config::filter::{Reason, TagFilter, TagFilterSpec, TagSort, TagVersion};
use proptest::prelude::*;

fn tag_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        // versions, lenient forms and variants
        (
            prop::option::of(Just("v")),
            0u64..20,
            prop::option::of(0u64..20),
            prop::option::of(0u64..20),
            prop::option::of(prop_oneof![
                Just("-rc1".to_string()),
                Just("-rc10".to_string()),
                Just("-beta.2".to_string()),
                Just("-alpine".to_string()),
                Just("-rc2-alpine".to_string()),
                Just("-slim-bookworm".to_string()),
            ]),
        )
            .prop_map(|(v, a, b, c, s)| {
                let mut t = format!("{}{a}", v.unwrap_or(""));
                if let Some(b) = b {
                    t += &format!(".{b}");
                    if let Some(c) = c {
                        t += &format!(".{c}");
                    }
                }
                t + &s.unwrap_or_default()
            }),
        "[a-z0-9._-]{1,12}",
    ]
}

proptest! {
    #[test]
    fn version_parse_never_panics(text in "\\PC{0,24}") {
        let _ = TagVersion::parse(&text);
    }

    #[test]
    fn version_display_round_trips(tag in tag_strategy()) {
        if let Some(v) = TagVersion::parse(&tag) {
            let again = TagVersion::parse(&v.to_string());
            prop_assert_eq!(again.as_ref(), Some(&v), "{} -> {}", tag, v);
        }
    }

    #[test]
    fn version_order_is_consistent(a in tag_strategy(), b in tag_strategy(), c in tag_strategy()) {
        let (Some(a), Some(b), Some(c)) = (TagVersion::parse(&a), TagVersion::parse(&b), TagVersion::parse(&c)) else {
            return Ok(());
        };
        prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
        prop_assert_eq!(a.cmp(&b) == std::cmp::Ordering::Equal, a == b);
        if a <= b && b <= c {
            prop_assert!(a <= c);
        }
        // Without variants and build metadata the order is plain semver precedence.
        if a.variant.is_none() && b.variant.is_none() {
            prop_assert_eq!(a.cmp(&b), a.version.cmp_precedence(&b.version));
        }
    }

    #[test]
    fn plain_versions_read_as_semver(major in 0u64..1000, minor in 0u64..1000, patch in 0u64..1000) {
        let v = TagVersion::parse(&format!("v{major}.{minor}.{patch}")).unwrap();
        prop_assert_eq!(v.version, semver::Version::new(major, minor, patch));
        prop_assert_eq!(v.variant, None);
    }

    #[test]
    fn pipeline_invariants(
        listed in prop::collection::vec(tag_strategy(), 0..30),
        exact in prop::collection::vec("[a-z0-9]{1,4}", 0..3),
        latest in prop::option::of(1usize..6),
        use_range in any::<bool>(),
        alpha in any::<bool>(),
        exclude_rc in any::<bool>(),
        shuffle_seed in any::<u64>(),
    ) {
        let spec = TagFilterSpec {
            include: None,
            exclude: if exclude_rc { vec!["*-rc*".into()] } else { vec![] },
            regex: None,
            deny: vec![],
            semver: use_range.then(|| ">=2, <15".to_string()),
            sort: Some(if alpha { TagSort::Alpha } else { TagSort::Semver }),
            latest,
            exact: exact.clone(),
        };
        let filter = TagFilter::compile(&spec).unwrap();
        let selection = filter.select(&listed);

        let input: BTreeSet<&String> = listed.iter().collect();
        // selected ⊆ input (exact tags are only added when listed)
        for tag in &selection.selected {
            prop_assert!(input.contains(tag), "{} not listed", tag);
        }
        // every listed tag is accounted for exactly once
        let selected: BTreeSet<&String> = selection.selected.iter().collect();
        prop_assert_eq!(selected.len(), selection.selected.len());
        let out: BTreeSet<&String> = selection.filtered_out.iter().map(|(t, _)| t).collect();
        prop_assert_eq!(out.len(), selection.filtered_out.len());
        prop_assert!(selected.is_disjoint(&out));
        prop_assert_eq!(selected.len() + out.len(), input.len());
        // latest N keeps at most N besides the exact tags
        if let Some(n) = latest {
            let non_exact = selection.selected.iter().filter(|t| !exact.contains(t)).count();
            prop_assert!(non_exact <= n);
        }
        // listed exact tags are always selected; unlisted ones are reported missing
        for tag in &exact {
            prop_assert_eq!(selected.contains(tag), input.contains(tag));
            prop_assert_eq!(selection.missing_exact.contains(tag), !input.contains(tag));
        }
        // with a range, every selected non-exact tag is a version inside it
        if use_range {
            for tag in selection.selected.iter().filter(|t| !exact.contains(t)) {
                let v = TagVersion::parse(tag);
                prop_assert!(v.is_some_and(|v| semver::VersionReq::parse(">=2, <15").unwrap().matches(&v.version)));
            }
        }
        // the selection comes out in the documented sort order, exact tags included
        let mut sorted = selection.selected.clone();
        sorted.sort_by(|a, b| {
            if alpha {
                return a.cmp(b);
            }
            match (TagVersion::parse(a), TagVersion::parse(b)) {
                (Some(x), Some(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
                (Some(_), None) => std::cmp::Ordering::Greater,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (None, None) => a.cmp(b),
            }
        });
        prop_assert_eq!(&sorted, &selection.selected);
        // the selection does not depend on the listing's order
        let mut reordered = listed.clone();
        let mut state = shuffle_seed | 1;
        for i in (1..reordered.len()).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            reordered.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let again = filter.select(&reordered);
        prop_assert_eq!(&again.selected, &selection.selected);
        let mut a: Vec<_> = again.filtered_out.clone();
        let mut b: Vec<_> = selection.filtered_out.clone();
        a.sort_by(|x, y| x.0.cmp(&y.0));
        b.sort_by(|x, y| x.0.cmp(&y.0));
        prop_assert_eq!(a, b);
        // BeyondLatest only appears when latest is set
        if latest.is_none() {
            let beyond = selection.filtered_out.iter().any(|(_, r)| matches!(r, Reason::BeyondLatest { .. }));
            prop_assert!(!beyond);
        }
    }
}
