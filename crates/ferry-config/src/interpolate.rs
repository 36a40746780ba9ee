//! Environment interpolation over mirror.yaml's raw text before YAML parsing: `${VAR}`,
//! `${VAR:-default}`, `${VAR:?message}` and `$$` for a literal `$`; each value stays one string.

/// Text after interpolation, and the values substituted (so errors can redact them).
#[derive(Debug, Default)]
pub struct Interpolated {
    pub text: String,
    pub substituted: Vec<String>,
}

/// An interpolation failure at a 1-based line and column of the original text. The message
/// names the variable, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpolationError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Replaces every `${…}` outside comments. `${VAR}` must be set (an empty value counts as set);
/// `${VAR:-default}` uses the default when VAR is unset or empty; `${VAR:?message}` fails with
/// the message when VAR is unset or empty. A `$` not followed by `{` or `$` stays as written.
/// Every failure is returned, in text order, not only the first.
pub fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Interpolated, Vec<InterpolationError>> {
    let mut out = Interpolated {
        text: String::with_capacity(text.len()),
        substituted: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut flow_depth = 0usize;
    for (line_index, line) in text.split_inclusive('\n').enumerate() {
        let number = line_index + 1;
        interpolate_line(line, number, env, &mut out, &mut flow_depth, &mut errors);
    }
    match errors.is_empty() {
        true => Ok(out),
        false => Err(errors),
    }
}

fn interpolate_line(
    line: &str,
    line_number: usize,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut Interpolated,
    flow_depth: &mut usize,
    errors: &mut Vec<InterpolationError>,
) {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let previous = if i == 0 { b' ' } else { bytes[i - 1] };
        match (quote, b) {
            (None, b'#') if previous == b' ' || previous == b'\t' || i == 0 => {
                out.text.push_str(&line[i..]);
                return;
            }
            (None, b'\'' | b'"') if b" \t:[{,-".contains(&previous) || i == 0 => {
                quote = Some(b);
            }
            (Some(b'"'), b'\\') if i + 1 < bytes.len() => {
                // The backslash and the whole character it escapes (which may be multi-byte).
                let width = 1 + line[i + 1..].chars().next().map_or(0, char::len_utf8);
                out.text.push_str(&line[i..i + width]);
                i += width;
                continue;
            }
            (Some(q), _) if q == b => quote = None,
            (None, b'[' | b'{') => *flow_depth += 1,
            (None, b']' | b'}') => *flow_depth = flow_depth.saturating_sub(1),
            _ => {}
        }
        if b == b'$' && bytes.get(i + 1) == Some(&b'$') {
            out.text.push('$');
            i += 2;
            continue;
        }
        if b == b'$' && bytes.get(i + 1) == Some(&b'{') {
            let column = line[..i].chars().count() + 1;
            let error = |message: String| InterpolationError {
                line: line_number,
                column,
                message,
            };
            let Some(close) = line[i + 2..].find('}') else {
                errors.push(error(
                    "unterminated \"${\" (write \"$$\" for a literal $)".into(),
                ));
                out.text.push_str(&line[i..]);
                return;
            };
            let end = i + 2 + close + 1;
            // A reference that fails stays as written, so the scan goes on to the next one.
            let mut fail = |out: &mut Interpolated, message: String| {
                errors.push(error(message));
                out.text.push_str(&line[i..end]);
            };
            let inner = &line[i + 2..i + 2 + close];
            let (name, rule) = match inner.find(":-").or_else(|| inner.find(":?")) {
                Some(at) => (&inner[..at], Some((&inner[at..at + 2], &inner[at + 2..]))),
                None => (inner, None),
            };
            if !is_variable_name(name) {
                fail(
                    out,
                    format!("\"${{{name}}}\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"),
                );
                i = end;
                continue;
            }
            let value = env(name);
            let value = match (value, rule) {
                (Some(v), None) => v,
                (Some(v), Some(_)) if !v.is_empty() => v,
                (_, Some((":-", default))) => default.to_string(),
                (_, Some((_, message))) => {
                    let message = if message.is_empty() {
                        "is required".to_string()
                    } else {
                        message.to_string()
                    };
                    fail(out, format!("${{{name}}}: {message}"));
                    i = end;
                    continue;
                }
                (None, None) => {
                    fail(
                        out,
                        format!(
                            "environment variable {name} is not set (referenced as ${{{name}}}; use ${{{name}:-default}} for a default)"
                        ),
                    );
                    i = end;
                    continue;
                }
            };
            let place = Place {
                quote,
                in_flow: *flow_depth > 0,
                starts_scalar: starts_scalar(&line[..i], *flow_depth > 0),
                ends_scalar: ends_scalar(&line[end..], *flow_depth > 0),
            };
            let written = match render(&value, place) {
                Ok(written) => written,
                Err(why) => {
                    fail(
                        out,
                        format!(
                            "the value of {name} {why}; write the whole value in double quotes, e.g. key: \"...${{{name}}}...\""
                        ),
                    );
                    i = end;
                    continue;
                }
            };
            out.text.push_str(&written);
            if !value.is_empty() {
                out.substituted.push(value);
            }
            i = end;
            continue;
        }
        // Copy one whole character.
        let width = line[i..].chars().next().map_or(1, char::len_utf8);
        out.text.push_str(&line[i..i + width]);
        i += width;
    }
}

