//! The fixed strings of the dispatch contract: authority, policy enums, error codes, usage source.

/// `AuthorityChatSubscriptionIsolatedV1`.
pub const AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1: &str = "chat_subscription_isolated_v1";
/// `PolicyCodexSubscriptionChatV1`.
pub const POLICY_CODEX_SUBSCRIPTION_CHAT_V1: &str = "codex-subscription-chat-v1";
/// `RuntimeContractCodexSubscriptionExecV1`.
pub const RUNTIME_CONTRACT_CODEX_SUBSCRIPTION_EXEC_V1: &str = "codex_subscription_exec_v1";
/// `AdapterCodexSubscription`.
pub const ADAPTER_CODEX_SUBSCRIPTION: &str = "model.chat.text-only.codex-subscription";
/// The agent name of the subscription lane (also the profile prefix).
pub const AGENT_CODEX_SUBSCRIPTION: &str = "codex-subscription";
/// `ReasoningEffortMedium`.
pub const REASONING_EFFORT_MEDIUM: &str = "medium";
/// `ReasoningContextCurrentTurn`.
pub const REASONING_CONTEXT_CURRENT_TURN: &str = "current_turn";
/// `AccountTypeChatGPT`.
pub const ACCOUNT_TYPE_CHATGPT: &str = "chatgpt";
/// `ThreadModeEphemeral`.
pub const THREAD_MODE_EPHEMERAL: &str = "ephemeral";
/// `SandboxModeReadOnly`.
pub const SANDBOX_MODE_READ_ONLY: &str = "readOnly";
/// `ApprovalPolicyNever`.
pub const APPROVAL_POLICY_NEVER: &str = "never";
/// `WorkdirModeEmptyPerTarget`.
pub const WORKDIR_MODE_EMPTY_PER_TARGET: &str = "empty_per_target";
/// `ToolsModeNone`.
pub const TOOLS_MODE_NONE: &str = "none";
/// `ResourcePolicyDenyAndFail`.
pub const RESOURCE_POLICY_DENY_AND_FAIL: &str = "deny_and_fail";
/// `UnknownProviderIdentity`: codex exec does not expose the resolved model.
pub const UNKNOWN_PROVIDER_IDENTITY: &str = "unknown";
/// `UsageSourceCodexExecJSONL`.
pub const USAGE_SOURCE_CODEX_EXEC_JSONL: &str = "codex_exec_jsonl";
/// Terminal status of a good subscription turn.
pub const TERMINAL_STATUS_COMPLETED: &str = "completed";
/// The only request timeout the subscription policy allows.
pub const REQUEST_TIMEOUT_MILLIS: i64 = 120_000;

/// `ErrorChatAuthorityViolation`.
pub const ERROR_CHAT_AUTHORITY_VIOLATION: &str = "chat_authority_violation";
/// `ErrorChatPolicyUnavailable`.
pub const ERROR_CHAT_POLICY_UNAVAILABLE: &str = "chat_policy_unavailable";
/// `ErrorProviderFailed`.
pub const ERROR_PROVIDER_FAILED: &str = "provider_failed";
/// `ErrorProviderResultUnknown`.
pub const ERROR_PROVIDER_RESULT_UNKNOWN: &str = "provider_result_unknown";

/// Set as `error_code` on the `exited` event of a cancelled run, so remote clients see why it ended.
pub const EXIT_CODE_CANCELED: &str = "canceled";
/// Our extension: `exited.error_code` of a run a node cancelled because it is shutting down
/// (its caller may run it again elsewhere).
pub const EXIT_CODE_NODE_SHUTDOWN: &str = "node_shutdown";

/// ChatGPT plans the subscription policy accepts.
pub const KNOWN_ACCOUNT_PLANS: &[&str] = &[
    "free",
    "go",
    "plus",
    "pro",
    "prolite",
    "team",
    "business",
    "enterprise",
    "edu",
    "self_serve_business_usage_based",
    "enterprise_cbp_usage_based",
];
