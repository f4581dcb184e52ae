//! The trace's closed vocabularies (contract §3): run statuses, stop reasons, error kinds and call
//! statuses. Each word is written once, here; serde, `toolrun schema`, the spec reader and
//! did-you-mean hints all read it from these enums, so a `match` that forgets a case does not
//! compile. This module depends on nothing else in the crate: every layer may use it.

use std::fmt;

/// Declares an enum whose variants serialise as the given words, with the list of all of them.
macro_rules! vocabulary {
    ($(#[$m:meta])* $vis:vis $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            // A vocabulary's whole API; not every enum uses every part.
            #[allow(dead_code)]
            pub(crate) const ALL: &'static [$name] = &[$($name::$variant,)+];
            /// The words, in declaration order (for schemas and did-you-mean hints).
            #[allow(dead_code)]
            pub(crate) const NAMES: &'static [&'static str] = &[$($text,)+];

            pub(crate) const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            #[allow(dead_code)]
            pub(crate) fn parse(s: &str) -> Option<$name> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

vocabulary! {
    /// How a run ended, for CI: it decides the exit code.
    pub(crate) Status {
        Ok = "ok",
        NeedsConfirmation = "needs_confirmation",
        NeedsReview = "needs_review",
        Failed = "failed",
    }
}

impl Status {
    pub(crate) fn exit_code(self) -> i32 {
        match self {
            Status::Ok => crate::exit::SUCCESS,
            Status::Failed => crate::exit::FAILED,
            Status::NeedsConfirmation | Status::NeedsReview => crate::exit::NEEDS_PERSON,
        }
    }
}

vocabulary! {
    /// Which rule ended a run.
    pub(crate) StopReason {
        Answer = "answer",
        NeedsConfirmation = "needs_confirmation",
        MaxSteps = "max_steps",
        MaxToolCalls = "max_tool_calls",
        LoopDetected = "loop_detected",
        RunTimeout = "run_timeout",
        MalformedDecision = "malformed_decision",
        ModelError = "model_error",
        Interrupted = "interrupted",
        MaxTokensTotal = "max_tokens_total",
        /// `limits.max_cost_usd`: the run spent its budget, by its model's `price:`.
        MaxCostUsd = "max_cost_usd",
        /// The model's reply was cut off at its `max_tokens`: the partial answer is kept.
        MaxTokens = "max_tokens",
        RepeatedErrors = "repeated_errors",
        EmptyQuery = "empty_query",
        /// An MCP server's tools could not be listed, or differ from the spec.
        McpError = "mcp_error",
    }
}

impl StopReason {
    /// Each rule ends a run with one status: an answer is a success, a limit or a loop needs a
    /// person to review, and a broken run (model, timeout, interruption) failed.
    pub(crate) fn status(self) -> Status {
        match self {
            StopReason::Answer => Status::Ok,
            StopReason::NeedsConfirmation => Status::NeedsConfirmation,
            StopReason::MaxSteps
            | StopReason::MaxToolCalls
            | StopReason::LoopDetected
            | StopReason::MaxTokensTotal
            | StopReason::MaxCostUsd
            | StopReason::MaxTokens
            | StopReason::RepeatedErrors => Status::NeedsReview,
            StopReason::RunTimeout
            | StopReason::MalformedDecision
            | StopReason::ModelError
            | StopReason::Interrupted
            | StopReason::EmptyQuery
            | StopReason::McpError => Status::Failed,
        }
    }
}

vocabulary! {
    /// What went wrong with one tool call (or one model decision); fed back to the model.
    pub ErrorKind {
        UnknownTool = "unknown_tool",
        InvalidArguments = "invalid_arguments",
        Denied = "denied",
        LoopDetected = "loop_detected",
        LimitExceeded = "limit_exceeded",
        Timeout = "timeout",
        HttpStatus = "http_status",
        Network = "network",
        NotFound = "not_found",
        ExecutionError = "execution_error",
        MalformedDecision = "malformed_decision",
        ModelError = "model_error",
    }
}

vocabulary! {
    /// Whether an executed call returned a result.
    pub(crate) CallStatus {
        Ok = "ok",
        Error = "error",
    }
}

/// The MCP content item types a mock's `content:` may hold.
pub(crate) const MCP_CONTENT_TYPES: &[&str] =
    &["text", "image", "audio", "resource", "resource_link"];

/// MCP's logging levels (RFC 5424's), least severe first.
pub(crate) const MCP_LOG_LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_and_as_str_agree() {
        for k in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
            assert_eq!(ErrorKind::parse(k.as_str()), Some(*k));
            let back: ErrorKind = serde_json::from_value(serde_json::json!(k.as_str())).unwrap();
            assert_eq!(back, *k);
        }
        for s in StopReason::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(
            serde_json::to_string(&Status::NeedsReview).unwrap(),
            "\"needs_review\""
        );
        assert_eq!(Status::NAMES.len(), Status::ALL.len());
        assert!(serde_json::from_str::<StopReason>("\"nope\"").is_err());
        assert_eq!(ErrorKind::parse("nope"), None);
    }
}
