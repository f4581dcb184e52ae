//! HTTP tools.
use super::{ErrorKind, ToolEnv, ToolError};
use crate::registry::{HttpTool, Tool};
use serde_json::Value;
pub async fn execute(
    _tool: &Tool,
    _http: &HttpTool,
    _args: &Value,
    _env: &ToolEnv<'_>,
) -> Result<Value, ToolError> {
    Err(ToolError::new(
        ErrorKind::ExecutionError,
        "http tools are not implemented yet",
    ))
}
