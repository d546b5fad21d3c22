//! Requests that move a run through its lifecycle from outside: resume (reply, approve,
//! request changes, auth completed, continue), cancel, pause, and the records hosts append.

use ar_core::event::{self as ev, RunEvent};
use ar_core::records::{message_type, Artifact, Message};
use ar_core::store::{RunChange, SecretChange};
use ar_core::{
    CredentialSource, InteractionStatus, LastResume, MessageProvenance, MessageRole, PauseReason,
    ResumeIntent, Run, RunStatus,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::admission::TurnPolicyRequest;
use sha2::{Digest, Sha256};

use crate::admission::{normalize_turn_policy, MODEL_CREDENTIAL_SECRET};
use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};
use crate::model_route::RunCredential;
use crate::owner::{OwnerMsg, StopReason};
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
        request.intent = request.intent.trim().to_string();
        request.content = request.content.trim().to_string();
        request.resume_id = request.resume_id.trim().to_string();
        request.interaction_id = request.interaction_id.trim().to_string();
        request.external_actor_id = request.external_actor_id.trim().to_string();
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
        match provenance {
            Some(MessageProvenance::Human) => {
                if request.external_actor_id.is_empty() {
                    return Err(EngineError::invalid(
                        "message_provenance human requires external_actor_id",
                    ));
                }
                if intent == ResumeIntent::AuthCompleted {
                    return Err(EngineError::invalid(
                        "message_provenance human cannot send auth_completed",
                    ));
                }
            }
            Some(MessageProvenance::SystemNotification) => {
                if intent != ResumeIntent::Reply {
                    return Err(EngineError::invalid(
                        "message_provenance system_notification requires intent reply",
                    ));
                }
                if !request.interaction_id.is_empty() || request.response_payload.is_some() {
                    return Err(EngineError::invalid(
                        "message_provenance system_notification cannot carry interaction_id or response_payload",
                    ));
                }
            }
            None => {}
        }
        if let Some(payload) = &request.response_payload {
            if !payload.is_object() && !payload.is_null() {
                return Err(EngineError::invalid(
                    "response_payload must be a JSON object",
                ));
            }
        }
        let run = self.load_run(app_id, run_id).await?;
        let turn_policy = match &request.turn_policy {
            Some(policy) => Some(normalize_turn_policy(policy, run.runtime_kind)?),
            None => None,
        };
        let print = fingerprint(&request);
        if !request.resume_id.is_empty()
            && last_resume(&run).map(|last| last.resume_id.as_str())
                == Some(request.resume_id.as_str())
        {
            return Ok(run);
        }
        if run.is_terminal() {
            return Err(EngineError::invalid("run is terminal"));
        }
        if run.status() != RunStatus::Paused {
            if last_resume(&run).map(|last| last.fingerprint.as_str()) == Some(print.as_str()) {
                return Ok(run);
            }
            return Err(EngineError::invalid("run is not paused"));
        }
        let now = self.now();
        if idle_expired(&run, now) {
            self.transact(app_id, run_id, Some(run), |run, change| {
                if !idle_expired(run, now) {
                    return Ok(Decide::Skip(()));
                }
                mark_completed(run, change, None, Some("idle_timeout"), now)?;
                Ok(Decide::Commit(()))
            })
            .await?;
            return Err(EngineError::invalid("run idle timeout expired"));
        }
        let interactions = self.deps().store.list_interactions(app_id, run_id).await?;
        let target = if request.interaction_id.is_empty() {
            interactions
                .iter()
                .rev()
                .find(|i| i.status == InteractionStatus::Pending)
                .cloned()
        } else {
            match interactions.iter().find(|i| i.id == request.interaction_id) {
                None => {
                    return Err(EngineError::invalid(format!(
                        "interaction {} is not pending",
                        request.interaction_id
                    )))
                }
                Some(found) if found.status == InteractionStatus::Resolved => {
                    let same = found.response_payload.as_ref()
                        == Some(&self::response_payload(&request, intent));
                    if same {
                        return Ok(run);
                    }
                    return Err(EngineError::invalid(format!(
                        "interaction {} is not pending",
                        request.interaction_id
                    )));
                }
                Some(found) => Some(found.clone()),
            }
        };
        if provenance == Some(MessageProvenance::SystemNotification)
            && (run.pause_reason() != PauseReason::AwaitingUserMessage || target.is_some())
        {
            return Err(EngineError::invalid(
                "system notifications can only resume a run awaiting a user message with no pending interactions",
            ));
        }
        let resume_id = if !request.resume_id.is_empty() {
            request.resume_id.clone()
        } else if let Some(interaction) = &target {
            format!("interaction:{}:{}", interaction.id, intent.as_str())
        } else {
            format!(
                "auto:{}:{}:{}",
                run.id,
                run.updated_at.timestamp_nanos_opt().unwrap_or_default(),
                &print[..16]
            )
        };
        let mut state = match self.deps().store.latest_checkpoint(run_id).await? {
            Some(checkpoint) => Some(LoopState::from_json(&checkpoint.state)?),
            None => None,
        };
        let checkpoint_step = state.as_ref().map(|s| s.step).unwrap_or(0);
        // Record the decision on the parked call, or queue the content as a user message.
        let decision = match intent {
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
        };
        let mut queue_content = !request.content.is_empty();
        if let (Some(state), Some(interaction)) = (state.as_mut(), &target) {
            if let Some(pending) = state
                .pending
                .iter_mut()
                .find(|p| p.interaction_id.as_deref() == Some(interaction.id.as_str()))
            {
                pending.decision = Some(decision.clone());
                // The reply or rejection reason already reaches the model as the call's result.
                queue_content = false;
            }
        }
        let mut state = state.unwrap_or_default();
        if queue_content {
            state.queued_user_messages.push(request.content.clone());
        }
        state.turn_steps = 0;
        state.corrections = 0;
        let payload = response_payload(&request, intent);
        let new_checkpoint = ar_core::store::Checkpoint {
            run_id: run.id.clone(),
            step: checkpoint_step,
            state: state.to_json(),
            created_at: now,
        };
        let message_kind = if provenance == Some(MessageProvenance::SystemNotification) {
            message_type::SYSTEM_NOTIFICATION
        } else {
            message_type::MESSAGE
        };
        let (run, _, ()) = self
            .transact(app_id, run_id, Some(run), |run, change| {
                if run.status() != RunStatus::Paused {
                    return Err(EngineError::invalid(if run.is_terminal() {
                        "run is terminal"
                    } else {
                        "run is not paused"
                    }));
                }
                if let Some(interaction) = &target {
                    let mut resolved = interaction.clone();
                    resolved.status = InteractionStatus::Resolved;
                    resolved.resolved_by_external_id = request.external_actor_id.clone();
                    resolved.resolved_at = Some(now);
                    resolved.updated_at = now;
                    resolved.response_payload = Some(payload.clone());
                    change.interactions.push(resolved);
                }
                if !request.content.is_empty() {
                    let mut row =
                        message(run, MessageRole::User, &request.content, message_kind, now);
                    row.runtime_message_id = resume_id.clone();
                    change.messages.push(row);
                }
                if let Some(policy) = &turn_policy {
                    run.input.turn_policy = policy.clone();
                }
                let interaction_id = target.as_ref().map(|i| i.id.clone()).unwrap_or_default();
                run.resume(intent, now)?;
                run.engine.last_resume = Some(LastResume {
                    resume_id: resume_id.clone(),
                    fingerprint: print.clone(),
                    intent: intent.as_str().to_string(),
                    message_provenance: request.message_provenance.clone(),
                    content: request.content.clone(),
                    external_actor_id: request.external_actor_id.clone(),
                    interaction_id: interaction_id.clone(),
                });
                change.checkpoint = Some(new_checkpoint.clone());
                change.events.push(RunEvent::RunResumed(ev::RunResumed {
                    resume_id: resume_id.clone(),
                    interaction_id,
                }));
                Ok(Decide::Commit(()))
            })
            .await?;
        self.spawn_owner(app_id, run_id);
        Ok(run)
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
            return Ok(run);
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
        self.inner
            .owners
            .tell(&run_id, OwnerMsg::Stop(StopReason::Cancelled));
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
        self.inner.owners.tell(run_id, OwnerMsg::Pause);
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

    /// `PUT /v1/runs/{id}/model-credential`: replaces an active run's credential (same connection).
    pub async fn update_model_credential(
        &self,
        app_id: &str,
        run_id: &str,
        credential: RunCredential,
    ) -> EngineResult<(Run, Option<DateTime<Utc>>)> {
        let Some(sealer) = self.deps().sealer.clone() else {
            return Err(EngineError::invalid(
                "run model credentials are not configured",
            ));
        };
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Err(EngineError::invalid("run is terminal"));
        }
        credential.validate(self.now())?;
        if let Some(sealed) = self
            .deps()
            .store
            .get_secret(run_id, MODEL_CREDENTIAL_SECRET)
            .await?
        {
            if let Ok(plain) = sealer.open(app_id, run_id, MODEL_CREDENTIAL_SECRET, &sealed) {
                if let Ok(current) = serde_json::from_slice::<RunCredential>(&plain) {
                    if current.connection_id != credential.connection_id
                        || current.account_id != credential.account_id
                    {
                        return Err(EngineError::invalid(
                            "replacement credential cannot change connection_id or account_id",
                        ));
                    }
                    if current.credential_type != credential.credential_type {
                        return Err(EngineError::invalid(
                            "replacement credential cannot change its type",
                        ));
                    }
                }
            }
        } else if run.input.credential_source != Some(CredentialSource::App) {
            return Err(EngineError::invalid(
                "run was not started with a model credential",
            ));
        }
        let ciphertext = sealer.seal_credential(app_id, run_id, &credential)?;
        let expires_at = credential.expires_at;
        let (run, _, ()) = self
            .transact(app_id, run_id, Some(run), |run, change| {
                if run.is_terminal() {
                    return Err(EngineError::invalid("run is terminal"));
                }
                change.secrets.push(SecretChange::Put {
                    kind: MODEL_CREDENTIAL_SECRET.to_string(),
                    ciphertext: ciphertext.clone(),
                });
                Ok(Decide::Commit(()))
            })
            .await?;
        self.mark_route_stale(run_id);
        Ok((run, expires_at))
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
