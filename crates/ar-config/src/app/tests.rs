//! Table tests of the app configuration: good configs parse to the expected settings, bad ones report every problem.

use std::collections::HashMap;
use std::time::Duration;

use super::reader::{Ctx, Obj};
use super::*;

fn env() -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<&str, &str> = [
        ("CTX_TOKEN", "ctx-secret"),
        ("CB_TOKEN", "cb-secret"),
        ("CMD_TOKEN", "cmd-secret"),
    ]
    .into_iter()
    .collect();
    move |name| vars.get(name).map(|v| v.to_string())
}

fn parse(text: &str) -> Result<AppConfig, Vec<Diagnostic>> {
    AppConfig::parse(text, &env())
}

const FULL_YAML: &str = r#"
apps:
  - app_id: helpin
    event_protocol: v2
    context_endpoint: https://host.example/context?tenant=1
    context_token_env: CTX_TOKEN
    event_callbacks:
      - url: https://host.example/events
        token_env: CB_TOKEN
        event_types: [run.completed, run.failed]
      - url: http://127.0.0.1:9000/hook
    mcp_providers: []
    command_provider:
      transport: http
      base_url: https://host.example/commands/
      token_env: CMD_TOKEN
      commands:
        - name: create_task
          description: Create a task
          input_schema: {type: object, properties: {title: {type: string}}, required: [title]}
          mutating: true
          risk_level: routine_mutation
        - name: list_tasks
          description: List tasks
    browser: null
    model_endpoints:
      - {id: local-llm, base_url: "http://127.0.0.1:11434/v1", auth_mode: none, allow_http: true}
      - {id: gateway.prod, base_url: "https://llm.example/openai/v1", auth_mode: api_key}
    require_run_model_credentials: true
  - app_id: usermaven
"#;

#[test]
fn full_yaml_config_parses() {
    let config = parse(FULL_YAML).unwrap();
    assert_eq!(
        config.app_ids().collect::<Vec<_>>(),
        vec!["helpin", "usermaven"]
    );
    let app = config.app("helpin").unwrap();
    assert_eq!(app.event_protocol, EventProtocol::V2);
    let context = app.context.as_ref().unwrap();
    assert_eq!(context.token.as_ref().unwrap().expose(), "ctx-secret");
    assert_eq!(app.event_callbacks.len(), 2);
    assert_eq!(
        app.event_callbacks[0].event_types,
        vec!["run.completed", "run.failed"]
    );
    assert!(app.event_callbacks[0].accepts("run.failed"));
    assert!(!app.event_callbacks[0].accepts("run.started"));
    assert!(app.event_callbacks[1].accepts("anything"));
    assert_eq!(
        app.event_callbacks[0].token.as_ref().unwrap().expose(),
        "cb-secret"
    );

    let commands = app.command_provider.as_ref().unwrap();
    assert_eq!(
        commands.execute_url(),
        "https://host.example/commands/execute"
    );
    let declared = commands.commands.as_ref().unwrap();
    assert_eq!(declared.len(), 2);
    let create = declared[0].to_tool_definition();
    assert!(create.mutating);
    assert_eq!(create.risk_level, Some(RiskLevel::RoutineMutation));
    assert_eq!(create.category, "host");
    assert_eq!(
        declared[1].input_schema,
        serde_json::json!({"type": "object", "properties": {}})
    );
    assert_eq!(app.model_endpoints[0].auth_mode, EndpointAuthMode::None);
    assert_eq!(
        app.model_endpoints[1].base_url,
        "https://llm.example/openai/v1"
    );
    assert!(app.require_run_model_credentials);

    let debug = format!("{config:?}");
    for secret in ["ctx-secret", "cb-secret", "cmd-secret"] {
        assert!(!debug.contains(secret), "{secret} leaked into Debug");
    }

    let other = config.app("usermaven").unwrap();
    assert_eq!(other.event_protocol, EventProtocol::V1);
    assert!(other.components().is_empty());
}

