use super::{DecideInput, ModelError, ModelTurn};
use crate::registry::Script;
pub struct ScriptedModel;
impl ScriptedModel {
    pub fn select(_name: &str, _s: &[Script], _q: &str) -> Result<ScriptedModel, String> { Ok(ScriptedModel) }
    pub fn decide(&mut self, _i: DecideInput<'_>) -> Result<ModelTurn, ModelError> { todo!() }
}
