//! Parsing `WWW-Authenticate` header values (RFC 7235) into the challenges a registry offers:
//! Bearer with its realm, service, scope and error, Basic, and any other scheme by name.

use std::fmt;

/// One authentication challenge from a `WWW-Authenticate` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `Bearer`: get a token from `realm` and send it.
    Bearer {
        /// The token endpoint, as the server wrote it (checked before use, not here).
        realm: String,
        /// The `service` to name in the token request.
        service: Option<String>,
        /// The scope the request needed, when the server says.
        scope: Option<String>,
        /// Why the presented token was refused (`insufficient_scope`, `invalid_token`).
        error: Option<String>,
    },
    /// `Basic`: send the user name and password.
    Basic {
        /// The protection space, when given; informational.
        realm: Option<String>,
    },
    /// A scheme ferry does not speak; kept by name, as the server spelled it.
    Other {
        /// The scheme name.
        scheme: String,
    },
}

/// A `WWW-Authenticate` value that could not be parsed, with the value and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    /// The header was present but held nothing.
    #[error("WWW-Authenticate value is empty")]
    Empty,
    /// Something other than the grammar allows at a position.
    #[error("WWW-Authenticate value {input:?}: expected {expected} at byte {position}")]
    Syntax {
        /// The whole header value.
        input: String,
        /// Byte offset of the problem.
        position: usize,
        /// What the grammar allows there.
        expected: &'static str,
    },
    /// A quoted string runs to the end of the value.
    #[error(
        "WWW-Authenticate value {input:?}: quoted string starting at byte {position} is not closed"
    )]
    UnterminatedQuote {
        /// The whole header value.
        input: String,
        /// Byte offset of the opening quote.
        position: usize,
    },
    /// A Bearer challenge without `realm`: there is nowhere to ask for a token.
    #[error("WWW-Authenticate value {input:?}: Bearer challenge has no realm")]
    BearerWithoutRealm {
        /// The whole header value.
        input: String,
    },
}

/// Parses every challenge in a `WWW-Authenticate` value, in the order given. Scheme and
/// parameter names are case-insensitive; values may be quoted (with `\` escapes) or bare.
pub fn parse_www_authenticate(value: &str) -> Result<Vec<Challenge>, ChallengeError> {
    let mut parser = Parser {
        input: value,
        bytes: value.as_bytes(),
        pos: 0,
    };
    let mut challenges = Vec::new();
    loop {
        parser.skip_whitespace_and_commas();
        if parser.at_end() {
            break;
        }
        let scheme = parser
            .token()
            .ok_or_else(|| parser.syntax("an authentication scheme"))?;
        let mut params: Vec<(String, String)> = Vec::new();
        let spaced = parser.skip_whitespace() > 0;
        let token68_end = if spaced { parser.token68_end() } else { None };
        if let Some(end) = token68_end {
            // A token68 credential blob (e.g. `Negotiate abc==`); no scheme ferry uses has one.
            parser.pos = end;
        } else {
            loop {
                let before = parser.pos;
                parser.skip_whitespace_and_commas();
                if parser.at_end() {
                    break;
                }
                let name = parser
                    .token()
                    .ok_or_else(|| parser.syntax("a parameter name or a scheme"))?;
                parser.skip_whitespace();
                if parser.peek() != Some(b'=') {
                    // A bare token here starts the next challenge.
                    parser.pos = before;
                    break;
                }
                parser.pos += 1;
                parser.skip_whitespace();
                let value = if parser.peek() == Some(b'"') {
                    parser.quoted_string()?
                } else {
                    parser
                        .bare_value()
                        .ok_or_else(|| parser.syntax("a parameter value"))?
                };
                params.push((name.to_ascii_lowercase(), value));
            }
        }
        challenges.push(build_challenge(value, scheme, params)?);
    }
    if challenges.is_empty() {
        return Err(ChallengeError::Empty);
    }
    Ok(challenges)
}

fn build_challenge(
    input: &str,
    scheme: &str,
    mut params: Vec<(String, String)>,
) -> Result<Challenge, ChallengeError> {
    // The first occurrence of a parameter wins.
    let mut take = |name: &str| {
        params
            .iter()
            .position(|(n, _)| n == name)
            .map(|i| params.remove(i).1)
    };
    if scheme.eq_ignore_ascii_case("bearer") {
        let realm = take("realm").ok_or_else(|| ChallengeError::BearerWithoutRealm {
            input: input.to_owned(),
        })?;
        Ok(Challenge::Bearer {
            realm,
            service: take("service"),
            scope: take("scope"),
            error: take("error"),
        })
    } else if scheme.eq_ignore_ascii_case("basic") {
        Ok(Challenge::Basic {
            realm: take("realm"),
        })
    } else {
        Ok(Challenge::Other {
            scheme: scheme.to_owned(),
        })
    }
}

