//! The stream mapping's settings, read from `template.yaml`, so the local mapping batches and
//! retries exactly like the deployed one and the two cannot drift.

use std::time::Duration;

use serde_yaml::Value;

/// The settings of the template's DynamoDB stream event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingSettings {
    /// `BatchSize`.
    pub batch_size: usize,
    /// `MaximumBatchingWindowInSeconds`.
    pub batching_window: Duration,
    /// `MaximumRetryAttempts`.
    pub max_retries: u32,
}

/// Reads the settings of the `Type: DynamoDB` event of the function built from `binary`
/// (`Metadata.BuildProperties.Binary`), so each local mapping plays its own deployed one (data-sync's
/// on the command table's stream, sql-sync's on the data table's). A template with no function
/// built from `binary` lends its one stream event (a service whose template predates its binary's
/// function). A missing setting takes Lambda's default (batch 100, no window, retries until the
/// record expires, capped here at 3); `MaximumRetryAttempts: -1` (until the record's age) is capped
/// here at 10.
pub fn stream_mapping_settings(template: &str, binary: &str) -> Result<MappingSettings, String> {
    let root: Value =
        serde_yaml::from_str(template).map_err(|e| format!("template.yaml does not parse: {e}"))?;
    let resources = root
        .get("Resources")
        .and_then(Value::as_mapping)
        .ok_or("template.yaml has no Resources")?;
    let mut all = Vec::new();
    let mut own = Vec::new();
    for resource in resources.values() {
        let built_from = resource
            .get("Metadata")
            .and_then(|m| m.get("BuildProperties"))
            .and_then(|b| b.get("Binary"))
            .and_then(Value::as_str);
        let events = resource
            .get("Properties")
            .and_then(|p| p.get("Events"))
            .and_then(Value::as_mapping);
        for event in events.into_iter().flat_map(|e| e.values()) {
            if event.get("Type").and_then(Value::as_str) == Some("DynamoDB") {
                let properties = event.get("Properties").cloned().unwrap_or(Value::Null);
                if built_from == Some(binary) {
                    own.push(properties.clone());
                }
                all.push(properties);
            }
        }
    }
    let found = if own.is_empty() { all } else { own };
    let [properties] = found.as_slice() else {
        return Err(format!(
            "template.yaml should have exactly one DynamoDB stream event for {binary}, found {}",
            found.len()
        ));
    };
    let number = |name: &str| properties.get(name).and_then(Value::as_u64);
    Ok(MappingSettings {
        batch_size: number("BatchSize").unwrap_or(100) as usize,
        batching_window: Duration::from_secs(number("MaximumBatchingWindowInSeconds").unwrap_or(0)),
        // -1: until the record's age limit, which the local mapping does not keep: 10 retries.
        max_retries: match properties
            .get("MaximumRetryAttempts")
            .and_then(Value::as_i64)
        {
            Some(n) if n >= 0 => n.min(10) as u32,
            Some(_) => 10,
            None => 3,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_stream_event_of_a_function() {
        let template = r#"
Resources:
  Api:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Http: {Type: HttpApi, Properties: {Path: /x, Method: GET}}
  Sync:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            BatchSize: 50
            MaximumBatchingWindowInSeconds: 2
            MaximumRetryAttempts: 4
"#;
        // No function is built from sql-sync here: the one stream event serves.
        for binary in ["data-sync", "sql-sync"] {
            assert_eq!(
                stream_mapping_settings(template, binary).unwrap(),
                MappingSettings {
                    batch_size: 50,
                    batching_window: Duration::from_secs(2),
                    max_retries: 4
                }
            );
        }
        assert!(stream_mapping_settings("Resources: {}", "data-sync").is_err());
    }

    #[test]
    fn each_function_reads_its_own_stream_event() {
        let template = r#"
Resources:
  DataSync:
    Type: AWS::Serverless::Function
    Metadata:
      BuildProperties: {Binary: data-sync}
    Properties:
      Events:
        Stream:
          Type: DynamoDB
          Properties: {Stream: !GetAtt Commands.StreamArn, BatchSize: 100, MaximumRetryAttempts: 10}
  SqlSync:
    Type: AWS::Serverless::Function
    Metadata:
      BuildProperties: {Binary: sql-sync}
    Properties:
      Events:
        Stream:
          Type: DynamoDB
          Properties: {Stream: !GetAtt Data.StreamArn, BatchSize: 20, MaximumRetryAttempts: 2}
"#;
        assert_eq!(
            stream_mapping_settings(template, "data-sync")
                .unwrap()
                .batch_size,
            100
        );
        let sql = stream_mapping_settings(template, "sql-sync").unwrap();
        assert_eq!((sql.batch_size, sql.max_retries), (20, 2));
        // A binary no function is built from, with two stream events: which one is unknown.
        let error = stream_mapping_settings(template, "other").unwrap_err();
        assert!(error.contains("found 2"), "{error}");
    }
}
