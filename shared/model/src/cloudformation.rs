//! The data table's indexes as `template.yaml` must declare them: the exact `AttributeDefinitions` and
//! `GlobalSecondaryIndexes` YAML that the operator CLI prints (`cqrs model template`) and that a test
//! compares with the template.

use std::fmt::Write;

use crate::model::{Model, Projection};

impl Model {
    /// The data table's `AttributeDefinitions` and `GlobalSecondaryIndexes`, indented to sit under
    /// the table's `Properties:` in `template.yaml`.
    ///
    /// ```
    /// let yaml = cqrs_model::Model::example().data_table_yaml();
    /// assert!(yaml.contains("- IndexName: gsi1\n"));
    /// assert!(yaml.contains("AttributeName: locCountry\n"));
    /// ```
    pub fn data_table_yaml(&self) -> String {
        let mut out = String::new();
        out.push_str("      AttributeDefinitions:\n");
        let mut definitions = vec![("pk", "S"), ("sk", "S")];
        for index in &self.indexes {
            for key in index.key_attributes() {
                definitions.push((key.name.as_str(), key.ty.as_str()));
            }
        }
        for (name, ty) in definitions {
            let _ = write!(
                out,
                "        - AttributeName: {name}\n          AttributeType: {ty}\n"
            );
        }
        out.push_str("      KeySchema:\n");
        out.push_str("        - AttributeName: pk\n          KeyType: HASH\n");
        out.push_str("        - AttributeName: sk\n          KeyType: RANGE\n");
        if self.indexes.is_empty() {
            return out;
        }
        out.push_str("      GlobalSecondaryIndexes:\n");
        for index in &self.indexes {
            let _ = writeln!(out, "        - IndexName: {}", index.name);
            out.push_str("          KeySchema:\n");
            for (key, kind) in index
                .pk
                .iter()
                .map(|k| (k, "HASH"))
                .chain(index.sk.iter().map(|k| (k, "RANGE")))
            {
                let _ = write!(
                    out,
                    "            - AttributeName: {}\n              KeyType: {kind}\n",
                    key.name
                );
            }
            out.push_str("          Projection:\n");
            let _ = writeln!(
                out,
                "            ProjectionType: {}",
                index.projection.type_name()
            );
            if let Projection::Include(attributes) = &index.projection {
                out.push_str("            NonKeyAttributes:\n");
                for a in attributes {
                    let _ = writeln!(out, "              - {a}");
                }
            }
        }
        out
    }
}