struct Parser<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn syntax(&self, expected: &'static str) -> ChallengeError {
        ChallengeError::Syntax {
            input: self.input.to_owned(),
            position: self.pos,
            expected,
        }
    }

    fn skip_whitespace(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn skip_whitespace_and_commas(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.pos += 1;
        }
    }

    /// An RFC 7230 token; `None` when none starts here.
    fn token(&mut self) -> Option<&'a str> {
        let start = self.pos;
        while self.peek().is_some_and(is_tchar) {
            self.pos += 1;
        }
        // Only ASCII bytes were consumed, so both ends are char boundaries.
        (self.pos > start).then(|| &self.input[start..self.pos])
    }

    /// Where a token68 starting here ends, if what follows is a token68 that fills the element.
    fn token68_end(&self) -> Option<usize> {
        let mut i = self.pos;
        let start = i;
        while self.bytes.get(i).is_some_and(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        }) {
            i += 1;
        }
        if i == start {
            return None;
        }
        while self.bytes.get(i) == Some(&b'=') {
            i += 1;
        }
        while matches!(self.bytes.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        matches!(self.bytes.get(i), None | Some(b',')).then_some(i)
    }

    fn quoted_string(&mut self) -> Result<String, ChallengeError> {
        let open = self.pos;
        self.pos += 1;
        let mut text = Vec::new();
        loop {
            match self.peek() {
                None => {
                    return Err(ChallengeError::UnterminatedQuote {
                        input: self.input.to_owned(),
                        position: open,
                    });
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(String::from_utf8_lossy(&text).into_owned());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    if let Some(escaped) = self.peek() {
                        text.push(escaped);
                        self.pos += 1;
                    }
                }
                Some(other) => {
                    text.push(other);
                    self.pos += 1;
                }
            }
        }
    }

    /// An unquoted value. Servers send bare values holding `:`, `/` and more (scopes, realm URLs),
    /// so this takes everything up to a comma or whitespace rather than a strict token.
    fn bare_value(&mut self) -> Option<String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| !matches!(b, b',' | b' ' | b'\t' | b'"'))
        {
            self.pos += 1;
        }
        (self.pos > start)
            .then(|| String::from_utf8_lossy(&self.bytes[start..self.pos]).into_owned())
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

