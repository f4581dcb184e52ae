use super::{ToolEnv, ToolError};
use crate::registry::MockResponse;
use serde_json::Value;
pub fn execute(_r: &[MockResponse], _args: &Value, _env: &ToolEnv<'_>) -> Result<Value, ToolError> { todo!() }
