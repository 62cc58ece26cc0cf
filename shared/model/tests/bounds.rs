//! Range bounds (`from`, `to`, `after`, `before`) on string, number, enum and timestamp sort parts,
//! at every position of a sort template, on the table and on an index, against an oracle that
//! filters every item in memory by its values alone: the key condition must read every item the
//! oracle keeps (DynamoDB compares key bytes; [`PatternQuery::in_range`] does the same) and
//! [`PatternQuery::matches`] must keep exactly those.
//!
//! Strings are drawn from characters that sort below the `#` between parts (a space, `!`, `"`) and
//! just above it (`$`): a part that is a proper prefix of `to` is followed by `#` in the key, and an
//! upper bound built as `prefix + to + U+10FFFF` left it out when `to`'s next character sorts
//! below `#` (the review's `GET /query/settings?to=ui%20x`).
//!
//! U+10FFFF is in the alphabet too: a read with only a lower bound ends at `prefix + U+10FFFF`, so an
//! item whose part held it was missed; no key part may hold it now, and the test checks that every
//! such item and parameter is refused.
//!
//! Two patterns read a sort part cut to a bucket (`{at:month}`, `{at:day}`): a parameter fixes the
//! bucket, and a bound keeps exactly the items whose own timestamp satisfies it, inside a bucket too
//! (the keys keep the bucket, [`PatternQuery::admits_values`] decides on the item's timestamp).
//!
//! [`PatternQuery::admits_values`]: cqrs_model::PatternQuery::admits_values
//! [`PatternQuery::in_range`]: cqrs_model::PatternQuery::in_range
//! [`PatternQuery::matches`]: cqrs_model::PatternQuery::matches

use std::cmp::Ordering;

use cqrs_model::{DeriveError, DerivedKeys, ItemView, KeyValue, Model, PatternQuery, ValueRef};
use proptest::prelude::*;

const MODEL: &str = r#"
[indexes.gsi1]
pk = "gsi1pk"
sk = "gsi1sk"

[indexes.gsi2]
pk = "gsi2pk"
sk = "gsi2sk"

[indexes.gsi3]
pk = "gsi3pk"
sk = "gsi3sk"

[entities.thing]
pk = "THING#{tenant}"
sk = "T#{name}#{rank}#{kind}#{at}"
id = "name"
attributes.name = { type = "string", required = true, max = 32 }
attributes.rank = { type = "number", required = true, width = 3 }
attributes.kind = { type = "enum", required = true, values = ["a", "a b", "a!", "ab", "b"] }
attributes.at = { type = "timestamp", required = true }
indexes.gsi1 = { pk = "BYTIME#{tenant}", sk = "{at}#{kind}#{rank}#{name}" }
indexes.gsi2 = { pk = "BYMONTH#{tenant}", sk = "{at:month}#{name}" }
indexes.gsi3 = { pk = "BYDAY#{tenant}", sk = "{at:day}#{rank}" }

[patterns.things]
entity = "thing"
params = ["name", "rank", "kind", "at"]
description = "things, by name, rank, kind and time"

[patterns.things_by_time]
entity = "thing"
index = "gsi1"
params = ["at", "kind", "rank", "name"]
description = "things, by time, kind, rank and name"

[patterns.things_by_month]
entity = "thing"
index = "gsi2"
params = ["at", "name"]
description = "things, by month and name"

[patterns.things_by_day]
entity = "thing"
index = "gsi3"
params = ["at", "rank"]
description = "things, by day and rank"
"#;

fn model() -> &'static Model {
    static MODEL_ONCE: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    MODEL_ONCE.get_or_init(|| Model::parse(MODEL).expect("the test model is valid"))
}

/// One item's values.
#[derive(Debug, Clone)]
struct Thing {
    name: String,
    rank: u32,
    kind: &'static str,
    /// Canonical (`YYYY-MM-DDTHH:MM:SS.sssZ`), so byte order is time order.
    at: String,
}

impl Thing {
    /// The value of an attribute as the oracle compares it.
    fn value(&self, attr: &str) -> Value {
        match attr {
            "name" => Value::Str(self.name.clone()),
            "rank" => Value::Num(self.rank),
            "kind" => Value::Str(self.kind.to_string()),
            "at" => Value::Time(self.at.clone()),
            _ => unreachable!("{attr}"),
        }
    }

