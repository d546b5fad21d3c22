//! RunSpec / RunEvent / Status JSON rules, validate_authority and ResponseMetadata validation.

use ar_dispatch::consts::*;
use ar_dispatch::{
    AuthorityMode, EventType, ProviderUsage, ResponseMetadata, RunEvent, RunSpec, SpecError, State,
    Status, TextOnlyPolicy,
};

pub const REV: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

pub fn policy(model: &str) -> TextOnlyPolicy {
    TextOnlyPolicy {
        policy_id: POLICY_CODEX_SUBSCRIPTION_CHAT_V1.into(),
        policy_revision: REV.into(),
        model: model.into(),
        reasoning_effort: REASONING_EFFORT_MEDIUM.into(),
        reasoning_context: REASONING_CONTEXT_CURRENT_TURN.into(),
        request_timeout_millis: REQUEST_TIMEOUT_MILLIS,
        developer_instruction_revision: REV.into(),
        account_type: ACCOUNT_TYPE_CHATGPT.into(),
        account_plan: "plus".into(),
        selected_adapter_id: ADAPTER_CODEX_SUBSCRIPTION.into(),
        selected_adapter_revision: REV.into(),
        selected_codex_version: "codex-cli 0.171.0".into(),
        selected_codex_executable_revision: REV.into(),
        selected_codex_schema_revision: REV.into(),
        thread_mode: THREAD_MODE_EPHEMERAL.into(),
        sandbox_mode: SANDBOX_MODE_READ_ONLY.into(),
        approval_policy: APPROVAL_POLICY_NEVER.into(),
        workdir_mode: WORKDIR_MODE_EMPTY_PER_TARGET.into(),
        dynamic_tools_mode: TOOLS_MODE_NONE.into(),
        mcp_mode: TOOLS_MODE_NONE.into(),
        command_policy: RESOURCE_POLICY_DENY_AND_FAIL.into(),
        file_read_policy: RESOURCE_POLICY_DENY_AND_FAIL.into(),
        isolation_revision: REV.into(),
    }
}

pub fn sub_spec(model: &str, p: TextOnlyPolicy) -> RunSpec {
    RunSpec {
        agent: AGENT_CODEX_SUBSCRIPTION.into(),
        model: model.into(),
        prompt: "hello".into(),
        profile: format!("codex-subscription:{model}"),
        authority: AuthorityMode::chat_subscription_isolated_v1(),
        runtime_contract: RUNTIME_CONTRACT_CODEX_SUBSCRIPTION_EXEC_V1.into(),
        text_only_policy: Some(p),
        ..Default::default()
    }
}

#[test]
fn legacy_spec_uses_go_names_and_omits_subscription_fields() {
    let spec = RunSpec {
        run_id: "r1".into(),
        agent: "codex".into(),
        prompt: "hi".into(),
        profile: "ignored-without-authority".into(),
        expected_policy_revision: REV.into(),
        ..Default::default()
    };
    let v: serde_json::Value = serde_json::from_str(&spec.to_json()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"RunID":"r1","Agent":"codex","Model":"","Prompt":"hi","Workdir":"","Env":null,"Machine":""})
    );
}

