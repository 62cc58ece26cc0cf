//! Comparing the relational read model with the data table, and repairing it (`cqrs verify --sql`,
//! `cqrs rebuild --sql`).
//!
//! Every state of the data table is the row it must be ([`crate::rows::row`]); PostgreSQL is read
//! back table by table. An item differs when PostgreSQL lacks it (`missing`), holds an older version
//! (`behind`) or a newer one (`ahead`), holds it in the other table than its row goes to
//! (`misplaced`: its entity's table or the generic one), holds the same version with other values
//! (`content`: compared in SQL, each expected value cast as a write would cast it), or holds a row
//! the data table does not have (`orphan`).
//!
//! [`repair`] writes the data table's state over every difference, whatever the versions say (a
//! row that is `ahead` is wrong too), and deletes the orphans, in one transaction.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::{Client, types::ToSql};

use crate::rows::Row;
use crate::schema::{GENERIC_TABLE, REMOVED_TABLE, Schema, ident};
use crate::write::{Change, apply_in};

/// One differing item.
///
/// ```
/// let d = cqrs_sql::verify::SqlDifference {
///     kind: "missing", pk: "LOAN#t1".into(), sk: "L1".into(), data_version: Some(2), sql_version: None,
/// };
/// assert_eq!(d.kind, "missing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlDifference {
    /// `missing`, `behind`, `ahead`, `misplaced`, `content` or `orphan`.
    pub kind: &'static str,
    /// The item's partition key.
    pub pk: String,
    /// The item's sort key.
    pub sk: String,
    /// Its version in the data table, if there.
    pub data_version: Option<i64>,
    /// Its version in PostgreSQL, if there.
    pub sql_version: Option<i64>,
}

/// Every row's place and version in PostgreSQL: (pk, sk) to (table, version), for the schema's
/// tables and the generic one. A key found twice (in two tables) is reported once per extra table
/// by [`compare`] as `misplaced`.
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client, schema: &cqrs_sql::schema::Schema) {
/// let rows = cqrs_sql::verify::read(client, schema).await.unwrap();
/// println!("{} items in PostgreSQL", rows.len());
/// # }
/// ```
pub async fn read(
    client: &Client,
    schema: &Schema,
) -> Result<HashMap<(String, String), Vec<(String, i64)>>, tokio_postgres::Error> {
    let mut found: HashMap<(String, String), Vec<(String, i64)>> = HashMap::new();
    let tables = schema
        .tables
        .iter()
        .map(|t| t.name.as_str())
        .chain([GENERIC_TABLE]);
    for table in tables {
        for row in client
            .query(
                &format!("SELECT \"pk\", \"sk\", \"version\" FROM {}", ident(table)),
                &[],
            )
            .await?
        {
            found
                .entry((row.get(0), row.get(1)))
                .or_default()
                .push((table.to_string(), row.get(2)));
        }
    }
    Ok(found)
}

/// The keys, among `expected` rows that PostgreSQL holds at the same version in the same table,
/// whose values differ from the expected ones.
async fn content_differences(
    client: &Client,
    expected: &[&Row],
) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let mut by_table: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for row in expected {
        by_table.entry(row.table.as_str()).or_default().push(row);
    }
    let mut differing = Vec::new();
    for (table, rows) in by_table {
        let columns: Vec<String> = rows[0].columns.iter().map(|c| ident(c)).collect();
        let t_list: Vec<String> = columns.iter().map(|c| format!("t.{c}")).collect();
        let v_list: Vec<String> = columns.iter().map(|c| format!("v.{c}")).collect();
        let sql = format!(
            "SELECT v.\"pk\", v.\"sk\" FROM ({}) AS v JOIN {} t \
             ON t.\"pk\" = v.\"pk\" AND t.\"sk\" = v.\"sk\" \
             WHERE ({}) IS DISTINCT FROM ({})",
            crate::write::unnest(&rows[0].columns, &rows[0].types),
            ident(table),
            t_list.join(", "),
            v_list.join(", "),
        );
        let arrays = crate::write::arrays(&rows);
        let params: Vec<&(dyn ToSql + Sync)> =
            arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        for row in client.query(&sql, &params).await? {
            differing.push((row.get(0), row.get(1)));
        }
    }
    Ok(differing)
}

