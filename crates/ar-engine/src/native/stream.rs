//! Streaming one model call: deltas published live, `*_started` events committed as the
//! stream opens them (or folded into the step's commit when the answer arrives at once).

use ar_core::event::{self as ev, RunEvent};
use ar_core::model::{ModelError, ModelRequest, ModelResponse, ModelRoute, StreamDelta};
use ar_core::tool::canonical_tool_name;
use ar_core::Run;
use tokio::sync::mpsc;

use crate::engine::Engine;
use crate::error::EngineResult;
use crate::owner::Owner;

use super::*;

impl StreamMarks {
    /// The `*_started` events a batch of deltas opens (each at most once per model call).
    fn open(&mut self, batch: &[StreamDelta]) -> Vec<RunEvent> {
        let mut opened = Vec::new();
        for delta in batch {
            match delta {
                StreamDelta::Text(_) if !self.text_started => {
                    self.text_started = true;
                    opened.push(RunEvent::AssistantMessageStarted(ev::MessageStarted {
                        message_id: self.message_id.clone(),
                    }));
                }
                StreamDelta::Reasoning(_) if !self.reasoning_started => {
                    self.reasoning_started = true;
                    opened.push(RunEvent::ReasoningMessageStarted(ev::MessageStarted {
                        message_id: self.reasoning_id.clone(),
                    }));
                }
                StreamDelta::ToolCallStarted { index, id, name }
                    if !self.tools_started.iter().any(|(seen, _)| seen == index) =>
                {
                    self.tools_started.push((*index, id.clone()));
                    opened.push(RunEvent::ToolCallStarted(ev::ToolCallStarted {
                        tool_call_id: id.clone(),
                        tool_name: canonical_tool_name(name),
                        parent_message_id: self.message_id.clone(),
                    }));
                }
                _ => {}
            }
        }
        opened
    }
}

/// How a model call ended.
pub(super) enum ModelCall {
    Answered(Result<ModelResponse, ModelError>),
    /// The owner was told to stop or to pause before the answer was complete; the request
    /// was dropped (aborted) and nothing of its answer is kept.
    Interrupted,
    /// A commit of the `*_started` events found the run stopped (ended elsewhere, lease lost).
    Stopped,
}

impl Engine {
    /// Streams one model call, publishing deltas live and committing `*_started` events as the
    /// stream opens them.
    pub(super) async fn call_model(
        &self,
        run: &mut Run,
        route: &ModelRoute,
        request: &ModelRequest,
        owner: &mut Owner,
        marks: &mut StreamMarks,
    ) -> EngineResult<ModelCall> {
        if let Some(answer) = self.scripted_answer(run, request).await? {
            return Ok(ModelCall::Answered(answer));
        }
        let (sender, mut receiver) = mpsc::unbounded_channel::<StreamDelta>();
        let models = self.deps().models.clone();
        let call = async move {
            let mut sink = move |delta: StreamDelta| {
                let _ = sender.send(delta);
            };
            models.complete(route, request, &mut sink).await
        };
        let inbox = &mut owner.inbox;
        let guarded = async move {
            tokio::select! {
                result = call => Some(result),
                () = inbox.stopped_or_paused() => None,
            }
        };
        let consume = async {
            let mut stopped = false;
            let mut first_batch = true;
            while let Some(first) = receiver.recv().await {
                let mut batch = vec![first];
                if first_batch {
                    // A short answer often arrives whole within a few milliseconds; then the
                    // step's one commit carries its `*_started` events and no delta is needed.
                    first_batch = false;
                    let window = tokio::time::sleep(DELTA_COALESCE_WINDOW);
                    tokio::pin!(window);
                    loop {
                        tokio::select! {
                            next = receiver.recv() => match next {
                                Some(delta) => batch.push(delta),
                                None => return Ok(false),
                            },
                            _ = &mut window => break,
                        }
                    }
                }
                while let Ok(next) = receiver.try_recv() {
                    batch.push(next);
                }
                if stopped {
                    continue;
                }
                match self.publish_deltas(run, marks, batch).await {
                    Ok(true) => {}
                    Ok(false) => stopped = true,
                    Err(error) => return Err(error),
                }
            }
            Ok(stopped)
        };
        let (result, stopped) = tokio::join!(guarded, consume);
        if stopped? {
            return Ok(ModelCall::Stopped);
        }
        Ok(result.map_or(ModelCall::Interrupted, ModelCall::Answered))
    }

    /// Commits the `*_started` events a batch of deltas opens, then publishes the deltas.
    pub(super) async fn publish_deltas(
        &self,
        run: &mut Run,
        marks: &mut StreamMarks,
        batch: Vec<StreamDelta>,
    ) -> EngineResult<bool> {
        let opened = marks.open(&batch);
        if !opened.is_empty() {
            if let Flow::Stop = self
                .commit_step(run, |_, change| {
                    change.events.extend(opened.iter().cloned());
                    Ok(())
                })
                .await?
            {
                return Ok(false);
            }
        }
        for delta in batch {
            let event = match delta {
                StreamDelta::Text(text) => RunEvent::AssistantMessageDelta(ev::MessageDelta {
                    message_id: marks.message_id.clone(),
                    text,
                }),
                StreamDelta::Reasoning(text) => RunEvent::ReasoningMessageDelta(ev::MessageDelta {
                    message_id: marks.reasoning_id.clone(),
                    text,
                }),
                StreamDelta::ToolCallArguments { index, delta } => {
                    let Some((_, id)) = marks.tools_started.iter().find(|(seen, _)| *seen == index)
                    else {
                        continue;
                    };
                    RunEvent::ToolCallArgsDelta(ev::ToolCallArgsDelta {
                        tool_call_id: id.clone(),
                        args_delta: delta,
                    })
                }
                StreamDelta::ToolCallStarted { .. } => continue,
            };
            self.publish_transient(run, event);
        }
        Ok(true)
    }
}
