//! `cqrs model events`: the committed `events.asyncapi.yaml` is what the model generates (drift
//! fails the test and says how to regenerate); the document has a channel, three messages and a
//! `receive` operation per entity; each entity event's schema carries the entity's attributes as
//! `openapi.yaml` does; and events built as issue 39's feed builds them (CloudEvents 1.0, one per
//! version: created, updated, a soft delete, a TTL removal) validate against their entity's
//! schema, with JSON Schema 2020-12 (the standalone schema, `$id` = `dataschema`) and with draft 07
//! (AsyncAPI's default schema format, the document's own schema), while broken ones are refused.
//!
//! The validator is PyPI's `jsonschema` in the project's `.venv` (scripts/tools.sh installs it
//! with schemathesis, from requirements-tools.txt): nothing is fetched at test time.

use std::path::{Path, PathBuf};
use std::process::Command;

use cqrs_model::{AttrType, Entity, ItemView, KeyValue, Model, ValueRef};
use serde_json::{Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn cqrs(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cqrs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn root_model() -> String {
    format!("{ROOT}/model.toml")
}

fn document() -> Value {
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(&cqrs(&["model", "events", "--file", &root_model()])).unwrap();
    serde_json::to_value(yaml).unwrap()
}

/// The entities whose items leave as events: those of which the change feed (`cqrs_events`)
/// publishes an example item (not the framework's own rows, such as TTL policies).
fn leaving(model: &Model) -> Vec<&Entity> {
    let feed = cqrs_events::Feed::new(model.clone(), "urn:cqrs:shop");
    model
        .entities()
        .iter()
        .filter(|entity| {
            let attributes = example_attributes(entity);
            let item: cqrs_item::Item = item_of(&state(entity, &attributes, 1, false));
            feed.entity_of(&item).is_some()
        })
        .collect()
}

#[test]
fn the_committed_events_asyncapi_yaml_is_what_the_model_generates() {
    let generated = cqrs(&["model", "events", "--file", &root_model()]);
    let path = format!("{ROOT}/events.asyncapi.yaml");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return;
    }
    if std::env::var_os("UPDATE_EVENTS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let line = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    panic!(
        "events.asyncapi.yaml differs from what model.toml generates, from line {}:\n  committed: \
         {:?}\n  generated: {:?}\nRegenerate it with\n  cargo run -p cqrs-cli -- model events > \
         events.asyncapi.yaml\n(or run this test with UPDATE_EVENTS=1)",
        line + 1,
        committed.lines().nth(line).unwrap_or("<end of file>"),
        generated.lines().nth(line).unwrap_or("<end of file>"),
    );
}

#[test]
fn every_entity_has_a_channel_its_three_messages_and_a_receive_operation() {
    let doc = document();
    let model = Model::example();
    assert_eq!(doc["asyncapi"], "3.0.0");
    assert_eq!(doc["info"]["version"], model.revision());
    let channels = doc["channels"].as_object().unwrap();
    let leaving = leaving(&model);
    assert_eq!(channels.len(), leaving.len());
    // The example's TTL policies are the framework's own rows: the feed never publishes them.
    assert!(model.entity("ttl_policy").is_some());
    assert!(channels.get("ttl_policy").is_none());
    assert_eq!(leaving.len() + 1, model.entities().len());
    for entity in &leaving {
        let name = entity.name.as_str();
        let channel = &channels[name];
        assert_eq!(channel["address"], name);
        for kind in ["created", "updated", "deleted"] {
            let to = format!("#/components/messages/{name}.{kind}");
            assert_eq!(channel["messages"][kind]["$ref"], to.as_str(), "{name}");
            let message = &doc["components"]["messages"][format!("{name}.{kind}")];
            assert_eq!(message["name"], format!("{name}.{kind}"));
            assert_eq!(message["contentType"], "application/cloudevents+json");
            let payload = message["payload"]["allOf"].as_array().unwrap();
            assert_eq!(
                payload[0]["$ref"],
                format!("#/components/schemas/{name}.Event")
            );
            assert_eq!(
                payload[1]["properties"]["type"]["const"],
                format!("{name}.{kind}")
            );
        }
        // One receive operation on the channel, naming the channel's messages.
        let ops: Vec<&Value> = doc["operations"]
            .as_object()
            .unwrap()
            .values()
            .filter(|op| op["channel"]["$ref"] == format!("#/channels/{name}").as_str())
            .collect();
        assert_eq!(ops.len(), 1, "{name}");
        assert_eq!(ops[0]["action"], "receive");
        assert_eq!(ops[0]["messages"].as_array().unwrap().len(), 3);
        assert_eq!(
            ops[0]["messages"][2]["$ref"],
            format!("#/channels/{name}/messages/deleted")
        );
    }
    // The envelope of every event: its type names every entity's three.
    let envelope = &doc["components"]["schemas"]["ChangeEvent"];
    assert_eq!(
        envelope["properties"]["type"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        3 * leaving.len()
    );
    for member in [
        "specversion",
        "id",
        "source",
        "type",
        "subject",
        "time",
        "datacontenttype",
        "dataschema",
        "tenant",
        "entity",
        "itemversion",
        "removal",
        "data",
    ] {
        assert!(
            envelope["properties"].get(member).is_some(),
            "ChangeEvent has no {member}"
        );
    }
}

/// The schema of `state.attributes` is `openapi.yaml`'s `E.Attributes` (the same code builds
/// both), with OpenAPI's `nullable` as a JSON Schema type list; `state` is `E.Item`.
#[test]
fn each_entity_event_carries_the_attributes_openapi_yaml_declares() {
    let doc = document();
    let openapi: serde_yaml::Value =
        serde_yaml::from_str(&cqrs(&["model", "openapi", "--file", &root_model()])).unwrap();
    let openapi = serde_json::to_value(openapi).unwrap();
    let model = Model::example();
    for entity in leaving(&model) {
        let name = entity.name.as_str();
        let event = &doc["components"]["schemas"][format!("{name}.Event")];
        let state = &event["properties"]["data"]["properties"]["state"];
        let attributes = &state["properties"]["attributes"];
        let declared = &openapi["components"]["schemas"][format!("{name}.Attributes")];
        assert_eq!(attributes["required"], declared["required"], "{name}");
        let props = attributes["properties"].as_object().unwrap();
        let declared_props = declared["properties"].as_object().unwrap();
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            declared_props.keys().collect::<Vec<_>>(),
            "{name}"
        );
        for (attr, schema) in declared_props {
            let mine = &props[attr];
            for keyword in ["format", "maxLength", "minimum", "maximum", "pattern"] {
                assert_eq!(
                    mine.get(keyword),
                    schema.get(keyword),
                    "{name}.{attr} {keyword}"
                );
            }
            if schema["nullable"] == true {
                assert_eq!(
                    mine["type"],
                    json!([schema["type"], "null"]),
                    "{name}.{attr}"
                );
                if let Some(values) = schema["enum"].as_array() {
                    let mut with_null = values.clone();
                    with_null.push(Value::Null);
                    assert_eq!(mine["enum"], Value::Array(with_null), "{name}.{attr}");
                }
            } else {
                assert_eq!(mine["type"], schema["type"], "{name}.{attr}");
                assert_eq!(mine.get("enum"), schema.get("enum"), "{name}.{attr}");
            }
            assert!(mine.get("nullable").is_none(), "{name}.{attr}");
        }
        // The item as GET /items answers it: E.Item's members, closed.
        let item = &openapi["components"]["schemas"][format!("{name}.Item")];
        assert_eq!(state["required"], item["required"], "{name}");
        assert_eq!(state["additionalProperties"], false, "{name}");
        assert_eq!(
            state["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            item["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            "{name}"
        );
        // `changed`: the declared attribute names (and, kept as given, undeclared ones).
        let changed = &event["properties"]["data"]["properties"]["changed"];
        let names: Vec<&str> = changed["items"]["anyOf"][0]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            entity
                .attributes
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
        );
        assert_eq!(
            event["properties"]["type"]["enum"],
            json!([
                format!("{name}.created"),
                format!("{name}.updated"),
                format!("{name}.deleted")
            ])
        );
        assert_eq!(event["properties"]["entity"]["const"], name);
        // No reference inside: each entity event's schema stands alone.
        assert!(!event.to_string().contains("$ref"), "{name}");
    }
    // A declared constraint, as openapi.rs's tests check it there.
    let order = &doc["components"]["schemas"]["order.Event"]["properties"]["data"]["properties"]["state"]
        ["properties"]["attributes"];
    assert_eq!(order["properties"]["userId"]["maxLength"], 128);
    assert_eq!(order["required"], json!(["status", "userId"]));
}

#[test]
fn the_standalone_schema_is_the_documents_with_its_id_and_dialect() {
    let doc = document();
    let model = Model::example();
    let standalone: Value = serde_json::from_str(&cqrs(&[
        "model",
        "events",
        "--file",
        &root_model(),
        "--schema",
        "order",
    ]))
    .unwrap();
    assert_eq!(
        standalone["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let id = format!("urn:cqrs:events:order:{}", model.revision());
    assert_eq!(standalone["$id"], id.as_str());
    // Events name their revision's schema; the schema takes any revision's events of the entity.
    assert_eq!(
        standalone["properties"]["dataschema"]["pattern"],
        "^urn:cqrs:events:order:[0-9a-f]+$"
    );
    let mut without = standalone.clone();
    let object = without.as_object_mut().unwrap();
    object.remove("$schema");
    object.remove("$id");
    assert_eq!(without, doc["components"]["schemas"]["order.Event"]);
    // An entity whose items never leave, and one the model does not have: clear errors.
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args([
            "model",
            "events",
            "--file",
            &root_model(),
            "--schema",
            "ttl_policy",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no events"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args([
            "model",
            "events",
            "--file",
            &root_model(),
            "--schema",
            "nope",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no entity `nope`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// Events as the feed builds them (INTERFACE of issue 39), validated by jsonschema.

const CREATED_AT: &str = "2024-02-01T09:00:00.000Z";
const UPDATED_AT: &str = "2024-02-01T10:15:30.250Z";

/// A value of the attribute's declared type, as the item JSON holds it.
fn value_of(entity: &Entity, name: &str) -> Value {
    let attr = &entity.attributes[name];
    match attr.ty {
        AttrType::String => {
            let mut text = format!("{name}V1");
            if let Some(max) = attr.max {
                text.truncate(max.max(1));
            }
            json!(text)
        }
        AttrType::Enum => json!(attr.values.last().unwrap()),
        AttrType::Number => json!(7),
        AttrType::Boolean => json!(false),
        AttrType::Timestamp => json!("2024-03-04T05:06:07.000Z"),
        AttrType::Map => json!({"note": "kept as given"}),
        AttrType::List => json!(["a", 1]),
    }
}

fn value_ref(value: &Value) -> ValueRef<'_> {
    match value {
        Value::Null => ValueRef::Null,
        Value::Bool(b) => ValueRef::Bool(*b),
        Value::String(text) => ValueRef::Str(text),
        Value::Number(_) => ValueRef::Num("7"),
        Value::Array(_) => ValueRef::Other("list"),
        Value::Object(_) => ValueRef::Other("map"),
    }
}

/// The item JSON of one version (as `GET /items` answers it), keys computed by the model.
fn state(
    entity: &Entity,
    attributes: &serde_json::Map<String, Value>,
    version: u64,
    deleted: bool,
) -> Value {
    let tenant = if entity.common { "common" } else { "t1" };
    let pairs: Vec<(&str, ValueRef<'_>)> = attributes
        .iter()
        .map(|(k, v)| (k.as_str(), value_ref(v)))
        .collect();
    let view = ItemView {
        tenant,
        created_at: CREATED_AT,
        attributes: &pairs,
    };
    let keys = entity
        .derive(&view)
        .unwrap_or_else(|e| panic!("{}: {e}", entity.name));
    let mut item = json!({
        "pk": keys.pk,
        "sk": keys.sk,
        "id": format!("{}#{}", keys.pk, keys.sk),
        "code": keys.sk,
        "name": entity.name,
        "version": version,
        "tenantCode": tenant,
        "type": entity.name,
        "isDeleted": deleted,
        "attributes": attributes,
        "source": "POST /commands",
        "requestId": "req-1",
        "createdAt": CREATED_AT,
        "createdBy": "u1",
        "updatedAt": if version == 1 { CREATED_AT } else { UPDATED_AT },
        "updatedBy": "u1",
        "entity": entity.name,
        "modelRevision": Model::example().revision(),
        "cpk": keys.pk,
        "csk": format!("{}@{version}", keys.sk),
    });
    for (name, value) in keys.index {
        item[name] = match value {
            KeyValue::S(text) => json!(text),
            KeyValue::N(text) => json!(text.parse::<u64>().unwrap()),
        };
    }
    item
}

/// Every declared attribute of `entity`, each with a value of its type.
fn example_attributes(entity: &Entity) -> serde_json::Map<String, Value> {
    entity
        .attributes
        .keys()
        .map(|name| (name.clone(), value_of(entity, name)))
        .collect()
}

/// The `cqrs_item::Item` of an item JSON. Read from text (its numbers are exact decimals, which
/// a `serde_json::Value` does not hand over), the index keys one by one: a number among the
/// flattened index keys does not deserialize (serde's `flatten` buffers it, and the buffered form
/// of an exact number is refused: "invalid type: newtype struct").
fn item_of(json: &Value) -> cqrs_item::Item {
    let declared: Vec<&str> = vec![
        "pk",
        "sk",
        "id",
        "code",
        "name",
        "version",
        "tenantCode",
        "type",
        "isDeleted",
        "seq",
        "ttl",
        "attributes",
        "source",
        "requestId",
        "createdAt",
        "createdBy",
        "createdIp",
        "updatedAt",
        "updatedBy",
        "updatedIp",
        "cpk",
        "csk",
        "entity",
        "modelRevision",
    ];
    let (members, keys): (
        serde_json::Map<String, Value>,
        serde_json::Map<String, Value>,
    ) = json
        .as_object()
        .unwrap()
        .clone()
        .into_iter()
        .partition(|(name, _)| declared.contains(&name.as_str()));
    let mut item: cqrs_item::Item =
        serde_json::from_str(&Value::Object(members).to_string()).unwrap();
    for (name, value) in keys {
        item.index_keys
            .insert(name, serde_json::from_str(&value.to_string()).unwrap());
    }
    item
}

/// One event of `entity` per INTERFACE39: `kind` created, updated, soft (deleted, soft) or ttl.
fn event(model: &Model, entity: &Entity, kind: &str) -> Value {
    let every = example_attributes(entity);
    let (version, previous, deleted) = match kind {
        "created" => (1u64, Value::Null, false),
        "updated" => (2, json!(1), false),
        "soft" => (3, json!(2), true),
        _ => (3, json!(2), false),
    };
    let changed: Vec<&str> = match kind {
        "created" => every.keys().map(String::as_str).collect(),
        "updated" => every.keys().map(String::as_str).take(1).collect(),
        _ => vec![],
    };
    let item = state(entity, &every, version, deleted);
    let pk = item["pk"].as_str().unwrap().to_string();
    let sk = item["sk"].as_str().unwrap().to_string();
    let ty = match kind {
        "created" | "updated" => format!("{}.{kind}", entity.name),
        _ => format!("{}.deleted", entity.name),
    };
    let mut event = json!({
        "specversion": "1.0",
        "id": "Zm9vYmFyYmF6cXV4MTIzNA",
        "source": "urn:cqrs:shop",
        "type": ty,
        "subject": format!("{pk}/{sk}"),
        "time": item["updatedAt"],
        "datacontenttype": "application/json",
        "dataschema": format!("urn:cqrs:events:{}:{}", entity.name, model.revision()),
        "tenant": item["tenantCode"],
        "entity": entity.name,
        "itemversion": version,
        "data": {
            "pk": pk,
            "sk": sk,
            "version": version,
            "previousVersion": previous,
            "state": item,
            "changed": changed,
        }
    });
    match kind {
        "soft" => event["removal"] = json!("soft"),
        "ttl" => event["removal"] = json!("ttl"),
        _ => {}
    }
    event
}

/// The Python with `jsonschema`: the project's `.venv` (scripts/tools.sh), or `EVENTS_PYTHON`;
/// `None` when told to skip (never under CI).
fn python() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("EVENTS_PYTHON") {
        return Some(explicit.into());
    }
    let venv = Path::new(ROOT).join(".venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    let skip = std::env::var("CQRS_SKIP_SCHEMA_VALIDATION").is_ok_and(|v| v == "1");
    if skip && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED (CQRS_SKIP_SCHEMA_VALIDATION=1): no .venv with jsonschema");
        return None;
    }
    panic!(
        "{} is missing: run scripts/tools.sh, name a Python with jsonschema in EVENTS_PYTHON, or \
         set CQRS_SKIP_SCHEMA_VALIDATION=1",
        venv.display()
    );
}

/// Checks each schema against its dialect's meta-schema, then each case: `{schema, dialect,
/// event, valid, label}`; prints one JSON line per case: `{label, valid, errors}`.
const VALIDATE: &str = r#"
import json, sys
from jsonschema import Draft202012Validator, Draft7Validator
spec = json.load(open(sys.argv[1]))
dialects = {"2020-12": Draft202012Validator, "7": Draft7Validator}
for name, schema in spec["schemas"].items():
    for cls in dialects.values():
        cls.check_schema(schema)
out = []
for case in spec["cases"]:
    cls = dialects[case["dialect"]]
    validator = cls(spec["schemas"][case["schema"]], format_checker=cls.FORMAT_CHECKER)
    errors = sorted(e.message for e in validator.iter_errors(case["event"]))
    out.append({"label": case["label"], "valid": not errors, "errors": errors[:3]})
print(json.dumps(out))
"#;

fn validate(schemas: Value, cases: Vec<Value>) -> Option<Vec<Value>> {
    let python = python()?;
    let dir = std::env::temp_dir().join(format!("cqrs-events-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cases.json");
    std::fs::write(
        &file,
        json!({"schemas": schemas, "cases": cases}).to_string(),
    )
    .unwrap();
    let out = Command::new(python)
        .args(["-c", VALIDATE])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "jsonschema: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn case(schema: &str, dialect: &str, label: String, event: Value, valid: bool) -> Value {
    json!({"schema": schema, "dialect": dialect, "label": label, "event": event, "valid": valid})
}

/// Every entity's created, updated, soft-deleted and TTL-removed events validate against its
/// standalone JSON Schema 2020-12, its schema in the document (draft 07) and `ChangeEvent`;
/// events that break the contract are refused, each for its reason.
#[test]
fn events_built_per_the_interface_validate_against_their_entity_schema_and_broken_ones_do_not() {
    let doc = document();
    let model = Model::example();
    let mut schemas = serde_json::Map::new();
    schemas.insert(
        "ChangeEvent".into(),
        doc["components"]["schemas"]["ChangeEvent"].clone(),
    );
    let mut cases = Vec::new();
    let feed = cqrs_events::Feed::new(model.clone(), "urn:cqrs:shop");
    let now = chrono::Utc::now();
    for entity in leaving(&model) {
        let name = entity.name.as_str();
        let standalone: Value = serde_json::from_str(&cqrs(&[
            "model",
            "events",
            "--file",
            &root_model(),
            "--schema",
            name,
        ]))
        .unwrap();
        // The feed names this schema's `$id` as the events' dataschema.
        assert_eq!(standalone["$id"], cqrs_events::dataschema(&model, name));
        schemas.insert(format!("{name}@2020"), standalone);
        schemas.insert(
            format!("{name}@doc"),
            doc["components"]["schemas"][format!("{name}.Event")].clone(),
        );
        let good: Vec<(&str, Value)> = ["created", "updated", "soft", "ttl"]
            .into_iter()
            .map(|kind| (kind, event(&model, entity, kind)))
            .collect();
        for (kind, event) in &good {
            for (schema, dialect) in [
                (format!("{name}@2020"), "2020-12"),
                (format!("{name}@doc"), "7"),
                ("ChangeEvent".to_string(), "2020-12"),
            ] {
                cases.push(case(
                    &schema,
                    dialect,
                    format!("{name} {kind} against {schema}"),
                    event.clone(),
                    true,
                ));
            }
        }
        // The change feed's own events (cqrs_events): a create, an update, a soft delete, a TTL
        // removal, each as the feed builds it from the item's versions.
        let attributes = example_attributes(entity);
        let version = |v: u64, deleted: bool| -> cqrs_item::Item {
            item_of(&state(entity, &attributes, v, deleted))
        };
        let (v1, v2, v3) = (version(1, false), version(2, false), version(3, true));
        let produced = [
            ("created", feed.version_event(&v1, None, now)),
            ("updated", feed.version_event(&v2, Some(&v1), now)),
            ("soft-deleted", feed.version_event(&v3, Some(&v2), now)),
            ("TTL-removed", feed.ttl_event(&v2, now)),
        ];
        for (kind, event) in produced {
            let event = serde_json::to_value(event.expect("an entity's item leaves")).unwrap();
            for (schema, dialect) in [
                (format!("{name}@2020"), "2020-12"),
                (format!("{name}@doc"), "7"),
                ("ChangeEvent".to_string(), "2020-12"),
            ] {
                cases.push(case(
                    &schema,
                    dialect,
                    format!("{name} {kind} by the feed against {schema}"),
                    event.clone(),
                    true,
                ));
            }
        }
        // The document's own examples validate too.
        for kind in ["created", "updated", "deleted"] {
            let example =
                &doc["components"]["messages"][format!("{name}.{kind}")]["examples"][0]["payload"];
            cases.push(case(
                &format!("{name}@doc"),
                "7",
                format!("{name} {kind}: the document's example"),
                example.clone(),
                true,
            ));
        }

        // An event too big for the transport: no state, `stateref` says where it is.
        let mut by_reference = good[1].1.clone();
        by_reference["data"]
            .as_object_mut()
            .unwrap()
            .remove("state");
        by_reference["stateref"] = json!("history");
        for (schema, dialect) in [
            (format!("{name}@2020"), "2020-12"),
            (format!("{name}@doc"), "7"),
            ("ChangeEvent".to_string(), "2020-12"),
        ] {
            cases.push(case(
                &schema,
                dialect,
                format!("{name} updated by reference (stateref) against {schema}"),
                by_reference.clone(),
                true,
            ));
        }

        // Broken events: each refused.
        let created = &good[0].1;
        let mut broken: Vec<(String, Value)> = Vec::new();
        let mut e = created.clone();
        e["type"] = json!("other.created");
        broken.push(("a type of another entity".into(), e));
        let mut e = created.clone();
        e["entity"] = json!("other");
        broken.push(("another entity".into(), e));
        let mut e = created.clone();
        e["data"]["previousVersion"] = json!(4);
        broken.push(("created with a previous version".into(), e));
        let mut e = good[2].1.clone();
        e.as_object_mut().unwrap().remove("removal");
        broken.push(("deleted without removal".into(), e));
        let mut e = good[1].1.clone();
        e["removal"] = json!("soft");
        broken.push(("updated with a removal".into(), e));
        let mut e = good[2].1.clone();
        e["data"]["state"]["isDeleted"] = json!(false);
        broken.push(("a soft delete of a live version".into(), e));
        let mut e = good[3].1.clone();
        e["data"]["changed"] = created["data"]["changed"].clone();
        if e["data"]["changed"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
        {
            broken.push(("a TTL removal that changed attributes".into(), e));
        }
        let mut e = created.clone();
        e["data"].as_object_mut().unwrap().remove("state");
        broken.push(("no state and no stateref".into(), e));
        let mut e = by_reference.clone();
        e["stateref"] = json!("elsewhere");
        broken.push(("a stateref other than history".into(), e));
        let mut e = created.clone();
        e["data"]["extra"] = json!(1);
        broken.push(("an undeclared member of data".into(), e));
        let mut e = created.clone();
        e["data"]["state"]["undeclared"] = json!("x");
        broken.push(("an undeclared member of the item".into(), e));
        let mut e = created.clone();
        e["id"] = json!("short");
        broken.push(("an id that is no 22-character digest".into(), e));
        let mut e = created.clone();
        e["Tenant"] = json!("t1");
        broken.push(("an attribute name CloudEvents refuses".into(), e));
        let mut e = created.clone();
        e["dataschema"] = json!(format!("urn:cqrs:events:other:{}", model.revision()));
        broken.push(("another entity's dataschema".into(), e));
        let mut e = created.clone();
        e["itemversion"] = json!(0);
        broken.push(("version 0".into(), e));
        if let Some((attr, _)) = entity.attributes.iter().find(|(_, a)| a.required) {
            let mut e = created.clone();
            e["data"]["state"]["attributes"]
                .as_object_mut()
                .unwrap()
                .remove(attr);
            broken.push((format!("without the required attribute {attr}"), e));
        }
        if let Some((attr, _)) = entity
            .attributes
            .iter()
            .find(|(_, a)| a.ty == AttrType::Enum)
        {
            let mut e = created.clone();
            e["data"]["state"]["attributes"][attr] = json!("NOT_A_VALUE");
            broken.push((format!("{attr} out of its enum"), e));
        }
        if let Some((attr, a)) = entity.attributes.iter().find(|(_, a)| a.max.is_some()) {
            let mut e = created.clone();
            e["data"]["state"]["attributes"][attr] = json!("x".repeat(a.max.unwrap() + 1));
            broken.push((format!("{attr} longer than its max"), e));
        }
        if let Some((attr, _)) = entity
            .attributes
            .iter()
            .find(|(_, a)| a.ty == AttrType::Number)
        {
            let mut e = created.clone();
            e["data"]["state"]["attributes"][attr] = json!("7");
            broken.push((format!("{attr} a string, not a number"), e));
        }
        for (why, event) in broken {
            for (schema, dialect) in [
                (format!("{name}@2020"), "2020-12"),
                (format!("{name}@doc"), "7"),
            ] {
                cases.push(case(
                    &schema,
                    dialect,
                    format!("{name} {why} against {schema}"),
                    event.clone(),
                    false,
                ));
            }
        }
    }
    let total = cases.len();
    let Some(results) = validate(Value::Object(schemas), cases.clone()) else {
        return;
    };
    assert_eq!(results.len(), total);
    let wrong: Vec<String> = cases
        .iter()
        .zip(&results)
        .filter(|(case, result)| case["valid"] != result["valid"])
        .map(|(case, result)| {
            format!(
                "{}: expected {}, got {} {}",
                result["label"],
                if case["valid"] == true {
                    "valid"
                } else {
                    "refused"
                },
                if result["valid"] == true {
                    "valid"
                } else {
                    "refused"
                },
                result["errors"]
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {total} cases wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    eprintln!("{total} cases as expected");
}

/// A model of its own gets channels of its own (and no example entity's).
#[test]
fn a_model_of_its_own_gets_a_contract_of_its_own() {
    let dir = std::env::temp_dir().join(format!("cqrs-events-own-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.toml");
    std::fs::write(
        &file,
        r#"
[entities.loan_record]
pk = "LOAN#{tenant}"
sk = "{loanId}"
id = "loanId"
attributes.loanId = { type = "string", max = 26 }
attributes.member = { type = "string", required = true, max = 64 }
attributes.state = { type = "enum", values = ["out", "back"] }
"#,
    )
    .unwrap();
    let yaml = cqrs(&["model", "events", "--file", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    let doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    let doc = serde_json::to_value(doc).unwrap();
    assert_eq!(
        doc["channels"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["loan_record"]
    );
    assert!(doc["operations"].get("receiveLoanRecord").is_some());
    let attrs = &doc["components"]["schemas"]["loan_record.Event"]["properties"]["data"]["properties"]
        ["state"]["properties"]["attributes"];
    assert_eq!(
        attrs["properties"]["state"]["enum"],
        json!(["out", "back", null])
    );
    assert_eq!(
        attrs["properties"]["state"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(attrs["required"], json!(["member"]));
}

/// Every `$ref` of the document points at something in it.
#[test]
fn every_reference_of_the_document_resolves() {
    fn refs<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
        match value {
            Value::Object(m) => {
                if let Some(Value::String(to)) = m.get("$ref") {
                    out.push(to);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let doc = document();
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 50, "{} references", all.len());
    for to in all {
        let pointer = to
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{to}: not local"));
        // JSON pointer: `~1` is `/`, `~0` is `~` (no key here holds either).
        assert!(doc.pointer(pointer).is_some(), "{to} resolves to nothing");
    }
}

/// Lints an AsyncAPI document with Redocly's `struct` rule (the AsyncAPI 3 type tree: required
/// fields, known keywords, value types, in schemas too); prints one JSON line per problem.
const LINT: &str = r#"
const path = require("node:path");
const [modules, file] = process.argv.slice(2);
const core = require(path.join(modules, "@redocly/openapi-core"));
(async () => {
  const config = await core.createConfig({ rules: { struct: "error" } });
  const document = await core.bundle({ ref: file, config });
  const spec = core.detectSpec(document.bundle.parsed);
  if (spec !== "async3") throw new Error(`read as ${spec}, not async3`);
  const problems = await core.lint({ ref: file, config });
  for (const p of problems) {
    console.log(JSON.stringify({ rule: p.ruleId, message: p.message, where: p.location.map((l) => l.pointer) }));
  }
})().catch((e) => { console.error(e); process.exit(2); });
"#;

/// The node_modules of the TypeScript client (scripts/typescript-client.sh installs them with
/// `npm ci` from its lockfile); `None` when told to skip (never under CI).
fn node_modules() -> Option<PathBuf> {
    let modules = Path::new(ROOT).join("clients/typescript/node_modules");
    if modules.join("@redocly/openapi-core").exists() {
        return Some(modules);
    }
    let skip = std::env::var("CQRS_SKIP_SCHEMA_VALIDATION").is_ok_and(|v| v == "1");
    if skip && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED (CQRS_SKIP_SCHEMA_VALIDATION=1): no clients/typescript/node_modules");
        return None;
    }
    panic!(
        "{} has no @redocly/openapi-core: run scripts/typescript-client.sh check (npm ci), or set \
         CQRS_SKIP_SCHEMA_VALIDATION=1",
        modules.display()
    );
}

fn lint(yaml: &str) -> Option<Vec<Value>> {
    let modules = node_modules()?;
    let dir = std::env::temp_dir().join(format!(
        "cqrs-events-lint-{}-{}",
        std::process::id(),
        yaml.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (script, file) = (dir.join("lint.cjs"), dir.join("events.asyncapi.yaml"));
    std::fs::write(&script, LINT).unwrap();
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new("node")
        .arg(&script)
        .arg(&modules)
        .arg(&file)
        .output()
        .expect("node (Node.js 20 or later) runs the AsyncAPI lint");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "lint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect(),
    )
}

/// The document is AsyncAPI 3.0 as Redocly's linter reads it, and the linter is no rubber stamp:
/// the same document with an OpenAPI `nullable` in a schema and a misspelt action is refused.
#[test]
fn the_document_is_asyncapi_3_to_a_linter() {
    let yaml = cqrs(&["model", "events", "--file", &root_model()]);
    let Some(problems) = lint(&yaml) else {
        return;
    };
    assert!(problems.is_empty(), "{problems:#?}");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    doc["components"]["schemas"]["order.Event"]["properties"]["tenant"]["nullable"] = true.into();
    doc["operations"]["receiveOrder"]["action"] = "recieve".into();
    let broken = serde_yaml::to_string(&doc).unwrap();
    let problems = lint(&broken).unwrap();
    let messages: Vec<&str> = problems
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("`action`")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("`nullable`")),
        "{messages:?}"
    );
}