fn write_quoted(f: &mut fmt::Formatter<'_>, value: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in value.chars() {
        if c == '"' || c == '\\' {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

/// Renders a challenge as a header value that [`parse_www_authenticate`] reads back unchanged.
impl fmt::Display for Challenge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Challenge::Bearer {
                realm,
                service,
                scope,
                error,
            } => {
                f.write_str("Bearer realm=")?;
                write_quoted(f, realm)?;
                for (name, value) in [("service", service), ("scope", scope), ("error", error)] {
                    if let Some(value) = value {
                        write!(f, ",{name}=")?;
                        write_quoted(f, value)?;
                    }
                }
                Ok(())
            }
            Challenge::Basic { realm: None } => f.write_str("Basic"),
            Challenge::Basic { realm: Some(realm) } => {
                f.write_str("Basic realm=")?;
                write_quoted(f, realm)
            }
            Challenge::Other { scheme } => f.write_str(scheme),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bearer(realm: &str, service: Option<&str>, scope: Option<&str>) -> Challenge {
        Challenge::Bearer {
            realm: realm.to_owned(),
            service: service.map(str::to_owned),
            scope: scope.map(str::to_owned),
            error: None,
        }
    }

    #[test]
    fn parses_a_registry_bearer_challenge() {
        let value = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull""#;
        assert_eq!(
            parse_www_authenticate(value).unwrap(),
            vec![bearer(
                "https://auth.docker.io/token",
                Some("registry.docker.io"),
                Some("repository:library/alpine:pull")
            )]
        );
    }

    #[test]
    fn parses_several_challenges_in_one_value() {
        let value = r#"Basic realm="x", Bearer realm="y",scope="a b""#;
        assert_eq!(
            parse_www_authenticate(value).unwrap(),
            vec![
                Challenge::Basic {
                    realm: Some("x".into())
                },
                bearer("y", None, Some("a b")),
            ]
        );
        let value = r#"Negotiate, Basic, Bearer realm="r""#;
        assert_eq!(
            parse_www_authenticate(value).unwrap(),
            vec![
                Challenge::Other {
                    scheme: "Negotiate".into()
                },
                Challenge::Basic { realm: None },
                bearer("r", None, None),
            ]
        );
    }

    #[test]
    fn quoted_strings_keep_escapes_and_commas() {
        let value = r#"Bearer realm="a\"b\\c, d", error="insufficient_scope", scope="repository:localhost:5000/a/b:pull,push""#;
        assert_eq!(
            parse_www_authenticate(value).unwrap(),
            vec![Challenge::Bearer {
                realm: r#"a"b\c, d"#.into(),
                service: None,
                scope: Some("repository:localhost:5000/a/b:pull,push".into()),
                error: Some("insufficient_scope".into()),
            }]
        );
    }

    #[test]
    fn names_are_case_insensitive_and_bare_values_allowed() {
        let value = "bEaReR REALM=https://auth.example/token , Service = reg.example,scope=repository:r.io:443/a/b:pull";
        assert_eq!(
            parse_www_authenticate(value).unwrap(),
            vec![bearer(
                "https://auth.example/token",
                Some("reg.example"),
                Some("repository:r.io:443/a/b:pull")
            )]
        );
        assert_eq!(
            parse_www_authenticate("BASIC realm=registry").unwrap(),
            vec![Challenge::Basic {
                realm: Some("registry".into())
            }]
        );
    }

    #[test]
    fn token68_credentials_are_skipped() {
        assert_eq!(
            parse_www_authenticate("Negotiate YII+/ab==, Basic realm=\"x\"").unwrap(),
            vec![
                Challenge::Other {
                    scheme: "Negotiate".into()
                },
                Challenge::Basic {
                    realm: Some("x".into())
                },
            ]
        );
    }

    #[test]
    fn reports_what_was_wrong() {
        assert_eq!(parse_www_authenticate("  , "), Err(ChallengeError::Empty));
        assert!(matches!(
            parse_www_authenticate(r#"Bearer realm="open"#),
            Err(ChallengeError::UnterminatedQuote { position: 13, .. })
        ));
        assert!(matches!(
            parse_www_authenticate(r#"Bearer service="s""#),
            Err(ChallengeError::BearerWithoutRealm { .. })
        ));
        assert!(matches!(
            parse_www_authenticate(r#""Bearer""#),
            Err(ChallengeError::Syntax { position: 0, .. })
        ));
        assert!(matches!(
            parse_www_authenticate("Bearer realm=x, service=,"),
            Err(ChallengeError::Syntax {
                expected: "a parameter value",
                ..
            })
        ));
        let message = parse_www_authenticate("Bearer =x").unwrap_err().to_string();
        assert!(message.contains("Bearer =x"), "{message}");
    }

    fn value() -> impl Strategy<Value = String> {
        "\\PC{0,16}"
    }

    fn challenge() -> impl Strategy<Value = Challenge> {
        prop_oneof![
            (
                value(),
                proptest::option::of(value()),
                proptest::option::of(value()),
                proptest::option::of(value())
            )
                .prop_map(|(realm, service, scope, error)| Challenge::Bearer {
                    realm,
                    service,
                    scope,
                    error
                }),
            proptest::option::of(value()).prop_map(|realm| Challenge::Basic { realm }),
            "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,8}"
                .prop_filter("not a known scheme", |s| {
                    !s.eq_ignore_ascii_case("bearer") && !s.eq_ignore_ascii_case("basic")
                })
                .prop_map(|scheme| Challenge::Other { scheme }),
        ]
    }

    /// Renders like a sloppy server: names in any case, any spacing around separators.
    fn render(challenge: &Challenge, upper: bool, space: &str) -> String {
        let name = |n: &str| {
            if upper {
                n.to_ascii_uppercase()
            } else {
                n.to_owned()
            }
        };
        let quote = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
        match challenge {
            Challenge::Bearer {
                realm,
                service,
                scope,
                error,
            } => {
                let mut out = format!(
                    "{} {}{space}={space}{}",
                    name("Bearer"),
                    name("realm"),
                    quote(realm)
                );
                for (n, v) in [("service", service), ("scope", scope), ("error", error)] {
                    if let Some(v) = v {
                        out.push_str(&format!("{space},{space}{}={}", name(n), quote(v)));
                    }
                }
                out
            }
            Challenge::Basic { realm: None } => name("Basic"),
            Challenge::Basic { realm: Some(r) } => {
                format!("{} {}={}", name("Basic"), name("realm"), quote(r))
            }
            Challenge::Other { scheme } => scheme.clone(),
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,64}") {
            let _ = parse_www_authenticate(&s);
        }

        #[test]
        fn never_panics_on_header_like_text(s in "[a-zA-Z =,\"\\\\:/ \t]{0,64}") {
            let _ = parse_www_authenticate(&s);
        }

        #[test]
        fn display_round_trips(challenges in proptest::collection::vec(challenge(), 1..4)) {
            let value = challenges.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            prop_assert_eq!(parse_www_authenticate(&value).unwrap(), challenges);
        }

        #[test]
        fn sloppy_renderings_round_trip(
            challenges in proptest::collection::vec(challenge(), 1..4),
            upper in any::<bool>(),
            space in prop_oneof![Just(""), Just(" "), Just(" \t ")],
        ) {
            let value = challenges
                .iter()
                .map(|c| render(c, upper, space))
                .collect::<Vec<_>>()
                .join(&format!("{space},{space}"));
            prop_assert_eq!(parse_www_authenticate(&value).unwrap(), challenges);
        }
    }
}
