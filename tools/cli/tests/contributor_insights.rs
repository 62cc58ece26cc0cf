//! The template can turn on CloudWatch Contributor Insights for the data table and every one of its
//! GSIs (the model's), with one parameter that is off by default (it is billed).

use serde_yaml::Value;

#[test]
fn one_parameter_off_by_default_turns_it_on_for_the_data_table_and_every_gsi() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml");
    let t: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let parameter = &t["Parameters"]["ContributorInsights"];
    assert_eq!(parameter["Default"], "false");
    assert!(
        parameter["Description"]
            .as_str()
            .unwrap()
            .contains("billed")
    );
    let condition = serde_yaml::to_string(&t["Conditions"]["ContributorInsightsOn"]).unwrap();
    assert!(
        condition.contains("ContributorInsights") && condition.contains("'true'"),
        "{condition}"
    );

    let switched = |spec: &Value, what: &str| {
        let enabled =
            serde_yaml::to_string(&spec["ContributorInsightsSpecification"]["Enabled"]).unwrap();
        assert!(
            enabled.contains("!If") && enabled.contains("ContributorInsightsOn"),
            "{what}: Enabled must follow the condition, got {enabled}"
        );
    };
    let data = &t["Resources"]["DataTable"]["Properties"];
    switched(data, "DataTable");
    let gsis = data["GlobalSecondaryIndexes"].as_sequence().unwrap();
    let model = cqrs_model::Model::example();
    assert_eq!(gsis.len(), model.indexes().len());
    for gsi in gsis {
        switched(gsi, gsi["IndexName"].as_str().unwrap());
    }
}
