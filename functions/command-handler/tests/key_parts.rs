//! Key parts the keys cannot hold: U+10FFFF ends every range read of the keys that begin with a
//! prefix (`prefix + U+10FFFF`), so a key part holding it would sort past that end and never be
//! read by a `from`-only bound. A command that would put it in a key, by entity (an attribute the
//! model fills a key template from) or with its own `pk` / `sk`, is a 400 naming the field, and
//! nothing is written (issue 36, item 7).

mod common;

use common::{Harness, USER_T1};
use serde_json::json;

#[tokio::test]
async fn a_key_part_with_the_highest_code_point_is_a_400_and_writes_nothing() {
    let h = Harness::new().await;
    let max = '\u{10FFFF}';
    let order = |order_id: String, user_id: String| {
        json!({"entity": "order", "version": 0,
               "attributes": {"orderId": order_id, "userId": user_id, "status": "PENDING"}})
    };
    let cases = [
        (
            "the id attribute (table sort key)",
            order(format!("o{max}"), "u1".into()),
            "attributes.orderId",
        ),
        (
            "an attribute of an index key",
            order("o1".into(), format!("u{max}1")),
            "attributes.userId",
        ),
        (
            "its own sort key",
            json!({"pk": "PRODUCT#t1", "sk": format!("P{max}"), "version": 0}),
            "sk",
        ),
        (
            "its own partition key",
            json!({"pk": format!("PRODUCT#t1#{max}"), "sk": "P1", "version": 0}),
            "pk",
        ),
    ];
    for (name, body, field) in cases {
        let (status, problem) = h.post(&USER_T1, body).await;
        assert_eq!(status, 400, "{name}: {problem}");
        assert_eq!(problem["field"], field, "{name}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("U+10FFFF"),
            "{name}: {problem}"
        );
    }
    assert_eq!(h.command_count().await, 0, "nothing written");
    // The same commands without it are written.
    let (status, problem) = h.post(&USER_T1, order("o1".into(), "u1".into())).await;
    assert_eq!(status, 202, "{problem}");
    assert_eq!(h.command_count().await, 1);
}
