//! `/openapi.json`, built once from the catalogue (`catalogue.rs`) and the
//! wire types' JSON Schemas.

use std::sync::OnceLock;

use drover_wire as wire;
use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::catalogue::{Auth, OPS, Op, Reply, SchemaFn, implied, schema};

/// What is not an operation: the title, the tags, the security schemes and
/// the shared header parameters.
const FRAME: &str = r#"{
  "openapi": "3.1.0",
  "info": {
    "title": "Drover",
    "version": "1",
    "description": "Drover coordinator: submit jobs to pools of self-hosted runners, manage pools, runners and the workspace budget, and the runner wire protocol (version 1).\n\nEvery error, including those from the HTTP layer (a malformed request line, path or header such as a bad `Content-Length`: 400 `BAD_REQUEST`; request headers over 64 KiB: 431 `PAYLOAD_TOO_LARGE`; a method the route does not take: 405 `METHOD_NOT_ALLOWED`), is answered in the `ErrorBody` envelope.\n\nVersions: the `drover` CLI, runners and the desktop app send `drover-protocol` (the wire protocol they speak) and `drover-client` (`drover/<version>`) on every request. A protocol outside the range `/healthz` reports is refused on every other route with 426: `UPGRADE_REQUIRED` (the client is older; the message names the version to install) or `COORDINATOR_TOO_OLD` (the client is newer). Requests without the header are served.\n\nRequest bodies are JSON objects (an array or any other JSON value is refused with 400 `BAD_REQUEST`) sent with `Content-Type: application/json`. Integer fields take any number without a fractional part (`3` and `3.0` alike, as JSON Schema's `integer` does); `3.5` is refused.\n\nUnder load the coordinator sheds work rather than queue it: 503 `OVERLOADED` with a `Retry-After` header (seconds) when it has too many connections open (the last tenth of its connections serve only the runner protocol, one request each), when large request bodies (over 128 KiB) in flight exceed its body memory, when too many member reads (`GET`) are in flight (the runner protocol is not counted), or when its database stays busy. A request's headers must arrive within the header timeout (which also closes idle keep-alive connections) and its body within the body timeout (else 408 `REQUEST_TIMEOUT`, and the connection closes)."
  },
  "tags": [
    {
      "name": "jobs",
      "description": "Submit, read, list, cancel and follow jobs."
    },
    {
      "name": "runtimes",
      "description": "Pools: personal (`/v1/me`) and workspace-owned (`/v1/workspace`), and their join tokens."
    },
    {
      "name": "runners",
      "description": "Pairing, listing and revoking runners."
    },
    {
      "name": "pairing",
      "description": "Pairing a device with a one-time code, and the member's own API tokens."
    },
    {
      "name": "billing",
      "description": "The workspace budget and usage."
    },
    {
      "name": "runner protocol",
      "description": "Version 1 of the runner wire protocol: join → hello → lease (long-poll) → heartbeat (long-poll for cancel) → logs → complete."
    },
    {
      "name": "meta",
      "description": "This document, its docs page, liveness, readiness and metrics."
    },
    {
      "name": "members",
      "description": "The workspace's members and its audit log (admins)."
    },
    {
      "name": "github",
      "description": "The workspace's GitHub App: linking installations, the repositories it reaches, and GitHub Actions runners registered beside workspace runners."
    }
  ],
  "security": [
    {
      "memberToken": []
    }
  ],
  "components": {
    "securitySchemes": {
      "memberToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "drv_…",
        "description": "A member's API token (`drv_…`), minted by `drover-coordinator admin bootstrap|add-member`."
      },
      "runnerToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "rnr_…",
        "description": "A runner's credential (`rnr_…`), from pairing or joining; stops working when the runner is revoked."
      },
      "joinToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "djt_…",
        "description": "A pool's join token (`djt_…`); only exchanges itself for a runner credential at `POST /v1/runner/join`, until it expires."
      }
    },
    "parameters": {
      "DroverProtocol": {
        "name": "drover-protocol",
        "in": "header",
        "required": false,
        "description": "The wire protocol version the client speaks; runner-core's client (the runner, the `drover` CLI, the desktop app) sends it on every request, with `drover-client: drover/<version>`. Optional; every route but `/healthz` checks it when present: not a number, 400 `UNSUPPORTED_PROTOCOL`; older than this coordinator serves, 426 `UPGRADE_REQUIRED`; newer than it knows, 426 `COORDINATOR_TOO_OLD` (`/healthz` reports the range).",
        "schema": {
          "type": "integer",
          "minimum": 0
        }
      },
      "LeaseId": {
        "name": "lease",
        "in": "path",
        "required": true,
        "description": "The lease id (`lse_…`) from `POST /v1/runner/lease`.",
        "schema": {
          "type": "string"
        }
      },
      "Surface": {
        "name": "drover-surface",
        "in": "header",
        "required": false,
        "description": "Which surface the request comes from, for the audit log: `rest` (the default), `cli` or `desktop`. The clients set it; another value is `400 BAD_REQUEST`.",
        "schema": {
          "type": "string",
          "enum": [
            "rest",
            "cli",
            "desktop"
          ]
        }
      }
    }
  }
}"#;

/// The document, serialized (built on first use).
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| serde_json::to_string(&build()).expect("the document serializes"))
}

