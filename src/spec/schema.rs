pub fn spec_schema() -> serde_json::Value {
    serde_json::json!({})
}