#[test]
fn components_summary_is_secret_free() {
    let config = parse(FULL_YAML).unwrap();
    let app = config.app("helpin").unwrap();
    let components = app.components();
    let kinds: Vec<_> = components
        .iter()
        .map(|c| (c.kind, c.name.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("target_context", "target_context"),
            ("event_callback", "event_callback[0]"),
            ("event_callback", "event_callback[1]"),
            ("command_provider", "command_provider"),
        ]
    );
    // Query strings are not shown.
    assert_eq!(
        components[0].url.as_deref(),
        Some("https://host.example/context")
    );
    assert!(components[0].auth_configured);
    assert!(!components[2].auth_configured);
    assert_eq!(
        components[3].url.as_deref(),
        Some("https://host.example/commands/")
    );
    let report = app.doctor_report().render();
    assert!(report.contains("create_task, list_tasks"), "{report}");
    assert!(report.contains("local-llm"));
    assert!(!report.contains("secret"));
}

#[test]
fn json_is_accepted_and_preferred() {
    let config =
        parse(r#"{"apps":[{"app_id":"a","event_callbacks":[{"url":"https://x.example/cb"}]}]}"#)
            .unwrap();
    assert_eq!(config.apps["a"].event_callbacks.len(), 1);
    assert!(parse("").unwrap().apps.is_empty());
    assert!(parse("apps: []").unwrap().apps.is_empty());
}

#[test]
fn file_reference_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("apps.yaml");
    std::fs::write(&path, "apps:\n  - app_id: from-file\n").unwrap();
    let config = AppConfig::load(&format!("@{}", path.display()), &env()).unwrap();
    assert!(config.app("from-file").is_some());
    let err = AppConfig::load("@/definitely/missing.yaml", &env()).unwrap_err();
    assert_eq!(err[0].path, "AGENT_RUNTIME_APP_CONFIG");
}

