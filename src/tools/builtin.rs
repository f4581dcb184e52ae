use super::{ToolEnv, ToolError};
use serde_json::Value;
pub fn execute(_n: &str, _args: &Value, _env: &ToolEnv<'_>) -> Result<Value, ToolError> { todo!() }
