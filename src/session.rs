//! What every run needs before the loop starts: the model chosen, secrets read, the clock fixed.
//! Problems here are the user's set-up (exit 2), found before any request is made.

use crate::models::ModelClient;
use crate::redact::Secrets;
use crate::registry::Registry;

pub(crate) struct Prepared {
    pub(crate) model: ModelClient,
    pub(crate) model_name: String,
    pub(crate) secrets: Secrets,
}

pub(crate) fn model_name(registry: &Registry, requested: Option<&str>) -> Result<String, String> {
    match requested {
        Some(name) => match registry.model(name) {
            Some(m) => Ok(m.name.clone()),
            None => {
                let hint =
                    crate::diag::did_you_mean(name, registry.model_names()).unwrap_or_else(|| {
                        format!(
                            "models in this spec: {}",
                            registry.model_names().collect::<Vec<_>>().join(", ")
                        )
                    });
                Err(format!("the spec has no model `{name}`; {hint}"))
            }
        },
        None => match registry.default_model {
            Some(i) => Ok(registry.models[i].name.clone()),
            None if registry.models.is_empty() => {
                Err("the spec declares no models; add one under `models:`".into())
            }
            None => {
                Err("the spec has several models and no `default_model`; pass --model NAME".into())
            }
        },
    }
}

pub(crate) fn prepare(
    registry: &Registry,
    requested_model: Option<&str>,
    query: &str,
) -> Result<Prepared, String> {
    prepare_with(registry, requested_model, query, false)
}

/// `offline`: every declared secret is the mask, whatever the environment holds. Offline tests
/// use scripted models and fixtures: they need no credentials, and a real one could only leak.
pub(crate) fn prepare_with(
    registry: &Registry,
    requested_model: Option<&str>,
    query: &str,
    offline: bool,
) -> Result<Prepared, String> {
    let model_name = model_name(registry, requested_model)?;
    let (mut secrets, missing) = if offline {
        let mut masked = Secrets::default();
        for name in &registry.secrets {
            masked.insert(name, crate::redact::MASK.to_string());
        }
        (masked, Vec::new())
    } else {
        Secrets::from_env(&registry.secrets)
    };
    if !missing.is_empty() {
        return Err(format!(
            "the spec reads secret(s) {} from the environment, but they are not set; export them and run again",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let def = registry
        .model(&model_name)
        .ok_or_else(|| format!("no model `{model_name}`"))?;
    let model = ModelClient::new(def, query, &mut secrets)?;
    warn_short_secrets(&secrets);
    Ok(Prepared {
        model,
        model_name,
        secrets,
    })
}

/// Once per secret and process: `test` prepares every case, and one warning is enough.
pub(crate) fn warn_short_secrets(secrets: &Secrets) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut warned) = WARNED.lock() else {
        return;
    };
    for line in secrets.short_warnings() {
        if !warned.contains(&line) {
            eprintln!("{line}");
            warned.push(line);
        }
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(crate::exit::FAILED);
        }
    }
}
