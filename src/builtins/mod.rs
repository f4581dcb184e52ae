//! Placeholder until the builtins branch lands.
pub struct BuiltinError { pub kind: BuiltinErrorKind, pub message: String }
pub enum BuiltinErrorKind { InvalidArguments, ExecutionError, NotFound }
pub struct BuiltinContext { pub now_unix_ms: i64 }
pub struct BuiltinInfo { pub name: &'static str, pub summary: &'static str, pub input_schema: fn() -> serde_json::Value }
fn calc_schema() -> serde_json::Value { serde_json::json!({"type":"object","properties":{"expression":{"type":"string","description":"expr"}},"required":["expression"],"additionalProperties":false}) }
static ALL: &[BuiltinInfo] = &[BuiltinInfo { name: "calculator", summary: "calc", input_schema: calc_schema }];
pub fn all() -> &'static [BuiltinInfo] { ALL }
pub fn find(name: &str) -> Option<&'static BuiltinInfo> { ALL.iter().find(|b| b.name == name) }
pub fn call(_name: &str, _args: &serde_json::Value, _ctx: &BuiltinContext) -> Result<serde_json::Value, BuiltinError> { Err(BuiltinError { kind: BuiltinErrorKind::ExecutionError, message: "todo".into() }) }
