//! The data a template renders over: a JSON value, a tool call's parts, or values converted
//! once and shared; converted for minijinja on first use.

use super::cost;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The data a template renders over (JSON), converted for minijinja on first use. A URL
/// context percent-encodes every string but the secrets that write the URL's origin (see
/// `tools::http::build_url`).
pub(crate) struct Ctx<'a> {
    pub(super) data: Data<'a>,
    pub(super) raw_secrets: Option<&'a [String]>,
    value: OnceLock<minijinja::Value>,
}

pub(super) enum Data<'a> {
    Json(&'a Value),
    /// A tool call's context: its arguments, and the whole context made (once, by the caller)
    /// only when a template reads more than an argument passed through.
    Call {
        args: &'a Value,
        /// A secret's value by name.
        secret: &'a (dyn Fn(&str) -> Option<&'a str> + Sync),
        whole: &'a (dyn Fn() -> &'a Value + Sync),
    },
    /// Top-level values converted already (see [`Shared`]).
    Shared(Vec<(&'static str, Shared)>),
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(data: &'a Value) -> Ctx<'a> {
        Ctx {
            data: Data::Json(data),
            raw_secrets: None,
            value: OnceLock::new(),
        }
    }

    pub(crate) fn url(data: &'a Value, raw_secrets: &'a [String]) -> Ctx<'a> {
        Ctx {
            data: Data::Json(data),
            raw_secrets: Some(raw_secrets),
            value: OnceLock::new(),
        }
    }

    /// A tool call's context (`{"args": .., "secrets": .., "query": ..}`), which `whole` makes
    /// when a template needs it: `{{ args.NAME }}` templates read the arguments alone.
    pub(crate) fn call(parts: CallParts<'a>) -> Ctx<'a> {
        Ctx {
            data: parts.data(),
            raw_secrets: None,
            value: OnceLock::new(),
        }
    }

    /// [`Ctx::call`] for a URL template (see [`Ctx::url`]).
    pub(crate) fn url_call(parts: CallParts<'a>, raw_secrets: &'a [String]) -> Ctx<'a> {
        Ctx {
            data: parts.data(),
            raw_secrets: Some(raw_secrets),
            value: OnceLock::new(),
        }
    }

    /// The string at `args.NAME` or `secrets.NAME`, read without converting the context; not
    /// in a URL context (which encodes every string).
    pub(super) fn string(&self, root: super::Root, name: &str) -> Option<&str> {
        if self.raw_secrets.is_some() {
            return None;
        }
        match (&self.data, root) {
            (Data::Json(data), super::Root::Args) => data.get("args")?.get(name)?.as_str(),
            (Data::Json(data), super::Root::Secrets) => data.get("secrets")?.get(name)?.as_str(),
            (Data::Call { args, .. }, super::Root::Args) => args.get(name)?.as_str(),
            (Data::Call { secret, .. }, super::Root::Secrets) => secret(name),
            (Data::Shared(_), _) => None,
        }
    }

    /// The context as one JSON value, unless it is made of converted values.
    fn whole(&self) -> Option<&Value> {
        match &self.data {
            Data::Json(data) => Some(data),
            Data::Call { whole, .. } => Some(whole()),
            Data::Shared(_) => None,
        }
    }

    /// A context of values converted once and shared, in this order (the same context as the
    /// JSON object of these entries).
    pub(crate) fn shared(roots: Vec<(&'static str, Shared)>) -> Ctx<'static> {
        Ctx {
            data: Data::Shared(roots),
            raw_secrets: None,
            value: OnceLock::new(),
        }
    }

    pub(super) fn value(&self) -> &minijinja::Value {
        self.value
            .get_or_init(|| match (&self.data, self.whole(), self.raw_secrets) {
                (Data::Json(_) | Data::Call { .. }, data, Some(raw)) => {
                    url_context(data.unwrap_or(&Value::Null), raw)
                }
                (Data::Json(_) | Data::Call { .. }, data, None) => {
                    context(data.unwrap_or(&Value::Null))
                }
                (Data::Shared(roots), _, _) => {
                    // Serialised as a map of values minijinja holds already: it keeps them by handle
                    // (shared, not copied), and the map is the kind a JSON object converts to.
                    struct Roots<'r>(&'r [(&'static str, Shared)]);
                    impl serde::Serialize for Roots<'_> {
                        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                            s.collect_map(self.0.iter().map(|(name, v)| (*name, &v.value)))
                        }
                    }
                    minijinja::Value::from(minijinja::value::Serde(Roots(roots)))
                }
            })
    }

    /// The context as JSON, for a child process to render over.
    pub(super) fn json(&self) -> Value {
        match self.whole() {
            Some(data) => data.clone(),
            None => serde_json::to_value(self.value()).unwrap_or_default(),
        }
    }

    /// Display bytes of a top-level value (percent-encoding triples a URL context's).
    pub(super) fn root_size(&self, root: &str) -> f64 {
        let size = match &self.data {
            Data::Json(data) => data.get(root).map_or(0.0, cost::json_size),
            Data::Call { args, .. } if root == "args" => cost::json_size(args),
            Data::Call { whole, .. } => whole().get(root).map_or(0.0, cost::json_size),
            Data::Shared(roots) => roots
                .iter()
                .find(|(name, _)| *name == root)
                .map_or(0.0, |(_, v)| v.size),
        };
        if self.raw_secrets.is_some() {
            size * 3.0
        } else {
            size
        }
    }
}

/// What a tool call's context is made of (see [`Ctx::call`]).
#[derive(Clone, Copy)]
pub(crate) struct CallParts<'a> {
    pub(crate) args: &'a Value,
    /// A secret's value by name.
    pub(crate) secret: &'a (dyn Fn(&str) -> Option<&'a str> + Sync),
    /// The whole context as JSON, made once when a template needs it.
    pub(crate) whole: &'a (dyn Fn() -> &'a Value + Sync),
}