/// Where in the YAML a `${…}` stands, as far as its value's meaning depends on it.
#[derive(Debug, Clone, Copy)]
struct Place {
    /// Inside a quoted scalar (`'` or `"`), or plain.
    quote: Option<u8>,
    /// Inside a flow collection (`[…]`, `{…}`), where `,` `[` `]` `{` `}` end a plain scalar.
    in_flow: bool,
    /// Nothing of a plain scalar comes before it on the line.
    starts_scalar: bool,
    /// Nothing of a plain scalar comes after it.
    ends_scalar: bool,
}

/// The text that makes YAML read `value` back as exactly that string at `place`: as it is where
/// it cannot change the document's structure, escaped inside quotes, double-quoted when it is
/// a plain scalar on its own; or why it cannot stay one string here. Newlines never reach the
/// text, so every later line keeps its number for error messages.
fn render(value: &str, place: Place) -> Result<String, String> {
    match place.quote {
        Some(b'"') => Ok(double_quoted_body(value)),
        Some(_) => {
            if value.chars().any(|c| c.is_control() && c != '\t') {
                return Err(format!(
                    "contains {}, which a single-quoted YAML string cannot hold",
                    unsafe_part(value)
                ));
            }
            Ok(value.replace('\'', "''"))
        }
        None if plain_safe(value, place) => Ok(value.to_string()),
        None if place.starts_scalar && place.ends_scalar => {
            Ok(format!("\"{}\"", double_quoted_body(value)))
        }
        None => Err(format!(
            "would change the YAML's structure inside an unquoted value (it contains {})",
            unsafe_part(value)
        )),
    }
}

/// `value` written for the inside of a double-quoted YAML scalar.
fn double_quoted_body(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// True when `value`, written as it is at `place` in a plain scalar, is read back as the same
/// characters and nothing more (the type YAML gives a plain scalar, a number or `true`, stays).
fn plain_safe(value: &str, place: Place) -> bool {
    let Some(first) = value.chars().next() else {
        return true;
    };
    let last = value.chars().last().unwrap_or(first);
    if value.chars().any(char::is_control)
        || value.contains(": ")
        || value.ends_with(':') && place.ends_scalar
        || value.contains(" #")
        || place.in_flow && value.contains([',', '[', ']', '{', '}'])
    {
        return false;
    }
    if place.starts_scalar {
        let second = value.chars().nth(1);
        let indicator = "-?:,[]{}#&*!|>'\"%@`".contains(first);
        let dash_like = matches!(first, '-' | '?' | ':') && second.is_some_and(|c| c != ' ');
        if first == ' ' || indicator && !dash_like {
            return false;
        }
    }
    !(place.ends_scalar && last == ' ')
}

/// What in `value` keeps it from standing unquoted, for the error message.
fn unsafe_part(value: &str) -> &'static str {
    if value.contains(['\n', '\r']) {
        "a line break"
    } else if value.chars().any(char::is_control) {
        "a control character"
    } else if value.contains(": ") || value.ends_with(':') {
        "\": \""
    } else if value.contains(" #") {
        "\" #\""
    } else {
        "a YAML indicator"
    }
}

