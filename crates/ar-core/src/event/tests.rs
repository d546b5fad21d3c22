//! The event vocabulary: which kinds are transient, terminal, lifecycle and persisted.

use super::*;

#[test]
fn deltas_are_the_transient_kinds() {
    let transient: Vec<&str> = EventKind::ALL
        .iter()
        .filter(|kind| kind.is_transient())
        .map(|kind| kind.as_str())
        .collect();
    assert_eq!(
        transient,
        [
            "assistant_message_delta",
            "reasoning_message_delta",
            "tool_call_args_delta",
            "activity_delta"
        ]
    );
    assert_eq!(
        EventKind::persisted().count(),
        EventKind::ALL.len() - transient.len()
    );
}

#[test]
fn terminal_and_lifecycle_kinds() {
    for kind in EventKind::ALL {
        assert_eq!(
            kind.is_terminal(),
            matches!(
                kind.as_str(),
                "run.completed" | "run.failed" | "run.cancelled"
            )
        );
        assert_eq!(kind.is_lifecycle(), kind.as_str().starts_with("run."));
        assert_eq!(EventKind::parse(kind.as_str()), Ok(*kind));
    }
    assert!(EventKind::parse("run.complete").is_err());
}

#[test]
fn every_event_names_its_kind() {
    let event = RunEvent::ToolCallArgsDelta(ToolCallArgsDelta::default());
    assert_eq!(event.kind(), EventKind::ToolCallArgsDelta);
    assert!(event.is_transient());
}