/// A case name, the config text, and every (path, message fragment) it must report.
type BadCase = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const BAD: &[BadCase] = &[
    ("not yaml", "apps: [unclosed", &[("AGENT_RUNTIME_APP_CONFIG", "invalid YAML")]),
    ("not json", "{\"apps\": [", &[("AGENT_RUNTIME_APP_CONFIG", "invalid JSON")]),
    ("root not mapping", "[1, 2]", &[("", "expected a mapping")]),
    ("apps not list", "apps: {app_id: a}", &[("apps", "expected a list")]),
    ("typo at root", "aps: []", &[("aps", "did you mean `apps`")]),
    (
        "missing and duplicate ids",
        "apps: [{event_protocol: v1}, {app_id: a}, {app_id: a, evnt_callbacks: []}]",
        &[
            ("apps[0].app_id", "is required"),
            ("apps[2].app_id", "duplicate app_id \"a\""),
            ("apps[2].evnt_callbacks", "did you mean `event_callbacks`"),
        ],
    ),
    (
        "bad scalars",
        "apps: [{app_id: 'a b', event_protocol: v3, require_run_model_credentials: 'yes'}]",
        &[
            ("apps[0].app_id", "not allowed"),
            ("apps[0].event_protocol", "invalid event_protocol"),
            ("apps[0].require_run_model_credentials", "expected true or false"),
        ],
    ),
    (
        "context endpoint problems",
        "apps: [{app_id: a, context_endpoint: 'ftp://u:p@h/x#f', context_token: t, context_token_env: CTX_TOKEN}]",
        &[
            ("apps[0].context_endpoint", "scheme \"ftp\""),
            ("apps[0].context_endpoint", "must not contain credentials"),
            ("apps[0].context_endpoint", "fragment"),
            ("apps[0].context_token_env", "not both"),
        ],
    ),
    (
        "context token without endpoint, missing env",
        "apps: [{app_id: a, context_token_env: NOPE}]",
        &[("apps[0].context_token_env", "NOPE is not set")],
    ),
    (
        "event callbacks",
        r#"apps: [{app_id: a, event_callbacks: [
            {url: "https://ok.example/a", event_types: [run.completed, assistant_message_delta, run.complete, run.completed]},
            {token: t},
            {url: "relative/path", token_env: MISSING_CB},
            {url: "https://ok.example/a"},
            {url: "https://user@ok.example/b", events: [x]}]}]"#,
        &[
            ("apps[0].event_callbacks[0].event_types[1]", "transient"),
            ("apps[0].event_callbacks[0].event_types[2]", "unknown event type"),
            ("apps[0].event_callbacks[0].event_types[3]", "duplicate event type"),
            ("apps[0].event_callbacks[1].url", "is required"),
            ("apps[0].event_callbacks[2].url", "not a valid absolute URL"),
            ("apps[0].event_callbacks[2].token_env", "MISSING_CB is not set"),
            ("apps[0].event_callbacks[3].url", "duplicate callback URL"),
            ("apps[0].event_callbacks[4].url", "credentials"),
            ("apps[0].event_callbacks[4].events", "unknown key"),
        ],
    ),
    (
        "mcp providers",
        r#"apps: [{app_id: a, mcp_providers: [
            {name: crm, transport: grpc, url: "https://x.example"},
            {name: local, transport: stdio, url: "https://x.example"},
            {name: "bad name", url: "https://x.example", command: x},
            {name: crm, transport: streamable_http},
            {name: ns, url: "https://x.example", tool_namespace: none, tool_prefix: p_, refresh_interval: soon, startup_policy: eager},
            {url: "https://x.example", allowed_tools: [""]}]}]"#,
        &[
            ("apps[0].mcp_providers[0].transport", "unsupported transport \"grpc\""),
            ("apps[0].mcp_providers[1].command", "required for the stdio transport"),
            ("apps[0].mcp_providers[1].url", "not used by the stdio transport"),
            ("apps[0].mcp_providers[2].name", "must start with a letter or digit"),
            ("apps[0].mcp_providers[2].command", "only used by the stdio transport"),
            ("apps[0].mcp_providers[3].name", "duplicate MCP provider name \"crm\""),
            ("apps[0].mcp_providers[3].url", "is required"),
            ("apps[0].mcp_providers[4].tool_prefix", "tool_namespace: none"),
            ("apps[0].mcp_providers[4].refresh_interval", "not a duration"),
            ("apps[0].mcp_providers[4].startup_policy", "unknown startup_policy"),
            ("apps[0].mcp_providers[5].name", "is required"),
            ("apps[0].mcp_providers[5].allowed_tools[0]", "must not be empty"),
        ],
    ),
    (
        "duplicate mcp provider",
        r#"apps: [{app_id: a, mcp_providers: [{name: crm, url: "https://x.example"}, {name: crm, url: "https://y.example"}]}]"#,
        &[
            ("apps[0].mcp_providers[1].name", "duplicate MCP provider name"),
        ],
    ),
    (
        "command provider",
        r#"apps: [{app_id: a, command_provider: {transport: grpc, base_url: "https://h.example/c?x=1", commands: [
            {name: create_task, mutating: false, risk_level: destructive_mutation},
            {name: create_task, input_schema: [1]},
            {description: no name, risk_level: extreme, mutating: true},
            {name: "has space"}]}}]"#,
        &[
            ("apps[0].command_provider.transport", "unsupported transport"),
            ("apps[0].command_provider.base_url", "query string"),
            ("apps[0].command_provider.commands[0].risk_level", "requires mutating: true"),
            ("apps[0].command_provider.commands[1].name", "duplicate command"),
            ("apps[0].command_provider.commands[1].input_schema", "JSON schema object"),
            ("apps[0].command_provider.commands[2].name", "is required"),
            ("apps[0].command_provider.commands[2].risk_level", "invalid risk_level"),
            ("apps[0].command_provider.commands[3].name", "must start with a letter"),
        ],
    ),
    (
        "workspace, skills, browser",
        r#"apps: [{app_id: a,
            workspace_provider: {transport: git, root_dir: relative},
            skill_provider: {package_token: x},
            browser: {enabled: 'yes', allowed_domains: ["*", "bad domain", ".x.com"], artifact_provider: {transport: s3}}}]"#,
        &[
            ("apps[0].browser", "does not support browser tools yet"),
            ("apps[0].workspace_provider.transport", "unsupported transport \"git\""),
            ("apps[0].workspace_provider.base_url", "is required"),
            ("apps[0].workspace_provider.root_dir", "absolute path"),
            ("apps[0].skill_provider.base_url", "is required"),
            ("apps[0].skill_provider.package_base_url", "required when a package token is set"),
            ("apps[0].browser.enabled", "expected true or false"),
            ("apps[0].browser.allowed_domains[1]", "not a domain pattern"),
            ("apps[0].browser.allowed_domains[2]", "not a domain pattern"),
            ("apps[0].browser.artifact_provider.transport", "unsupported transport"),
            ("apps[0].browser.artifact_provider.upload_endpoint", "is required"),
        ],
    ),
    (
        "http workspace with root_dir",
        r#"apps: [{app_id: a, workspace_provider: {base_url: "https://h.example", root_dir: /x}}]"#,
        &[
            ("apps[0].workspace_provider.root_dir", "only used by the repository transport"),
        ],
    ),
    (
        "model endpoints",
        r#"apps: [{app_id: a, model_endpoints: [
            {id: ok, base_url: "https://llm.example/v1", auth_mode: api_key},
            {id: ok, base_url: "https://llm2.example/v1", auth_mode: api_key},
            {id: "bad id!", base_url: "http://llm.example/v1", auth_mode: api_key},
            {id: slash, base_url: "https://llm.example/v1/", auth_mode: none},
            {id: creds, base_url: "https://k:s@llm.example/v1?x=1#f", auth_mode: oauth},
            {id: case, base_url: "https://LLM.example:443/v1", auth_mode: none},
            {id: "x", auth_mode: none},
            {base_url: "ftp://llm.example", allow_http: 1}]}]"#,
        &[
            ("apps[0].model_endpoints[1].id", "duplicate model endpoint id"),
            ("apps[0].model_endpoints[2].id", "may only contain"),
            ("apps[0].model_endpoints[2].base_url", "requires allow_http"),
            ("apps[0].model_endpoints[3].base_url", "must not end with a slash"),
            ("apps[0].model_endpoints[4].base_url", "credentials"),
            ("apps[0].model_endpoints[4].base_url", "query string"),
            ("apps[0].model_endpoints[4].base_url", "fragment"),
            ("apps[0].model_endpoints[4].auth_mode", "unknown auth_mode"),
            ("apps[0].model_endpoints[5].base_url", "canonical form; write it as \"https://llm.example/v1\""),
            ("apps[0].model_endpoints[6].base_url", "is required"),
            ("apps[0].model_endpoints[7].id", "is required"),
            ("apps[0].model_endpoints[7].auth_mode", "is required"),
            ("apps[0].model_endpoints[7].base_url", "scheme \"ftp\""),
            ("apps[0].model_endpoints[7].allow_http", "expected true or false"),
        ],
    ),
    (
        "model endpoint id too long",
        "apps: [{app_id: a, model_endpoints: [{id: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, base_url: 'https://x.example', auth_mode: none}]}]",
        &[("apps[0].model_endpoints[0].id", "at most 100")],
    ),
    (
        "credential callback",
        r#"apps: [{app_id: a, model_credential_callback: {url: "http://host.example/refresh?x=1", token_env: NOPE, extra: 1}}]"#,
        &[
            ("apps[0].model_credential_callback.url", "must use https"),
            ("apps[0].model_credential_callback.url", "query string"),
            ("apps[0].model_credential_callback.token_env", "NOPE is not set"),
            ("apps[0].model_credential_callback.extra", "unknown key"),
        ],
    ),
];

