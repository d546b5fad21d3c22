//! Unit tests of the turn setup: each CLI's arguments, environment and files.

use super::*;

const TOKEN: &str = "art_run_turn-token";
const KEY: &str = "sk-real-route-key";

fn bridge_files(dir: &Path) -> BridgeFiles {
    BridgeFiles {
        command: "/opt/agent-runtime".into(),
        args: vec!["mcp-bridge".into()],
        env: vec![
            (
                "AGENT_RUNTIME_API_BASE_URL".into(),
                "http://127.0.0.1:8090".into(),
            ),
            ("AGENT_RUNTIME_APP_ID".into(), "app".into()),
            ("AGENT_RUNTIME_RUN_ID".into(), "run_1".into()),
            ("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into()),
        ],
        timeout_secs: 300,
        dir: dir.to_path_buf(),
    }
}

fn setup(permissions: TurnPermissions) -> TurnSetup {
    TurnSetup {
        route: Some(TurnRoute {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "mock-model".into(),
            api_key: Some(Secret::new(KEY)),
            account_id: None,
        }),
        permissions,
        bridge: None,
    }
}

fn grant() -> Grant {
    Grant {
        base_url: "http://127.0.0.1:4444/v1".into(),
        placeholder: Secret::new("arp_placeholder"),
    }
}

fn args_of(launch: &Launch) -> String {
    let spec = RunSpec {
        prompt: "hi".into(),
        model: launch.model.clone(),
        ..Default::default()
    };
    launch.provider.command(&spec).unwrap().args.join(" ")
}

fn holds(launch: &Launch, needle: &str) -> bool {
    launch.env.iter().any(|(_, value)| value.contains(needle))
}

fn read_json(path: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[cfg(unix)]
fn mode_of(path: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn ctx<'a>(
    setup: &'a TurnSetup,
    grant: Option<&'a Grant>,
    bridge: Option<&'a BridgeFiles>,
    dirs: (&'a Path, Option<&'a Path>),
) -> LaunchContext<'a> {
    LaunchContext {
        program: "cli".into(),
        setup,
        grant,
        bridge,
        workdir: dirs.0,
        home: dirs.1,
    }
}

/// A read-only workspace puts each CLI in its own read-only mode and never bypasses its
/// permission checks.
#[test]
fn a_read_only_turn_selects_each_clis_read_only_mode() {
    let workdir = tempfile::tempdir().unwrap();
    let read_only = setup(TurnPermissions::ReadOnly);
    let c = ctx(&read_only, None, None, (workdir.path(), None));
    let codex = args_of(&codex_launch(&c));
    assert!(codex.contains("--sandbox read-only"), "{codex}");
    assert!(!codex.contains("dangerously"), "{codex}");
    let claude = claude_launch(&c).unwrap();
    let args = args_of(&claude);
    assert!(args.contains("--permission-mode plan"), "{args}");
    assert!(!args.contains("dangerously") && claude.env.iter().all(|(k, _)| k != "IS_SANDBOX"));
    assert!(args_of(&opencode_launch(&c).unwrap()).contains("--agent plan"));

    let bypass = setup(TurnPermissions::Bypass);
    let c = ctx(&bypass, None, None, (workdir.path(), None));
    let codex = args_of(&codex_launch(&c));
    assert!(
        codex.contains("--sandbox workspace-write --skip-git-repo-check"),
        "{codex}"
    );
    assert!(
        codex.contains("--dangerously-bypass-approvals-and-sandbox"),
        "{codex}"
    );
    assert!(!args_of(&opencode_launch(&c).unwrap()).contains("--agent"));
}

/// codex is given the proxy and the placeholder, never the key; the bridge in overrides.
#[test]
fn codex_gets_the_proxy_and_the_bridge_in_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = bridge_files(dir.path());
    let turn = setup(TurnPermissions::CliDefault);
    let grant = grant();
    let launch = codex_launch(&ctx(&turn, Some(&grant), Some(&bridge), (dir.path(), None)));
    let args = args_of(&launch);
    for expected in [
        r#"mcp_servers.agent_runtime.command="/opt/agent-runtime""#,
        r#"mcp_servers.agent_runtime.args=["mcp-bridge"]"#,
        r#"AGENT_RUNTIME_SERVICE_TOKEN="art_run_turn-token""#,
        "mcp_servers.agent_runtime.tool_timeout_sec=300",
        r#"model_providers.ar.base_url="http://127.0.0.1:4444/v1""#,
        r#"model_providers.ar.env_key="AR_MODEL_API_KEY""#,
        "--model mock-model",
    ] {
        assert!(args.contains(expected), "{expected} in {args}");
    }
    assert!(
        !holds(&launch, TOKEN),
        "the token is the bridge's, not codex's"
    );
    assert!(!args.contains(KEY) && !holds(&launch, KEY));
    assert!(launch
        .env
        .contains(&(MODEL_KEY_ENV.to_string(), "arp_placeholder".to_string())));
}

