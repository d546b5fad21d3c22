//! `open_pr` through the GitHub REST API: `POST {api}/repos/{owner}/{repo}/pulls` with
//! `{title, head, base, body}` and the repository's token, answered `201` with the pull
//! request (`number`, `html_url`). The API base is `AGENT_RUNTIME_GITHUB_API_BASE`.

use std::time::Duration;

use ar_core::workspace::WorkspaceError;
use ar_wire::host::RepositoryWorkspaceSpec;
use serde_json::{json, Value};

use crate::http;

/// GitHub's public API.
pub const DEFAULT_API_BASE: &str = "https://api.github.com";

fn failed(reason: impl Into<String>) -> WorkspaceError {
    WorkspaceError::Repository {
        step: "open_pr",
        reason: reason.into(),
    }
}

/// `owner/repo` of a GitHub clone URL (`https://github.com/o/r(.git)`, `git@github.com:o/r.git`).
pub fn owner_repo(clone_url: &str) -> Option<(String, String)> {
    let path = match clone_url.split_once("://") {
        Some((_, rest)) => rest.split_once('/')?.1,
        None => clone_url.split_once(':')?.1,
    };
    let path = path.trim_end_matches('/').trim_end_matches(".git");
    let mut parts = path.rsplitn(2, '/');
    let repo = parts.next()?.to_string();
    let owner = parts.next()?.rsplit('/').next()?.to_string();
    (!owner.is_empty() && !repo.is_empty()).then_some((owner, repo))
}

/// The GitHub REST API as one repository's calls see it: the API base and the token (the
/// spec's own, else the deployment's `AGENT_RUNTIME_GITHUB_TOKEN|GITHUB_TOKEN|GH_TOKEN`).
pub struct GitHub<'a> {
    pub client: &'a reqwest::Client,
    pub api: &'a str,
    pub token: &'a str,
}

impl GitHub<'_> {
    /// Opens the pull request of `branch` into the base branch; `{number, url}`.
    pub async fn open_pr(
        &self,
        spec: &RepositoryWorkspaceSpec,
        branch: &str,
        title: &str,
    ) -> Result<Value, WorkspaceError> {
        let (owner, repo) = owner_repo(&spec.clone_url)
            .ok_or_else(|| failed("the clone URL names no GitHub owner/repository"))?;
        if self.token.is_empty() {
            return Err(failed(
                "no GitHub token: the repository spec's auth carries none and \
                 AGENT_RUNTIME_GITHUB_TOKEN, GITHUB_TOKEN and GH_TOKEN are unset",
            ));
        }
        let (client, api, token) = (self.client, self.api, self.token);
        let base = if spec.base_branch.is_empty() {
            "main"
        } else {
            &spec.base_branch
        };
        let body = json!({"title": title, "head": branch, "base": base,
                          "body": "Opened by Agent Runtime."});
        let response = client
            .post(format!("{api}/repos/{owner}/{repo}/pulls"))
            .timeout(Duration::from_secs(30))
            .bearer_auth(token)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .json(&body)
            .send()
            .await
            .map_err(|err| failed(http::describe(&err)))?;
        let status = response.status();
        let bytes = http::read_limited(response)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if status.as_u16() != 201 {
            return Err(failed(format!(
                "GitHub answered HTTP {}: {}",
                status.as_u16(),
                http::snippet(&bytes)
            )));
        }
        let pr: Value = serde_json::from_slice(&bytes).map_err(|e| failed(e.to_string()))?;
        Ok(json!({"number": pr["number"], "url": pr["html_url"]}))
    }
}

#[cfg(test)]
mod tests {
    use super::owner_repo;

    #[test]
    fn owner_and_repository_come_from_the_clone_url() {
        let pair = |o: &str, r: &str| Some((o.to_string(), r.to_string()));
        assert_eq!(
            owner_repo("https://github.com/acme/app.git"),
            pair("acme", "app")
        );
        assert_eq!(
            owner_repo("git@github.com:acme/app.git"),
            pair("acme", "app")
        );
        assert_eq!(
            owner_repo("http://127.0.0.1:9/git/acme/app"),
            pair("acme", "app")
        );
        assert_eq!(owner_repo("nothing"), None);
    }
}