#[test]
fn bad_configs_report_every_problem() {
    for (name, text, expected) in BAD {
        let diagnostics = match parse(text) {
            Ok(config) => panic!("{name}: expected diagnostics, got {config:?}"),
            Err(diagnostics) => diagnostics,
        };
        for (path, fragment) in *expected {
            assert!(
                diagnostics
                    .iter()
                    .any(|d| d.path == *path && d.message.contains(fragment)),
                "{name}: missing ({path}, {fragment}) in:\n{}",
                diagnostics
                    .iter()
                    .map(|d| format!("  {d}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        assert_eq!(
            diagnostics.len(),
            expected.len(),
            "{name}: unexpected extra diagnostics:\n{}",
            diagnostics
                .iter()
                .map(|d| format!("  {d}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn diagnostics_never_echo_secrets() {
    let err = parse(r#"apps: [{app_id: a, context_token: "tok-abc", context_token_env: CTX_TOKEN, event_callbacks: [{url: "https://u:pw-xyz@h.example"}]}]"#)
        .unwrap_err();
    let text = crate::ConfigError(err).to_string();
    assert!(
        !text.contains("tok-abc") && !text.contains("ctx-secret") && !text.contains("pw-xyz"),
        "{text}"
    );
}

/// Each section of a capability this version does not have: a valid value, and what the
/// refusal names.
const REFUSED: &[(&str, &str, &str)] = &[("browser", "{enabled: true}", "browser tools")];

#[test]
fn valid_sections_of_unsupported_capabilities_are_refused_by_name() {
    for (key, value, capability) in REFUSED {
        let text = format!("apps: [{{app_id: a, {key}: {value}}}]");
        let diagnostics = parse(&text).expect_err(key);
        assert_eq!(diagnostics.len(), 1, "{key}: {diagnostics:?}");
        assert_eq!(diagnostics[0].path, format!("apps[0].{key}"));
        assert!(
            diagnostics[0]
                .message
                .contains(&format!("this version does not support {capability}")),
            "{key}: {}",
            diagnostics[0].message
        );
    }
}

#[test]
fn workspace_providers_of_both_transports_are_kept() {
    let config = parse(r#"apps: [{app_id: a, workspace_provider: {base_url: "http://127.0.0.1:9/ws"}},
        {app_id: b, workspace_provider: {transport: repository, base_url: "https://h.example", root_dir: /srv/checkouts}}]"#)
        .expect("both transports are accepted");
    let http = config.apps["a"].workspace_provider.as_ref().expect("kept");
    assert_eq!(http.base_url.as_str(), "http://127.0.0.1:9/ws");
    let repo = config.apps["b"].workspace_provider.as_ref().expect("kept");
    assert_eq!(repo.transport, WorkspaceTransport::Repository);
    let diagnostics = parse(r#"apps: [{app_id: a, workspace_provider: {transport: repository, base_url: "https://h.example"}}]"#)
        .expect_err("a repository provider needs a root_dir");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].path, "apps[0].workspace_provider.root_dir");
}

#[test]
fn empty_sections_of_unsupported_capabilities_configure_nothing() {
    let config = parse(
        "apps: [{app_id: a, mcp_providers: [], workspace_provider: null, skill_provider: null, browser: {}, model_credential_callback: null}]",
    )
    .unwrap();
    assert!(config.app("a").unwrap().components().is_empty());
}

/// Runs one section parser on YAML text; panics on diagnostics.
fn parse_section<T>(
    text: &str,
    parse: impl FnOnce(&mut Ctx<'_>, String, &Value) -> Option<T>,
) -> T {
    let value: Value = serde_yaml::from_str(text).unwrap();
    let lookup = env();
    let mut ctx = Ctx {
        lookup: &lookup,
        diagnostics: Vec::new(),
    };
    let parsed = parse(&mut ctx, "s".into(), &value);
    assert!(ctx.diagnostics.is_empty(), "{:?}", ctx.diagnostics);
    parsed.unwrap()
}

/// Adapts a parser of a mapping of `section` to [`parse_section`].
fn mapping<T>(
    section: &'static keys::Section,
    parse: impl FnOnce(&mut Ctx<'_>, &Obj<'_>) -> Option<T>,
) -> impl FnOnce(&mut Ctx<'_>, String, &Value) -> Option<T> {
    move |ctx, path, value| {
        let obj = Obj::new(ctx, path, value, section)?;
        parse(ctx, &obj)
    }
}

#[test]
fn refused_sections_still_parse_what_their_capability_will_need() {
    let crm = parse_section(
        "{name: crm, url: https://mcp.example/api, token: inline-token, allowed_tools: [find_contact], refresh_interval: 5m, startup_policy: required}",
        parse_mcp_provider,
    );
    assert_eq!(crm.transport, McpTransport::Http);
    assert_eq!(crm.refresh_interval, Some(Duration::from_secs(300)));
    assert_eq!(crm.startup_policy, StartupPolicy::Required);
    assert_eq!(
        crm.unknown_refresh_cooldown,
        DEFAULT_UNKNOWN_REFRESH_COOLDOWN
    );
    assert_eq!(crm.effective_prefix(), "crm");
    assert!(!format!("{crm:?}").contains("inline-token"));

    let local = parse_section(
        "{name: local, transport: stdio, command: /usr/bin/mcp-server, args: [--flag], env: {API_KEY: abc}, tool_namespace: none, unknown_refresh_cooldown: 10s}",
        parse_mcp_provider,
    );
    assert_eq!(local.transport, McpTransport::Stdio);
    assert_eq!(local.tool_namespace, ToolNamespace::None);
    assert_eq!(local.effective_prefix(), "");
    assert_eq!(local.env["API_KEY"].expose(), "abc");
    assert_eq!(local.unknown_refresh_cooldown, Duration::from_secs(10));

    let workspace = parse_section(
        "{transport: repository, base_url: https://host.example/ws, root_dir: /var/lib/ar, token: w}",
        mapping(&keys::WORKSPACE_PROVIDER, parse_workspace_provider),
    );
    assert_eq!(workspace.transport, WorkspaceTransport::Repository);
    assert_eq!(
        workspace.root_dir.as_deref(),
        Some(std::path::Path::new("/var/lib/ar"))
    );
    assert_eq!(workspace.token.unwrap().expose(), "w");
    let skills = parse_section(
        "{base_url: https://host.example/skills, token: p}",
        mapping(&keys::SKILL_PROVIDER, parse_skill_provider),
    );
    assert_eq!(skills.token.unwrap().expose(), "p");
    let browser = parse_section(
        "{enabled: true, allowed_domains: ['*.example.com', docs.rs], artifact_provider: {upload_endpoint: https://host.example/upload, token: t}}",
        mapping(&keys::BROWSER, |ctx, obj| Some(parse_browser(ctx, obj))),
    );
    assert_eq!(browser.allowed_domains, vec!["*.example.com", "docs.rs"]);
    assert!(browser.artifact_provider.is_some());
    let callback = parse_section(
        "{url: http://localhost:7000/refresh, token_env: CB_TOKEN}",
        mapping(
            &keys::MODEL_CREDENTIAL_CALLBACK,
            parse_model_credential_callback,
        ),
    );
    assert_eq!(callback.token.unwrap().expose(), "cb-secret");
}

#[test]
fn a_command_provider_without_commands_means_the_builtin_catalogue() {
    let config = parse(
        "apps: [{app_id: original, command_provider: {base_url: 'https://h.example/cmd'}}, \
         {app_id: none, command_provider: {base_url: 'https://h.example/cmd', commands: []}}]",
    )
    .unwrap();
    let original = &config.apps["original"];
    assert_eq!(original.command_provider.as_ref().unwrap().commands, None);
    let report = original.doctor_report();
    assert!(report.builtin_host_commands);
    assert!(
        report.render().contains("built-in catalogue"),
        "{}",
        report.render()
    );
    let none = &config.apps["none"];
    assert_eq!(
        none.command_provider.as_ref().unwrap().commands,
        Some(Vec::new()),
        "an empty list is our extension saying: no commands"
    );
    assert!(!none.doctor_report().builtin_host_commands);
}