/// True when `before` (the line up to a `${`) ends where a scalar may begin: only indentation,
/// or `key: `, `- `, `? `, and in a flow collection `[`, `{` or `,`.
fn starts_scalar(before: &str, in_flow: bool) -> bool {
    let trimmed = before.trim_end_matches([' ', '\t']);
    if trimmed.is_empty() {
        return true;
    }
    let spaced = trimmed.len() < before.len();
    let last = trimmed.chars().last().unwrap_or(' ');
    match last {
        ':' | '-' | '?' => spaced,
        '[' | '{' | ',' => in_flow,
        _ => false,
    }
}

/// True when `after` (the line after a `}`) holds nothing more of the same plain scalar: the
/// end of the line, a comment, and in a flow collection `,` `]` or `}`; or `: ` for a key.
fn ends_scalar(after: &str, in_flow: bool) -> bool {
    let rest = after.trim_start_matches([' ', '\t']);
    let spaced = rest.len() < after.len();
    rest.is_empty()
        || rest.starts_with(['\n', '\r'])
        || spaced && rest.starts_with('#')
        || rest.starts_with(": ")
        || rest.starts_with(":\n")
        || in_flow && rest.starts_with([',', ']', '}'])
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "USER_NAME" => Some("robot".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn run(text: &str) -> Result<String, InterpolationError> {
        interpolate(text, &env)
            .map(|i| i.text)
            .map_err(|mut e| e.remove(0))
    }

    #[test]
    fn substitutes_defaults_and_escapes() {
        assert_eq!(run("u: ${USER_NAME}\n").unwrap(), "u: robot\n");
        assert_eq!(run("u: ${NOPE:-anon}").unwrap(), "u: anon");
        assert_eq!(run("u: ${EMPTY:-anon}").unwrap(), "u: anon");
        assert_eq!(run("u: ${EMPTY}").unwrap(), "u: ");
        assert_eq!(run("p: a$$b $x").unwrap(), "p: a$b $x");
        assert_eq!(
            run("p: x # ${NOPE} in a comment").unwrap(),
            "p: x # ${NOPE} in a comment"
        );
        assert_eq!(run("p: 'a # ${USER_NAME}'").unwrap(), "p: 'a # robot'");
        assert_eq!(
            interpolate("a: ${USER_NAME}", &env).unwrap().substituted,
            vec!["robot".to_string()]
        );
    }

    #[test]
    fn errors_name_variable_and_position() {
        let e = run("a: 1\nb:  ${MISSING}\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        assert!(e.message.contains("MISSING"), "{}", e.message);
        let e = run("b: ${EMPTY:?set EMPTY to the token}").unwrap_err();
        assert!(e.message.contains("set EMPTY to the token"));
        assert!(run("b: ${OPEN").is_err());
        assert!(run("b: ${1X}").is_err());
    }

    #[test]
    fn every_unset_variable_is_reported_not_only_the_first() {
        let errors = interpolate(
            "u: ${NOPE_USER}\np: ${NOPE_PASS} ${USER_NAME} ${ALSO:?needed}\nq: ${OPEN\n",
            &env,
        )
        .unwrap_err();
        let at: Vec<(usize, usize)> = errors.iter().map(|e| (e.line, e.column)).collect();
        assert_eq!(at, vec![(1, 4), (2, 4), (2, 30), (3, 4)]);
        assert!(errors[0].message.contains("NOPE_USER"));
        assert!(errors[1].message.contains("NOPE_PASS"));
        assert!(errors[2].message.contains("needed"));
    }
}
