//! Requests that move a run through its lifecycle from outside: resume (reply, approve,
//! request changes, auth completed, continue), cancel, pause, and the records hosts append.

use ar_core::budget::{BudgetExceeded, RunBudgets};
use ar_core::durable::DurableSignal;
use ar_core::event::{self as ev, RunEvent};
use ar_core::records::{interaction_kind, message_type, Artifact, Interaction, Message};
use ar_core::replica::OwnerSignal;
use ar_core::store::{Checkpoint, Committed, RunChange, SecretChange};
use ar_core::{
    ExecutionMode, InteractionStatus, LastResume, MessageProvenance, MessageRole, PauseReason,
    ResumeIntent, Run, RunStatus, TurnPolicy,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::admission::TurnPolicyRequest;
use sha2::{Digest, Sha256};

use crate::admission::{normalize_turn_policy, MODEL_CREDENTIAL_SECRET};
use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};
use crate::records::{mark_cancelled, mark_completed, mark_paused, message};
use crate::transcript::{Decision, LoopState};

/// An artifact a host appends.
#[derive(Debug, Clone, Default)]
pub struct NewArtifact {
    pub artifact_type: String,
    pub format: String,
    pub storage_mode: String,
    pub inline_content: String,
    pub metadata: Option<Value>,
}

/// A resume request after wire decoding.
#[derive(Debug, Clone, Default)]
pub struct ResumeRun {
    pub intent: String,
    pub content: String,
    pub resume_id: String,
    pub interaction_id: String,
    pub response_payload: Option<Value>,
    pub external_actor_id: String,
    pub message_provenance: String,
    pub turn_policy: Option<TurnPolicyRequest>,
    /// Budgets to raise (or set), as the request gave them: each one given replaces the
    /// run's (an addition of this version; how a run paused for its budget goes on).
    pub budgets: Option<Value>,
}

