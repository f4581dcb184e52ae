use super::ToolError;
use crate::registry::Table;
use serde_json::Value;
pub fn execute(_t: &Table, _args: &Value) -> Result<Value, ToolError> { todo!() }
