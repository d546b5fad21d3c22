//! The workflow's pure state: duplicate resume ids, the memory's cap, what a continued run
//! carries, `current_step`'s transitions and the queues' names.

use ar_core::durable::{DurableQueue, TurnOutcome};
use ar_core::{PauseReason, RunStatus};

use super::*;
use crate::TemporalSettings;

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_string()).collect()
}

#[test]
fn a_resume_id_wakes_once_whether_pending_or_consumed() {
    let mut memory = ResumeIds::default();
    memory.receive("r-1".into(), Wake::Resume);
    memory.receive("r-1".into(), Wake::Approve);
    memory.receive(String::new(), Wake::Resume);
    assert_eq!(memory.pending_ids(), ids(&["r-1"]), "a pending duplicate");
    assert_eq!(memory.consume(), Some(Wake::Resume));
    assert!(!memory.has_pending());
    memory.receive("r-1".into(), Wake::Resume);
    assert!(!memory.has_pending(), "a consumed id came back");
    assert_eq!(memory.consume(), None);
    memory.receive("r-2".into(), Wake::Approve);
    memory.receive("r-3".into(), Wake::Resume);
    assert_eq!(memory.consume(), Some(Wake::Approve), "oldest first");
    assert_eq!(memory.pending_ids(), ids(&["r-3"]));
    assert_eq!(memory.consumed(), ids(&["r-1", "r-2"]).as_slice());
}

#[test]
fn the_memory_forgets_only_the_oldest_past_its_cap() {
    let mut memory = ResumeIds::default();
    for n in 0..=REMEMBERED_RESUME_IDS {
        memory.receive(format!("r-{n}"), Wake::Resume);
        memory.consume();
    }
    assert_eq!(memory.consumed().len(), REMEMBERED_RESUME_IDS);
    assert_eq!(memory.consumed()[0], "r-1");
    memory.receive("r-0".into(), Wake::Resume);
    assert!(memory.has_pending(), "the forgotten oldest id");
    memory.receive("r-1".into(), Wake::Resume);
    assert_eq!(memory.pending_ids(), ids(&["r-0"]), "still remembered");
}

#[test]
fn consumed_ids_survive_continue_as_new() {
    let input = WorkflowInput {
        app_id: "app".into(),
        run_id: "run_1".into(),
        consumed_resume_ids: ids(&["old"]),
        turns: 7,
        turns_per_run: 2,
    };
    let mut memory = ResumeIds::carried(input.consumed_resume_ids.clone());
    memory.receive("new".into(), Wake::Resume);
    memory.consume();
    memory.receive("waiting".into(), Wake::Resume);
    let next = continued(&input, &memory);
    assert_eq!(next.consumed_resume_ids, ids(&["old", "new"]));
    assert_eq!(
        (next.app_id.as_str(), next.run_id.as_str()),
        ("app", "run_1")
    );
    assert_eq!((next.turns, next.turns_per_run), (0, 2));
    // Through Temporal's payload (JSON) and into the next run's memory.
    let payload = serde_json::to_value(&next).expect("encodes");
    let next: WorkflowInput = serde_json::from_value(payload).expect("decodes");
    let mut memory = ResumeIds::carried(next.consumed_resume_ids);
    memory.receive("old".into(), Wake::Resume);
    memory.receive("new".into(), Wake::Approve);
    assert!(!memory.has_pending());
}

#[test]
fn a_first_start_carries_only_the_contract_input() {
    let first = WorkflowInput {
        app_id: "app".into(),
        run_id: "run_1".into(),
        ..WorkflowInput::default()
    };
    assert_eq!(
        serde_json::to_value(&first).expect("encodes"),
        serde_json::json!({"app_id": "app", "run_id": "run_1"})
    );
    assert_eq!(turn_limit(&first), TURNS_PER_WORKFLOW_RUN);
    let every_two = WorkflowInput {
        turns_per_run: 2,
        ..first
    };
    assert_eq!(turn_limit(&every_two), 2);
}

#[test]
fn current_step_follows_the_wait_and_what_ended_it() {
    let outcome = |reason| TurnOutcome::of(RunStatus::Paused, reason, 3);
    let cases = [
        (PauseReason::HumanApproval, "awaiting_approval"),
        (PauseReason::Authentication, "awaiting_auth"),
        (PauseReason::AwaitingUserMessage, "awaiting_input"),
        (PauseReason::Manual, "awaiting_input"),
    ];
    for (reason, step) in cases {
        let wait = Wait::after(&outcome(reason));
        assert_eq!(CurrentStep::waiting(wait).as_str(), step, "{reason:?}");
    }
    let woken = [
        (Wait::Approval, Some(Wake::Approve), "approval_received"),
        (Wait::Approval, Some(Wake::Resume), "feedback_received"),
        (Wait::Input, Some(Wake::Resume), "input_received"),
        (Wait::Input, Some(Wake::Approve), "approval_received"),
        (Wait::Auth, Some(Wake::Resume), "auth_completed"),
        (Wait::Input, None, "input_received"),
    ];
    for (wait, wake, step) in woken {
        assert_eq!(
            CurrentStep::woken(wait, wake).as_str(),
            step,
            "{wait:?} {wake:?}"
        );
    }
    assert_eq!(CurrentStep::default().as_str(), "queued");
}

#[test]
fn queues_are_named_with_the_deployment_prefix() {
    let settings = |prefix: &str| TemporalSettings {
        address: "127.0.0.1:7233".into(),
        namespace: "default".into(),
        task_queue_prefix: prefix.into(),
        api_key: None,
        tls: None,
        turns_per_workflow_run: 0,
    };
    let names = |prefix: &str| {
        DurableQueue::ALL
            .iter()
            .map(|queue| settings(prefix).queue_name(*queue))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(""),
        ids(&[
            "agent-native-interactive",
            "agent-native-autonomous",
            "automation-default",
            "agent-native-coding"
        ])
    );
    assert!(names("staging-")
        .iter()
        .zip(names(""))
        .all(|(prefixed, bare)| *prefixed == format!("staging-{bare}")));
}