/// Compares the rows the data table's states must be (`expected`) with what PostgreSQL holds;
/// returns the differences in key order.
///
/// ```no_run
/// # async fn example(client: &tokio_postgres::Client, model: &cqrs_model::Model, items: Vec<cqrs_item::Item>) {
/// let schema = cqrs_sql::schema::Schema::of(model);
/// let expected: Vec<_> = items.iter().map(|i| cqrs_sql::rows::row(model, &schema, i)).collect();
/// let differences = cqrs_sql::verify::compare(client, &schema, &expected).await.unwrap();
/// println!("{} differences", differences.len());
/// # }
/// ```
pub async fn compare(
    client: &Client,
    schema: &Schema,
    expected: &[Row],
) -> Result<Vec<SqlDifference>, tokio_postgres::Error> {
    let mut found = read(client, schema).await?;
    let mut differences = Vec::new();
    let mut same_version = Vec::new();
    for row in expected {
        let (pk, sk) = row.key();
        let version = row.version();
        let difference = |kind, sql_version| SqlDifference {
            kind,
            pk: pk.to_string(),
            sk: sk.to_string(),
            data_version: Some(version),
            sql_version,
        };
        let Some(places) = found.remove(&(pk.to_string(), sk.to_string())) else {
            differences.push(difference("missing", None));
            continue;
        };
        let here = places.iter().find(|(table, _)| *table == row.table);
        match (here, places.len()) {
            (Some((_, v)), 1) if *v == version => same_version.push(row),
            (Some((_, v)), 1) if *v < version => differences.push(difference("behind", Some(*v))),
            (Some((_, v)), 1) => differences.push(difference("ahead", Some(*v))),
            (_, _) => differences.push(difference("misplaced", places.first().map(|(_, v)| *v))),
        }
    }
    for (pk, sk) in content_differences(client, &same_version).await? {
        differences.push(SqlDifference {
            kind: "content",
            data_version: same_version
                .iter()
                .find(|r| r.key() == (pk.as_str(), sk.as_str()))
                .map(|r| r.version()),
            sql_version: None,
            pk,
            sk,
        });
    }
    for ((pk, sk), places) in found {
        differences.push(SqlDifference {
            kind: "orphan",
            pk,
            sk,
            data_version: None,
            sql_version: places.first().map(|(_, v)| *v),
        });
    }
    differences.sort_by(|a, b| (&a.pk, &a.sk, a.kind).cmp(&(&b.pk, &b.sk, b.kind)));
    Ok(differences)
}

/// Writes the data table's state over every difference in one transaction: the item's rows (both
/// tables) and its removal record deleted, then its expected row written; an orphan's rows deleted.
/// Returns how many items it repaired.
///
/// ```no_run
/// # async fn example(client: &mut tokio_postgres::Client, schema: &cqrs_sql::schema::Schema, expected: Vec<cqrs_sql::rows::Row>) {
/// let differences = cqrs_sql::verify::compare(client, schema, &expected).await.unwrap();
/// let repaired = cqrs_sql::verify::repair(client, schema, &expected, &differences).await.unwrap();
/// assert_eq!(repaired, differences.len());
/// # }
/// ```
pub async fn repair(
    client: &mut Client,
    schema: &Schema,
    expected: &[Row],
    differences: &[SqlDifference],
) -> Result<usize, tokio_postgres::Error> {
    if differences.is_empty() {
        return Ok(0);
    }
    let tables: Vec<String> = schema
        .tables
        .iter()
        .map(|t| t.name.clone())
        .chain([GENERIC_TABLE.to_string(), REMOVED_TABLE.to_string()])
        .collect();
    let by_key: HashMap<(&str, &str), &Row> = expected.iter().map(|r| (r.key(), r)).collect();
    let mut rewrite = Vec::new();
    let transaction = client.transaction().await?;
    for difference in differences {
        for table in &tables {
            transaction
                .execute(
                    &format!(
                        "DELETE FROM {} WHERE \"pk\" = $1 AND \"sk\" = $2",
                        ident(table)
                    ),
                    &[&difference.pk, &difference.sk],
                )
                .await?;
        }
        if let Some(row) = by_key.get(&(difference.pk.as_str(), difference.sk.as_str())) {
            rewrite.push(Change::Upsert((*row).clone()));
        }
    }
    apply_in(&transaction, &rewrite).await?;
    transaction.commit().await?;
    Ok(differences.len())
}