impl<'a> CallParts<'a> {
    fn data(self) -> Data<'a> {
        Data::Call {
            args: self.args,
            secret: self.secret,
            whole: self.whole,
        }
    }
}

/// A JSON value converted for templates once, with its display size (for the render budget):
/// a scripted model's context holds every result so far at every step, and a result can be
/// megabytes, so each is converted when it is made and shared from then on.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    value: minijinja::Value,
    size: f64,
}

impl Shared {
    pub(crate) fn new(v: &Value) -> Shared {
        Shared {
            value: context(v),
            size: cost::json_size(v),
        }
    }

    /// The object `head` with one more entry last, `key: value`, without copying `value`.
    pub(crate) fn extended(
        head: &serde_json::Map<String, Value>,
        key: &str,
        value: &Value,
    ) -> Shared {
        struct Extended<'a>(&'a serde_json::Map<String, Value>, &'a str, &'a Value);
        impl serde::Serialize for Extended<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(self.0.len() + 1))?;
                for (k, v) in self.0 {
                    map.serialize_entry(k, v)?;
                }
                map.serialize_entry(self.1, self.2)?;
                map.end()
            }
        }
        let head_size = cost::json_size(&Value::Object(serde_json::Map::new()));
        let entries: f64 = head.iter().map(|(k, v)| cost::entry_size(k, v)).sum();
        Shared {
            value: minijinja::Value::from(minijinja::value::Serde(&Extended(head, key, value))),
            size: head_size + entries + cost::entry_size(key, value),
        }
    }

    /// An array of these values.
    pub(crate) fn array(items: &[Shared]) -> Shared {
        Shared {
            value: minijinja::Value::from(minijinja::value::Serde(
                items.iter().map(|i| &i.value).collect::<Vec<_>>(),
            )),
            size: items.iter().map(|i| i.size + 2.0).sum::<f64>() + 2.0,
        }
    }

    /// The value of an attribute of an object (`id`).
    pub(crate) fn attr(&self, name: &str) -> Option<String> {
        let v = self.value.get_attr(name).ok()?;
        v.as_str().map(str::to_string)
    }
}

pub(super) fn context(value: &Value) -> minijinja::Value {
    minijinja::Value::from(minijinja::value::Serde(value))
}

/// A URL template's context: every string percent-encoded for any URL component and marked
/// safe (so `| urlencode` leaves it alone), except the secrets named in `raw_secrets` (those
/// that write the scheme and host).
fn url_context(data: &Value, raw_secrets: &[String]) -> minijinja::Value {
    fn convert(v: &Value) -> minijinja::Value {
        match v {
            Value::Null => minijinja::Value::from(()),
            Value::Bool(b) => minijinja::Value::from(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => minijinja::Value::from(i),
                (_, Some(u), _) => minijinja::Value::from(u),
                (_, _, Some(f)) => minijinja::Value::from(f),
                _ => minijinja::Value::from(()),
            },
            Value::String(s) => minijinja::Value::from_safe_string(
                percent_encoding::utf8_percent_encode(s, URL_COMPONENT).to_string(),
            ),
            Value::Array(items) => items.iter().map(convert).collect(),
            Value::Object(map) => minijinja::Value::from_object(
                map.iter()
                    .map(|(k, v)| (k.clone(), convert(v)))
                    .collect::<BTreeMap<String, minijinja::Value>>(),
            ),
        }
    }
    let mut root: BTreeMap<String, minijinja::Value> = BTreeMap::new();
    if let Value::Object(map) = data {
        for (key, v) in map {
            let converted = match v {
                Value::Object(secrets) if key == "secrets" => minijinja::Value::from_object(
                    secrets
                        .iter()
                        .map(|(name, s)| {
                            let value = if raw_secrets.contains(name) {
                                context(s)
                            } else {
                                convert(s)
                            };
                            (name.clone(), value)
                        })
                        .collect::<BTreeMap<String, minijinja::Value>>(),
                ),
                other => convert(other),
            };
            root.insert(key.clone(), converted);
        }
    }
    minijinja::Value::from_object(root)
}

/// Everything but RFC 3986 "unreserved" characters: an encoded value cannot add a `/`, `?`, `#`,
/// `&`, `=`, `@`, `:` or `\` to a URL, in any position.
const URL_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
