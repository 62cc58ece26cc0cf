//! Pure tests: `template.yaml` parses into the three expected table specs.

use aws_sdk_dynamodb::types::{KeyType, ProjectionType, ScalarAttributeType, StreamViewType};
use cqrs_testkit::template::{
    self, AttributeSpec, COMMAND_TABLE, DATA_TABLE, HISTORY_TABLE, IDEMPOTENCY_TABLE, KeySpec,
    TableSpec,
};

fn attr(name: &str, attribute_type: ScalarAttributeType) -> AttributeSpec {
    AttributeSpec {
        name: name.into(),
        attribute_type,
    }
}

fn key(name: &str, key_type: KeyType) -> KeySpec {
    KeySpec {
        name: name.into(),
        key_type,
    }
}

fn pk_sk() -> Vec<KeySpec> {
    vec![key("pk", KeyType::Hash), key("sk", KeyType::Range)]
}

fn specs() -> Vec<TableSpec> {
    template::workspace_tables().expect("template.yaml parses")
}

#[test]
fn exactly_six_tables_in_order() {
    let ids: Vec<_> = specs().into_iter().map(|s| s.logical_id).collect();
    assert_eq!(
        ids,
        [
            COMMAND_TABLE,
            DATA_TABLE,
            HISTORY_TABLE,
            IDEMPOTENCY_TABLE,
            cqrs_testkit::fixtures::PARKED_TABLE,
            "SequencesTable"
        ]
    );
}

#[test]
fn sequences_table_has_pk_sk_no_ttl_and_no_stream() {
    // Sequences never expire, and a counter row must never reach data-sync's stream.
    let specs = specs();
    let t = template::find(&specs, "SequencesTable").unwrap();
    assert_eq!(t.key_schema, pk_sk());
    assert!(t.ttl_attribute.is_none());
    assert!(t.stream_view_type.is_none());
}

#[test]
fn idempotency_table_has_a_hash_key_ttl_and_no_stream() {
    let specs = specs();
    let t = template::find(&specs, IDEMPOTENCY_TABLE).unwrap();
    assert_eq!(t.key_schema.len(), 1);
    assert_eq!(t.hash_key(), Some("pk"));
    assert_eq!(t.ttl_attribute.as_deref(), Some("ttl"));
    assert!(t.stream_view_type.is_none());
}

#[test]
fn command_table() {
    let specs = specs();
    let t = template::find(&specs, COMMAND_TABLE).unwrap();
    assert_eq!(t.key_schema, pk_sk());
    assert_eq!(
        t.attributes,
        [
            attr("pk", ScalarAttributeType::S),
            attr("sk", ScalarAttributeType::S)
        ]
    );
    assert_eq!(t.stream_view_type, Some(StreamViewType::NewImage));
    assert!(t.global_secondary_indexes.is_empty());
    assert!(t.local_secondary_indexes.is_empty());
    assert_eq!(t.ttl_attribute.as_deref(), Some("ttl"));
    assert_eq!(t.table_name_template.as_deref(), Some("${Prefix}-command"));
    assert_eq!(
        t.table_name(&[("Prefix", "cqrs")]).as_deref(),
        Some("cqrs-command")
    );
}

#[test]
fn data_table() {
    let specs = specs();
    let t = template::find(&specs, DATA_TABLE).unwrap();
    assert_eq!(t.key_schema, pk_sk());
    // Its GSIs and their key attributes are the entity model's (tests/model_template.rs).
    assert_eq!(
        t.attributes.len(),
        2 + cqrs_model::Model::example().index_attribute_names().len()
    );
    // Newest states with their previous ones, for sql-sync (the relational read model).
    assert_eq!(
        t.stream_view_type,
        Some(aws_sdk_dynamodb::types::StreamViewType::NewAndOldImages)
    );
    assert_eq!(
        t.global_secondary_indexes.len(),
        cqrs_model::Model::example().indexes().len()
    );
    assert_eq!(t.ttl_attribute.as_deref(), Some("ttl"));
    assert_eq!(t.table_name(&[("Prefix", "p")]).as_deref(), Some("p-data"));
}

#[test]
fn history_table() {
    let specs = specs();
    let t = template::find(&specs, HISTORY_TABLE).unwrap();
    assert_eq!(t.key_schema, pk_sk());
    assert_eq!(
        t.attributes,
        [
            attr("pk", ScalarAttributeType::S),
            attr("sk", ScalarAttributeType::S),
            attr("id", ScalarAttributeType::S),
            attr("version", ScalarAttributeType::N),
        ]
    );
    assert_eq!(t.stream_view_type, None);
    assert_eq!(t.global_secondary_indexes.len(), 1);
    let gsi = &t.global_secondary_indexes[0];
    assert_eq!(gsi.name, "id-version-index");
    assert_eq!(
        gsi.key_schema,
        [key("id", KeyType::Hash), key("version", KeyType::Range)]
    );
    assert_eq!(gsi.projection_type, ProjectionType::All);
    assert!(gsi.non_key_attributes.is_empty());
    assert_eq!(t.ttl_attribute.as_deref(), Some("ttl"));
    assert_eq!(
        t.table_name(&[("Prefix", "p")]).as_deref(),
        Some("p-history")
    );
}

#[test]
fn short_tags_everywhere_do_not_break_parsing() {
    let yaml = r#"
Conditions:
  IsProd: !Equals [!Ref Stage, prod]
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Condition: IsProd
    Properties:
      TableName: !Join ['-', [!Ref Prefix, t]]
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      Tags: [{Key: k, Value: !Ref AWS::StackName}]
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment: {Variables: {TABLE: !Ref T, ARN: !GetAtt T.StreamArn}}
"#;
    // `!Join` as TableName is not supported: reported, not a panic.
    let err = template::parse_template(yaml).unwrap_err().to_string();
    assert!(err.contains("TableName"), "{err}");

    let ok = yaml.replace("!Join ['-', [!Ref Prefix, t]]", "!Sub '${Prefix}-t'");
    let specs = template::parse_template(&ok).unwrap();
    assert_eq!(specs.len(), 1);
    assert_eq!(
        specs[0].table_name(&[("Prefix", "a")]).as_deref(),
        Some("a-t")
    );
    assert_eq!(specs[0].table_name(&[]), None);
}

#[test]
fn long_form_sub_and_escapes() {
    let yaml = r#"
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      TableName: {"Fn::Sub": "${Prefix}-t-${!Literal}"}
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: B}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      TimeToLiveSpecification: {AttributeName: ttl, Enabled: false}
"#;
    let specs = template::parse_template(yaml).unwrap();
    assert_eq!(
        specs[0].table_name(&[("Prefix", "a")]).as_deref(),
        Some("a-t-${Literal}")
    );
    assert_eq!(specs[0].ttl_attribute, None);
    assert_eq!(
        specs[0].attributes[0].attribute_type,
        ScalarAttributeType::B
    );
}

#[test]
fn inconsistent_definitions_are_errors() {
    let base = r#"
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
"#;
    assert!(template::parse_template(base).is_ok());
    for (from, to) in [
        ("AttributeName: pk, KeyType", "AttributeName: nope, KeyType"),
        ("KeyType: HASH", "KeyType: RANGE"),
        ("AttributeType: S", "AttributeType: X"),
        ("PAY_PER_REQUEST", "PROVISIONED"),
    ] {
        let yaml = base.replace(from, to);
        assert!(template::parse_template(&yaml).is_err(), "{from} -> {to}");
    }
    assert!(template::parse_template("Resources: [").is_err());
}
