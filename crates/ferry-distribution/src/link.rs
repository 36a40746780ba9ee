//! Reading the `rel="next"` target out of an RFC 8288 `Link` header, which is how registries
//! page tag lists and referrers. The caller resolves the URI-reference against the request URL.

/// The URI-reference of the first link whose `rel` includes `next`, exactly as written between
/// `<` and `>`. `None` when there is no such link or the value is too malformed to read.
pub fn next_link(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut pos = 0;
    loop {
        // Between links: whitespace and commas.
        while matches!(bytes.get(pos), Some(b' ' | b'\t' | b',')) {
            pos += 1;
        }
        if bytes.get(pos) != Some(&b'<') {
            return None;
        }
        let target_start = pos + 1;
        let target_len = bytes.get(target_start..)?.iter().position(|&b| b == b'>')?;
        let target_end = target_start + target_len;
        pos = target_end + 1;

        let mut is_next = false;
        let mut seen_rel = false;
        // Parameters: `; name[=value]`, until a comma or the end.
        loop {
            while matches!(bytes.get(pos), Some(b' ' | b'\t')) {
                pos += 1;
            }
            match bytes.get(pos) {
                None | Some(b',') => break,
                Some(b';') => pos += 1,
                Some(_) => return None,
            }
            while matches!(bytes.get(pos), Some(b' ' | b'\t')) {
                pos += 1;
            }
            let name_start = pos;
            while bytes
                .get(pos)
                .is_some_and(|b| !matches!(b, b'=' | b';' | b',' | b' ' | b'\t'))
            {
                pos += 1;
            }
            let name = &bytes[name_start..pos];
            while matches!(bytes.get(pos), Some(b' ' | b'\t')) {
                pos += 1;
            }
            let mut param_value = Vec::new();
            if bytes.get(pos) == Some(&b'=') {
                pos += 1;
                while matches!(bytes.get(pos), Some(b' ' | b'\t')) {
                    pos += 1;
                }
                if bytes.get(pos) == Some(&b'"') {
                    pos += 1;
                    loop {
                        match bytes.get(pos) {
                            None => return None,
                            Some(b'"') => {
                                pos += 1;
                                break;
                            }
                            Some(b'\\') => {
                                if let Some(&escaped) = bytes.get(pos + 1) {
                                    param_value.push(escaped);
                                }
                                pos += 2;
                            }
                            Some(&other) => {
                                param_value.push(other);
                                pos += 1;
                            }
                        }
                    }
                } else {
                    while bytes
                        .get(pos)
                        .is_some_and(|b| !matches!(b, b';' | b',' | b' ' | b'\t'))
                    {
                        param_value.push(bytes[pos]);
                        pos += 1;
                    }
                }
            }
            // Only the first `rel` of a link counts (RFC 8288 section 3.3).
            if name.eq_ignore_ascii_case(b"rel") && !seen_rel {
                seen_rel = true;
                is_next = param_value
                    .split(|b| b.is_ascii_whitespace())
                    .any(|relation| relation.eq_ignore_ascii_case(b"next"));
            }
        }
        if is_next {
            // '<' and '>' are ASCII, so the slice sits on char boundaries.
            return value.get(target_start..target_end).map(str::to_owned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_a_registry_next_link() {
        assert_eq!(
            next_link(r#"</v2/library/alpine/tags/list?last=3.1&n=100>; rel="next""#).as_deref(),
            Some("/v2/library/alpine/tags/list?last=3.1&n=100")
        );
    }

    #[test]
    fn accepts_unquoted_and_case_variants() {
        assert_eq!(next_link("<a>;rel=next").as_deref(), Some("a"));
        assert_eq!(next_link("<a> ; REL = \"Next\"").as_deref(), Some("a"));
    }

    #[test]
    fn picks_the_next_link_among_several() {
        let value = r#"<https://r.io/first>; rel="first", <https://r.io/p?x=1,2>; title="a, b; c"; rel="prev next", <https://r.io/last>; rel=last"#;
        assert_eq!(next_link(value).as_deref(), Some("https://r.io/p?x=1,2"));
        let value = r#"<a>; rel="prev", <b>; rel="next""#;
        assert_eq!(next_link(value).as_deref(), Some("b"));
    }

    #[test]
    fn ignores_links_that_are_not_next() {
        assert_eq!(next_link(r#"<a>; rel="prev""#), None);
        assert_eq!(next_link(r#"<a>; rel="nextpage""#), None);
        assert_eq!(next_link(r#"<a>; title="rel=next""#), None);
        assert_eq!(next_link(r#"<a>; rel="prev"; rel="next""#), None);
        assert_eq!(next_link(""), None);
        assert_eq!(next_link("<a; rel=next"), None);
        assert_eq!(next_link("a; rel=next"), None);
        assert_eq!(next_link(r#"<a>; rel="next"#), None);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,80}") {
            let _ = next_link(&s);
        }

        #[test]
        fn never_panics_on_link_like_text(s in "[<>;,=\" \\\\a-z/é]{0,60}") {
            let _ = next_link(&s);
        }

        #[test]
        fn finds_a_generated_next_link(
            target in "[a-zA-Z0-9/?&=.,;:_-]{0,30}",
            before in proptest::collection::vec("[a-z]{1,5}", 0..3),
        ) {
            let mut links: Vec<String> = before.iter().map(|t| format!("<{t}>; rel=\"prev\"")).collect();
            links.push(format!("<{target}>; rel=\"next\""));
            prop_assert_eq!(next_link(&links.join(", ")), Some(target));
        }
    }
}