#[test]
fn claude_code_reads_the_bridge_from_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = bridge_files(dir.path());
    let turn = setup(TurnPermissions::CliDefault);
    let grant = grant();
    let launch =
        claude_launch(&ctx(&turn, Some(&grant), Some(&bridge), (dir.path(), None))).unwrap();
    let args = args_of(&launch);
    assert!(!args.contains(TOKEN) && !holds(&launch, TOKEN), "{args}");
    assert!(args.contains("--allowedTools mcp__agent_runtime"), "{args}");
    let path = args
        .split_once("--mcp-config ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .unwrap();
    let server = &read_json(path)["mcpServers"]["agent_runtime"];
    assert_eq!(server["command"], "/opt/agent-runtime");
    assert_eq!(server["env"]["AGENT_RUNTIME_SERVICE_TOKEN"], TOKEN);
    #[cfg(unix)]
    assert_eq!(mode_of(path), 0o600);
    assert!(launch.env.contains(&(
        "ANTHROPIC_API_KEY".to_string(),
        "arp_placeholder".to_string()
    )));
    assert!(!holds(&launch, KEY));
}

#[test]
fn opencode_reads_the_bridge_and_the_proxy_from_configs_outside_the_workdir() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let bridge = bridge_files(dir.path());
    let turn = setup(TurnPermissions::CliDefault);
    let grant = grant();
    let launch = opencode_launch(&ctx(
        &turn,
        Some(&grant),
        Some(&bridge),
        (workdir.path(), Some(home.path())),
    ))
    .unwrap();
    assert_eq!(launch.model, "ar/mock-model");
    let global = home.path().join(".config/opencode/opencode.json");
    let global = read_json(global.to_str().unwrap());
    assert_eq!(
        global["provider"]["ar"]["options"]["baseURL"],
        "http://127.0.0.1:4444/v1"
    );
    assert!(!global.to_string().contains(KEY));
    let (_, path) = launch
        .env
        .iter()
        .find(|(name, _)| name == "OPENCODE_CONFIG")
        .cloned()
        .unwrap();
    assert!(path.starts_with(&dir.path().display().to_string()));
    let server = &read_json(&path)["mcp"]["agent_runtime"];
    assert_eq!(server["type"], "local");
    assert_eq!(server["environment"]["AGENT_RUNTIME_SERVICE_TOKEN"], TOKEN);
    assert!(!holds(&launch, TOKEN) && !holds(&launch, KEY));
    assert_eq!(std::fs::read_dir(workdir.path()).unwrap().count(), 0);
}

#[test]
fn each_clis_name_of_a_bridged_tool_is_known() {
    for (agent, name, bridged) in [
        ("codex", "agent_runtime.get_context", true),
        ("codex", "shell", false),
        ("claude", "mcp__agent_runtime__mcp__docs__lookup", true),
        ("claude", "mcp__docs__lookup", false),
        ("opencode", "agent_runtime_get_context", true),
        ("opencode", "bash", false),
        ("command", "agent_runtime.get_context", false),
    ] {
        assert_eq!(is_bridged(agent, name), bridged, "{agent} {name}");
    }
}

/// The whole setup: a proxy is running for the turn, the CLI's environment has its address
/// and placeholder and nowhere the key; the scratch goes with `finish`.
#[tokio::test]
async fn a_prepared_turn_holds_a_placeholder_not_the_key() {
    let root = tempfile::tempdir().unwrap();
    let workdir = root.path().join("run_1");
    let resources = TurnResources {
        bridge_program: None,
        egress_limits: EgressLimits::default(),
        upstream: crate::egress::upstream_client().unwrap(),
    };
    let spec = RunSpec {
        agent: "claude".into(),
        turn: Some(setup(TurnPermissions::Bypass)),
        ..Default::default()
    };
    let base = ClaudeProvider::default();
    let mut prepared = prepare(&resources, root.path(), &spec, "run_1", &workdir, &base)
        .await
        .unwrap();
    let env: std::collections::HashMap<_, _> = prepared.env.iter().cloned().collect();
    let base_url = &env["ANTHROPIC_BASE_URL"];
    assert!(
        base_url.starts_with("http://127.0.0.1:") && !base_url.ends_with("/v1"),
        "{base_url}"
    );
    assert!(env["ANTHROPIC_API_KEY"].starts_with("arp_"));
    assert!(prepared.env.iter().all(|(_, v)| !v.contains(KEY)));
    let home = PathBuf::from(&env["HOME"]);
    assert!(home.starts_with(root.path().join(".homes")));
    let with_bridge = RunSpec {
        turn: Some(TurnSetup {
            bridge: Some(TurnBridge {
                env: Vec::new(),
                timeout_secs: 1,
            }),
            ..setup(TurnPermissions::Bypass)
        }),
        ..spec.clone()
    };
    let refused = prepare(
        &resources,
        root.path(),
        &with_bridge,
        "run_2",
        &workdir,
        &base,
    )
    .await;
    assert!(matches!(
        refused,
        Err(DispatchError::Policy {
            code: "bridge_unavailable",
            ..
        })
    ));
    let report = prepared.scratch.finish().await.unwrap();
    assert_eq!(report.requests, 0);
    assert!(!home.exists(), "the private home outlived the turn");
}

#[test]
fn the_setup_round_trips_and_debug_hides_the_secrets() {
    let turn = TurnSetup {
        bridge: Some(TurnBridge {
            env: vec![("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into())],
            timeout_secs: 5,
        }),
        ..setup(TurnPermissions::ReadOnly)
    };
    let json = serde_json::to_string(&turn).unwrap();
    assert!(
        json.contains(KEY) && json.contains("\"read_only\""),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<TurnSetup>(&json).unwrap(), turn);
    let shown = format!("{turn:?}");
    assert!(!shown.contains(KEY) && !shown.contains(TOKEN), "{shown}");
    assert!(serde_json::from_str::<TurnSetup>(r#"{"route":null,"extra":1}"#).is_err());
}
