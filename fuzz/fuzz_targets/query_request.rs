//! The query handler's request parsing on arbitrary input: the route, the path segments, the query
//! parameters, access-pattern plans and the cursors. No panic, every refusal a 4xx, and a cursor
//! never decodes for a partition, item or pattern read other than the one the request names.
//!
//! Input (lossy UTF-8): line 1 the raw path, line 2 the query string, line 3 a cursor.
#![no_main]

use std::collections::HashMap;

use cqrs_store::query::{Order, PageKey, PartitionQuery, SortKeyRange, VersionKey, VersionQuery};
use lambda_http::aws_lambda_events::query_map::QueryMap;
use libfuzzer_sys::fuzz_target;
use cqrs_query_handler::{cursor, params, pattern, route};

/// The example entity model, parsed once.
fn model() -> &'static cqrs_model::Model {
    static MODEL: std::sync::OnceLock<cqrs_model::Model> = std::sync::OnceLock::new();
    MODEL.get_or_init(cqrs_model::Model::example)
}

fn check<T>(result: Result<T, cqrs_problem::ApiError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            let status = error.status();
            assert!((400..500).contains(&status), "{status}: {error}");
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.splitn(3, '\n');
    let path = lines.next().unwrap_or_default();
    let query = lines.next().unwrap_or_default();
    let cursor_text = lines.next().unwrap_or_default();

    // The route and its segments.
    for stage in [None, Some("prod")] {
        if let Some(route) = check(route::parse_path(path, stage)) {
            if let Some(segment) = route.pk()
                && let Some(pk) = check(route::decode_segment("pk", segment))
            {
                assert!(!segment.is_empty() || pk.is_empty());
            }
            if let route::Route::Version { version, .. } = route
                && let Some(v) = check(route::decode_segment("v", version))
                && let Some(v) = check(params::parse_version("v", &v))
            {
                assert!(v >= 1);
            }
        }
    }

    // The query parameters, as the runtime would hand them over.
    let mut pairs: HashMap<String, Vec<String>> = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        pairs
            .entry(name.to_string())
            .or_default()
            .push(value.to_string());
    }
    let query_map = QueryMap::from(pairs.clone());

    // Access patterns: any pattern name and parameters plan a query or are a 400 naming the
    // parameter; a cursor decodes only into positions inside that plan, for that tenant.
    let model = model();
    for pattern in [
        "orders_by_status",
        "items_of_order",
        "readings_of_sensor",
        "stores_in_region",
    ]
    .into_iter()
    .chain(path.strip_prefix("/query/"))
    {
        let given: Vec<(&str, &str)> = pairs
            .iter()
            .flat_map(|(name, values)| values.iter().map(move |v| (name.as_str(), v.as_str())))
            .collect();
        if let Ok(plan) = model.query(pattern, "t1", &given)
            && let Some(decoded) =
                check(cursor::decode_pattern(cursor_text, &plan, Order::Ascending))
        {
            assert_eq!(decoded.shards.len(), plan.partitions.len());
            for position in decoded.shards {
                if let pattern::ShardPosition::After(key) = position {
                    let sort: Vec<_> = plan
                        .sort_attrs
                        .iter()
                        .map(|a| key[&a.name].clone())
                        .collect();
                    assert!(plan.in_range(&sort));
                    // Every value has the key schema's type and fits DynamoDB's key sizes, so
                    // the start key is one DynamoDB accepts.
                    for attr in &plan.sort_attrs {
                        let value = &key[&attr.name];
                        assert_eq!(
                            matches!(value, cqrs_model::KeyValue::N(_)),
                            attr.ty == cqrs_model::KeyType::N,
                            "{}: {value:?}",
                            attr.name
                        );
                        assert!(value.as_str().len() <= cqrs_keys::MAX_SORT_KEY_BYTES);
                    }
                    for table_key in ["pk", "sk"] {
                        assert!(matches!(key[table_key], cqrs_model::KeyValue::S(_)));
                    }
                    let (pk, sk) = (key["pk"].as_str(), key["sk"].as_str());
                    assert!(plan.entity_of_table_key(pk, sk).is_some());
                }
            }
        }
    }
    // Forged positions: a cursor of the right pattern, tenant and parameters whose sort position
    // holds the input's value (first character the type, the rest the text) decodes only when the
    // value has the index's key type and fits a sort key.
    let plan = model
        .query("orders_by_status", "t1", &[("status", "PENDING")])
        .expect("the example pattern plans");
    let (kind, text) = cursor_text
        .char_indices()
        .nth(1)
        .map_or((cursor_text, ""), |(i, _)| cursor_text.split_at(i));
    let mut shards = vec![serde_json::json!(0); plan.partitions.len()];
    shards[0] = serde_json::json!({
        "gsi2sk": [kind, text],
        "pk": ["S", "ORDER#t1"],
        "sk": ["S", "ORDER#o1"],
    });
    let forged = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        serde_json::json!({
            "l": "query",
            "p": "orders_by_status",
            "f": format!("{:016x}", plan.fingerprint()),
            "o": "asc",
            "s": shards,
        })
        .to_string(),
    );
    if check(cursor::decode_pattern(&forged, &plan, Order::Ascending)).is_some() {
        assert_eq!(kind, "S");
        assert!(!text.is_empty() && text.len() <= cqrs_keys::MAX_SORT_KEY_BYTES);
    }

    let allowed = [
        "skPrefix",
        "skFrom",
        "skTo",
        "order",
        "limit",
        "cursor",
        "includeDeleted",
        "minVersion",
    ];
    if let Some(params) = check(params::Params::new(&query_map, &allowed)) {
        if let Some(limit) = check(params.limit()) {
            assert!((1..=params::MAX_LIMIT).contains(&limit));
        }
        let _ = check(params.order(Order::Ascending));
        let _ = check(params.flag("includeDeleted"));
        if let Some(Some(v)) = check(params.version("minVersion")) {
            assert!(v >= 1);
        }
    }

    // Cursors: a forged one decodes only for the very partition / item it was made for.
    for query in [
        PartitionQuery::new("PRODUCT#t1"),
        PartitionQuery::new("PRODUCT#t1")
            .range(SortKeyRange::Prefix("P".into()))
            .order(Order::Descending),
    ] {
        if let Some(key) = check(cursor::decode_partition(cursor_text, &query)) {
            assert_eq!(key.pk, query.pk);
            assert!(query.range.contains(&key.sk));
        }
    }
    let versions = VersionQuery::new("PRODUCT#t1", "P1");
    if let Some(key) = check(cursor::decode_versions(cursor_text, &versions)) {
        assert_eq!(key, VersionKey::new("PRODUCT#t1", "P1", key.version));
    }
    // And every cursor we make decodes back to its key.
    let key = PageKey {
        pk: "PRODUCT#t1".into(),
        sk: format!("P{path}"),
    };
    let query = PartitionQuery::new("PRODUCT#t1").range(SortKeyRange::Prefix("P".into()));
    let made = cursor::encode_partition(&query, &key);
    assert_eq!(cursor::decode_partition(&made, &query).ok(), Some(key));
});
