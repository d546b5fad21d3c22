//! The closed vocabularies of the domain (statuses, reasons, modes) with their contract strings.

/// Error for a string that is not one of an enum's contract values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field} {value:?}: expected one of {expected}")]
pub struct UnknownValue {
    pub field: &'static str,
    pub value: String,
    pub expected: String,
}

macro_rules! contract_enum {
    ($(#[$meta:meta])* $name:ident, $field:literal { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in contract order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The contract string of this value.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses a contract string (exact match after trimming).
            pub fn parse(value: &str) -> Result<Self, $crate::enums::UnknownValue> {
                match value.trim() {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::enums::UnknownValue {
                        field: $field,
                        value: value.to_string(),
                        expected: [$($text),+].join(", "),
                    }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use contract_enum;

contract_enum!(
    /// Lifecycle status of a run.
    RunStatus, "status" {
        Queued => "queued",
        Running => "running",
        Paused => "paused",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
);

impl RunStatus {
    /// Completed, failed and cancelled runs never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

contract_enum!(
    /// Why a paused run waits.
    PauseReason, "pause_reason" {
        None => "none",
        HumanInput => "human_input",
        HumanApproval => "human_approval",
        Authentication => "authentication",
        AwaitingUserMessage => "awaiting_user_message",
        Manual => "manual",
        /// One of the run's budgets would be spent by its next model call (an addition of
        /// this version).
        Budget => "budget",
    }
);

contract_enum!(
    /// Where a run's model credential comes from when it is not the runtime's own.
    CredentialSource, "credential_source" {
        /// The host supplied a run credential.
        App => "app",
    }
);

contract_enum!(
    /// Author of a run message.
    MessageRole, "role" {
        User => "user",
        Assistant => "assistant",
        System => "system",
        Tool => "tool",
    }
);

contract_enum!(
    /// Run-level approval state.
    ApprovalState, "approval_state" {
        NotRequired => "not_required",
        Pending => "pending",
        Approved => "approved",
        Rejected => "rejected",
    }
);

contract_enum!(
    /// When the approval gate stops tool calls.
    ApprovalMode, "approval_mode" {
        Never => "never",
        MutatingTools => "mutating_tools",
        Always => "always",
        RiskBased => "risk_based",
    }
);

contract_enum!(
    /// Whether a person is expected to take part in the run.
    InvocationMode, "mode" {
        Autonomous => "autonomous",
        Interactive => "interactive",
    }
);

contract_enum!(
    /// Where a run executes: in the API process or as a durable workflow.
    ExecutionMode, "execution_mode" {
        Lightweight => "lightweight",
        Durable => "durable",
    }
);

contract_enum!(
    /// Which adapter executes an agent.
    RuntimeKind, "runtime_kind" {
        NativeSdk => "native_sdk",
        A2a => "a2a",
        Codex => "codex",
        OpenCode => "opencode",
        ClaudeCode => "claude_code",
    }
);

contract_enum!(
    /// What a resume request asks the run to do.
    ResumeIntent, "intent" {
        Reply => "reply",
        Continue => "continue",
        Approve => "approve",
        RequestChanges => "request_changes",
        AuthCompleted => "auth_completed",
    }
);

contract_enum!(
    /// Chat-style or task-style turns.
    TurnMode, "turn_policy.mode" {
        CompleteOnFinish => "complete_on_finish",
        PauseAfterAssistant => "pause_after_assistant",
    }
);

contract_enum!(
    /// Whether completing a turn needs the `finish_turn` tool.
    CompletionMode, "turn_policy.completion_mode" {
        Implicit => "implicit",
        Explicit => "explicit",
        ExplicitFinish => "explicit_finish",
    }
);

impl CompletionMode {
    /// `explicit` and the SDK's `explicit_finish` mean the same thing.
    pub fn is_explicit(self) -> bool {
        matches!(
            self,
            CompletionMode::Explicit | CompletionMode::ExplicitFinish
        )
    }
}

contract_enum!(
    /// Whether an interaction still waits for a person.
    InteractionStatus, "interaction status" {
        Pending => "pending",
        Resolved => "resolved",
    }
);

contract_enum!(
    /// Who wrote a resume message.
    MessageProvenance, "message_provenance" {
        Human => "human",
        SystemNotification => "system_notification",
    }
);

contract_enum!(
    /// Risk classification of a tool, independent of its mutating flag.
    RiskLevel, "risk_level" {
        Read => "read",
        RoutineMutation => "routine_mutation",
        SensitiveMutation => "sensitive_mutation",
        DestructiveMutation => "destructive_mutation",
    }
);

contract_enum!(
    /// Event projection contract of an app.
    EventProtocol, "event_protocol" {
        V1 => "v1",
        V2 => "v2",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rejects_unknown_with_choices() {
        let error = ApprovalMode::parse("sometimes").unwrap_err();
        assert!(error
            .to_string()
            .contains("never, mutating_tools, always, risk_based"));
        assert_eq!(
            ApprovalMode::parse(" always ").unwrap(),
            ApprovalMode::Always
        );
    }
}
