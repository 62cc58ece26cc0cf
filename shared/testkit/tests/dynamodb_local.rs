//! Against DynamoDB Local (started by `cqrs dynamodb-local start`):
//! `fresh_tables()` creates what the template says, and the command table's
//! stream delivers inserts.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::{
    AttributeValue, KeyType, ProjectionType, StreamViewType, TableDescription,
};
use aws_sdk_dynamodbstreams::types::OperationType;
use cqrs_testkit::template::{self, COMMAND_TABLE, DATA_TABLE, HISTORY_TABLE, TableSpec};

async fn describe(client: &aws_sdk_dynamodb::Client, name: &str) -> TableDescription {
    client
        .describe_table()
        .table_name(name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeTable {name}: {e:?}"))
        .table
        .unwrap()
}

fn keys(schema: &[aws_sdk_dynamodb::types::KeySchemaElement]) -> Vec<(String, KeyType)> {
    schema
        .iter()
        .map(|k| (k.attribute_name().to_owned(), k.key_type().clone()))
        .collect()
}

fn assert_matches_spec(table: &TableDescription, spec: &TableSpec) {
    let expected_keys: Vec<_> = spec
        .key_schema
        .iter()
        .map(|k| (k.name.clone(), k.key_type.clone()))
        .collect();
    assert_eq!(
        keys(table.key_schema()),
        expected_keys,
        "{}",
        spec.logical_id
    );

    let attrs: HashSet<_> = table
        .attribute_definitions()
        .iter()
        .map(|a| (a.attribute_name().to_owned(), a.attribute_type().clone()))
        .collect();
    let expected_attrs: HashSet<_> = spec
        .attributes
        .iter()
        .map(|a| (a.name.clone(), a.attribute_type.clone()))
        .collect();
    assert_eq!(attrs, expected_attrs, "{}", spec.logical_id);

    let gsis = table.global_secondary_indexes();
    assert_eq!(
        gsis.len(),
        spec.global_secondary_indexes.len(),
        "{}",
        spec.logical_id
    );
    for expected in &spec.global_secondary_indexes {
        let gsi = gsis
            .iter()
            .find(|g| g.index_name() == Some(expected.name.as_str()))
            .unwrap_or_else(|| panic!("GSI {} missing", expected.name));
        let expected_keys: Vec<_> = expected
            .key_schema
            .iter()
            .map(|k| (k.name.clone(), k.key_type.clone()))
            .collect();
        assert_eq!(keys(gsi.key_schema()), expected_keys);
        assert_eq!(
            gsi.projection().and_then(|p| p.projection_type()),
            Some(&expected.projection_type)
        );
    }

    match &spec.stream_view_type {
        Some(view) => {
            let stream = table.stream_specification().expect("stream specification");
            assert!(stream.stream_enabled(), "{}", spec.logical_id);
            assert_eq!(stream.stream_view_type(), Some(view));
            assert!(table.latest_stream_arn().is_some());
        }
        None => assert!(
            table
                .stream_specification()
                .is_none_or(|s| !s.stream_enabled()),
            "{} should have no stream",
            spec.logical_id
        ),
    }
}

#[tokio::test]
async fn fresh_tables_match_the_template() {
    let specs = template::workspace_tables().unwrap();
    let tables = cqrs_testkit::fresh_tables().await;
    assert_ne!(tables.command, tables.data);

    for (name, id, suffix) in [
        (&tables.command, COMMAND_TABLE, "-command"),
        (&tables.data, DATA_TABLE, "-data"),
        (&tables.history, HISTORY_TABLE, "-history"),
    ] {
        assert!(name.starts_with("t-") && name.ends_with(suffix), "{name}");
        let description = describe(&tables.client, name).await;
        assert_matches_spec(&description, template::find(&specs, id).unwrap());

        let ttl = tables
            .client
            .describe_time_to_live()
            .table_name(name)
            .send()
            .await
            .unwrap();
        let ttl = ttl.time_to_live_description().unwrap();
        assert_eq!(ttl.attribute_name(), Some("ttl"), "{name}");
    }

    // Spelled out once more, independent of the spec comparison above.
    let history = describe(&tables.client, &tables.history).await;
    let gsi = &history.global_secondary_indexes()[0];
    assert_eq!(gsi.index_name(), Some("id-version-index"));
    assert_eq!(
        keys(gsi.key_schema()),
        [
            ("id".to_owned(), KeyType::Hash),
            ("version".to_owned(), KeyType::Range)
        ]
    );
    assert_eq!(
        gsi.projection().and_then(|p| p.projection_type()),
        Some(&ProjectionType::All)
    );
    let command = describe(&tables.client, &tables.command).await;
    let stream = command.stream_specification().unwrap();
    assert!(stream.stream_enabled());
    assert_eq!(stream.stream_view_type(), Some(&StreamViewType::NewImage));
}

#[tokio::test]
async fn parallel_fresh_tables_never_share_names() {
    let (a, b) = tokio::join!(cqrs_testkit::fresh_tables(), cqrs_testkit::fresh_tables());
    let names: HashSet<_> = [a.command, a.data, a.history, b.command, b.data, b.history]
        .into_iter()
        .collect();
    assert_eq!(names.len(), 6);
}

#[tokio::test]
async fn put_to_command_table_shows_up_as_insert_on_its_stream() {
    let tables = cqrs_testkit::fresh_tables().await;
    tables
        .client
        .put_item()
        .table_name(&tables.command)
        .item("pk", AttributeValue::S("tenant#1".into()))
        .item("sk", AttributeValue::S("thing#42@1".into()))
        .item("payload", AttributeValue::S("hello".into()))
        .send()
        .await
        .unwrap();

    let arn = tables.command_stream_arn().await;
    assert!(
        arn.contains(&format!("table/{}/stream/", tables.command)),
        "{arn}"
    );

    let streams = cqrs_testkit::streams_client().await;
    let records = cqrs_testkit::tables::wait_for_stream_records(
        &streams,
        &arn,
        1,
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record.event_name(), Some(&OperationType::Insert));
    let change = record.dynamodb().unwrap();
    assert_eq!(
        change.stream_view_type(),
        Some(&aws_sdk_dynamodbstreams::types::StreamViewType::NewImage)
    );
    let image = change.new_image().unwrap();
    assert_eq!(
        image.get("sk"),
        Some(&aws_sdk_dynamodbstreams::types::AttributeValue::S(
            "thing#42@1".into()
        ))
    );
    assert_eq!(
        image.get("payload"),
        Some(&aws_sdk_dynamodbstreams::types::AttributeValue::S(
            "hello".into()
        ))
    );
    assert!(change.old_image().is_none());

    // The convenience wrapper sees the same record.
    let again = tables.command_stream_records(1).await;
    assert_eq!(again.len(), 1);
}

/// DynamoDB Local's stream writes an empty map as an untyped `{}`; the testkit's streams client
/// repairs it, so an item with empty maps can be read from the stream like any other.
#[tokio::test]
async fn empty_maps_come_out_of_the_stream_as_empty_maps() {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    use aws_sdk_dynamodbstreams::types::AttributeValue as StreamAv;
    let tables = cqrs_testkit::fresh_tables().await;
    let nested = Av::M([("inner".to_string(), Av::M(Default::default()))].into());
    tables
        .client
        .put_item()
        .table_name(&tables.command)
        .item("pk", Av::S("PRODUCT#t1".into()))
        .item("sk", Av::S("P@1".into()))
        .item("attributes", Av::M(Default::default()))
        .item("nested", nested)
        .item("list", Av::L(vec![Av::M(Default::default())]))
        .send()
        .await
        .unwrap();
    let records = tables.command_stream_records(1).await;
    let image = records[0].dynamodb().unwrap().new_image().unwrap();
    assert_eq!(image["attributes"], StreamAv::M(Default::default()));
    assert_eq!(
        image["nested"],
        StreamAv::M([("inner".to_string(), StreamAv::M(Default::default()))].into())
    );
    assert_eq!(
        image["list"],
        StreamAv::L(vec![StreamAv::M(Default::default())])
    );
}
