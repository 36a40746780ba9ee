//! The listing personalities of the test registry (issue 31): tag lists and catalogs as Quay,
//! Artifactory, Nexus, GHCR, ACR, Harbor and Docker Hub answer them, and malformed answers.

use axum::http::StatusCode;
use serde_json::json;

use super::Personality;
use crate::registry::reply::{Reply, oci_error};
use crate::registry::routes::query_value;

/// Quay's page, whatever `n` asks (regclient #272, deitch/docker_registry2 #56, lstags #185).
pub const QUAY_PAGE: usize = 50;
/// ACR's catalog page (regclient #404; acr-cli #93: "only returns the first 100 repos").
pub const ACR_CATALOG_PAGE: usize = 100;

/// An opaque page token's text before the offset. Quay's are Fernet tokens (`gAAAAAB…`, the
/// `=` padding percent-encoded); the hostile one carries `/`, `..`, `%2f` and an encoded
/// control character, all of which a client must send back exactly as written.
const QUAY_TOKEN: &str = "gAAAAABg1i7jwRsgyD_X_wcMmj11T0w";
const HOSTILE_TOKEN: &str = "a/../..%2f%2F..%01%7f%0d%0a";

/// Malformed tag-list answers (no registry in particular: what a proxy, a broken build or a
/// half-migrated instance sends; issue 31's "an entry that is not a string, a header with an
/// empty value, an HTML page with a 200, a redirect to nowhere").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedListing {
    /// Each page's list holds `42`, `{"name":"x"}` and `null` among the tags.
    EntryNotAString,
    /// Pages carry `Link:` with an empty value (and the next page is never linked).
    EmptyLink,
    /// `200 OK` with `Content-Type: text/html` and a login page for a body.
    HtmlPage,
    /// The first page links a next page that answers 404 (it was never there).
    LinkToNowhere,
    /// The first page links a page on another host (`http://elsewhere.invalid/…`).
    LinkOffOrigin,
    /// Every page is the first page again, linked by a new opaque token each time: a loop no
    /// repeated URL shows.
    EndlessTokens,
}

/// The tag names a page is cut from: the repository's tags and (Artifactory) the digests of
/// manifests no tag names, sorted as one list.
fn listed_names(p: &Personality, tags: &[String], untagged: &[String]) -> Vec<String> {
    let mut names: Vec<String> = tags.to_vec();
    if p.digest_entries_listed {
        names.extend(untagged.iter().cloned());
        names.sort();
    }
    names
}

/// The personality's answer to `GET /v2/NAME/tags/list`, when its listing switches change it.
pub(crate) fn tag_list(
    p: &Personality,
    base_url: &str,
    repo: &str,
    tags: &[String],
    untagged: &[String],
    pairs: &[(String, String)],
    page_size: Option<usize>,
) -> Option<Reply> {
    let listing_switched = p.tag_pages_opaque
        || p.digest_entries_listed
        || p.tag_link_drops_repository_key
        || p.tag_link_absent
        || p.tag_link_wrong_prefix
        || p.tag_list_malformed.is_some();
    if !listing_switched {
        return None;
    }
    let names = listed_names(p, tags, untagged);
    let body = |page: &[String]| json!({"name": repo, "tags": page});
    if p.tag_list_malformed == Some(MalformedListing::EndlessTokens) {
        let turn = query_value(pairs, "next_page")
            .and_then(token_offset)
            .unwrap_or(0);
        let page: Vec<String> = names.iter().take(2).cloned().collect();
        return Some(Reply::new(StatusCode::OK).json(&body(&page)).header(
            "link",
            format!(
                "</v2/{repo}/tags/list?next_page=t~{}>; rel=\"next\"",
                turn + 1
            ),
        ));
    }
    if p.tag_pages_opaque {
        // Quay: `n` and `last` ignored; the offset lives in the opaque token only.
        let token = query_value(pairs, "next_page");
        let offset = token.map_or(Some(0), token_offset)?;
        let page: Vec<String> = names.iter().skip(offset).take(QUAY_PAGE).cloned().collect();
        let mut reply = Reply::new(StatusCode::OK).json(&body(&page));
        if offset + page.len() < names.len() {
            let prefix = if p.tag_token_hostile {
                HOSTILE_TOKEN
            } else {
                QUAY_TOKEN
            };
            let next = offset + page.len();
            reply = reply.header(
                "link",
                format!("</v2/{repo}/tags/list?next_page={prefix}~{next}%3D&n={QUAY_PAGE}>; rel=\"next\""),
            );
        }
        return Some(reply);
    }
    if p.tag_list_malformed == Some(MalformedListing::HtmlPage) {
        return Some(
            Reply::new(StatusCode::OK)
                .header("content-type", "text/html; charset=utf-8")
                .body("<!DOCTYPE html><html><head><title>Sign in</title></head><body><form action=\"/login\"></form></body></html>"),
        );
    }
    let asked = match query_value(pairs, "n") {
        None => None,
        Some(text) => match text.parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => {
                return Some(oci_error(
                    400,
                    "PAGINATION_NUMBER_INVALID",
                    "n is not a number",
                ));
            }
        },
    };
    let limit = match (asked, page_size) {
        // Nexus group: `n` is answered in full, whatever the group's own first page (renovate
        // #18447: `?n=10000` answered 10,000 tags); without `n` the group's first page.
        (Some(n), _) if p.tag_link_absent => n,
        (Some(n), Some(page)) => n.min(page),
        (Some(n), None) => n,
        (None, Some(page)) => page,
        (None, None) => usize::MAX,
    };
    let last = query_value(pairs, "last");
    if p.tag_list_malformed == Some(MalformedListing::LinkToNowhere) && last.is_some() {
        return Some(oci_error(
            404,
            "NAME_UNKNOWN",
            format!("repository {repo} is not known"),
        ));
    }
    let mut remaining = names.iter().filter(|t| last.is_none_or(|l| t.as_str() > l));
    let mut page: Vec<serde_json::Value> =
        remaining.by_ref().take(limit).map(|t| json!(t)).collect();
    let last_name = page.last().and_then(|v| v.as_str()).map(str::to_owned);
    let more = remaining.next().is_some();
    if p.tag_list_malformed == Some(MalformedListing::EntryNotAString) {
        page.insert(0, json!(42));
        page.push(json!({"name": "x"}));
        page.push(serde_json::Value::Null);
    }
    let mut reply = Reply::new(StatusCode::OK).json(&json!({"name": repo, "tags": page}));
    if p.tag_list_malformed == Some(MalformedListing::EmptyLink) {
        reply = reply.header("link", "");
        return Some(reply);
    }
    let (true, Some(last_name)) = (more, last_name) else {
        return Some(reply);
    };
    if p.tag_link_absent {
        // Nexus group repositories: the page is cut, and nothing says so.
        return Some(reply);
    }
    let query = format!("n={limit}&last={last_name}");
    let link = if p.tag_list_malformed == Some(MalformedListing::LinkOffOrigin) {
        format!("<http://elsewhere.invalid/v2/{repo}/tags/list?{query}>; rel=\"next\"")
    } else if p.tag_list_malformed == Some(MalformedListing::LinkToNowhere) {
        format!("</v2/{repo}/tags/list?{query}>; rel=\"next\"")
    } else if p.tag_link_wrong_prefix {
        // Nexus behind a connector port: the absolute Link keeps the internal path prefix.
        format!("<{base_url}/repository/docker-proxy/v2/{repo}/tags/list?{query}>; rel=\"next\"")
    } else if p.tag_link_drops_repository_key {
        // Artifactory: the Link leaves out the repository key (the first component).
        let rest = repo.split_once('/').map_or(repo, |(_, rest)| rest);
        format!("</v2/{rest}/tags/list?{query}>; rel=\"next\"")
    } else {
        format!("</v2/{repo}/tags/list?{query}>; rel=\"next\"")
    };
    Some(reply.header("link", link))
}

