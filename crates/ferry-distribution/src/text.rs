//! Text from outside made safe for a terminal: the one escaping function for every name, error
//! text or value from a registry or layout that ferry prints (control characters made visible).

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character a terminal may act on written out as an escape (`\x1b`, `\r`,
/// `\u{9b}`, `\u{202e}`): C0 controls (newline and tab too), DEL, C1 controls, and the Unicode
/// bidirectional overrides and isolates that reorder what is shown. Text with none of them is
/// borrowed. (A backslash is left as it is: the escape is for a reader, not to be reversed.)
pub fn escape_terminal(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// [`escape_terminal`] for text of several lines that ferry composed itself (a rendered plan or
/// report): the same escapes, except that `\n` is kept as the line break it is.
pub fn escape_terminal_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let needs = |c: char| is_terminal_control(c) && !(keep_newlines && c == '\n');
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_terminal_control(c) && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_terminal_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A character a terminal acts on instead of showing: C0, DEL and C1 controls, and the
/// bidirectional formatting characters.
fn is_terminal_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for text in ["prod/app", "v1.2.3-rc_1", "ünïcödé 🚢", ""] {
            assert!(matches!(escape_terminal(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn every_control_character_is_escaped() {
        assert_eq!(escape_terminal("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape_terminal("x\ry\x07\x08\x7f"), "x\\ry\\x07\\x08\\x7f");
        assert_eq!(escape_terminal("two\nlines\tand"), "two\\nlines\\tand");
        assert_eq!(escape_terminal("\u{9b}31m"), "\\x9b31m");
        assert_eq!(escape_terminal("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape_terminal("\0"), "\\x00");
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            let escaped = escape_terminal(&c.to_string()).into_owned();
            assert!(
                !escaped.chars().any(char::is_control),
                "{c:?} -> {escaped:?}"
            );
        }
    }

    #[test]
    fn composed_lines_keep_their_breaks_and_lose_their_controls() {
        assert_eq!(
            escape_terminal_lines("synced  a:\x1b]0;x\x07\nnext\r\n"),
            "synced  a:\\x1b]0;x\\x07\nnext\\r\n"
        );
        assert!(matches!(escape_terminal_lines("a\nb\n"), Cow::Borrowed(_)));
    }
}