    /// The value of `attr` as the key of `pattern` holds it: a bucketed timestamp cut to its
    /// bucket (what a parameter fixing that part selects).
    fn key_value(&self, pattern: &str, attr: &str) -> Value {
        match (attr, bucket_width(pattern)) {
            ("at", Some(width)) => Value::Time(self.at[..width].to_string()),
            _ => self.value(attr),
        }
    }

    /// The parameter text that fixes `attr` to this item's value.
    fn param(&self, attr: &str) -> String {
        match attr {
            "name" => self.name.clone(),
            "rank" => self.rank.to_string(),
            "kind" => self.kind.to_string(),
            "at" => self.at.clone(),
            _ => unreachable!("{attr}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Str(String),
    Num(u32),
    Time(String),
}

/// A bound as a caller writes it, and how the oracle reads it.
#[derive(Debug, Clone)]
struct BoundParam {
    text: String,
    /// A timestamp bound shortened to a period (`2024-01`): compared with the item's timestamp cut
    /// to the same length.
    period: bool,
}

impl BoundParam {
    /// How `value` compares with this bound, by value.
    fn compare(&self, value: &Value) -> Ordering {
        match value {
            Value::Str(s) => s.as_bytes().cmp(self.text.as_bytes()),
            Value::Num(n) => n.cmp(&self.text.parse::<u32>().expect("a number bound")),
            Value::Time(t) if self.period => t[..self.text.len()].cmp(&self.text),
            Value::Time(t) => t.as_str().cmp(&self.text),
        }
    }
}

const KINDS: [&str; 5] = ["a", "a b", "a!", "ab", "b"];

fn name() -> impl Strategy<Value = String> {
    "[ !\"$ab\u{e9}\u{10FFFF}]{1,4}"
}

fn timestamp() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![2023, 2024]),
        prop::sample::select(vec![1u32, 2, 12]),
        prop::sample::select(vec![1u32, 15, 28]),
        prop::sample::select(vec![0u32, 10, 23]),
        prop::sample::select(vec![0u32, 59]),
        prop::sample::select(vec![0u32, 1, 999]),
    )
        .prop_map(|(y, mo, d, h, mi, ms)| {
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{mi:02}.{ms:03}Z")
        })
}

fn thing() -> impl Strategy<Value = Thing> {
    (
        name(),
        prop::sample::select(vec![0u32, 1, 7, 10, 99, 100, 999]),
        prop::sample::select(KINDS.to_vec()),
        timestamp(),
    )
        .prop_map(|(name, rank, kind, at)| Thing {
            name,
            rank,
            kind,
            at,
        })
}

/// A bound's text for `attr`: near the items' values (one of them, a prefix or an extension of
/// it) or drawn fresh.
fn bound_for(attr: &'static str) -> BoxedStrategy<BoundParam> {
    let whole = |text: String| BoundParam {
        text,
        period: false,
    };
    match attr {
        "name" => prop_oneof![
            name(),
            (name(), "[ !\"$a\u{10FFFF}]{1,2}").prop_map(|(a, b)| format!("{a}{b}")),
        ]
        .prop_map(whole)
        .boxed(),
        "rank" => prop::sample::select(vec![0u32, 1, 6, 7, 8, 10, 50, 99, 100, 999])
            .prop_map(move |n| whole(n.to_string()))
            .boxed(),
        "kind" => prop::sample::select(KINDS.to_vec())
            .prop_map(move |k| whole(k.to_string()))
            .boxed(),
        _ => (
            timestamp(),
            prop::sample::select(vec![4usize, 7, 10, 13, 24]),
        )
            .prop_map(|(t, len)| BoundParam {
                text: t[..len].to_string(),
                period: len < 24,
            })
            .boxed(),
    }
}

/// The order of the sort template's parts for each pattern.
fn parts(pattern: &str) -> &'static [&'static str] {
    match pattern {
        "things" => &["name", "rank", "kind", "at"],
        "things_by_time" => &["at", "kind", "rank", "name"],
        "things_by_month" => &["at", "name"],
        _ => &["at", "rank"],
    }
}

/// The width of the bucket `{at}` is cut to in `pattern`'s sort key, if it is.
fn bucket_width(pattern: &str) -> Option<usize> {
    match pattern {
        "things_by_month" => Some(7),
        "things_by_day" => Some(10),
        _ => None,
    }
}

const PATTERNS: [&str; 4] = [
    "things",
    "things_by_time",
    "things_by_month",
    "things_by_day",
];

