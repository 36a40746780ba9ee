//! Environment interpolation over mirror.yaml's raw text before YAML parsing: `${VAR}`,
//! `${VAR:-default}`, `${VAR:?message}` and `$$` for a literal `$`; comments are left alone.

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
pub fn interpolate(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Interpolated, InterpolationError> {
    let mut out = Interpolated {
        text: String::with_capacity(text.len()),
        substituted: Vec::new(),
    };
    for (line_index, line) in text.split_inclusive('\n').enumerate() {
        interpolate_line(line, line_index + 1, env, &mut out)?;
    }
    Ok(out)
}

fn interpolate_line(
    line: &str,
    line_number: usize,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut Interpolated,
) -> Result<(), InterpolationError> {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let previous = if i == 0 { b' ' } else { bytes[i - 1] };
        match (quote, b) {
            (None, b'#') if previous == b' ' || previous == b'\t' || i == 0 => {
                out.text.push_str(&line[i..]);
                return Ok(());
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
                return Err(error(
                    "unterminated \"${\" (write \"$$\" for a literal $)".into(),
                ));
            };
            let inner = &line[i + 2..i + 2 + close];
            let (name, rule) = match inner.find(":-").or_else(|| inner.find(":?")) {
                Some(at) => (&inner[..at], Some((&inner[at..at + 2], &inner[at + 2..]))),
                None => (inner, None),
            };
            if !is_variable_name(name) {
                return Err(error(format!(
                    "\"${{{name}}}\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )));
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
                    return Err(error(format!("${{{name}}}: {message}")));
                }
                (None, None) => {
                    return Err(error(format!(
                        "environment variable {name} is not set (referenced as ${{{name}}}; use ${{{name}:-default}} for a default)"
                    )));
                }
            };
            out.text.push_str(&value);
            if !value.is_empty() {
                out.substituted.push(value);
            }
            i += 2 + close + 1;
            continue;
        }
        // Copy one whole character.
        let width = line[i..].chars().next().map_or(1, char::len_utf8);
        out.text.push_str(&line[i..i + width]);
        i += width;
    }
    Ok(())
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
        interpolate(text, &env).map(|i| i.text)
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
}
