//! A tool's arguments: its input schema (the path parameters, the query
//! fields, the body's fields, and what REST takes in headers or by content
//! negotiation), and a call's arguments sorted back into those parts.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::super::catalogue::Op;
use super::super::openapi::{inline_generator, query_fields};
use crate::error::Error;
use drover_wire::op::AnswerKind;

/// One object: the path parameters, the query fields and the body's fields.
pub(super) fn input_schema(op: &Op) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let documented: Vec<Value> = if op.params.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(op.params).expect("catalogue params are JSON")
    };
    for name in op.path_params() {
        let description = documented
            .iter()
            .find(|p| p["name"] == name && p["in"] == "path")
            .map(|p| p["description"].clone())
            .unwrap_or_else(|| json!(format!("The `{name}` in the path.")));
        properties.insert(
            name.to_owned(),
            json!({"type": "string", "description": description}),
        );
        required.push(json!(name));
    }
    if let Some(query) = op.decl.query {
        for (name, schema, needed) in query_fields(query) {
            if needed {
                required.push(json!(name));
            }
            properties.insert(name, schema);
        }
    }
    // What REST takes in a header (an `Idempotency-Key`), and the CSV an
    // answer may come as, are arguments too.
    for (name, description) in header_params(op) {
        properties.insert(name, json!({"type": "string", "description": description}));
    }
    if op.decl.kind == AnswerKind::JsonOrCsv {
        properties.insert(
            FORMAT.into(),
            json!({"type": "string", "enum": ["json", "csv"], "description": "`csv` for the answer as CSV text (RFC 4180), as REST gives it with `Accept: text/csv`; JSON by default."}),
        );
    }
    let mut schema = Map::new();
    if let (Some(body_schema), Some(body)) = (op.decl.body, &op.body) {
        let body_schema = body_schema(&mut inline_generator()).to_value();
        if let Some(props) = body_schema["properties"].as_object() {
            properties.extend(props.clone());
        }
        if body.required
            && let Some(needed) = body_schema["required"].as_array()
        {
            required.extend(needed.iter().cloned());
        }
        if let Some(one_of) = body_schema.get("oneOf") {
            schema.insert("oneOf".into(), one_of.clone());
        }
    }
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    schema.insert("additionalProperties".into(), json!(false));
    schema
}

/// The argument that asks for CSV.
pub(super) const FORMAT: &str = "format";

/// The operation's documented header parameters, as argument names
/// (`Idempotency-Key` is `idempotencyKey`) with their descriptions.
pub(super) fn header_params(op: &Op) -> Vec<(String, Value)> {
    let documented: Vec<Value> = if op.params.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(op.params).expect("catalogue params are JSON")
    };
    documented
        .iter()
        .filter(|p| p["in"] == "header")
        .filter_map(|p| {
            let header = p["name"].as_str()?;
            let mut name = String::new();
            for (i, word) in header.split('-').enumerate() {
                let mut chars = word.chars();
                if let Some(first) = chars.next() {
                    match i {
                        0 => name.extend(first.to_lowercase()),
                        _ => name.extend(first.to_uppercase()),
                    }
                    name.extend(chars.map(|c| c.to_ascii_lowercase()));
                }
            }
            Some((name, p["description"].clone()))
        })
        .collect()
}

/// A call's arguments, sorted into the path, the query, the body, and
/// what REST takes in headers (`headers`: by argument name; `format`).
pub(super) struct Args {
    path: HashMap<&'static str, String>,
    query: Map<String, Value>,
    body: Map<String, Value>,
    headers: Map<String, Value>,
}

impl Args {
    pub(super) fn split(op: &Op, mut args: Map<String, Value>) -> Result<Self, Error> {
        let mut path = HashMap::new();
        for name in op.path_params() {
            match args.remove(name) {
                Some(Value::String(s)) => path.insert(name, s),
                Some(_) => return Err(Error::bad_request(format!("`{name}` must be a string"))),
                None => return Err(Error::bad_request(format!("`{name}` is required"))),
            };
        }
        let mut headers = Map::new();
        let mut extra: Vec<String> = header_params(op).into_iter().map(|(n, _)| n).collect();
        if op.decl.kind == AnswerKind::JsonOrCsv {
            extra.push(FORMAT.into());
        }
        for name in extra {
            if let Some(v) = args.remove(&name) {
                headers.insert(name, v);
            }
        }
        let mut query = Map::new();
        if let Some(q) = op.decl.query {
            for (name, _, _) in query_fields(q) {
                if let Some(v) = args.remove(&name) {
                    query.insert(name, v);
                }
            }
        }
        if op.decl.body.is_none()
            && let Some(name) = args.keys().next()
        {
            return Err(Error::bad_request(format!("unknown argument `{name}`")));
        }
        Ok(Self {
            path,
            query,
            body: args,
            headers,
        })
    }

    /// A string argument REST takes in a header, or `format`.
    pub(super) fn header(&self, name: &str) -> Result<Option<&str>, Error> {
        match self.headers.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Error::bad_request(format!("`{name}` must be a string"))),
        }
    }

    /// `format`: CSV or JSON.
    pub(super) fn csv(&self) -> Result<bool, Error> {
        match self.header(FORMAT)? {
            None | Some("json") => Ok(false),
            Some("csv") => Ok(true),
            Some(other) => Err(Error::bad_request(format!(
                "`format` must be json or csv, not {other:?}"
            ))),
        }
    }

    /// A path parameter (required, so present: `split` checked it).
    pub(super) fn id(&self, name: &str) -> String {
        self.path.get(name).cloned().unwrap_or_default()
    }

    pub(super) fn query<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_value(Value::Object(self.query.clone()))
            .map_err(|e| Error::bad_request(format!("invalid arguments: {e}")))
    }

    pub(super) fn body<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_value(Value::Object(self.body.clone()))
            .map_err(|e| Error::bad_request(format!("invalid arguments: {e}")))
    }

    /// A body whose fields all have defaults: none given is all defaults.
    pub(super) fn optional_body<T: DeserializeOwned + Default>(&self) -> Result<T, Error> {
        if self.body.is_empty() {
            return Ok(T::default());
        }
        self.body()
    }
}
