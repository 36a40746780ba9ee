//! Text from outside made safe for a terminal: the one escaping function for every name, error
//! text or value from a registry or layout that ferry prints, and the one bound on its length.

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

/// The most bytes of one outside string (a listed name, a registry's error code or message, a
/// parser's complaint about a body) that ferry keeps in an error or a report line.
pub const SHOWN_BYTES: usize = 300;

/// `text` cut to at most `max` bytes on a character boundary, with `…` marking a cut. Text that
/// fits is borrowed.
pub fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}

/// Outside text as it enters an error: cut to [`SHOWN_BYTES`], then escaped, so a registry can
/// neither grow an error without bound nor start a line of its own in a report.
pub fn for_error(text: &str) -> String {
    escape_terminal(&shorten(text, SHOWN_BYTES)).into_owned()
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
    fn outside_text_is_cut_on_a_character_boundary_then_escaped() {
        assert!(matches!(shorten("short", 300), Cow::Borrowed("short")));
        assert_eq!(
            shorten(&"x".repeat(400), 300),
            format!("{}…", "x".repeat(300))
        );
        let odd = format!("x{}", "é".repeat(200));
        assert_eq!(shorten(&odd, 300), format!("x{}…", "é".repeat(149)));
        let forged = format!("{}\nFORGED line", "C".repeat(15 * 1024));
        let shown = for_error(&forged);
        assert!(shown.len() <= SHOWN_BYTES + "…".len(), "{}", shown.len());
        assert_eq!(for_error("BAD\nFORGED"), "BAD\\nFORGED");
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