/// Schemas whose named types live in `#/components/schemas`.
pub fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator()
}

/// Self-contained schemas (an MCP tool's input, a query string's fields).
pub fn inline_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
}

/// A query struct's fields, inline: (name, schema, required).
pub fn query_fields(query: SchemaFn) -> Vec<(String, Value, bool)> {
    let schema = query(&mut inline_generator()).to_value();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, s)| (name.clone(), s.clone(), required.contains(&name.as_str())))
        .collect()
}

fn build() -> Value {
    let mut doc: Value = serde_json::from_str(FRAME).expect("FRAME is JSON");
    let mut g = generator();
    let mut paths = Map::new();
    for op in OPS {
        let item = paths
            .entry(op.decl.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object");
        item.insert(op.decl.method.to_owned(), operation(op, &mut g));
    }
    doc["paths"] = Value::Object(paths);
    let mut schemas = g.take_definitions(true);
    schemas.sort_keys();
    doc["components"]["schemas"] = Value::Object(schemas);
    doc
}

fn operation(op: &Op, g: &mut SchemaGenerator) -> Value {
    let mut o = json!({
        "tags": [op.tag],
        "operationId": op.decl.id,
        "summary": op.summary,
        "description": op.description,
    });
    o["security"] = match op.auth {
        Auth::Member => json!([{"memberToken": []}]),
        Auth::Runner => json!([{"runnerToken": []}]),
        Auth::Join => json!([{"joinToken": []}]),
        Auth::Public => json!([]),
    };
    if let Some(tool) = op.tool {
        o["x-mcp-tool"] = json!(tool);
    }
    let mut params: Vec<Value> = if op.params.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(op.params).expect("catalogue params are JSON")
    };
    if let Some(query) = op.decl.query {
        for (name, mut schema, required) in query_fields(query) {
            let description = schema
                .as_object_mut()
                .and_then(|s| s.remove("description"))
                .unwrap_or(Value::Null);
            params.push(json!({
                "name": name, "in": "query", "required": required,
                "description": description, "schema": schema,
            }));
        }
    }
    let surface = json!({"$ref": "#/components/parameters/Surface"});
    if op.auth == Auth::Member && !params.contains(&surface) {
        params.push(surface);
    }
    if !params.is_empty() {
        o["parameters"] = Value::Array(params);
    }
    if let (Some(schema), Some(body)) = (op.decl.body, &op.body) {
        let mut b = json!({
            "required": body.required,
            "content": {"application/json": {"schema": schema(g)}},
        });
        if !body.description.is_empty() {
            b["description"] = json!(body.description);
        }
        o["requestBody"] = b;
    }
    let mut responses = Map::new();
    for r in op.responses.iter().chain(implied(op)) {
        let mut resp = json!({"description": r.description});
        let content = match &r.reply {
            Reply::Empty => None,
            Reply::Answer => Some(json!({"application/json": {"schema": (op.decl.answer)(g)}})),
            Reply::AnswerOrCsv => Some(json!({
                "application/json": {"schema": (op.decl.answer)(g)},
                "text/csv": {"schema": {"type": "string"}},
            })),
            Reply::Error(code) => Some(json!({"application/json": {
                "schema": schema::<wire::ErrorBody>(g),
                "example": {"error": {"code": code, "message": "…"}},
            }})),
            Reply::Raw(content) => {
                Some(serde_json::from_str(content).expect("catalogue content is JSON"))
            }
        };
        if let Some(content) = content {
            resp["content"] = content;
        }
        responses.insert(r.status.to_string(), resp);
    }
    o["responses"] = Value::Object(responses);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in the document names a schema or parameter it holds.
    #[test]
    fn every_reference_resolves() {
        let doc: Value = serde_json::from_str(document()).unwrap();
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r.clone());
                    }
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 50);
        for r in all {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
        if let Ok(path) = std::env::var("DROVER_DUMP_OPENAPI") {
            std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
    }

    /// Every error an operation documents has the status the one table
    /// gives its code, and every code its prose names (`` `CODE` ``) is
    /// a real `ErrorCode` of that status.
    #[test]
    fn documented_errors_match_the_status_table() {
        use super::super::error::status_of;
        let code_in_prose = |word: &str| -> Option<wire::ErrorCode> {
            let code: wire::ErrorCode = serde_json::from_value(json!(word)).ok()?;
            (code.as_str() == word).then_some(code)
        };
        let mut checked = 0;
        for op in OPS {
            for r in op.responses.iter().chain(implied(op)) {
                let at = format!("{} {} {}", op.decl.method, op.decl.path, r.status);
                if let Reply::Error(code) = r.reply {
                    assert_eq!(status_of(code).as_u16(), r.status, "{at}: {code:?}");
                    checked += 1;
                }
                for word in r.description.split('`').skip(1).step_by(2) {
                    let screaming =
                        word.len() > 3 && word.chars().all(|c| c.is_ascii_uppercase() || c == '_');
                    if !screaming || r.status < 400 {
                        continue;
                    }
                    let code = code_in_prose(word)
                        .unwrap_or_else(|| panic!("{at}: `{word}` is not an error code"));
                    assert_eq!(status_of(code).as_u16(), r.status, "{at}: `{word}`");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "only {checked} documented errors");
    }
}
