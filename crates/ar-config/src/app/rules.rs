//! URL and name rules of the app configuration (callback URLs, provider base URLs, model endpoints, identifiers).

use url::Url;

use super::reader::Ctx;

/// What a URL field accepts beyond "absolute http(s) with a host, no userinfo, no fragment".
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UrlRules {
    /// A query string is allowed (endpoints called as-is; not for bases that get paths appended).
    pub allow_query: bool,
    /// Plain http only to loopback hosts (localhost, 127.0.0.1, ::1).
    pub https_unless_loopback: bool,
}

pub(crate) fn is_loopback_host(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Checks a URL field; reports every violated rule at `path`, returns the URL when it passes.
pub(crate) fn check_url(ctx: &mut Ctx<'_>, path: &str, raw: &str, rules: UrlRules) -> Option<Url> {
    let url = match Url::parse(raw) {
        Ok(url) => url,
        Err(err) => {
            ctx.report(path, format!("is not a valid absolute URL: {err}"));
            return None;
        }
    };
    let before = ctx.diagnostics.len();
    if !matches!(url.scheme(), "http" | "https") {
        ctx.report(
            path,
            format!(
                "scheme {:?} is not allowed (use http or https)",
                url.scheme()
            ),
        );
    }
    if !url.has_host() || url.host_str() == Some("") {
        ctx.report(path, "must include a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        ctx.report(
            path,
            "must not contain credentials (user:password@); use a token field",
        );
    }
    if url.fragment().is_some() {
        ctx.report(path, "must not contain a fragment (#...)");
    }
    if !rules.allow_query && url.query().is_some() {
        ctx.report(path, "must not contain a query string");
    }
    if rules.https_unless_loopback && url.scheme() == "http" && !is_loopback_host(&url) {
        ctx.report(
            path,
            "must use https (plain http is allowed only for localhost/127.0.0.1)",
        );
    }
    (ctx.diagnostics.len() == before).then_some(url)
}

/// Most characters a model endpoint id may have.
pub(crate) const MAX_ENDPOINT_ID_LEN: usize = 100;
/// Most characters a model endpoint base URL may have.
pub(crate) const MAX_ENDPOINT_URL_LEN: usize = 2048;

pub(crate) fn check_endpoint_id(ctx: &mut Ctx<'_>, path: &str, id: &str) -> bool {
    let mut ok = true;
    if id.len() > MAX_ENDPOINT_ID_LEN {
        ctx.report(
            path,
            format!("must be at most {MAX_ENDPOINT_ID_LEN} characters"),
        );
        ok = false;
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        ctx.report(path, "may only contain letters, digits, '.', '_' and '-'");
        ok = false;
    }
    ok
}

/// A model endpoint base URL: canonical absolute http(s), no credentials, query, fragment or
/// trailing slash, at most 2048 characters; http only with `allow_http`.
pub(crate) fn check_endpoint_base_url(
    ctx: &mut Ctx<'_>,
    path: &str,
    raw: &str,
    allow_http: bool,
) -> Option<String> {
    if raw.len() > MAX_ENDPOINT_URL_LEN {
        ctx.report(
            path,
            format!("must be at most {MAX_ENDPOINT_URL_LEN} characters"),
        );
        return None;
    }
    let before = ctx.diagnostics.len();
    let url = check_url(ctx, path, raw, UrlRules::default());
    if raw.ends_with('/') {
        ctx.report(path, "must not end with a slash");
    }
    let url = url?;
    if url.scheme() == "http" && !allow_http {
        ctx.report(path, "plain http requires allow_http: true");
    }
    let canonical = canonical_form(&url);
    if ctx.diagnostics.len() == before && canonical != raw {
        ctx.report(
            path,
            format!("is not in canonical form; write it as {canonical:?}"),
        );
    }
    (ctx.diagnostics.len() == before).then_some(canonical)
}

/// The URL serialized without the trailing slash the parser adds to an empty path.
pub(crate) fn canonical_form(url: &Url) -> String {
    let text = url.as_str();
    if url.path() == "/" && url.query().is_none() && url.fragment().is_none() {
        text.trim_end_matches('/').to_string()
    } else {
        text.to_string()
    }
}

/// Names used as tool names, prefixes and component names: `[A-Za-z0-9][A-Za-z0-9_-]*`, at most `max`.
pub(crate) fn check_name(ctx: &mut Ctx<'_>, path: &str, name: &str, max: usize) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !first_ok || !rest_ok {
        ctx.report(
            path,
            "must start with a letter or digit and contain only letters, digits, '_' and '-'",
        );
        return false;
    }
    if name.len() > max {
        ctx.report(path, format!("must be at most {max} characters"));
        return false;
    }
    true
}

/// `{base}/{segment}` for a validated base URL (no query or fragment), whatever its trailing slash.
pub fn join_endpoint(base: &Url, segment: &str) -> String {
    format!(
        "{}/{}",
        base.as_str().trim_end_matches('/'),
        segment.trim_start_matches('/')
    )
}
