//! `ferry tags`: lists a repository's tags and runs a tag filter over them, showing what it
//! selects, what it leaves out and why, and which exact tags are missing.

use ferry_config::Origin;
use ferry_config::filter::{TagFilter, TagFilterSpec, TagSort};
use ferry_distribution::Reference;
use ferry_sync::plan::RejectedName;
use ferry_sync::{Run, RunContext};

use crate::cli::{SortArg, TagsArgs};
use crate::exit::{self, Exit};
use crate::progress::{Progress, print_stdout};

pub async fn run(args: &TagsArgs, progress: &Progress) -> Exit {
    // A tag or digest on a registry reference is ignored; a layout is `oci:<dir>`; skopeo's
    // `docker://` prefix is accepted.
    let reference = super::without_docker_transport(&args.reference);
    let origin = match reference.strip_prefix("oci:") {
        Some(_) => Origin::parse(reference),
        None => super::copy::unsupported_transport(reference)
            .and_then(|()| Reference::parse(reference).map_err(|e| e.to_string()))
            .map(|r| Origin::Registry {
                registry: r.registry,
                repository: r.repository,
            }),
    };
    let origin = match origin {
        Ok(r) => r,
        Err(e) => {
            progress.eprint(&format!("error: {e}"));
            return Exit::Usage;
        }
    };
    let spec = TagFilterSpec {
        include: (!args.include.is_empty()).then(|| args.include.clone()),
        exclude: args.exclude.clone(),
        regex: args.regex.clone(),
        deny: Vec::new(),
        semver: args.semver.clone(),
        sort: args.sort.map(|s| match s {
            SortArg::Semver => TagSort::Semver,
            SortArg::Alpha => TagSort::Alpha,
        }),
        latest: args.latest,
        exact: args.exact.clone(),
    };
    let filter = match TagFilter::compile(&spec) {
        Ok(f) => f,
        Err(e) => {
            progress.eprint(&format!("error: --{}: {e}", e.field));
            return Exit::Config;
        }
    };
    let mut config = match &args.access.config {
        Some(path) => match super::load_registries(path, progress) {
            Ok(c) => c,
            Err(code) => return code,
        },
        None => super::empty_config(),
    };
    if let Origin::Registry { registry, .. } = &origin {
        match super::access::Access::new(&args.tls).one(&args.one) {
            Ok(access) => access.apply_to_host(&mut config, registry),
            Err(message) => {
                progress.eprint(&format!("error: {message}"));
                return Exit::Usage;
            }
        }
    }
    let ctx = RunContext::new(&config);
    let run = Run::new(config, ctx);
    let listed = match run.source(&origin).await {
        Ok(source) => source.list_tags().await,
        Err(e) => Err(e),
    };
    let (tags, rejected) = match listed {
        Ok(t) => RejectedName::split(t),
        Err(e) => {
            progress.eprint(&format!("error: {e}"));
            for hint in crate::hints::for_error(&["tags"], &e) {
                progress.eprint(&hint);
            }
            return exit::for_error(&e);
        }
    };
    let selection = filter.select(&tags);
    if args.json {
        let value = serde_json::json!({
            "repository": origin.to_string(),
            "listed": tags.len(),
            "selected": selection.selected,
            "filtered_out": selection.filtered_out.iter()
                .map(|(t, r)| serde_json::json!({"tag": t, "reason": r.to_string()}))
                .collect::<Vec<_>>(),
            "missing_exact": selection.missing_exact,
            "rejected_names": rejected,
        });
        crate::progress::println_stdout(&format!("{value:#}"));
        return Exit::Clean;
    }
    let width = tags.iter().map(|t| t.len()).max().unwrap_or(0);
    for tag in &selection.selected {
        print_stdout(&format!("select  {tag}\n"));
    }
    for (tag, reason) in &selection.filtered_out {
        print_stdout(&format!("skip    {tag:<width$}  {reason}\n"));
    }
    for tag in &selection.missing_exact {
        print_stdout(&format!(
            "missing {tag:<width$}  exact tag not in the repository\n"
        ));
    }
    for r in &rejected {
        print_stdout(&format!("invalid {:?}  left out: {}\n", r.name, r.reason));
        if let Some(more) = r.more_line() {
            print_stdout(&format!("invalid {more}\n"));
        }
    }
    print_stdout(&format!(
        "{} listed, {} selected, {} filtered out{}\n",
        tags.len(),
        selection.selected.len(),
        selection.filtered_out.len(),
        if selection.missing_exact.is_empty() {
            String::new()
        } else {
            format!(", {} exact tags missing", selection.missing_exact.len())
        }
    ));
    Exit::Clean
}
