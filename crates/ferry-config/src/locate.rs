//! Where each node of mirror.yaml sits: a map from field path (`mappings[2].tags.semver`) to
//! 1-based line and column, read with yaml-rust2's marked events, for pointing errors at text.

use std::collections::HashMap;
use std::fmt;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence position, 0-based.
    Index(usize),
}

/// A field path from the document root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    /// The document root: the empty path.
    pub fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    /// This path, then the mapping key `key`.
    pub fn key(&self, key: &str) -> FieldPath {
        let mut next = self.clone();
        next.0.push(Segment::Key(key.to_string()));
        next
    }

    /// This path, then the sequence position `index`.
    pub fn index(&self, index: usize) -> FieldPath {
        let mut next = self.clone();
        next.0.push(Segment::Index(index));
        next
    }

    /// A path written in the dotted form used in messages: `tags.semver`, `exclude[1]`.
    pub fn join_dotted(&self, dotted: &str) -> FieldPath {
        let mut next = self.clone();
        for part in dotted.split('.').filter(|p| !p.is_empty()) {
            let (name, mut rest) = match part.find('[') {
                Some(at) => (&part[..at], &part[at..]),
                None => (part, ""),
            };
            if !name.is_empty() {
                next.0.push(Segment::Key(name.to_string()));
            }
            while let Some(inner) = rest.strip_prefix('[') {
                let Some(close) = inner.find(']') else { break };
                if let Ok(i) = inner[..close].parse() {
                    next.0.push(Segment::Index(i));
                }
                rest = &inner[close + 1..];
            }
        }
        next
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(k) if i == 0 => write!(f, "{k}")?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// A 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

#[derive(Clone, Debug)]
struct Node {
    value: Position,
    key: Option<Position>,
    scalar: Option<String>,
    /// A mapping's keys, in order (`None` for a scalar or a sequence).
    keys: Option<Vec<String>>,
    /// A sequence's length.
    items: Option<usize>,
    /// For a mapping entry: its text, from the key to the next key or the mapping's end, as
    /// character indexes.
    entry: Option<(usize, usize)>,
}

/// What a node is, for walking the document against the fields a type takes.
pub enum Shape<'a> {
    /// A mapping, with its keys in order.
    Map(&'a [String]),
    /// A sequence of this many items.
    Seq(usize),
    /// A scalar or an alias.
    Other,
}

/// The positions of every node of one YAML document.
#[derive(Debug, Default)]
pub struct Locator {
    nodes: HashMap<FieldPath, Node>,
}

impl Locator {
    /// Reads the document's structure; a syntax error leaves an empty locator (serde reports
    /// syntax errors with their own position).
    pub fn new(text: &str) -> Locator {
        let mut builder = Builder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut builder, false).is_err() {
            return Locator::default();
        }
        Locator {
            nodes: builder.nodes,
        }
    }

    /// Where the value at `path` starts; for a path that is absent, its nearest present parent.
    pub fn value(&self, path: &FieldPath) -> Position {
        self.nearest(path)
            .map_or(Position { line: 1, column: 1 }, |n| n.value)
    }

    /// Where the key naming `path` starts (falls back to the value's position).
    pub fn key(&self, path: &FieldPath) -> Position {
        self.nearest(path)
            .map_or(Position { line: 1, column: 1 }, |n| {
                n.key.unwrap_or(n.value)
            })
    }

    /// The field whose value is at `line` and starts at or before `column` (the nearest such),
    /// if any: what an error found at that place in the text is about.
    pub fn field_at(&self, line: usize, column: usize) -> Option<FieldPath> {
        self.nodes
            .iter()
            .filter(|(path, n)| {
                !path.0.is_empty() && n.value.line == line && n.value.column <= column
            })
            .max_by_key(|(path, n)| (n.value.column, path.0.len()))
            .map(|(path, _)| path.clone())
    }

    /// What the node at exactly `path` is.
    pub fn shape(&self, path: &FieldPath) -> Shape<'_> {
        match self.nodes.get(path) {
            Some(Node { keys: Some(k), .. }) => Shape::Map(k),
            Some(Node { items: Some(n), .. }) => Shape::Seq(*n),
            _ => Shape::Other,
        }
    }

    /// `text` with the entries at `paths` (mapping keys and their values) blanked: every
    /// character but line breaks turned into a space, so every other node keeps its line and
    /// column.
    pub fn blank(&self, text: &str, paths: &[FieldPath]) -> String {
        let mut spans: Vec<(usize, usize)> = paths
            .iter()
            .filter_map(|p| self.nodes.get(p).and_then(|n| n.entry))
            .collect();
        spans.sort_unstable();
        text.chars()
            .enumerate()
            .map(|(i, c)| {
                let inside = spans.iter().any(|(a, b)| (*a..*b).contains(&i));
                if inside && c != '\n' && c != '\r' {
                    ' '
                } else {
                    c
                }
            })
            .collect()
    }

    /// The text of the scalar at exactly `path`, if it is one.
    pub fn scalar(&self, path: &FieldPath) -> Option<&str> {
        self.nodes.get(path).and_then(|n| n.scalar.as_deref())
    }

    /// Scalars under keys with one of these names, anywhere in the document.
    pub fn scalars_named(&self, names: &[&str]) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|(path, _)| {
                matches!(path.0.last(), Some(Segment::Key(k)) if names.contains(&k.as_str()))
            })
            .filter_map(|(_, node)| node.scalar.as_deref())
            .collect()
    }

    fn nearest(&self, path: &FieldPath) -> Option<&Node> {
        let mut probe = path.0.as_slice();
        loop {
            if let Some(node) = self.nodes.get(&FieldPath(probe.to_vec())) {
                return Some(node);
            }
            probe = probe.split_last()?.1;
        }
    }
}

