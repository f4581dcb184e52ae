//! Built-in tools run in-process; none of them reaches a shell, a file or the network.

use super::{ErrorKind, ToolEnv, ToolError};
use crate::builtins::{self, BuiltinContext, BuiltinErrorKind};
use serde_json::Value;

pub(crate) fn execute(name: &str, args: &Value, env: &ToolEnv<'_>) -> Result<Value, ToolError> {
    builtins::call(
        name,
        args,
        &BuiltinContext {
            now_unix_ms: env.now_unix_ms,
        },
    )
    .map_err(|e| {
        let kind = match e.kind {
            BuiltinErrorKind::InvalidArguments => ErrorKind::InvalidArguments,
            BuiltinErrorKind::ExecutionError => ErrorKind::ExecutionError,
            BuiltinErrorKind::NotFound => ErrorKind::NotFound,
        };
        ToolError::new(kind, e.message)
    })
}
