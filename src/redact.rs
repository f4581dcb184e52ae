//! Secrets: read only from declared environment variables, and scrubbed from everything toolrun
//! writes (traces, events, fixtures, errors), including when a server echoes them back.

use serde_json::Value;
use std::collections::BTreeMap;

pub const MASK: &str = "***";

/// Values shorter than this are not masked: masking "a" would shred every text.
const MIN_SECRET_LEN: usize = 3;

#[derive(Default, Clone, Debug)]
pub struct Secrets {
    values: BTreeMap<String, String>,
}

impl Secrets {
    /// Reads each declared variable; returns the names that are not set.
    pub fn from_env(names: &[String]) -> (Secrets, Vec<String>) {
        let mut values = BTreeMap::new();
        let mut missing = Vec::new();
        for name in names {
            match std::env::var(name) {
                Ok(v) if !v.is_empty() => {
                    values.insert(name.clone(), v);
                }
                _ => missing.push(name.clone()),
            }
        }
        (Secrets { values }, missing)
    }

    pub fn insert(&mut self, name: &str, value: String) {
        self.values.insert(name.to_string(), value);
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn as_json(&self) -> Value {
        Value::Object(
            self.values
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    }

    pub fn redactor(&self) -> Redactor {
        Redactor::new(self.values.values().cloned())
    }
}

#[derive(Default, Clone, Debug)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    needles: Vec<String>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut needles: Vec<String> = values
            .into_iter()
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            .collect();
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        needles.dedup();
        Redactor { needles }
    }

    pub fn add(&mut self, value: String) {
        if value.len() >= MIN_SECRET_LEN && !self.needles.contains(&value) {
            self.needles.push(value);
            self.needles
                .sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    pub fn str(&self, s: &str) -> String {
        let mut out = s.to_string();
        for n in &self.needles {
            if out.contains(n.as_str()) {
                out = out.replace(n.as_str(), MASK);
            }
        }
        out
    }

    pub fn value(&self, v: &mut Value) {
        if self.needles.is_empty() {
            return;
        }
        match v {
            Value::String(s) if self.needles.iter().any(|n| s.contains(n.as_str())) => {
                *s = self.str(s)
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => {
                let keys: Vec<String> = map
                    .keys()
                    .filter(|k| self.needles.iter().any(|n| k.contains(n.as_str())))
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(val) = map.remove(&k) {
                        map.insert(self.str(&k), val);
                    }
                }
                map.values_mut().for_each(|i| self.value(i));
            }
            _ => {}
        }
    }

    /// Does any secret survive in this text? Used to fail closed before writing a fixture.
    pub fn leaks(&self, text: &str) -> Option<usize> {
        self.needles.iter().position(|n| text.contains(n.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_secrets_everywhere_in_json() {
        let r = Redactor::new(["s3cr3t-value".to_string()]);
        let mut v = json!({"a": "Bearer s3cr3t-value", "b": ["x s3cr3t-value"], "s3cr3t-value": 1});
        r.value(&mut v);
        assert_eq!(v, json!({"a": "Bearer ***", "b": ["x ***"], "***": 1}));
        assert!(r.leaks(&v.to_string()).is_none());
    }
}
