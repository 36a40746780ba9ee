//! Who writes which target, compared as places rather than as spellings: layout directories
//! canonicalised (a layout inside or above another is a clash), registry hosts normalised.
//!
//! Used twice: by the config check for the mappings written in the file, and by the catalog
//! expansion for each repository a whole-registry mapping matches (a catalog name such as
//! `app/blobs/sha256/<hex>` or `x/index.json` would otherwise land a layout inside another's).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Component, Path, PathBuf};

use super::Target;

/// One mapping's claim on a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writer {
    /// The mapping's position in the config.
    pub index: usize,
    /// Its source as written back.
    pub source: String,
    /// The target as that mapping spelled it.
    pub target: Target,
}

/// How a target meets one already claimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clash<'a> {
    /// The same place (spelled alike or not).
    Same(&'a Writer),
    /// A layout directory inside the claimed layout.
    Inside(&'a Writer),
    /// A layout directory that holds the claimed layout.
    Above(&'a Writer),
}

impl Clash<'_> {
    /// The mapping that claimed the place first.
    pub fn writer(&self) -> &Writer {
        match self {
            Clash::Same(w) | Clash::Inside(w) | Clash::Above(w) => w,
        }
    }

    /// Why `target` is refused, naming both targets and the other mapping.
    pub fn describe(&self, target: &Target) -> String {
        let w = self.writer();
        let by = format!("mappings[{}] (source {})", w.index, w.source);
        match self {
            Clash::Same(_) if w.target == *target => {
                format!("target {target} is also written by {by}")
            }
            Clash::Same(_) => format!(
                "target {target} is the same place as {}, which {by} writes",
                w.target
            ),
            Clash::Inside(_) => format!(
                "target {target} lies inside the layout {}, which {by} writes (a layout never \
                 holds another layout)",
                w.target
            ),
            Clash::Above(_) => format!(
                "target {target} would hold the layout {}, which {by} writes (a layout never \
                 holds another layout)",
                w.target
            ),
        }
    }
}

/// The targets claimed so far. Each lookup costs a path's depth in map lookups, not the number
/// of claims: a catalog expands to up to `max_repositories` targets, each checked against all.
#[derive(Debug, Default)]
pub struct Writers {
    writers: Vec<Writer>,
    /// Claimed layouts by canonical directory (the first claim of each). Paths order by
    /// component, so every claimed layout under a directory follows that directory at once.
    layouts: BTreeMap<PathBuf, usize>,
    /// Claimed registry repositories by normalised host and path.
    registries: HashMap<(String, String), usize>,
}

/// A target as a place: a canonical layout directory, or a normalised host and a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Place {
    Layout(PathBuf),
    Registry(String, String),
}

impl Writers {
    /// No target claimed.
    pub fn new() -> Writers {
        Writers::default()
    }

    /// How `target` clashes with the claims so far, if it does: the same place first, then the
    /// nearest claimed layout it lies inside, then a claimed layout it would hold.
    pub fn clash(&self, target: &Target) -> Option<Clash<'_>> {
        let writer = |i: &usize| &self.writers[*i];
        match place(target) {
            Place::Registry(host, repository) => self
                .registries
                .get(&(host, repository))
                .map(|i| Clash::Same(writer(i))),
            Place::Layout(dir) => {
                if let Some(i) = self.layouts.get(&dir) {
                    return Some(Clash::Same(writer(i)));
                }
                if let Some(i) = dir.ancestors().skip(1).find_map(|a| self.layouts.get(a)) {
                    return Some(Clash::Inside(writer(i)));
                }
                self.layouts
                    .range::<Path, _>((Bound::Excluded(dir.as_path()), Bound::Unbounded))
                    .next()
                    .filter(|(below, _)| below.starts_with(&dir))
                    .map(|(_, i)| Clash::Above(writer(i)))
            }
        }
    }

    /// Claims `target` for mapping `index` (whose source is `source`).
    pub fn claim(&mut self, target: &Target, index: usize, source: &str) {
        let i = self.writers.len();
        self.writers.push(Writer {
            index,
            source: source.to_owned(),
            target: target.clone(),
        });
        match place(target) {
            Place::Layout(dir) => {
                self.layouts.entry(dir).or_insert(i);
            }
            Place::Registry(host, repository) => {
                self.registries.entry((host, repository)).or_insert(i);
            }
        }
    }
}