#[test]
fn subscription_spec_round_trips_without_expected_revision() {
    let mut spec = sub_spec("gpt-5.5", policy("gpt-5.5"));
    spec.expected_policy_revision = REV.into();
    let json = spec.to_json();
    assert!(!json.contains("ExpectedPolicyRevision"));
    assert!(!json.contains("expected_policy_revision"));
    assert!(json.contains(r#""profile":"codex-subscription:gpt-5.5""#));
    assert!(json.contains(r#""authority":"chat_subscription_isolated_v1""#));
    assert!(json.contains(r#""request_timeout_millis":120000"#));
    let back = RunSpec::from_json(json.as_bytes()).unwrap();
    spec.expected_policy_revision.clear();
    assert_eq!(back, spec);
}

#[test]
fn decoding_is_strict() {
    let cases: &[(&str, &str)] = &[
        (r#"{"Agent":"codex","Bogus":1}"#, "unknown field"),
        (r#"{"Agent":"codex"} {"Agent":"x"}"#, "trailing"),
        (r#"{"Agent":"codex"}x"#, "trailing"),
        (r#"{"Agent":"codex","#, "EOF"),
        (r#"{"Agent":5}"#, "invalid type"),
        (r#"{"ExpectedPolicyRevision":"x"}"#, "unknown field"),
        (r#"{"Agent":"a","Agent":"b"}"#, "duplicate"),
    ];
    for (input, want) in cases {
        let err = RunSpec::from_json(input.as_bytes()).unwrap_err();
        assert!(err.to_string().contains(want), "{input}: {err}");
    }
}

#[test]
fn run_id_alias_and_conflict() {
    let s = RunSpec::from_json(br#"{"run_id":"a"}"#).unwrap();
    assert_eq!(s.run_id, "a");
    let s = RunSpec::from_json(br#"{"RunID":"a","run_id":"a"}"#).unwrap();
    assert_eq!(s.run_id, "a");
    let e = RunSpec::from_json(br#"{"RunID":"a","run_id":"b"}"#).unwrap_err();
    assert!(matches!(e, SpecError::RunIdConflict { .. }), "{e}");
    // serde path (e.g. an axum Json extractor) applies the same rules
    assert!(serde_json::from_str::<RunSpec>(r#"{"RunID":"a","run_id":"b"}"#).is_err());
}

#[test]
fn profile_needs_authority() {
    let e = RunSpec::from_json(br#"{"Agent":"codex","profile":"p"}"#).unwrap_err();
    assert_eq!(e, SpecError::ProfileWithoutAuthority);
}

#[test]
fn validate_authority_rules() {
    let good = sub_spec("gpt-5.5", policy("gpt-5.5"));
    good.validate_authority().unwrap();
    RunSpec {
        agent: "codex".into(),
        ..Default::default()
    }
    .validate_authority()
    .unwrap();

    let mut bad: Vec<(RunSpec, &str)> = Vec::new();
    let mut s = good.clone();
    s.workdir = "/tmp/x".into();
    bad.push((s, "Workdir"));
    let mut s = good.clone();
    s.env = vec!["A=1".into()];
    bad.push((s, "Env"));
    let mut p = policy("gpt-5.5");
    p.policy_revision = REV.to_uppercase();
    bad.push((sub_spec("gpt-5.5", p), "policy_revision"));
    let mut p = policy("gpt-5.5");
    p.isolation_revision = "abc".into();
    bad.push((sub_spec("gpt-5.5", p), "isolation_revision"));
    let mut p = policy("gpt-5.5");
    p.account_plan = "platinum".into();
    bad.push((sub_spec("gpt-5.5", p), "account_plan"));
    let mut p = policy("gpt-5.5");
    p.request_timeout_millis = 60_000;
    bad.push((sub_spec("gpt-5.5", p), "request_timeout_millis"));
    let mut p = policy("gpt-5.5");
    p.sandbox_mode = "workspaceWrite".into();
    bad.push((sub_spec("gpt-5.5", p), "sandbox_mode"));
    bad.push((sub_spec("gpt-5.5", policy("gpt-4")), "policy model"));
    let mut s = good.clone();
    s.profile = "codex-subscription:other".into();
    bad.push((s, "profile"));
    let mut s = good.clone();
    s.agent = "codex".into();
    bad.push((s, "agent"));
    let mut s = good.clone();
    s.expected_policy_revision = "f".repeat(64);
    bad.push((s, "expected"));
    let mut s = good.clone();
    s.authority = AuthorityMode("root".into());
    bad.push((s, "unknown authority"));
    let mut s = good.clone();
    s.text_only_policy = None;
    bad.push((s, "text_only_policy"));
    let s = RunSpec {
        agent: "codex".into(),
        runtime_contract: "x".into(),
        ..Default::default()
    };
    bad.push((s, "runtime_contract requires authority"));
    for (spec, want) in bad {
        let e = spec.validate_authority().unwrap_err();
        assert_eq!(e.code(), ERROR_CHAT_POLICY_UNAVAILABLE);
        assert!(e.to_string().contains(want), "want {want:?} in {e}");
    }
    let mut s = good.clone();
    s.expected_policy_revision = REV.into();
    s.validate_authority().unwrap();
    for plan in KNOWN_ACCOUNT_PLANS {
        let mut p = policy("gpt-5.5");
        p.account_plan = plan.to_string();
        sub_spec("gpt-5.5", p).validate_authority().unwrap();
    }
}

pub fn metadata() -> ResponseMetadata {
    ResponseMetadata {
        provider_thread_id: "t".into(),
        requested_model: "gpt-5.5".into(),
        resolved_model: UNKNOWN_PROVIDER_IDENTITY.into(),
        selected_adapter_id: ADAPTER_CODEX_SUBSCRIPTION.into(),
        selected_adapter_revision: REV.into(),
        selected_codex_version: "v".into(),
        selected_codex_executable_revision: REV.into(),
        selected_codex_schema_revision: REV.into(),
        observed_adapter_id: ADAPTER_CODEX_SUBSCRIPTION.into(),
        observed_adapter_revision: REV.into(),
        observed_codex_version: "v".into(),
        observed_codex_executable_revision: REV.into(),
        observed_codex_schema_revision: REV.into(),
        terminal_status: "completed".into(),
        usage_source: USAGE_SOURCE_CODEX_EXEC_JSONL.into(),
        usage: ProviderUsage {
            input_tokens: 10,
            cached_input_tokens: 5,
            output_tokens: 3,
            reasoning_tokens: 1,
        },
    }
}

#[test]
fn response_metadata_rules() {
    metadata().validate().unwrap();
    type Breaker = (fn(&mut ResponseMetadata), &'static str);
    let breakers: Vec<Breaker> = vec![
        (|m| m.resolved_model = "gpt-5.5".into(), "resolved_model"),
        (
            |m| m.observed_codex_version = "w".into(),
            "observed_codex_version",
        ),
        (
            |m| m.observed_adapter_revision = "f".repeat(64),
            "observed_adapter_revision",
        ),
        (|m| m.terminal_status = "failed".into(), "terminal_status"),
        (|m| m.usage_source = "guess".into(), "usage_source"),
        (|m| m.usage.output_tokens = 0, "output_tokens"),
        (|m| m.usage.cached_input_tokens = 11, "cached_input_tokens"),
        (|m| m.usage.reasoning_tokens = 4, "reasoning_tokens"),
    ];
    for (f, want) in breakers {
        let mut m = metadata();
        f(&mut m);
        let e = m.validate().unwrap_err();
        assert!(e.to_string().contains(want), "{want}: {e}");
    }
}

#[test]
fn event_and_status_json() {
    let mut e = RunEvent::new("r", EventType::Message, "hi");
    e.time = "2026-01-02T03:04:05.123456789Z".parse().unwrap();
    let v: serde_json::Value = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"run_id":"r","type":"message","time":"2026-01-02T03:04:05.123456789Z","data":"hi"})
    );
    let mut x = RunEvent::exited("r", 3);
    x.error_code = "provider_failed".into();
    x.response = Some(metadata());
    let back: RunEvent = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
    assert_eq!(back, x);
    let t = RunEvent::tool("r", "shell", "ls");
    assert_eq!(t.data, r#"{"name":"shell","summary":"ls"}"#);
    let s = Status::ended(State::Canceled, -1, "canceled");
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        serde_json::json!({"state":"canceled","exit_code":-1,"err":"canceled"})
    );
    assert!(s.terminal());
    assert!(!Status::running().terminal());
    assert_eq!(
        serde_json::to_value(Status::running()).unwrap(),
        serde_json::json!({"state":"running","exit_code":0})
    );
    for (k, name) in [
        (EventType::Started, "started"),
        (EventType::Stdout, "stdout"),
        (EventType::Stderr, "stderr"),
        (EventType::Message, "message"),
        (EventType::Tool, "tool"),
        (EventType::Subagent, "subagent"),
        (EventType::Error, "error"),
        (EventType::Exited, "exited"),
    ] {
        assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(name));
    }
}
