//! Every (state, action) pair of the run state machine: what it allows and what it refuses.

use super::*;
use crate::{ApprovalState, PauseReason, RunStatus};

fn state(status: RunStatus) -> RunState {
    let reason = if status == RunStatus::Paused {
        PauseReason::HumanInput
    } else {
        PauseReason::None
    };
    RunState::restore(status, reason, ApprovalState::NotRequired, false)
}

const ACTIONS: &[RunAction] = &[
    RunAction::Start,
    RunAction::Pause(PauseReason::Manual),
    RunAction::Pause(PauseReason::None),
    RunAction::RequestPause,
    RunAction::Resume,
    RunAction::Approve,
    RunAction::Reject,
    RunAction::Complete,
    RunAction::Fail,
    RunAction::Cancel,
];

/// The status each action leads to from each status; `None`: refused.
fn expected(from: RunStatus, action: RunAction) -> Option<RunStatus> {
    use RunStatus::*;
    if from.is_terminal() {
        return None;
    }
    match (from, action) {
        (Queued, RunAction::Start) => Some(Running),
        (Queued | Running, RunAction::Pause(reason)) if reason != PauseReason::None => Some(Paused),
        (Running, RunAction::RequestPause) => Some(Running),
        (Paused, RunAction::Resume) => Some(Running),
        (Paused, RunAction::Approve | RunAction::Reject) => Some(Paused),
        (Running | Paused, RunAction::Complete) => Some(Completed),
        (_, RunAction::Fail) => Some(Failed),
        (_, RunAction::Cancel) => Some(Cancelled),
        _ => None,
    }
}

#[test]
fn every_state_and_action_pair_follows_the_table() {
    for from in RunStatus::ALL {
        for action in ACTIONS {
            let before = state(*from);
            let mut after = before;
            let outcome = after.apply(*action);
            match expected(*from, *action) {
                Some(status) => {
                    assert_eq!(outcome, Ok(()), "{from} + {action}");
                    assert_eq!(after.status(), status, "{from} + {action}");
                }
                None => {
                    assert_eq!(
                        outcome,
                        Err(TransitionError {
                            status: *from,
                            action: *action
                        }),
                        "{from} + {action}"
                    );
                    assert_eq!(after, before, "a refused {action} changed a {from} run");
                }
            }
        }
    }
}

#[test]
fn pause_reasons_follow_the_status() {
    let mut run = state(RunStatus::Queued);
    run.apply(RunAction::Start).unwrap();
    assert_eq!(run.pause_reason(), PauseReason::None);
    run.apply(RunAction::RequestPause).unwrap();
    assert!(run.pause_requested());
    run.apply(RunAction::Pause(PauseReason::Manual)).unwrap();
    assert_eq!(run.pause_reason(), PauseReason::Manual);
    assert!(!run.pause_requested(), "pausing answers the request");
    run.apply(RunAction::Resume).unwrap();
    assert_eq!(run.pause_reason(), PauseReason::None);
    run.apply(RunAction::Fail).unwrap();
    assert_eq!(run.pause_reason(), PauseReason::None);
    assert!(run.status().is_terminal());
}

#[test]
fn approvals_are_decided_while_paused_and_consumed_once() {
    let mut run = RunState::queued(true);
    assert_eq!(run.approval_state(), ApprovalState::Pending);
    assert!(run.apply(RunAction::Approve).is_err(), "not paused yet");
    run.apply(RunAction::Pause(PauseReason::HumanApproval))
        .unwrap();
    run.apply(RunAction::Approve).unwrap();
    assert_eq!(run.approval_state(), ApprovalState::Approved);
    run.consume_approval();
    assert_eq!(run.approval_state(), ApprovalState::NotRequired);
    run.consume_approval();
    assert_eq!(run.approval_state(), ApprovalState::NotRequired);
}

fn run_in(status: RunStatus) -> Run {
    Run {
        id: "run_1".into(),
        app_id: "app".into(),
        host_run_id: String::new(),
        agent_id: "agent".into(),
        target: TargetRef::default(),
        runtime_kind: RuntimeKind::NativeSdk,
        execution_mode: ExecutionMode::Lightweight,
        invocation_mode: InvocationMode::Autonomous,
        external_actor_id: String::new(),
        state: state(status),
        input: RunInput::default(),
        output_summary: JsonMap::new(),
        workspace_lease: None,
        error_message: String::new(),
        started_at: None,
        completed_at: None,
        created_at: chrono::Utc::now(),
        updated_at: chrono::Utc::now(),
        version: 3,
        engine: EngineState::default(),
    }
}

#[test]
fn a_refused_resume_changes_nothing_on_the_run() {
    let mut run = run_in(RunStatus::Completed);
    let before = run.clone();
    assert!(run
        .resume(ResumeIntent::Approve, chrono::Utc::now())
        .is_err());
    assert_eq!(run, before);
    let mut paused = Run {
        state: state(RunStatus::Paused),
        ..before
    };
    let now = chrono::Utc::now();
    paused.resume(ResumeIntent::RequestChanges, now).unwrap();
    assert_eq!(paused.approval_state(), ApprovalState::Rejected);
    assert_eq!(paused.engine.turn_started_at, Some(now));
}

/// A paused or ended run runs no CLI turn: the digest of its turn's gateway token goes with the
/// transition, so no replica accepts the token any longer.
#[test]
fn pausing_or_ending_forgets_the_tool_gateway_token() {
    type End = fn(&mut Run) -> Result<(), TransitionError>;
    let ends: [(&str, End); 4] = [
        ("pause", |run| run.pause(PauseReason::HumanApproval)),
        ("complete", |run| run.complete(chrono::Utc::now())),
        ("fail", |run| run.fail("boom", chrono::Utc::now())),
        ("cancel", |run| run.cancel(chrono::Utc::now())),
    ];
    for (name, end) in ends {
        let mut run = run_in(RunStatus::Running);
        run.engine.tool_gateway_token_sha256 = Some("ab".repeat(32));
        end(&mut run).unwrap();
        assert_eq!(run.engine.tool_gateway_token_sha256, None, "{name}");
    }
    let mut refused = run_in(RunStatus::Completed);
    refused.engine.tool_gateway_token_sha256 = Some("ab".repeat(32));
    assert!(refused.pause(PauseReason::Manual).is_err());
    assert!(refused.engine.tool_gateway_token_sha256.is_some());
}