enum Frame {
    Map {
        path: FieldPath,
        /// The key read, its position and character index, waiting for its value.
        key: Option<(String, Position, usize)>,
        /// The entry before, whose text ends where the next key (or the mapping) does.
        open: Option<FieldPath>,
    },
    Seq {
        path: FieldPath,
        next: usize,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    nodes: HashMap<FieldPath, Node>,
    /// Scalars written under an anchor (`&name value`), by anchor id: an alias to one is
    /// placed with the scalar's text, so a secret used through an alias is found (and
    /// redacted) under the key that uses it.
    anchored: HashMap<usize, String>,
}

fn position(mark: Marker) -> Position {
    // yaml-rust2 counts lines from 1 and columns from 0.
    Position {
        line: mark.line(),
        column: mark.col() + 1,
    }
}

impl Builder {
    /// Places a node starting at `mark`; `None` when the node is a mapping key.
    fn place(&mut self, mark: Marker, scalar: Option<&str>) -> Option<FieldPath> {
        let here = position(mark);
        let (path, key, entry_start) = match self.stack.last_mut() {
            None => (FieldPath::root(), None, None),
            Some(Frame::Seq { path, next }) => {
                *next += 1;
                (path.index(*next - 1), None, None)
            }
            Some(Frame::Map { path, key, open }) => match key.take() {
                None => {
                    let ended = open.take();
                    *key = Some((scalar.unwrap_or("?").to_string(), here, mark.index()));
                    self.end_entry(ended, mark.index());
                    return None;
                }
                Some((name, at, start)) => (path.key(&name), Some(at), Some((name, start))),
            },
        };
        if let Some((name, start)) = entry_start {
            if let Some(Frame::Map {
                open, path: parent, ..
            }) = self.stack.last_mut()
            {
                *open = Some(path.clone());
                let parent = parent.clone();
                if let Some(keys) = self.nodes.get_mut(&parent).and_then(|n| n.keys.as_mut()) {
                    keys.push(name);
                }
            }
            self.nodes.entry(path.clone()).or_insert(Node {
                value: here,
                key,
                scalar: scalar.map(str::to_string),
                keys: None,
                items: None,
                entry: Some((start, start)),
            });
            return Some(path);
        }
        if let Some(Frame::Seq { path: parent, .. }) = self.stack.last() {
            let parent = parent.clone();
            if let Some(n) = self.nodes.get_mut(&parent).and_then(|n| n.items.as_mut()) {
                *n += 1;
            }
        }
        self.nodes.entry(path.clone()).or_insert(Node {
            value: here,
            key,
            scalar: scalar.map(str::to_string),
            keys: None,
            items: None,
            entry: None,
        });
        Some(path)
    }

    /// The entry at `path` ends at character `end`.
    fn end_entry(&mut self, path: Option<FieldPath>, end: usize) {
        if let Some(node) = path.and_then(|p| self.nodes.get_mut(&p))
            && let Some((start, _)) = node.entry
        {
            node.entry = Some((start, end));
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::Scalar(text, _, anchor, _) => {
                self.place(mark, Some(&text));
                if anchor > 0 {
                    self.anchored.insert(anchor, text);
                }
            }
            Event::Alias(anchor) => {
                let text = self.anchored.get(&anchor).cloned();
                self.place(mark, text.as_deref());
            }
            Event::MappingStart(..) => {
                let path = self.place(mark, None).unwrap_or_default();
                if let Some(node) = self.nodes.get_mut(&path) {
                    node.keys = Some(Vec::new());
                }
                self.stack.push(Frame::Map {
                    path,
                    key: None,
                    open: None,
                });
            }
            Event::SequenceStart(..) => {
                let path = self.place(mark, None).unwrap_or_default();
                if let Some(node) = self.nodes.get_mut(&path) {
                    node.items = Some(0);
                }
                self.stack.push(Frame::Seq { path, next: 0 });
            }
            Event::MappingEnd => {
                if let Some(Frame::Map { open, .. }) = self.stack.pop() {
                    self.end_entry(open, mark.index());
                }
            }
            Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_values_keys_and_parents() {
        let text = "version: 1\nmappings:\n  - source: a\n    tags:\n      semver: '>=1'\n";
        let locator = Locator::new(text);
        let semver = FieldPath::root().join_dotted("mappings[0].tags.semver");
        assert_eq!(
            locator.value(&semver),
            Position {
                line: 5,
                column: 15
            }
        );
        assert_eq!(locator.key(&semver), Position { line: 5, column: 7 });
        assert_eq!(
            locator.scalar(&FieldPath::root().join_dotted("mappings[0].source")),
            Some("a")
        );
        let absent = FieldPath::root().join_dotted("mappings[0].tags.regex");
        assert_eq!(locator.value(&absent).line, 5);
        assert_eq!(semver.to_string(), "mappings[0].tags.semver");
    }
}
