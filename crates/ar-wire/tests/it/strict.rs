//! `StartRunRequest` rejects unknown fields at every depth; shared nested types stay lenient elsewhere.

use ar_wire::{ResumeRunRequest, StartRunRequest, UpdateRunModelCredentialRequest};
use serde_json::{json, Value};

use crate::fixture_value;

fn with(path: &[&str], key: &str) -> Value {
    let mut v = fixture_value("start_run_request.json");
    let mut cur = &mut v;
    for p in path {
        cur = match p.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => &mut cur[*p],
        };
    }
    cur.as_object_mut()
        .expect("object")
        .insert(key.to_owned(), json!("surprise"));
    v
}

fn rejects(v: Value, key: &str) {
    let err = serde_json::from_value::<StartRunRequest>(v).expect_err("must be rejected");
    let msg = err.to_string();
    assert!(msg.contains("unknown field") && msg.contains(key), "{msg}");
}

#[test]
fn unknown_top_level_field_is_rejected() {
    rejects(with(&[], "app"), "app");
    let err = serde_json::from_str::<StartRunRequest>(
        r#"{"app_id":"a","agent_id":"b","target":{"type":"t","id":"1"},"priority":1}"#,
    )
    .expect_err("unknown field");
    assert!(
        err.to_string().contains("unknown field `priority`"),
        "{err}"
    );
}

#[test]
fn unknown_nested_fields_are_rejected() {
    rejects(with(&["target"], "kind"), "kind");
    rejects(with(&["target", "display"], "subtitle"), "subtitle");
    rejects(with(&["model"], "temperature"), "temperature");
    rejects(with(&["model", "endpoint"], "allow_http"), "allow_http");
    rejects(with(&["model", "controls"], "max_tokens"), "max_tokens");
    rejects(
        with(&["model_credential"], "refresh_token"),
        "refresh_token",
    );
    rejects(with(&["turn_policy"], "timeout"), "timeout");
    rejects(with(&["mcp_servers", "0"], "headers"), "headers");
    rejects(
        with(&["mcp_servers", "0", "tools", "1"], "mutating"),
        "mutating",
    );
    rejects(with(&["mcp_servers", "0", "skills", "0"], "name"), "name");
    rejects(
        with(&["mcp_servers", "0", "credential"], "refresh_token"),
        "refresh_token",
    );
}

#[test]
fn free_form_maps_are_not_checked() {
    let mut v = fixture_value("start_run_request.json");
    v["metadata"]["anything"] = json!({"nested": true});
    v["trigger"]["x"] = json!(1);
    v["target"]["metadata"]["y"] = json!(2);
    v["mcp_servers"][0]["skills"][0]["config"] = json!({"free": "form"});
    v["mcp_servers"][1]["credential"]["headers"]["X-Other"] = json!("v");
    serde_json::from_value::<StartRunRequest>(v).expect("free-form maps accept any key");
}

#[test]
fn nulls_are_accepted_in_start_run() {
    let req: StartRunRequest = serde_json::from_value(json!({
        "app_id": "a", "agent_id": "b", "target": {"type": "t", "id": "1", "display": null},
        "model": null, "model_credential": null, "turn_policy": null, "mcp_servers": null,
        "host_run_id": null, "allowed_tools": null, "metadata": null
    }))
    .expect("nulls are zero values");
    assert!(req.model.is_none() && req.mcp_servers.is_empty());
}

#[test]
fn type_errors_still_surface() {
    let err = serde_json::from_value::<StartRunRequest>(json!({"target": "ticket"}))
        .expect_err("bad type");
    assert!(err.to_string().contains("invalid type"), "{err}");
    let err = serde_json::from_value::<StartRunRequest>(
        json!({"turn_policy": {"idle_timeout_seconds": "10"}}),
    )
    .expect_err("bad type");
    assert!(err.to_string().contains("invalid type"), "{err}");
}

#[test]
fn same_nested_types_are_lenient_in_other_bodies() {
    let resume: ResumeRunRequest = serde_json::from_value(json!({
        "intent": "reply", "turn_policy": {"mode": "pause_after_assistant", "future": 1}, "future": 2
    }))
    .expect("resume is lenient");
    assert_eq!(
        resume.turn_policy.map(|p| p.mode).as_deref(),
        Some("pause_after_assistant")
    );
    let refresh: UpdateRunModelCredentialRequest = serde_json::from_value(json!({
        "credential": {"type": "oauth", "access_token": "t", "issued_at": "x"}
    }))
    .expect("refresh-callback response is lenient");
    assert_eq!(refresh.credential.credential_type, "oauth");
}
