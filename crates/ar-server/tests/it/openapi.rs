//! The OpenAPI document (`GET /openapi.json`) against what it describes: every route the
//! router mounts is documented with its methods, every documented operation is routed, and
//! every schema has exactly the JSON keys its `ar-wire` type reads, marking as required
//! exactly those it always writes. A route or field added without the document fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ar_test_support::mock_provider::MockProvider;
use ar_test_support::service::*;
use reqwest::Method;
use serde::de::{Deserializer, Error as _, Visitor};
use serde_json::Value;

fn document() -> Value {
    ar_server::openapi::document_json()
}

/// The methods of each documented path.
fn documented(doc: &Value) -> BTreeMap<String, BTreeSet<String>> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .map(|(path, item)| {
            let methods = item.as_object().expect("path item").keys().cloned();
            (path.clone(), methods.collect())
        })
        .collect()
}

/// Every `.route("PATH", …)` of the server's own router (the studio's protocol, seed 003, is
/// documented by the studio), with the methods named in its method router.
fn mounted_routes() -> Vec<(String, BTreeSet<String>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut routes = Vec::new();
    for file in source_files(&dir) {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("studio_") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read source");
        for chunk in text.split(".route(").skip(1) {
            let Some(path) = chunk.trim_start().strip_prefix('"') else {
                continue;
            };
            let path = path.split('"').next().unwrap_or_default().to_string();
            // The method router ends where the next statement or route begins.
            let call = chunk.split([';']).next().unwrap_or_default();
            let methods = ["get", "post", "put", "delete", "patch"]
                .into_iter()
                .filter(|method| calls_method(call, method))
                .map(str::to_string)
                .collect();
            routes.push((path, methods));
        }
    }
    routes
}

/// Whether `code` calls `method(` as a function or a method (not as the tail of a name).
fn calls_method(code: &str, method: &str) -> bool {
    let call = format!("{method}(");
    code.match_indices(&call).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn source_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(source_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn every_mounted_route_is_documented_with_its_methods() {
    let doc = documented(&document());
    let routes = mounted_routes();
    assert!(routes.len() >= 25, "found only {} routes", routes.len());
    for (path, methods) in routes {
        // Routes of the `/v1` tree are mounted relative to it (and again under `/internal`,
        // the run tree under `/v2` too); the rest at the root.
        let candidates = if doc.contains_key(&path) {
            vec![path.clone()]
        } else {
            let mut found: Vec<String> = ["/v1", "/internal", "/v2"]
                .iter()
                .map(|prefix| format!("{prefix}{path}"))
                .filter(|full| doc.contains_key(full))
                .collect();
            if found.is_empty() {
                panic!("route {path} ({methods:?}) is mounted but not in /openapi.json");
            }
            if found.iter().any(|full| full.starts_with("/v1")) {
                let internal = format!("/internal{path}");
                assert!(doc.contains_key(&internal), "{internal} is not documented");
            }
            found.sort();
            found
        };
        for full in candidates {
            let documented = &doc[&full];
            for method in &methods {
                assert!(
                    documented.contains(method),
                    "{method} {full} is mounted but not documented (documented: {documented:?})"
                );
            }
        }
    }
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let doc = documented(&document());
    for (path, methods) in &doc {
        let concrete = path
            .replace("{run_id}", "run_x")
            .replace("{agent_id}", "agent_x")
            .replace("{server_id}", "server_x");
        for method in methods {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            // No app_id: a routed handler asks for one (or answers); the router's fallback
            // says `not found`.
            let (status, body) = server
                .send_as(Some(TOKEN), method.clone(), &concrete, None)
                .await;
            let unrouted = status == 404 && body == serde_json::json!({"error": "not found"});
            assert!(!unrouted, "{method} {path} is documented but not routed");
        }
    }
    server.stop().await;
}

/// The JSON keys a wire type reads: the field list its derived `Deserialize` hands
/// `deserialize_struct`.
struct FieldCapture<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for FieldCapture<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(Self::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(Self::Error::custom("captured"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

fn keys_read<T: for<'de> serde::Deserialize<'de>>() -> BTreeSet<String> {
    let mut fields = None;
    let _ = T::deserialize(FieldCapture(&mut fields));
    fields
        .unwrap_or_else(|| panic!("{} is not a struct", std::any::type_name::<T>()))
        .iter()
        .map(|field| field.to_string())
        .collect()
}

macro_rules! wire_types {
    ($($ty:ty),+ $(,)?) => {
        vec![$((
            <$ty as utoipa::ToSchema>::name().to_string(),
            keys_read::<$ty>(),
        )),+]
    };
}

#[test]
fn every_schema_has_exactly_its_wire_types_fields() {
    let read: BTreeMap<String, BTreeSet<String>> = ar_server::for_each_wire_type!(wire_types)
        .into_iter()
        .collect();
    let written: BTreeMap<String, Value> =
        ar_server::openapi::wire_defaults().into_iter().collect();
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let own = ["ApproveBody", "EmptyObject"];
    for (name, schema) in schemas {
        if own.contains(&name.as_str()) {
            continue;
        }
        let fields = read
            .get(name)
            .unwrap_or_else(|| panic!("schema {name} is no wire type this test knows"));
        let properties: BTreeSet<String> = schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(&properties, fields, "schema {name} against ar_wire::{name}");
        let required: BTreeSet<String> = schema["required"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let always: BTreeSet<String> = written[name]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(required, always, "required fields of {name}");
    }
    for name in read.keys() {
        assert!(
            schemas.contains_key(name),
            "ar_wire::{name} is not in the document"
        );
    }
}

#[test]
fn the_document_is_openapi_3_1_with_unique_operations_and_resolvable_refs() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let text = doc.to_string();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap_or_default();
        assert!(schemas.contains_key(name), "dangling $ref {name}");
    }
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("item") {
            let id = operation["operationId"].as_str().unwrap_or_default();
            assert!(
                ids.insert(id.to_string()),
                "{method} {path}: duplicate id {id}"
            );
            let errors = operation["responses"].as_object().expect("responses");
            if !["/healthz", "/readyz", "/openapi.json", "/metrics"].contains(&path.as_str()) {
                assert!(errors.contains_key("401"), "{method} {path} lacks its 401");
                assert!(errors.contains_key("400"), "{method} {path} lacks its 400");
            }
        }
    }
}

#[tokio::test]
async fn the_server_serves_the_document_without_a_token() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let (status, body) = server
        .send_as(None, Method::GET, "/openapi.json", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, document());
    server.stop().await;
}