fn fingerprint(request: &ResumeRun) -> String {
    let mut hasher = Sha256::new();
    for part in [
        request.message_provenance.as_str(),
        request.intent.as_str(),
        request.content.as_str(),
        &request
            .response_payload
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default(),
        request.external_actor_id.as_str(),
        request.interaction_id.as_str(),
        &request
            .turn_policy
            .as_ref()
            .map(|p| serde_json::to_string(p).unwrap_or_default())
            .unwrap_or_default(),
        &request
            .budgets
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default(),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hex::encode(hasher.finalize())
}

fn last_resume(run: &Run) -> Option<&LastResume> {
    run.engine.last_resume.as_ref()
}

fn idle_expired(run: &Run, now: DateTime<Utc>) -> bool {
    let policy = &run.input.turn_policy;
    policy.pauses_after_assistant()
        && policy.idle_timeout_seconds > 0
        && run.status() == RunStatus::Paused
        && (now - run.updated_at).num_seconds() > policy.idle_timeout_seconds
}

/// Trims a resume request and checks its intent and provenance rules.
fn check_resume_request(
    request: &mut ResumeRun,
) -> EngineResult<(ResumeIntent, Option<MessageProvenance>)> {
    for field in [
        &mut request.intent,
        &mut request.content,
        &mut request.resume_id,
        &mut request.interaction_id,
        &mut request.external_actor_id,
    ] {
        *field = field.trim().to_string();
    }
    if request.intent.is_empty() {
        return Err(EngineError::invalid("intent is required"));
    }
    let intent = ResumeIntent::parse(&request.intent)
        .map_err(|error| EngineError::invalid(error.to_string()))?;
    let provenance = match request.message_provenance.trim() {
        "" => None,
        other => Some(
            MessageProvenance::parse(other)
                .map_err(|error| EngineError::invalid(error.to_string()))?,
        ),
    };
    check_provenance(request, intent, provenance)?;
    if let Some(payload) = &request.response_payload {
        if !payload.is_object() && !payload.is_null() {
            return Err(EngineError::invalid(
                "response_payload must be a JSON object",
            ));
        }
    }
    Ok((intent, provenance))
}

/// What each message provenance allows.
fn check_provenance(
    request: &ResumeRun,
    intent: ResumeIntent,
    provenance: Option<MessageProvenance>,
) -> EngineResult<()> {
    match provenance {
        Some(MessageProvenance::Human) if request.external_actor_id.is_empty() => Err(
            EngineError::invalid("message_provenance human requires external_actor_id"),
        ),
        Some(MessageProvenance::Human) if intent == ResumeIntent::AuthCompleted => Err(
            EngineError::invalid("message_provenance human cannot send auth_completed"),
        ),
        Some(MessageProvenance::SystemNotification) if intent != ResumeIntent::Reply => {
            Err(EngineError::invalid(
                "message_provenance system_notification requires intent reply",
            ))
        }
        Some(MessageProvenance::SystemNotification)
            if !request.interaction_id.is_empty() || request.response_payload.is_some() =>
        {
            Err(EngineError::invalid(
                "message_provenance system_notification cannot carry interaction_id or response_payload",
            ))
        }
        _ => Ok(()),
    }
}

/// Whether this resume was already applied (same `resume_id`, or the same request while the
/// run still runs from it); an error when the run cannot be resumed at all.
fn already_resumed(run: &Run, request: &ResumeRun, print: &str) -> EngineResult<bool> {
    let last = last_resume(run);
    if !request.resume_id.is_empty()
        && last.map(|last| last.resume_id.as_str()) == Some(request.resume_id.as_str())
    {
        return Ok(true);
    }
    if run.is_terminal() {
        return Err(EngineError::invalid("run is terminal"));
    }
    if run.status() == RunStatus::Paused {
        return Ok(false);
    }
    if last.map(|last| last.fingerprint.as_str()) == Some(print) {
        return Ok(true);
    }
    Err(EngineError::invalid("run is not paused"))
}

/// The resume's id: the host's, else one derived from the interaction it answers, else one
/// derived from the run's state and the request.
fn resume_id_for(
    run: &Run,
    request: &ResumeRun,
    intent: ResumeIntent,
    target: Option<&Interaction>,
    print: &str,
) -> String {
    if !request.resume_id.is_empty() {
        return request.resume_id.clone();
    }
    if let Some(interaction) = target {
        return format!("interaction:{}:{}", interaction.id, intent.as_str());
    }
    format!(
        "auto:{}:{}:{}",
        run.id,
        run.updated_at.timestamp_nanos_opt().unwrap_or_default(),
        &print[..16]
    )
}

/// The decision a resume records on the parked call it answers.
fn decision_of(request: &ResumeRun, intent: ResumeIntent) -> Decision {
    match intent {
        ResumeIntent::Approve => Decision::Approved,
        ResumeIntent::RequestChanges => Decision::Rejected {
            reason: request.content.clone(),
        },
        ResumeIntent::Reply | ResumeIntent::Continue | ResumeIntent::AuthCompleted => {
            Decision::Answered {
                content: match &request.response_payload {
                    Some(payload) if !payload.is_null() => payload.to_string(),
                    _ => request.content.clone(),
                },
            }
        }
    }
}

/// A run paused for its budget goes on only with a budget that allows what its next model
/// call needs (recorded on the `budget` interaction it answers).
fn enough_budget(
    current: Option<RunBudgets>,
    raised: Option<RunBudgets>,
    target: Option<&Interaction>,
) -> EngineResult<()> {
    let payload = target
        .filter(|interaction| interaction.interaction_kind == interaction_kind::BUDGET)
        .and_then(|interaction| interaction.request_payload.as_ref());
    let Some(spent) =
        payload.and_then(|payload| serde_json::from_value::<BudgetExceeded>(payload.clone()).ok())
    else {
        return Ok(());
    };
    let allowed = raised
        .or(current)
        .and_then(|budgets| budgets.allowed(spent.limit));
    if allowed.is_none_or(|allowed| allowed >= spent.needed) {
        return Ok(());
    }
    let limit = spent.limit.as_str();
    Err(EngineError::invalid(format!(
        "run is paused for its budget ({spent}): resume with budgets.{limit} of at least {}",
        spent.needed
    )))
}

/// What the agent is told when a person decided on a call it made through the run tool
/// gateway (an agent CLI's MCP bridge): such a call is parked in no loop state, so the agent
/// learns the decision as a message and, once approved, makes the call again (the gateway
/// lets it run and consumes the approval).
fn gateway_decision_note(interaction: &Interaction, intent: ResumeIntent) -> Option<String> {
    if interaction.interaction_kind != interaction_kind::APPROVAL_REQUEST {
        return None;
    }
    let payload = interaction.request_payload.as_ref()?;
    let tool = payload.get("tool_name")?.as_str()?;
    match intent {
        ResumeIntent::Approve => Some(format!(
            "A person approved your call of {tool} that was waiting for approval. Make that \
             call again now, with the same input: it will run this time."
        )),
        ResumeIntent::RequestChanges => Some(format!(
            "A person did not approve your call of {tool}; it did not run. Do not make it \
             again unless their answer asks for it."
        )),
        _ => None,
    }
}

/// The loop state the resumed turn starts from (the latest checkpoint's): the decision
/// recorded on the parked call it answers, or the content queued as a user message; the turn's
/// counters reset.
fn resumed_state(
    previous: Option<&Checkpoint>,
    request: &ResumeRun,
    intent: ResumeIntent,
    target: Option<&Interaction>,
) -> EngineResult<LoopState> {
    let mut state = match previous {
        Some(checkpoint) => LoopState::from_json(&checkpoint.state)?,
        None => LoopState::default(),
    };
    let parked = target.and_then(|interaction| {
        state
            .pending
            .iter_mut()
            .find(|p| p.interaction_id.as_deref() == Some(interaction.id.as_str()))
    });
    match parked {
        // The reply or rejection reason reaches the model as the call's result.
        Some(pending) => pending.decision = Some(decision_of(request, intent)),
        None => {
            let note = target.and_then(|interaction| gateway_decision_note(interaction, intent));
            state.queued_user_messages.extend(note);
            if !request.content.is_empty() {
                state.queued_user_messages.push(request.content.clone());
            }
        }
    }
    state.turn_steps = 0;
    state.corrections = 0;
    state.skill_corrected = false;
    Ok(state)
}

/// What a resume answers.
enum ResumeTarget {
    /// This pending interaction, or none (a plain reply or continue).
    Answers(Option<Box<Interaction>>),
    /// The named interaction was already resolved by this same answer.
    Repeat,
}

/// Everything a resume commits, decided before the commit.
struct ResumePlan {
    request: ResumeRun,
    intent: ResumeIntent,
    /// The interaction it resolves.
    target: Option<Interaction>,
    payload: Value,
    resume_id: String,
    print: String,
    turn_policy: Option<TurnPolicy>,
    /// The run's budgets once raised by the request, when it raises any.
    budgets: Option<RunBudgets>,
    checkpoint: Checkpoint,
    /// The checkpoint `checkpoint` replaces (at the same step), for a rollback.
    previous_checkpoint: Option<Checkpoint>,
    message_kind: &'static str,
    now: DateTime<Utc>,
}

impl ResumePlan {
    /// Resumes `run` (still paused) with the plan's interaction, message, policy and checkpoint.
    fn apply(&self, run: &mut Run, change: &mut RunChange) -> EngineResult<()> {
        let (request, now) = (&self.request, self.now);
        if run.status() != RunStatus::Paused {
            return Err(EngineError::invalid(if run.is_terminal() {
                "run is terminal"
            } else {
                "run is not paused"
            }));
        }
        if let Some(interaction) = &self.target {
            let mut resolved = interaction.clone();
            resolved.status = InteractionStatus::Resolved;
            resolved.resolved_by_external_id = request.external_actor_id.clone();
            resolved.resolved_at = Some(now);
            resolved.updated_at = now;
            resolved.response_payload = Some(self.payload.clone());
            change.interactions.push(resolved);
        }
        if !request.content.is_empty() {
            let mut row = message(
                run,
                MessageRole::User,
                &request.content,
                self.message_kind,
                now,
            );
            row.runtime_message_id = self.resume_id.clone();
            change.messages.push(row);
        }
        if let Some(policy) = &self.turn_policy {
            run.input.turn_policy = policy.clone();
        }
        if self.budgets.is_some() {
            run.engine.budgets = self.budgets;
        }
        let interaction_id = self
            .target
            .as_ref()
            .map(|i| i.id.clone())
            .unwrap_or_default();
        run.resume(self.intent, now)?;
        run.engine.last_resume = Some(LastResume {
            resume_id: self.resume_id.clone(),
            fingerprint: self.print.clone(),
            intent: self.intent.as_str().to_string(),
            message_provenance: request.message_provenance.clone(),
            content: request.content.clone(),
            external_actor_id: request.external_actor_id.clone(),
            interaction_id: interaction_id.clone(),
        });
        change.checkpoint = Some(self.checkpoint.clone());
        change.events.push(RunEvent::RunResumed(ev::RunResumed {
            resume_id: self.resume_id.clone(),
            interaction_id,
        }));
        Ok(())
    }
}

/// What rolls a committed resume of a durable run back when its workflow could not be told.
struct ResumeUndo {
    /// The run as it was before the resume.
    before: Run,
    /// The run's version the resume committed: only a run nothing changed since is rolled back
    /// (anything else, such as a turn a signal reported as failed yet delivered, is left be).
    resumed_version: i64,
    /// The interaction the resume resolved, as it was (pending).
    interaction: Option<Interaction>,
    /// The message the resume appended.
    appended: Vec<String>,
    /// The checkpoint the resume's replaced; with none, the empty loop state (what a run
    /// without a checkpoint starts from) at the same step.
    checkpoint: Checkpoint,
}

impl ResumeUndo {
    fn of(before: Run, resumed: &Run, committed: &Committed, plan: &ResumePlan) -> ResumeUndo {
        let checkpoint = plan
            .previous_checkpoint
            .clone()
            .unwrap_or_else(|| Checkpoint {
                state: LoopState::default().to_json(),
                ..plan.checkpoint.clone()
            });
        ResumeUndo {
            before,
            resumed_version: resumed.version,
            interaction: plan.target.clone(),
            appended: committed.messages.iter().map(|m| m.id.clone()).collect(),
            checkpoint,
        }
    }

    /// Puts the run back as it was (a stored state, not a transition: the resume is undone,
    /// not followed by a pause) and records `run.paused` for it; false when the run moved on.
    fn apply(&self, run: &mut Run, change: &mut RunChange) -> EngineResult<Decide<bool>> {
        if run.version != self.resumed_version {
            return Ok(Decide::Skip(false));
        }
        let version = run.version;
        *run = self.before.clone();
        run.version = version;
        change.interactions.extend(self.interaction.clone());
        change.removed_messages.clone_from(&self.appended);
        change.checkpoint = Some(self.checkpoint.clone());
        change
            .events
            .push(RunEvent::RunPaused(ev::RunPaused::because(
                run.pause_reason(),
            )));
        Ok(Decide::Commit(true))
    }
}

impl Engine {
    /// `POST /v1/runs/{id}/resume` and its shorthands.
    pub async fn resume(
        &self,
        app_id: &str,
        run_id: &str,
        mut request: ResumeRun,
    ) -> EngineResult<Run> {
        if self.is_shutting_down() {
            return Err(EngineError::ShuttingDown);
        }
        let (intent, provenance) = check_resume_request(&mut request)?;
        let run = self.load_run(app_id, run_id).await?;
        let turn_policy = match &request.turn_policy {
            Some(policy) => Some(normalize_turn_policy(policy, run.runtime_kind)?),
            None => None,
        };
        let raise = match &request.budgets {
            Some(value) if !value.is_null() => {
                Some(RunBudgets::parse(value, "budgets").map_err(EngineError::Invalid)?)
            }
            _ => None,
        };
        let print = fingerprint(&request);
        if already_resumed(&run, &request, &print)? {
            return Ok(run);
        }
        let now = self.now();
        if idle_expired(&run, now) {
            self.expire_idle(app_id, run_id, run, now).await?;
            return Err(EngineError::invalid("run idle timeout expired"));
        }
        let target = match self.resume_target(&run, &request, intent).await? {
            ResumeTarget::Answers(target) => target.map(|found| *found),
            ResumeTarget::Repeat => return Ok(run),
        };
        if provenance == Some(MessageProvenance::SystemNotification)
            && (run.pause_reason() != PauseReason::AwaitingUserMessage || target.is_some())
        {
            return Err(EngineError::invalid(
                "system notifications can only resume a run awaiting a user message with no pending interactions",
            ));
        }
        let budgets = raise.map(|raise| run.engine.budgets.unwrap_or_default().raised_by(raise));
        if run.pause_reason() == PauseReason::Budget {
            enough_budget(run.engine.budgets, budgets, target.as_ref())?;
        }
        let resume_id = resume_id_for(&run, &request, intent, target.as_ref(), &print);
        let previous_checkpoint = self.deps().store.latest_checkpoint(run_id).await?;
        let state = resumed_state(
            previous_checkpoint.as_ref(),
            &request,
            intent,
            target.as_ref(),
        )?;
        let plan = ResumePlan {
            payload: response_payload(&request, intent),
            previous_checkpoint,
            checkpoint: Checkpoint {
                run_id: run.id.clone(),
                step: state.step,
                state: state.to_json(),
                created_at: now,
            },
            message_kind: if provenance == Some(MessageProvenance::SystemNotification) {
                message_type::SYSTEM_NOTIFICATION
            } else {
                message_type::MESSAGE
            },
            request,
            intent,
            target,
            resume_id,
            print,
            turn_policy,
            budgets,
            now,
        };
        let before = run.clone();
        let (run, committed, ()) = self
            .transact(app_id, run_id, Some(run), |run, change| {
                plan.apply(run, change)?;
                Ok(Decide::Commit(()))
            })
            .await?;
        if run.execution_mode == ExecutionMode::Durable {
            let undo = ResumeUndo::of(before, &run, &committed, &plan);
            return self.signal_resumed(run, &plan, undo).await;
        }
        self.spawn_owner(app_id, run_id);
        Ok(run)
    }

    /// Wakes a durable run's workflow for a committed resume. When the signal fails the
    /// resume is rolled back whole (the run as it was, its interaction pending, its message
    /// gone, its checkpoint restored; `run.paused` says it waits again) and the request fails,
    /// so the host can try again.
    async fn signal_resumed(
        &self,
        run: Run,
        plan: &ResumePlan,
        undo: ResumeUndo,
    ) -> EngineResult<Run> {
        let resume_id = plan.resume_id.clone();
        let signal = match plan.intent {
            ResumeIntent::Approve | ResumeIntent::RequestChanges => {
                DurableSignal::Approve { resume_id }
            }
            _ => DurableSignal::Resume { resume_id },
        };
        let Err(error) = self.signal_durable(&run.id, signal).await else {
            return Ok(run);
        };
        tracing::error!(run_id = %run.id, error = %ar_core::error_chain(&error), "resume signal failed; rolling the resume back");
        let rolled_back = self
            .transact(&run.app_id, &run.id, None, |run, change| {
                undo.apply(run, change)
            })
            .await;
        let context = match rolled_back {
            Ok((_, _, true)) => "the run's workflow could not be signalled, so the resume was rolled back (the run is paused as before); try again",
            Ok((_, _, false)) => {
                tracing::error!(run_id = %run.id, "the run changed after the resume; not rolled back");
                "the run's workflow could not be signalled and the run changed meanwhile, so the resume was not rolled back"
            }
            Err(rollback) => {
                tracing::error!(run_id = %run.id, error = %rollback, "could not roll the resume back");
                "the run's workflow could not be signalled and the resume could not be rolled back"
            }
        };
        Err(EngineError::Internal {
            context: context.to_string(),
            cause: Some(Box::new(error)),
        })
    }

    /// Completes a chat run that sat paused past its idle timeout.
    async fn expire_idle(
        &self,
        app_id: &str,
        run_id: &str,
        run: Run,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        self.transact(app_id, run_id, Some(run), |run, change| {
            if !idle_expired(run, now) {
                return Ok(Decide::Skip(()));
            }
            mark_completed(run, change, None, Some("idle_timeout"), now)?;
            Ok(Decide::Commit(()))
        })
        .await?;
        Ok(())
    }

    /// The interaction a resume answers: the one named, else the latest pending one (none
    /// when nothing is pending), or a repeat of the answer that resolved the named one.
    async fn resume_target(
        &self,
        run: &Run,
        request: &ResumeRun,
        intent: ResumeIntent,
    ) -> EngineResult<ResumeTarget> {
        let interactions = self
            .deps()
            .store
            .list_interactions(&run.app_id, &run.id)
            .await?;
        if request.interaction_id.is_empty() {
            let latest = interactions
                .iter()
                .rev()
                .find(|i| i.status == InteractionStatus::Pending);
            return Ok(ResumeTarget::Answers(latest.cloned().map(Box::new)));
        }
        let not_pending = || {
            EngineError::invalid(format!(
                "interaction {} is not pending",
                request.interaction_id
            ))
        };
        let found = interactions
            .iter()
            .find(|i| i.id == request.interaction_id)
            .ok_or_else(not_pending)?;
        if found.status != InteractionStatus::Resolved {
            return Ok(ResumeTarget::Answers(Some(Box::new(found.clone()))));
        }
        if found.response_payload.as_ref() == Some(&response_payload(request, intent)) {
            return Ok(ResumeTarget::Repeat);
        }
        Err(not_pending())
    }

    /// `POST /v1/runs/{id}/cancel`: by run id or host run id; idempotent on terminal runs.
    pub async fn cancel(&self, app_id: &str, run_or_host_id: &str) -> EngineResult<Run> {
        let store = &self.deps().store;
        let run = match store.get_run(app_id, run_or_host_id).await? {
            Some(run) => run,
            None => store
                .get_run_by_host_run_id(app_id, run_or_host_id)
                .await?
                .ok_or_else(EngineError::run_not_found)?,
        };
        if run.is_terminal() {
            // Cancelling again re-runs a cleanup that did not happen.
            if run.status() == RunStatus::Cancelled {
                self.clean_workspace_later(app_id, &run.id);
            }
            return Ok(run);
        }
        if run.execution_mode == ExecutionMode::Durable {
            // The workflow first, so it schedules nothing more for the run.
            self.cancel_durable(&run.id).await?;
        }
        let now = self.now();
        let run_id = run.id.clone();
        let (run, _, ()) = self
            .transact(app_id, &run_id, Some(run), |run, change| {
                if run.is_terminal() {
                    return Ok(Decide::Skip(()));
                }
                mark_cancelled(run, change, now)?;
                Ok(Decide::Commit(()))
            })
            .await?;
        self.signal_owner(&run_id, OwnerSignal::Cancel);
        self.clean_workspace_later(app_id, &run_id);
        Ok(run)
    }

    /// `POST /v1/runs/{id}/pause`: queued runs pause at once, running ones at the next safe point.
    pub async fn pause(&self, app_id: &str, run_id: &str) -> EngineResult<Run> {
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Err(EngineError::invalid("run is terminal"));
        }
        let (run, _, ()) = self
            .transact(app_id, run_id, Some(run), |run, change| {
                match run.status() {
                    RunStatus::Paused => Ok(Decide::Skip(())),
                    RunStatus::Queued => {
                        mark_paused(run, change, PauseReason::Manual)?;
                        Ok(Decide::Commit(()))
                    }
                    RunStatus::Running if run.request_pause()? => Ok(Decide::Commit(())),
                    RunStatus::Running => Ok(Decide::Skip(())),
                    _ => Err(EngineError::invalid("run is terminal")),
                }
            })
            .await?;
        self.signal_owner(run_id, OwnerSignal::Pause);
        if run.execution_mode == ExecutionMode::Durable {
            // The store holds the request (the turn pauses at its next safe point); the
            // workflow records it.
            self.signal_durable(run_id, DurableSignal::Pause).await?;
        }
        Ok(run)
    }

    /// `POST /v1/runs/{id}/messages`.
    pub async fn append_message(
        &self,
        app_id: &str,
        run_id: &str,
        role: &str,
        content: &str,
        external_actor_id: &str,
    ) -> EngineResult<Message> {
        let role = match role.trim() {
            "" => MessageRole::User,
            text => match MessageRole::parse(text) {
                Ok(role) if role != MessageRole::Tool => role,
                _ => {
                    return Err(EngineError::invalid(format!(
                        "invalid role {text:?}: expected one of user, assistant, system"
                    )))
                }
            },
        };
        let content = content.trim();
        if content.is_empty() {
            return Err(EngineError::invalid("content is required"));
        }
        let run = self.load_run(app_id, run_id).await?;
        let mut row = message(&run, role, content, message_type::MESSAGE, self.now());
        if !external_actor_id.trim().is_empty() {
            row.content_blocks = None;
        }
        let mut change = RunChange::for_run(&run);
        change.messages.push(row);
        let committed = self.deps().store.commit(change).await?;
        if run.execution_mode == ExecutionMode::Durable && !run.is_terminal() {
            let signal = DurableSignal::Message {
                content: content.to_string(),
            };
            if let Err(error) = self.signal_durable(run_id, signal).await {
                // The message is stored; the workflow only records that one arrived.
                tracing::warn!(run_id, %error, "message signal failed");
            }
        }
        committed
            .messages
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::invalid("message was not stored"))
    }

    /// `POST /v1/runs/{id}/artifacts`.
    pub async fn append_artifact(
        &self,
        app_id: &str,
        run_id: &str,
        request: NewArtifact,
    ) -> EngineResult<Artifact> {
        let NewArtifact {
            artifact_type,
            format,
            storage_mode,
            inline_content,
            metadata,
        } = request;
        let artifact_type = artifact_type.trim();
        if artifact_type.is_empty() {
            return Err(EngineError::invalid("artifact_type is required"));
        }
        let storage_mode = if storage_mode.trim().is_empty() {
            "inline"
        } else {
            storage_mode.trim()
        };
        if storage_mode != "inline" {
            return Err(EngineError::invalid(format!(
                "invalid storage_mode {storage_mode:?}: expected inline"
            )));
        }
        if let Some(metadata) = &metadata {
            if !metadata.is_object() && !metadata.is_null() {
                return Err(EngineError::invalid("metadata must be a JSON object"));
            }
        }
        let run = self.load_run(app_id, run_id).await?;
        let format = if format.trim().is_empty() {
            "json"
        } else {
            format.trim()
        };
        let mut artifact =
            crate::records::artifact(&run, artifact_type, format, &inline_content, self.now());
        artifact.storage_mode = storage_mode.to_string();
        artifact.metadata = Some(
            metadata
                .filter(|m| !m.is_null())
                .unwrap_or_else(|| json!({})),
        );
        let mut change = RunChange::for_run(&run);
        change.artifacts.push(artifact);
        let committed = self.deps().store.commit(change).await?;
        committed
            .artifacts
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::invalid("artifact was not stored"))
    }

    /// `DELETE /v1/runs/{id}/model-credential`: later model requests pause for authentication.
    pub async fn revoke_model_credential(&self, app_id: &str, run_id: &str) -> EngineResult<()> {
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Ok(());
        }
        self.transact(app_id, run_id, Some(run), |_, change| {
            change.secrets.push(SecretChange::Delete {
                kind: MODEL_CREDENTIAL_SECRET.to_string(),
            });
            Ok(Decide::Commit(()))
        })
        .await?;
        self.mark_route_stale(run_id);
        Ok(())
    }
}

fn response_payload(request: &ResumeRun, intent: ResumeIntent) -> Value {
    match &request.response_payload {
        Some(payload) if !payload.is_null() => payload.clone(),
        _ => json!({"intent": intent.as_str(), "content": request.content}),
    }
}
