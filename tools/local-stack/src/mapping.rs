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

/// Finds the (single) `Type: DynamoDB` event of the template's functions and reads its settings;
/// a missing setting takes Lambda's default (batch 100, no window, retries until the record
/// expires, capped here at 3).
pub fn stream_mapping_settings(template: &str) -> Result<MappingSettings, String> {
    let root: Value =
        serde_yaml::from_str(template).map_err(|e| format!("template.yaml does not parse: {e}"))?;
    let resources = root
        .get("Resources")
        .and_then(Value::as_mapping)
        .ok_or("template.yaml has no Resources")?;
    let mut found = Vec::new();
    for resource in resources.values() {
        let events = resource
            .get("Properties")
            .and_then(|p| p.get("Events"))
            .and_then(Value::as_mapping);
        for event in events.into_iter().flat_map(|e| e.values()) {
            if event.get("Type").and_then(Value::as_str) == Some("DynamoDB") {
                found.push(event.get("Properties").cloned().unwrap_or(Value::Null));
            }
        }
    }
    let [properties] = found.as_slice() else {
        return Err(format!(
            "template.yaml should have exactly one DynamoDB stream event, found {}",
            found.len()
        ));
    };
    let number = |name: &str| properties.get(name).and_then(Value::as_u64);
    Ok(MappingSettings {
        batch_size: number("BatchSize").unwrap_or(100) as usize,
        batching_window: Duration::from_secs(number("MaximumBatchingWindowInSeconds").unwrap_or(0)),
        max_retries: number("MaximumRetryAttempts").map_or(3, |n| n.min(10) as u32),
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
        assert_eq!(
            stream_mapping_settings(template).unwrap(),
            MappingSettings {
                batch_size: 50,
                batching_window: Duration::from_secs(2),
                max_retries: 4
            }
        );
        assert!(stream_mapping_settings("Resources: {}").is_err());
    }
}
