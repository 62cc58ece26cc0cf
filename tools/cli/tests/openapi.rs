//! `cqrs model openapi`: the committed `openapi.yaml` is what the model generates (drift fails the
//! test and says how to regenerate), and the generated contract says what the model says.

use std::process::Command;

use serde_yaml::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn generate(model_file: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cqrs"))
        .args(["model", "openapi", "--file", model_file])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn example_document() -> Value {
    serde_yaml::from_str(&generate(&format!("{ROOT}/model.toml"))).unwrap()
}

#[test]
fn the_committed_openapi_yaml_is_what_the_model_generates() {
    let generated = generate(&format!("{ROOT}/model.toml"));
    let path = format!("{ROOT}/openapi.yaml");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return;
    }
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let line = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
    panic!(
        "openapi.yaml differs from what model.toml generates, from line {}:\n  committed: {:?}\n  \
         generated: {:?}\nRegenerate it with\n  cargo run -p cqrs-cli -- model openapi > openapi.yaml\n\
         (or run this test with UPDATE_OPENAPI=1)",
        line + 1,
        committed.lines().nth(line).unwrap_or("<end of file>"),
        generated.lines().nth(line).unwrap_or("<end of file>"),
    );
}

fn params(doc: &Value, path: &str) -> Vec<(String, bool)> {
    doc["paths"][path]["get"]["parameters"]
        .as_sequence()
        .unwrap_or_else(|| panic!("no parameters for {path}"))
        .iter()
        .filter(|p| p.get("name").is_some())
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["required"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[test]
fn every_pattern_has_its_own_path_with_the_parameters_the_model_allows() {
    let doc = example_document();
    let model = cqrs_model::Model::example();
    let paths = doc["paths"].as_mapping().unwrap();
    assert!(paths.get("/query/{pattern}").is_none());
    for pattern in model.patterns() {
        let path = format!("/query/{}", pattern.name);
        assert!(paths.get(path.as_str()).is_some(), "{path} missing");
    }
    // The partition's parameter is required; the sort key's are not; ranges where allowed.
    let of_user = params(&doc, "/query/orders_of_user");
    assert!(of_user.contains(&("userId".into(), true)), "{of_user:?}");
    assert!(of_user.iter().any(|(n, r)| n == "from" && !r));
    let items = params(&doc, "/query/items_of_order");
    assert!(items.contains(&("orderId".into(), false)), "{items:?}");
    assert!(items.contains(&("itemId".into(), false)), "{items:?}");
    // `sort = ["range"]`: no sort parameter, only the bounds.
    let readings = params(&doc, "/query/readings_of_sensor");
    assert!(readings.contains(&("sensorId".into(), true)));
    assert!(!readings.iter().any(|(n, _)| n == "readAt"), "{readings:?}");
    assert!(readings.iter().any(|(n, _)| n == "before"));
    // A page holds the pattern's entity's items; a collection's, either.
    let page = &doc["components"]["schemas"]["orders_of_user.Page"];
    assert_eq!(
        page["properties"]["items"]["items"]["$ref"],
        "#/components/schemas/order.Item"
    );
    let collection = &doc["components"]["schemas"]["order_with_items.Page"];
    assert_eq!(
        collection["properties"]["items"]["items"]["oneOf"]
            .as_sequence()
            .unwrap()
            .len(),
        2
    );
    // The enum parameter of a sharded pattern is the attribute's enum.
    let by_status = &doc["paths"]["/query/orders_by_status"]["get"]["parameters"][0];
    assert_eq!(by_status["name"], "status");
    assert_eq!(by_status["schema"]["enum"].as_sequence().unwrap().len(), 5);
}

#[test]
fn entity_schemas_carry_the_declared_constraints() {
    let doc = example_document();
    let schemas = &doc["components"]["schemas"];
    let order = &schemas["order.Attributes"];
    let required: Vec<&str> = order["required"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, ["status", "userId"]);
    assert_eq!(order["properties"]["userId"]["maxLength"], 128);
    assert_eq!(order["properties"]["totalCents"]["type"], "number");
    assert_eq!(order["properties"]["totalCents"]["format"], "decimal");
    // `width = 12`: a whole number of at most 12 digits.
    let price = &schemas["product.Attributes"]["properties"]["priceCents"];
    assert_eq!(price["type"], "integer");
    assert_eq!(price["minimum"], 0);
    assert_eq!(price["maximum"], 999_999_999_999u64);
    let at = &schemas["log.Attributes"]["properties"]["at"];
    assert_eq!(at["format"], "date-time");
    // PATCH: the attributes that name the item are required and never null; the others may be.
    let patch = &schemas["order_item.Patch"]["properties"]["attributes"];
    let named: Vec<&str> = patch["required"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(named, ["orderId", "itemId"]);
    assert_eq!(
        schemas["order.Patch"]["properties"]["attributes"]["properties"]["totalCents"]["nullable"],
        true
    );
    // The item as the query API answers it: its index keys, its entity, nothing else.
    let item = &schemas["store.Item"];
    assert_eq!(item["additionalProperties"], false);
    assert_eq!(item["properties"]["entity"]["enum"][0], "store");
    assert_eq!(item["properties"]["locCountry"]["type"], "string");
}

/// OpenAPI 3.0 has no `const`: each branch of the command bodies must exclude the others, or a
/// valid body matches two (and `oneOf` refuses it).
#[test]
fn exactly_one_command_body_branch_matches_each_body() {
    let doc = example_document();
    let schemas = &doc["components"]["schemas"];
    for method in ["post", "patch"] {
        let branches = doc["paths"]["/commands"][method]["requestBody"]["content"]
            ["application/json"]["schema"]["oneOf"]
            .as_sequence()
            .unwrap();
        let model = cqrs_model::Model::example();
        assert_eq!(branches.len(), model.entities().len() + 1);
        let mut entities = Vec::new();
        for branch in branches {
            let name = branch["$ref"]
                .as_str()
                .unwrap()
                .trim_start_matches("#/components/schemas/");
            let schema = &schemas[name];
            assert_eq!(schema["additionalProperties"], false, "{name}");
            let props = schema["properties"].as_mapping().unwrap();
            if name.starts_with("Key") {
                assert!(props.get("entity").is_none(), "{name} takes entity");
                assert!(props.get("pk").is_some());
            } else {
                assert!(
                    props.get("pk").is_none() && props.get("sk").is_none(),
                    "{name}"
                );
                let one = schema["properties"]["entity"]["enum"]
                    .as_sequence()
                    .unwrap();
                assert_eq!(one.len(), 1, "{name}");
                entities.push(one[0].as_str().unwrap().to_string());
                let required = schema["required"].as_sequence().unwrap();
                assert!(required.contains(&Value::from("entity")), "{name}");
            }
        }
        let before = entities.len();
        entities.sort();
        entities.dedup();
        assert_eq!(entities.len(), before, "two branches share an entity");
        // An example per entity, each a body of its own branch.
        let examples = doc["paths"]["/commands"][method]["requestBody"]["content"]
            ["application/json"]["examples"]
            .as_mapping()
            .unwrap();
        for entity in &entities {
            assert_eq!(
                examples[entity.as_str()]["value"]["entity"],
                entity.as_str()
            );
        }
    }
}

#[test]
fn a_model_of_its_own_gets_a_contract_of_its_own() {
    let dir = std::env::temp_dir().join(format!("cqrs-openapi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.toml");
    std::fs::write(
        &file,
        r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[entities.loan]
pk = "LOAN#{tenant}"
sk = "{loanId}"
id = "loanId"
attributes.loanId = { type = "string", max = 26 }
attributes.member = { type = "string", required = true, max = 64 }
attributes.fee = { type = "number", width = 6 }
attributes.due = { type = "timestamp", required = true }
indexes.gsi1 = { pk = "MEMBER#{tenant}#{member}", sk = "{due}#{loanId}" }

[patterns.loans_of_member]
entity = "loan"
index = "gsi1"
params = ["member"]
description = "a member's loans by due date"
"#,
    )
    .unwrap();
    let doc: Value = serde_yaml::from_str(&generate(file.to_str().unwrap())).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let paths: Vec<&str> = doc["paths"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .filter(|k| k.starts_with("/query/"))
        .collect();
    assert_eq!(paths, ["/query/loans_of_member"]);
    let schemas = doc["components"]["schemas"].as_mapping().unwrap();
    assert!(schemas.get("loan.Create").is_some());
    assert!(schemas.get("order.Create").is_none());
    assert_eq!(
        doc["components"]["schemas"]["loan.Attributes"]["properties"]["fee"]["maximum"],
        999_999
    );
    assert_eq!(
        doc["paths"]["/query/loans_of_member"]["get"]["operationId"],
        "queryLoansOfMember"
    );
}

#[test]
fn every_status_a_command_hook_may_refuse_with_is_in_the_contract_of_every_operation_it_runs_in() {
    let doc = example_document();
    for (path, method) in [
        ("/commands", "post"),
        ("/commands", "patch"),
        ("/master-data/copy", "post"),
    ] {
        let responses = &doc["paths"][path][method]["responses"];
        for status in cqrs_problem::REFUSAL_STATUSES {
            let response = &responses[status.to_string().as_str()];
            assert_eq!(
                response["$ref"],
                Value::from("#/components/responses/Problem"),
                "{method} {path} documents {status} (a command hook's refusal) as a problem document"
            );
        }
    }
}

/// Each operation of the service's own routes (`[routes.<function>]`) is in the document: its id
/// and words, its path parameters (strings), its query parameters with their schemas and required
/// flags, its 200 body's schema (any object when undeclared) and its problem documents, under the
/// document's security as the framework's operations.
#[test]
fn the_services_own_operations_are_documented() {
    let dir = std::env::temp_dir().join(format!("cqrs-openapi-routes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let example = std::fs::read_to_string(format!("{ROOT}/model.toml")).unwrap();
    let file = dir.join("model.toml");
    std::fs::write(
        &file,
        format!(
            "{example}\n{}",
            r#"
[routes.shelf-report]
reads = ["sql"]
[routes.shelf-report.operations.shelfReport]
method = "GET"
path = "/shelves/{shelfId}/report"
summary = "A shelf's report"
description = "Counted in the read model."
problems = [400, 401, 503]
query = { status = { enum = ["open", "done"] }, limit = { type = "integer", minimum = 1 }, q = {} }
required_query = ["status"]
response = { type = "object", required = ["count"], properties = { count = { type = "integer" } } }
[routes.shelf-report.operations.shelfNote]
method = "POST"
path = "/shelves/{shelfId}/report"
"#
        ),
    )
    .unwrap();
    let doc: Value = serde_yaml::from_str(&generate(file.to_str().unwrap())).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let item = &doc["paths"]["/shelves/{shelfId}/report"];
    let get = &item["get"];
    assert_eq!(get["operationId"], "shelfReport");
    assert_eq!(get["summary"], "A shelf's report");
    let description = get["description"].as_str().unwrap();
    assert!(
        description.starts_with("Counted in the read model."),
        "{description}"
    );
    assert!(
        description.contains("[routes.shelf-report]"),
        "{description}"
    );
    let params = get["parameters"].as_sequence().unwrap();
    let named = |name: &str| {
        params
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no parameter {name}"))
    };
    assert_eq!(named("shelfId")["in"], "path");
    assert_eq!(named("shelfId")["required"], true);
    assert_eq!(named("shelfId")["schema"]["type"], "string");
    assert_eq!(named("status")["in"], "query");
    assert_eq!(named("status")["required"], true);
    assert_eq!(named("status")["schema"]["enum"][1], "done");
    assert_eq!(named("limit")["required"], false);
    assert_eq!(named("limit")["schema"]["type"], "integer");
    assert_eq!(named("limit")["schema"]["minimum"], 1);
    assert_eq!(named("q")["schema"]["type"], "string");
    // The local caller's headers, as every framework operation has them.
    assert!(
        params
            .iter()
            .any(|p| p["$ref"] == "#/components/parameters/TenantHeader")
    );
    let ok = &get["responses"]["200"]["content"]["application/json"]["schema"];
    assert_eq!(ok["required"][0], "count");
    assert_eq!(ok["properties"]["count"]["type"], "integer");
    let mut statuses: Vec<&str> = get["responses"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["200", "400", "401", "503"]);
    for status in ["400", "401", "503"] {
        assert_eq!(
            get["responses"][status]["$ref"], "#/components/responses/Problem",
            "{status}"
        );
    }
    // The framework's problem response is application/problem+json.
    assert!(
        doc["components"]["responses"]["Problem"]["content"]["application/problem+json"]
            .is_mapping()
    );
    // Undeclared response: any JSON object; no problems declared: the 200 alone.
    let post = &item["post"];
    assert_eq!(post["operationId"], "shelfNote");
    assert_eq!(
        post["responses"]["200"]["content"]["application/json"]["schema"]["type"],
        "object"
    );
    assert_eq!(post["responses"].as_mapping().unwrap().len(), 1);
    // Under the document's security, as the framework's operations (none overrides it).
    assert!(get.get("security").is_none());
    assert!(doc["paths"]["/commands"]["post"].get("security").is_none());
    assert_eq!(doc["security"][0]["jwt"], Value::Sequence(vec![]));
}

/// Issue 38: an entity's write roles are in its command schemas, in words and as `x-cqrs-roles`;
/// the problem schema documents the members of a constraint's refusal.
#[test]
fn entity_command_schemas_say_who_may_write() {
    let dir = std::env::temp_dir().join(format!("cqrs-openapi-roles-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.toml");
    std::fs::write(
        &file,
        r#"
[entities.copy]
pk = "COPY#{tenant}"
sk = "{copyId}"
attributes.copyId = { type = "string", required = true, max = 40 }
roles = { create = ["librarian"], delete = ["manager", "admin"] }

[entities.note]
pk = "NOTE#{tenant}"
sk = "{noteId}"
attributes.noteId = { type = "string", required = true, max = 40 }
"#,
    )
    .unwrap();
    let doc: Value = serde_yaml::from_str(&generate(file.to_str().unwrap())).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let schemas = &doc["components"]["schemas"];
    for name in ["copy.Create", "copy.Patch"] {
        let schema = &schemas[name];
        let roles = &schema["x-cqrs-roles"];
        assert_eq!(roles["create"][0], "librarian", "{name}");
        assert_eq!(roles["delete"][1], "admin", "{name}");
        assert!(
            roles.get("update").is_none(),
            "{name}: update is not restricted"
        );
        let description = schema["description"].as_str().unwrap();
        assert!(
            description.contains("Who may write: create: librarian; delete: manager, admin"),
            "{description}"
        );
    }
    assert!(schemas["note.Create"].get("x-cqrs-roles").is_none());
    let problem = &schemas["Problem"]["properties"];
    for member in ["constraint", "reason", "limit"] {
        assert!(problem.get(member).is_some(), "Problem.{member}");
    }
    assert_eq!(problem["reason"]["enum"][0], "missing");
}
