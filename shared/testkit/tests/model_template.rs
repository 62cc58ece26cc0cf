//! `template.yaml` follows the entity model: the data table's GSIs (names, key schema with native
//! multi-attribute keys, attribute types, projection) are exactly those of `model.toml`, and the
//! local tables made from the template carry them (a query on a native multi-attribute GSI in
//! DynamoDB Local).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeyType, ProjectionType, ScalarAttributeType};
use cqrs_model::{KeyType as ModelKeyType, Model, Projection};
use cqrs_testkit::template::{DATA_TABLE, find, workspace_tables};

fn scalar(ty: ModelKeyType) -> ScalarAttributeType {
    match ty {
        ModelKeyType::S => ScalarAttributeType::S,
        ModelKeyType::N => ScalarAttributeType::N,
        ModelKeyType::B => ScalarAttributeType::B,
    }
}

#[test]
fn data_table_gsis_are_the_models() {
    let model = Model::example();
    let specs = workspace_tables().unwrap();
    let data = find(&specs, DATA_TABLE).unwrap();
    let hint = format!(
        "template.yaml's DataTable differs from model.toml; put this under its Properties \
         (`cargo run -p cqrs-cli -- model template` prints it):\n{}",
        model.data_table_yaml()
    );
    let types: BTreeMap<&str, &ScalarAttributeType> = data
        .attributes
        .iter()
        .map(|a| (a.name.as_str(), &a.attribute_type))
        .collect();
    assert_eq!(
        data.global_secondary_indexes.len(),
        model.indexes().len(),
        "{hint}"
    );
    for index in model.indexes() {
        let Some(spec) = data
            .global_secondary_indexes
            .iter()
            .find(|g| g.name == index.name)
        else {
            panic!("GSI {} is missing. {hint}", index.name);
        };
        let want: Vec<(String, KeyType)> = index
            .pk
            .iter()
            .map(|k| (k.name.clone(), KeyType::Hash))
            .chain(index.sk.iter().map(|k| (k.name.clone(), KeyType::Range)))
            .collect();
        let got: Vec<(String, KeyType)> = spec
            .key_schema
            .iter()
            .map(|k| (k.name.clone(), k.key_type.clone()))
            .collect();
        assert_eq!(got, want, "key schema of {}. {hint}", index.name);
        for key in index.key_attributes() {
            assert_eq!(
                types.get(key.name.as_str()),
                Some(&&scalar(key.ty)),
                "type of {}. {hint}",
                key.name
            );
        }
        let (projection, include) = match &index.projection {
            Projection::All => (ProjectionType::All, vec![]),
            Projection::KeysOnly => (ProjectionType::KeysOnly, vec![]),
            Projection::Include(list) => (ProjectionType::Include, list.clone()),
        };
        assert_eq!(spec.projection_type, projection, "{}. {hint}", index.name);
        assert_eq!(spec.non_key_attributes, include, "{}. {hint}", index.name);
    }
    // Nothing else is defined on the data table.
    assert_eq!(
        types.len(),
        2 + model.index_attribute_names().len(),
        "{hint}"
    );
}

#[tokio::test]
async fn native_multi_attribute_gsi_answers_in_dynamodb_local() {
    let tables = cqrs_testkit::fresh_tables().await;
    let s = |v: &str| AttributeValue::S(v.into());
    for (store, tenant, country, region, city) in [
        ("s1", "t1", "US", "CA", "San Francisco"),
        ("s2", "t1", "US", "CA", "Los Angeles"),
        ("s3", "t1", "US", "WA", "Seattle"),
        ("s4", "t2", "US", "CA", "Fresno"),
        ("s5", "t1", "US", "", ""),
    ] {
        let mut put = tables
            .client
            .put_item()
            .table_name(&tables.data)
            .item("pk", s(&format!("STORE#{tenant}")))
            .item("sk", s(store));
        // A sparse index: an item without every key attribute is not in it.
        if !region.is_empty() {
            put = put
                .item("locTenant", s(tenant))
                .item("locCountry", s(country))
                .item("locRegion", s(region))
                .item("locCity", s(city))
                .item("locStoreId", s(store));
        }
        put.send().await.unwrap();
    }
    let query = |condition: &'static str| {
        tables
            .client
            .query()
            .table_name(&tables.data)
            .index_name("location")
            .key_condition_expression(condition)
            .expression_attribute_values(":t", s("t1"))
            .expression_attribute_values(":c", s("US"))
            .expression_attribute_values(":r", s("CA"))
    };
    let city = |page: aws_sdk_dynamodb::operation::query::QueryOutput| -> Vec<String> {
        page.items()
            .iter()
            .filter_map(|i| i.get("locCity").and_then(|v| v.as_s().ok()).cloned())
            .collect()
    };
    // Every partition attribute by equality; a range condition on the sort attribute used.
    let page = query("locTenant = :t AND locCountry = :c AND locRegion = :r")
        .send()
        .await
        .unwrap();
    assert_eq!(city(page), ["Los Angeles", "San Francisco"]);
    let page =
        query("locTenant = :t AND locCountry = :c AND locRegion = :r AND begins_with(locCity, :p)")
            .expression_attribute_values(":p", s("San"))
            .send()
            .await
            .unwrap();
    assert_eq!(city(page), ["San Francisco"]);
    // A partition attribute left out is refused by DynamoDB itself.
    let refused = tables
        .client
        .query()
        .table_name(&tables.data)
        .index_name("location")
        .key_condition_expression("locTenant = :t AND locCountry = :c")
        .expression_attribute_values(":t", s("t1"))
        .expression_attribute_values(":c", s("US"))
        .send()
        .await;
    assert!(refused.is_err());
}
