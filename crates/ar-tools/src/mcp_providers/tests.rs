//! App MCP providers against a host's `http` provider (`ar_test_support::provider_host`, the
//! shape of the Python SDK's provider router).

use std::time::{Duration, Instant};

use ar_core::{JsonMap, TargetRef};
use ar_test_support::provider_host::{tool, ProviderHost};
use serde_json::json;

use super::*;

fn providers(yaml_provider: &str) -> McpProviders {
    let text = format!(
        "apps: [{{app_id: a, command_provider: {{base_url: 'https://h.example', commands: [{{name: create_task}}]}}, mcp_providers: [{yaml_provider}]}}]"
    );
    let config = AppConfig::parse(&text, &|_| None).expect("config");
    McpProviders::with_timeout(&config, Path::new("."), Duration::from_secs(5)).expect("providers")
}

fn ctx() -> ToolContext {
    ToolContext {
        app_id: "a".into(),
        run_id: "run_1".into(),
        agent_id: "agt_1".into(),
        external_actor_id: "user-7".into(),
        target: TargetRef {
            target_type: "deal".into(),
            id: "D-1".into(),
            display: None,
            metadata: None,
        },
        context_summary: String::new(),
        run_metadata: JsonMap::new(),
    }
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn names(tools: &[ToolDefinition]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_str()).collect()
}

#[tokio::test]
async fn tools_are_published_prefixed_and_calls_reach_the_provider_with_meta() {
    let host = ProviderHost::start(
        Some("prov-token"),
        vec![
            tool("search", "Search notes", false),
            tool("create_note", "Create a note", true),
        ],
    )
    .await;
    let providers = providers(&format!(
        "{{name: crm, url: '{}', token: prov-token}}",
        host.url()
    ));
    let stop = CancellationToken::new();
    providers.start(&stop);
    eventually("the catalogue", || providers.catalog("a").len() == 2).await;
    let tools = providers.catalog("a");
    assert_eq!(names(&tools), ["crm__search", "crm__create_note"]);
    assert!(!tools[0].mutating && tools[1].mutating);
    assert_eq!(tools[1].category, "crm");
    assert!(providers.catalog("other").is_empty());

    let output = providers
        .call(&ctx(), "crm__create_note", json!({"text": "hello"}))
        .await
        .expect("a provider tool");
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.content, "create_note: hello");
    let calls = host.calls();
    assert_eq!(calls[0]["tool_name"], "create_note");
    assert_eq!(calls[0]["meta"]["run_id"], "run_1");
    assert_eq!(calls[0]["meta"]["target"]["id"], "D-1");
    assert_eq!(calls[0]["meta"]["target_type"], "deal");
    assert!(providers
        .call(&ctx(), "create_note", json!({}))
        .await
        .is_none());

    let failed = providers
        .call(&ctx(), "crm__search", json!([1]))
        .await
        .unwrap();
    assert!(
        failed.is_error && failed.content.contains("JSON object"),
        "{failed:?}"
    );
    let health = &providers.health("a")[0];
    assert_eq!(
        (health.status, health.tool_count),
        (ProviderStatus::Ready, 2)
    );
    stop.cancel();
}

#[tokio::test]
async fn concurrent_refreshes_share_one_listing() {
    let host = ProviderHost::start(None, vec![tool("search", "Search", false)]).await;
    host.set_list_delay(Duration::from_millis(300));
    let providers = providers(&format!("{{name: crm, url: '{}'}}", host.url()));
    let app = providers.apps["a"].clone();
    let outcomes = futures::future::join_all((0..5).map(|_| app.refresh(0))).await;
    assert_eq!(host.lists(), 1, "one listing for five concurrent refreshes");
    assert!(
        outcomes
            .iter()
            .all(|outcome| *outcome == RefreshOutcome::Changed),
        "{outcomes:?}"
    );
    assert_eq!(app.refresh(0).await, RefreshOutcome::Unchanged);
    assert_eq!(host.lists(), 2);
}