/// The offset an opaque token carries after its last `~` (padding `=` trimmed).
fn token_offset(token: &str) -> Option<usize> {
    token.rsplit_once('~')?.1.trim_end_matches('=').parse().ok()
}

/// The personality's answer to `GET /v2/_catalog`, when its switches change it.
pub(crate) fn catalog(
    p: &Personality,
    names: &[String],
    pairs: &[(String, String)],
) -> Option<Reply> {
    if p.catalog_absent {
        // GHCR serves no catalog: a plain-text 404 (vscode-docker #1525, oras-go #621).
        return Some(
            Reply::new(StatusCode::NOT_FOUND)
                .header("content-type", "text/plain; charset=utf-8")
                .body("404 page not found\n"),
        );
    }
    if p.catalog_admin_only {
        // Harbor: only a system administrator may list the catalog (harbor #18414, #21291).
        return Some(oci_error(
            401,
            "UNAUTHORIZED",
            "unauthorized to list catalog: unauthorized to list catalog",
        ));
    }
    if !p.catalog_pages_at_100 {
        return None;
    }
    let asked = query_value(pairs, "n").and_then(|n| n.parse::<usize>().ok());
    let limit = asked.unwrap_or(ACR_CATALOG_PAGE).min(ACR_CATALOG_PAGE);
    let last = query_value(pairs, "last");
    let mut remaining = names.iter().filter(|n| last.is_none_or(|l| n.as_str() > l));
    let page: Vec<String> = remaining.by_ref().take(limit).cloned().collect();
    let more = remaining.next().is_some();
    let mut reply = Reply::new(StatusCode::OK).json(&json!({ "repositories": page }));
    if more && let Some(last) = page.last() {
        reply = reply.header(
            "link",
            format!("</v2/_catalog?last={last}&n={ACR_CATALOG_PAGE}&orderby=>; rel=\"next\""),
        );
    }
    Some(reply)
}

/// Docker Hub's anti-abuse throttle: a 429 whose body is plain text, not an OCI error
/// (docker/hub-feedback #1907: "Too Many Requests (HAP429)."), its `Retry-After` kept.
pub(crate) fn throttle_body(p: &Personality, mut reply: Reply) -> Reply {
    if p.throttle_body_text && reply.status == StatusCode::TOO_MANY_REQUESTS {
        reply.headers.insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("text/plain"),
        );
        reply.headers.remove(axum::http::header::CONTENT_LENGTH);
        reply.body = bytes::Bytes::from_static(b"Too Many Requests (HAP429).\n");
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_tokens_carry_their_offset() {
        assert_eq!(token_offset(&format!("{QUAY_TOKEN}~50=")), Some(50));
        assert_eq!(token_offset("a/../..//..\u{1}\u{7f}\r\n~100="), Some(100));
        assert_eq!(token_offset("nothing"), None);
    }
}
