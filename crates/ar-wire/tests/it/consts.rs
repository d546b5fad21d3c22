//! Enum value lists, normalizers, NATS helpers and header names.

use ar_wire::agents::{approval_mode, runtime_kind};
use ar_wire::events;
use ar_wire::model::{normalize_service_tier, service_tier};
use ar_wire::runs::{
    self, normalize_completion_mode, pause_reason, resume_intent, run_status, turn_completion_mode,
};
use ar_wire::{nats, tools, EventEnvelope};

#[test]
fn enum_lists_include_contract_extensions() {
    assert!(pause_reason::is_valid("manual"));
    assert!(approval_mode::is_valid("risk_based"));
    assert!(resume_intent::is_valid("continue"));
    assert!(runtime_kind::is_valid("a2a") && runtime_kind::is_valid("claude_code"));
    assert!(!run_status::is_valid("Running"));
    assert_eq!(run_status::ALL.len(), 6);
    assert!(runs::is_terminal_status("cancelled") && !runs::is_terminal_status("paused"));
    assert!(runs::is_active_status("paused"));
}

#[test]
fn completion_mode_accepts_both_spellings() {
    assert!(
        turn_completion_mode::is_valid("explicit")
            && turn_completion_mode::is_valid("explicit_finish")
    );
    assert_eq!(
        normalize_completion_mode("explicit"),
        Some("explicit_finish")
    );
    assert_eq!(
        normalize_completion_mode(" Explicit_Finish "),
        Some("explicit_finish")
    );
    assert_eq!(normalize_completion_mode(""), Some("implicit"));
    assert_eq!(normalize_completion_mode("sometimes"), None);
}

#[test]
fn service_tier_aliases_normalize() {
    assert_eq!(normalize_service_tier(" Default "), service_tier::STANDARD);
    assert_eq!(normalize_service_tier("priority"), service_tier::FAST);
    assert_eq!(normalize_service_tier("flex"), "flex");
}

#[test]
fn transient_event_types() {
    assert!(events::is_transient("assistant_message_delta"));
    assert!(events::is_transient("activity_delta"));
    assert!(!events::is_transient("assistant_message_completed"));
    assert!(!events::is_transient("no_such_event"));
    assert!(events::is_lifecycle("run.mcp_credential_updated"));
    assert_eq!(
        events::EVENT_PROTOCOL_HEADER,
        "X-Agent-Runtime-Event-Protocol"
    );
}

#[test]
fn risk_levels() {
    assert_eq!(
        tools::effective_risk_level(false, "destructive_mutation"),
        "read"
    );
    assert_eq!(tools::effective_risk_level(true, ""), "sensitive_mutation");
    assert_eq!(
        tools::effective_risk_level(true, "read"),
        "sensitive_mutation"
    );
    assert_eq!(
        tools::effective_risk_level(true, "routine_mutation"),
        "routine_mutation"
    );
}

#[test]
fn nats_subjects_match_sdk() {
    let e = EventEnvelope {
        app_id: "acme.prod".into(),
        run_id: "run 1".into(),
        event_type: "run.completed".into(),
        ..EventEnvelope::default()
    };
    assert_eq!(
        nats::render_subject("", &e),
        "agent-runtime.events.acme_prod.run_1.run.completed"
    );
    assert_eq!(
        nats::render_v2_subject(&e),
        "agent-runtime.events.v2.acme_prod.run_1.run.completed"
    );
    assert_eq!(
        nats::render_subject("x.{type}.{app_id}", &e),
        "x.run.completed.acme_prod"
    );
    assert_eq!(nats::app_event_subject(""), "agent-runtime.events._.>");
    assert_eq!(
        nats::v2_app_event_subject("a/b*"),
        "agent-runtime.events.v2.a_b_.>"
    );
    let tricky = EventEnvelope {
        app_id: "{run_id}".into(),
        run_id: "r".into(),
        event_type: "t".into(),
        ..EventEnvelope::default()
    };
    assert_eq!(
        nats::render_subject("{app_id}.{run_id}", &tricky),
        "{run_id}.r"
    );
    assert_eq!(nats::DEFAULT_STREAM_NAME, "AGENT_RUNTIME_EVENTS");
}

#[test]
fn a_parsed_subject_template_renders_as_the_sdk_does() {
    let template =
        nats::SubjectTemplate::parse("p.{app_id}.{unknown}.{run_id}.{type}.{event_type}{");
    assert_eq!(
        template.render(" a.b/c ", "run\t1>", "tool_call.started"),
        "p.a_b_c.{unknown}.run_1_.tool_call.started.tool_call.started{"
    );
    assert_eq!(
        nats::SubjectTemplate::parse("  ").render("", "", ""),
        "agent-runtime.events._._._",
        "an empty template is the default; empty values are `_`"
    );
    for (app, run, kind) in [("acme.prod", "run 1", "run.completed"), ("x*", " ", "a>b")] {
        assert_eq!(
            nats::SubjectTemplate::parse(nats::DEFAULT_SUBJECT_TEMPLATE).render(app, run, kind),
            format!(
                "agent-runtime.events.{}.{}.{}",
                nats::app_token(app),
                nats::token(run),
                nats::token(kind)
            )
        );
    }
}