/// What one query asks: the pattern, the open position, and the bounds on it.
#[derive(Debug, Clone)]
struct Ask {
    pattern: &'static str,
    open: usize,
    /// `from` or `after`.
    lower: Option<(&'static str, BoundParam)>,
    /// `to` or `before`.
    upper: Option<(&'static str, BoundParam)>,
}

fn ask() -> impl Strategy<Value = Ask> {
    (prop::sample::select(PATTERNS.to_vec()), 0usize..4).prop_flat_map(|(pattern, open)| {
        let open = open % parts(pattern).len();
        let attr = parts(pattern)[open];
        (
            prop::option::of((prop::sample::select(vec!["from", "after"]), bound_for(attr))),
            prop::option::of((prop::sample::select(vec!["to", "before"]), bound_for(attr))),
        )
            .prop_map(move |(lower, upper)| Ask {
                pattern,
                open,
                lower,
                upper,
            })
    })
}

/// The oracle: whether `item` belongs to the answer of `ask` with the fixed parts of `anchor`. A
/// parameter fixes a part as the key holds it (a bucketed timestamp: its bucket); a bound keeps
/// exactly the items whose value satisfies it, also on a bucketed part (the value, not its bucket).
fn oracle(ask: &Ask, anchor: &Thing, item: &Thing) -> bool {
    let parts = parts(ask.pattern);
    if parts[..ask.open]
        .iter()
        .any(|attr| item.key_value(ask.pattern, attr) != anchor.key_value(ask.pattern, attr))
    {
        return false;
    }
    let value = item.value(parts[ask.open]);
    let lower = ask.lower.as_ref().is_none_or(|(name, b)| {
        let c = b.compare(&value);
        if *name == "from" {
            c.is_ge()
        } else {
            c.is_gt()
        }
    });
    let upper = ask.upper.as_ref().is_none_or(|(name, b)| {
        let c = b.compare(&value);
        if *name == "to" { c.is_le() } else { c.is_lt() }
    });
    lower && upper
}

/// Runs `f` on the item's values as the model reads them.
fn with_view<T>(item: &Thing, f: impl FnOnce(&ItemView<'_>) -> T) -> T {
    let rank = item.rank.to_string();
    let attributes = [
        ("name", ValueRef::Str(&item.name)),
        ("rank", ValueRef::Num(&rank)),
        ("kind", ValueRef::Str(item.kind)),
        ("at", ValueRef::Str(&item.at)),
    ];
    f(&ItemView {
        tenant: "t1",
        created_at: "2024-01-01T00:00:00.000Z",
        attributes: &attributes,
    })
}

/// The item's keys, or the model's refusal of its values.
fn derive(item: &Thing) -> Result<DerivedKeys, DeriveError> {
    with_view(item, |view| model().entity("thing").unwrap().derive(view))
}

/// Whether the answer of `q` holds `item`: the keys say so ([`PatternQuery::matches`]) and so do
/// its values where the keys cannot tell ([`PatternQuery::admits_values`]: a bound inside a
/// bucket).
fn answered(q: &PatternQuery<'_>, pattern: &str, item: &Thing) -> bool {
    let entity = model().entity("thing").unwrap();
    let (partition, sort) = stored_keys(pattern, item);
    q.matches(entity, &partition, &sort).is_some()
        && with_view(item, |view| q.admits_values(entity, view))
}

/// The key values an item is stored under for `pattern`: (partition, sort).
fn stored_keys(pattern: &str, item: &Thing) -> (Vec<KeyValue>, Vec<KeyValue>) {
    let keys = derive(item).expect("generated items are valid");
    let index = match pattern {
        "things" => return (vec![KeyValue::S(keys.pk)], vec![KeyValue::S(keys.sk)]),
        "things_by_time" => "gsi1",
        "things_by_month" => "gsi2",
        _ => "gsi3",
    };
    (
        vec![keys.index[&format!("{index}pk")].clone()],
        vec![keys.index[&format!("{index}sk")].clone()],
    )
}

/// Items holding U+10FFFF in a key part are refused, naming the attribute (no key may hold it:
/// key ranges end at `prefix + U+10FFFF`); the rest are returned.
fn storable(items: &[Thing]) -> Result<Vec<Thing>, TestCaseError> {
    let mut kept = Vec::new();
    for item in items {
        match derive(item) {
            Ok(_) => {
                prop_assert!(!item.name.contains(MAX), "{item:?} was given keys");
                kept.push(item.clone());
            }
            Err(e) => {
                prop_assert!(item.name.contains(MAX), "{item:?} refused: {e:?}");
                prop_assert_eq!(&e.attribute, "name");
                prop_assert!(e.message.contains("U+10FFFF"), "{}", e.message);
            }
        }
    }
    Ok(kept)
}

const MAX: char = '\u{10FFFF}';

/// Checks one query against the oracle over `items`; the anchor fixes the parts before the open
/// one.
fn check(ask: &Ask, anchor: &Thing, items: &[Thing]) -> Result<(), TestCaseError> {
    let parts = parts(ask.pattern);
    let mut params: Vec<(String, String)> = parts[..ask.open]
        .iter()
        .map(|attr| (attr.to_string(), anchor.param(attr)))
        .collect();
    for (name, bound) in ask.lower.iter().chain(&ask.upper) {
        params.push((name.to_string(), bound.text.clone()));
    }
    let given: Vec<(&str, &str)> = params
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let answer = model().query(ask.pattern, "t1", &given);
    // A parameter holding U+10FFFF is refused, naming it: no key holds it.
    let refusable: Vec<&str> = given
        .iter()
        .filter(|(_, v)| v.contains(MAX))
        .map(|(n, _)| *n)
        .collect();
    if !refusable.is_empty() {
        let e = answer.expect_err("a parameter with U+10FFFF is refused");
        prop_assert!(
            refusable.contains(&e.param.as_str()) && e.message.contains("U+10FFFF"),
            "{given:?} refused: {e}"
        );
        return Ok(());
    }
    match answer {
        Ok(q) => {
            for item in items {
                let (_, sort) = stored_keys(ask.pattern, item);
                let expected = oracle(ask, anchor, item);
                if expected {
                    prop_assert!(
                        q.in_range(&sort),
                        "the key condition {:?} does not read {sort:?}, which {given:?} holds",
                        q.sort
                    );
                }
                prop_assert_eq!(
                    answered(&q, ask.pattern, item),
                    expected,
                    "{:?} with {:?}",
                    sort,
                    given
                );
            }
        }
        Err(e) => {
            // Only crossed bounds are refused here, naming the lower one; and then nothing lies
            // between them.
            prop_assert!(
                ["from", "after"].contains(&e.param.as_str()) && e.message.contains("sort after"),
                "{given:?} refused: {e}"
            );
            for item in items {
                prop_assert!(!oracle(ask, anchor, item), "{given:?} refused: {e}");
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bounds_keep_exactly_what_the_values_say(
        items in prop::collection::vec(thing(), 1..16),
        anchor in any::<prop::sample::Index>(),
        ask in ask(),
    ) {
        let anchor = items[anchor.index(items.len())].clone();
        let items = storable(&items)?;
        check(&ask, &anchor, &items)?;
    }
}

/// The review's reproduction, by the model alone: `ui` is at most `ui x`.
#[test]
fn a_part_that_is_a_proper_prefix_of_to_is_inside_the_bound() {
    let items = [
        ("ui", 5, "a"),
        ("ui x", 5, "a"),
        ("ui!", 5, "a"),
        ("ui x!", 5, "a"),
        ("uj", 5, "a"),
        ("u", 5, "a"),
    ]
    .map(|(name, rank, kind)| Thing {
        name: name.into(),
        rank,
        kind,
        at: "2024-01-15T10:00:00.000Z".into(),
    });
    for (name, text, want) in [
        ("to", "ui x", vec!["ui", "ui x", "u"]),
        ("before", "ui x", vec!["ui", "u"]),
        ("to", "ui", vec!["ui", "u"]),
        ("to", "u!", vec!["u"]),
    ] {
        let q = model().query("things", "t1", &[(name, text)]).unwrap();
        let got: Vec<&str> = items
            .iter()
            .filter(|item| {
                let (p, s) = stored_keys("things", item);
                q.matches(model().entity("thing").unwrap(), &p, &s)
                    .is_some()
            })
            .map(|item| item.name.as_str())
            .collect();
        assert_eq!(got, want, "{name}={text}");
        for item in &items {
            let (_, sort) = stored_keys("things", item);
            if want.contains(&item.name.as_str()) {
                assert!(q.in_range(&sort), "{name}={text} does not read {sort:?}");
            }
        }
    }
}

/// Crossed bounds are a 400 naming the lower bound, never an empty answer.
#[test]
fn crossed_bounds_name_the_lower_parameter() {
    for (params, param) in [
        (vec![("from", "ab"), ("to", "a")], "from"),
        (vec![("after", "b"), ("to", "a")], "after"),
        (vec![("from", "b"), ("before", "b")], "from"),
        (vec![("after", "a"), ("before", "a")], "after"),
        (vec![("name", "x"), ("from", "10"), ("to", "9")], "from"),
        (
            vec![("name", "x"), ("rank", "1"), ("from", "b"), ("to", "a b")],
            "from",
        ),
    ] {
        let e = model().query("things", "t1", &params).unwrap_err();
        assert_eq!(e.param, param, "{params:?}: {e}");
        assert!(e.message.contains("sort after"), "{e}");
    }
    let time = |params: &[(&str, &str)]| model().query("things_by_time", "t1", params);
    assert_eq!(
        time(&[("from", "2024-02"), ("to", "2024-01-31")])
            .unwrap_err()
            .param,
        "from"
    );
    // A period holds the timestamps inside it: these bounds do not cross.
    time(&[("from", "2024-01-15"), ("to", "2024-01")]).unwrap();
    time(&[("from", "2024-01-15T10:00:00Z"), ("to", "2024-01-15")]).unwrap();
    // Equal inclusive bounds hold one value.
    model()
        .query("things", "t1", &[("from", "ab"), ("to", "ab")])
        .unwrap();
}

/// The issue's case: a bound inside a bucket (`{at:month}`) keeps every item that satisfies it,
/// whatever the bound: `before=2024-01-15T00:00:00Z` keeps 1 to 14 January. The key holds only
/// the month, so the month is read for all four bounds, and the item's own timestamp decides.
#[test]
fn a_bound_inside_a_bucket_keeps_every_item_that_satisfies_it() {
    let items = [
        "2023-12-31T23:59:59.999Z",
        "2024-01-01T00:00:00.000Z",
        "2024-01-14T23:59:59.999Z",
        "2024-01-15T00:00:00.000Z",
        "2024-01-15T10:00:00.000Z",
        "2024-01-20T00:00:00.000Z",
        "2024-01-31T23:59:59.999Z",
        "2024-02-01T00:00:00.000Z",
    ]
    .map(|at| Thing {
        name: at[5..10].to_string(),
        rank: 5,
        kind: "a",
        at: at.into(),
    });
    let all = [
        "12-31", "01-01", "01-14", "01-15", "01-15", "01-20", "01-31", "02-01",
    ];
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        (vec![("before", "2024-01-15T00:00:00Z")], all[..3].to_vec()),
        (vec![("to", "2024-01-15T00:00:00Z")], all[..4].to_vec()),
        (vec![("after", "2024-01-15T00:00:00Z")], all[4..].to_vec()),
        (vec![("from", "2024-01-15T00:00:00Z")], all[3..].to_vec()),
        (vec![("before", "2024-01-15")], all[..3].to_vec()),
        (vec![("to", "2024-01-15")], all[..5].to_vec()),
        (vec![("after", "2024-01-15")], all[5..].to_vec()),
        (vec![("from", "2024-01-15")], all[3..].to_vec()),
        (
            vec![("after", "2024-01-31T23:59:59.999Z")],
            all[7..].to_vec(),
        ),
        (vec![("before", "2024-01-01T00:00:00Z")], all[..1].to_vec()),
        // A window inside one month: the bounds do not cross.
        (
            vec![
                ("after", "2024-01-14T23:59:59.999Z"),
                ("before", "2024-01-20T00:00:00Z"),
            ],
            all[3..5].to_vec(),
        ),
        // The bucket's own form bounds whole buckets, exactly.
        (vec![("before", "2024-01")], all[..1].to_vec()),
        (vec![("to", "2024-01")], all[..7].to_vec()),
        (vec![("after", "2024-01")], all[7..].to_vec()),
    ];
    for (params, want) in cases {
        let q = model()
            .query("things_by_month", "t1", &params)
            .unwrap_or_else(|e| panic!("{params:?} refused: {e}"));
        let mut got = Vec::new();
        for item in &items {
            if answered(&q, "things_by_month", item) {
                got.push(item.name.as_str());
                let (_, sort) = stored_keys("things_by_month", item);
                assert!(q.in_range(&sort), "{params:?} does not read {sort:?}");
            }
        }
        assert_eq!(got, want, "{params:?}");
    }
}
