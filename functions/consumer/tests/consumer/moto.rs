//! Parking into a real SQS FIFO dead-letter queue: moto's server (started on a free port of
//! 127.0.0.1 and stopped on drop, also when an assertion fails), the SQS client built as the
//! function builds it ([`cqrs_consumer::park::sqs_client`]), a poison event parked by the runtime
//! with its reason as message attributes, its group and its dedup id.
//!
//! moto comes from the project's `.venv` (scripts/tools.sh; `make test` runs it first), or from
//! `MOTO_SERVER`.

use std::collections::HashMap;

use crate::common::{Answer, Recorder, batch, event, message};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use cqrs_consumer::Runtime;
use cqrs_consumer::marker::MemoryMarkers;
use cqrs_consumer::park::SqsDeadLetter;
use cqrs_local_stack::moto;

#[tokio::test]
async fn a_poison_event_lands_in_the_fifo_dead_letter_queue_with_its_reason_group_and_dedup_id() {
    let moto = moto::Throwaway::start("consumer-park").expect("moto starts");
    let sqs = crate::common::consumer_sqs(&moto);
    let url = sqs
        .create_queue()
        .queue_name("shop-search-dlq.fifo")
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();

    let recorder = Recorder::new("search");
    recorder.fail("P001", 1, Answer::Poison("priceCents is negative".into()));
    let runtime = Runtime::new(
        recorder,
        crate::common::feed(),
        Vec::<cqrs_item::Item>::new(),
        MemoryMarkers::default(),
        SqsDeadLetter::new(sqs.clone(), &url),
    );
    let v1 = event("P001", 1);
    let (answer, counts) = runtime
        .handle_counted(batch(vec![message("m1", &v1, 2)]))
        .await;
    assert!(
        answer.batch_item_failures.is_empty(),
        "parked, acknowledged"
    );
    assert_eq!(counts.parked, 1);

    let received = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    let messages = received.messages();
    assert_eq!(messages.len(), 1);
    let parked = &messages[0];
    assert_eq!(
        parked.body(),
        Some(serde_json::to_string(&v1).unwrap().as_str())
    );
    let system = parked.attributes().unwrap();
    assert_eq!(
        system
            .get(&MessageSystemAttributeName::MessageGroupId)
            .map(String::as_str),
        Some(cqrs_keys::member_token("PRODUCT#t1", "P001").as_str())
    );
    assert_eq!(
        system
            .get(&MessageSystemAttributeName::MessageDeduplicationId)
            .cloned(),
        Some(format!("{}:park:m1", v1.id))
    );
    let attributes: HashMap<&str, &str> = parked
        .message_attributes()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.string_value().unwrap_or_default()))
        .collect();
    assert_eq!(attributes["cqrs-consumer"], "search");
    assert_eq!(attributes["cqrs-reason-kind"], "poison");
    assert_eq!(attributes["cqrs-reason"], "priceCents is negative");
    assert_eq!(attributes["cqrs-attempts"], "2");
    assert!(attributes["cqrs-parked-at"].ends_with('Z'));
}

#[tokio::test]
async fn a_redriven_event_that_fails_again_is_parked_again_not_deduplicated_away() {
    let moto = moto::Throwaway::start("consumer-repark").expect("moto starts");
    let sqs = crate::common::consumer_sqs(&moto);
    let url = sqs
        .create_queue()
        .queue_name("shop-search-dlq.fifo")
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let recorder = Recorder::new("search");
    recorder.fail("P001", 1, Answer::Poison("priceCents is negative".into()));
    let runtime = Runtime::new(
        recorder.clone(),
        crate::common::feed(),
        Vec::<cqrs_item::Item>::new(),
        MemoryMarkers::default(),
        SqsDeadLetter::new(sqs.clone(), &url),
    );
    let v1 = event("P001", 1);
    runtime.handle(batch(vec![message("m1", &v1, 1)])).await;
    // Redriven within SQS's 5-minute dedup window (a new message, first receive), still poison.
    let answer = runtime
        .handle(batch(vec![crate::common::redriven(message(
            "m1-redriven",
            &v1,
            1,
        ))]))
        .await;
    assert!(answer.batch_item_failures.is_empty());
    assert_eq!(recorder.calls().len(), 2);

    let received = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap();
    assert_eq!(
        received.messages().len(),
        2,
        "both parks are in the dead-letter queue: the second was not dropped as a duplicate"
    );
}
