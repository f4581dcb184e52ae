//! Fixtures: record a run once, replay it offline forever.

use crate::registry::Registry;
use std::path::Path;

pub struct ReplayReport {
    pub failures: Vec<String>,
}

pub async fn replay_file(
    _path: &Path,
    _registry: Option<&Registry>,
    _update: bool,
) -> Result<ReplayReport, String> {
    Err("replay is not available yet".into())
}