fn place(target: &Target) -> Place {
    match target {
        Target::OciLayout { path }
        | Target::OciArchive { path, .. }
        | Target::DockerArchive { path, .. } => Place::Layout(canonical(path)),
        Target::Registry {
            registry,
            repository,
        } => Place::Registry(normal_host(registry), repository.clone()),
    }
}

/// A host as one place: lowercase, no trailing dot, no `:443` (the port https implies).
fn normal_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    let host = host.strip_suffix(":443").unwrap_or(&host);
    host.trim_end_matches('.').to_owned()
}

/// `path` as the directory it names: made absolute against the working directory, its longest
/// existing ancestor resolved (symbolic links, `..`), the rest normalised lexically (`.`
/// dropped, `..` taking off one component).
pub fn canonical(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(path),
            Err(_) => path.to_path_buf(),
        }
    };
    let parts: Vec<Component<'_>> = absolute.components().collect();
    for existing in (1..=parts.len()).rev() {
        let head: PathBuf = parts[..existing].iter().collect();
        if let Ok(mut out) = std::fs::canonicalize(&head) {
            push_lexically(&mut out, &parts[existing..]);
            return out;
        }
    }
    let mut out = PathBuf::new();
    push_lexically(&mut out, &parts);
    out
}

fn push_lexically(out: &mut PathBuf, parts: &[Component<'_>]) {
    for part in parts {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(p: &str) -> Target {
        Target::OciLayout { path: p.into() }
    }

    fn registry(host: &str, repository: &str) -> Target {
        Target::Registry {
            registry: host.into(),
            repository: repository.into(),
        }
    }

    #[test]
    fn layouts_inside_above_or_spelled_otherwise_clash() {
        let mut w = Writers::new();
        w.claim(&layout("mirror/repo-0000"), 0, "r.io/repo-0000");
        for (t, kind) in [
            ("mirror/repo-0000", "same"),
            ("./mirror/repo-0000", "same"),
            ("mirror/x/../repo-0000/", "same"),
            ("./mirror/repo-0000/blobs/sha256/ab", "inside"),
            ("mirror/repo-0000/index.json", "inside"),
            ("mirror", "above"),
            ("./mirror/.", "above"),
        ] {
            let got = w.clash(&layout(t));
            let seen = match got {
                Some(Clash::Same(_)) => "same",
                Some(Clash::Inside(_)) => "inside",
                Some(Clash::Above(_)) => "above",
                None => "none",
            };
            assert_eq!(seen, kind, "{t}");
        }
        for apart in ["mirror/repo-00001", "mirror/repo", "other/repo-0000"] {
            assert_eq!(w.clash(&layout(apart)), None, "{apart}");
        }
        let said = w
            .clash(&layout("./mirror/repo-0000/index.json"))
            .unwrap()
            .describe(&layout("./mirror/repo-0000/index.json"));
        assert!(
            said.contains("oci:./mirror/repo-0000/index.json")
                && said.contains("oci:mirror/repo-0000")
                && said.contains("mappings[0] (source r.io/repo-0000)"),
            "{said}"
        );
    }

    #[test]
    fn a_symlinked_directory_is_the_place_it_points_at() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let mut w = Writers::new();
        w.claim(&layout(dir.path().join("real/a").to_str().unwrap()), 0, "s");
        let via_link = layout(dir.path().join("link/a/blobs").to_str().unwrap());
        assert!(matches!(w.clash(&via_link), Some(Clash::Inside(_))));
    }

    #[test]
    fn registry_repositories_clash_only_as_the_same_host_and_path() {
        let mut w = Writers::new();
        w.claim(&registry("mirror.io", "team/app"), 0, "s");
        assert!(matches!(
            w.clash(&registry("mirror.io.", "team/app")),
            Some(Clash::Same(_))
        ));
        assert!(matches!(
            w.clash(&registry("mirror.io:443", "team/app")),
            Some(Clash::Same(_))
        ));
        assert_eq!(w.clash(&registry("mirror.io", "team/app/sub")), None);
        assert_eq!(w.clash(&registry("mirror.io", "team")), None);
        assert_eq!(w.clash(&registry("mirror.io:5000", "team/app")), None);
        assert_eq!(w.clash(&layout("team/app")), None);
    }

    fn problems(mappings: &str) -> String {
        let text = format!("version: 1\nmappings:\n{mappings}");
        match crate::parse(&text, Path::new("m.yaml"), &|_| None) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    /// Issue 30 item 1, written in the file: nested layouts are refused at validate time,
    /// naming both targets, however each is spelled.
    #[test]
    fn the_config_refuses_a_layout_inside_or_above_another_mappings_layout() {
        let e = problems(
            "  - source: r.io/a\n    targets: ['oci:mirror/a']\n\
             \x20 - source: r.io/b\n    targets: ['oci:./mirror/a/blobs/sha256/ab']\n",
        );
        assert!(
            e.contains(
                "target oci:./mirror/a/blobs/sha256/ab lies inside the layout oci:mirror/a, \
                 which mappings[0] (source r.io/a) writes"
            ),
            "{e}"
        );
        let e = problems(
            "  - source: r.io/a\n    targets: ['oci:mirror/a']\n\
             \x20 - source: r.io/b\n    targets: ['oci:./mirror']\n",
        );
        assert!(
            e.contains("target oci:./mirror would hold the layout oci:mirror/a"),
            "{e}"
        );
        let e = problems(
            "  - source: r.io/a\n    targets: ['oci:mirror/a']\n\
             \x20 - source: r.io/b\n    targets: ['oci:./mirror/./a/']\n",
        );
        assert!(e.contains("is the same place as oci:mirror/a"), "{e}");
        let e = problems("  - source: r.io/a\n    targets: ['oci:m', 'oci:m/a']\n");
        assert!(
            e.contains("target oci:m/a lies inside the layout oci:m"),
            "{e}"
        );
        let e = problems("  - source: oci:./in\n    targets: ['oci:in/out']\n");
        assert!(
            e.contains("oci:./in and its target oci:in/out are nested"),
            "{e}"
        );
        // Beside each other, and one source written twice to one target, stay valid.
        assert_eq!(
            problems(
                "  - source: r.io/a\n    targets: ['oci:mirror/a']\n\
                 \x20 - source: r.io/ab\n    targets: ['oci:mirror/ab', 'r.io/m/a']\n\
                 \x20 - source: r.io/a\n    targets: ['oci:mirror/a']\n    tags: {exact: [v1]}\n"
            ),
            ""
        );
    }

    /// Issue 29: a mapping whose source and target are one repository was valid.
    #[test]
    fn the_config_refuses_a_repository_mirrored_onto_itself() {
        let e = problems("  - source: R.io/team/app\n    targets: ['r.io:443/team/app']\n");
        assert!(
            e.contains("r.io/team/app is both the source and a target"),
            "{e}"
        );
        assert_eq!(
            problems("  - source: r.io/team/app\n    targets: ['r.io/mirror/team/app']\n"),
            ""
        );
    }

    /// Many claims: every one is still found, inside, above or the same, and neighbours that
    /// only share a name prefix (`a1` beside `a10`) are not.
    #[test]
    fn thousands_of_claims_are_each_found() {
        let mut w = Writers::new();
        for n in 0..5000 {
            w.claim(&layout(&format!("/m/t{}/a{n}", n % 7)), n, "s");
        }
        assert!(
            matches!(w.clash(&layout("/m/t3/a10/index.json")), Some(Clash::Inside(x)) if x.index == 10)
        );
        assert!(matches!(w.clash(&layout("/m/t3/a10")), Some(Clash::Same(x)) if x.index == 10));
        assert!(matches!(w.clash(&layout("/m/t3")), Some(Clash::Above(_))));
        assert!(matches!(w.clash(&layout("/m")), Some(Clash::Above(_))));
        assert_eq!(w.clash(&layout("/m/t3/a1")), None, "a1 is under t1");
        assert_eq!(w.clash(&layout("/m/t7")), None);
        assert_eq!(w.clash(&layout("/m/t30")), None);
    }
}