#[tokio::test]
async fn a_required_provider_holds_readiness_until_a_retried_load_succeeds() {
    let host = ProviderHost::start(None, vec![tool("search", "Search", false)]).await;
    host.fail_next_lists(2);
    let providers = providers(&format!(
        "{{name: crm, url: '{}', startup_policy: required}}",
        host.url()
    ));
    assert_eq!(providers.waiting_for(), ["a/crm"]);
    assert!(providers.unready("a").unwrap().contains("crm"));
    assert_eq!(providers.health("a")[0].status, ProviderStatus::Loading);
    let stop = CancellationToken::new();
    providers.start(&stop);
    eventually("a failed first attempt", || {
        providers.health("a")[0].status == ProviderStatus::Failed
    })
    .await;
    assert!(
        providers.health("a")[0].error.contains("503"),
        "{:?}",
        providers.health("a")
    );
    eventually("readiness", || providers.waiting_for().is_empty()).await;
    assert_eq!(host.lists(), 3, "two failures, then the load that worked");
    assert!(providers.unready("a").is_none());
    let health = &providers.health("a")[0];
    assert_eq!(
        (health.status, health.tool_count),
        (ProviderStatus::Ready, 1)
    );
    assert!(health.error.is_empty() && health.last_success.is_some());
    stop.cancel();
}

#[tokio::test]
async fn a_refused_catalogue_keeps_the_one_before() {
    let host = ProviderHost::start(None, vec![tool("search", "Search", false)]).await;
    let providers = providers(&format!(
        "{{name: crm, url: '{}', tool_namespace: none}}",
        host.url()
    ));
    let app = providers.apps["a"].clone();
    assert_eq!(app.refresh(0).await, RefreshOutcome::Changed);
    host.set_tools(vec![
        tool("search", "Search", false),
        tool("create_task", "Shadow", true),
    ]);
    assert_eq!(app.refresh(0).await, RefreshOutcome::Failed);
    assert_eq!(names(&providers.catalog("a")), ["search"]);
    let health = &providers.health("a")[0];
    assert_eq!(health.status, ProviderStatus::Degraded);
    assert!(
        health.error.contains("\"create_task\" would shadow"),
        "{health:?}"
    );
    host.set_tools(vec![
        tool("search", "Search", false),
        tool("note", "Note", true),
    ]);
    assert_eq!(app.refresh(0).await, RefreshOutcome::Changed);
    assert_eq!(names(&providers.catalog("a")), ["search", "note"]);
    assert_eq!(providers.health("a")[0].status, ProviderStatus::Ready);
}

#[tokio::test]
async fn unknown_tools_refresh_once_per_cooldown() {
    let host = ProviderHost::start(None, vec![tool("search", "Search", false)]).await;
    let providers = providers(&format!(
        "{{name: crm, url: '{}', unknown_refresh_cooldown: 1h}}",
        host.url()
    ));
    host.set_tools(vec![
        tool("search", "Search", false),
        tool("new_tool", "New", false),
    ]);
    assert!(
        providers.refresh_for_unknown("a").await,
        "the first unknown name refreshes"
    );
    assert_eq!(
        names(&providers.catalog("a")),
        ["crm__search", "crm__new_tool"]
    );
    assert!(
        !providers.refresh_for_unknown("a").await,
        "within the cooldown nothing is listed"
    );
    assert_eq!(host.lists(), 1);
    assert!(!providers.refresh_for_unknown("other").await);
}

#[tokio::test]
async fn a_wrong_token_is_a_readable_failure() {
    let host = ProviderHost::start(Some("right"), vec![tool("search", "Search", false)]).await;
    let providers = providers(&format!(
        "{{name: crm, url: '{}', token: wrong}}",
        host.url()
    ));
    let app = providers.apps["a"].clone();
    assert_eq!(app.refresh(0).await, RefreshOutcome::Failed);
    let health = &providers.health("a")[0];
    assert_eq!(health.status, ProviderStatus::Failed);
    assert!(health.error.contains("401"), "{health:?}");
    assert!(!format!("{providers:?}").contains("wrong"));
}
