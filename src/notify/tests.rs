use super::*;
use crate::observe::MetricsRegistry;

fn config(queue_size: usize) -> NotifyConfig {
    NotifyConfig {
        webhook_url: reqwest::Url::parse("http://127.0.0.1:9/hook").unwrap(),
        secret: "0123456789abcdef0123456789abcdef".into(),
        queue_size,
    }
}

fn contacts(queue_size: usize) -> (Contacts, Delivery, Arc<Metrics>) {
    let metrics = Arc::new(MetricsRegistry::new().room("r"));
    let (outbox, delivery) = Outbox::new(&config(queue_size)).unwrap();
    (
        Contacts::new("r", outbox, metrics.clone()),
        delivery,
        metrics,
    )
}

#[test]
fn a_called_visitor_with_a_contact_is_queued_once() {
    let (contacts, delivery, metrics) = contacts(10);
    contacts.note("v1", "customer-42", 1_000);
    contacts.called(&["v0".into(), "v1".into()], 2_000);
    let called = delivery.take_queued().expect("one call queued");
    assert_eq!(called.contact, "customer-42");
    assert_eq!(called.room, "r");
    assert_eq!(called.queue_id, QueueId::of("v1").to_string());
    assert_eq!(called.called_at, rfc3339_ms(2_000));
    assert_eq!(called.event_id.len(), 32);
    // Called again on the next tick (still in the keep-alive's answer): not a second call.
    contacts.called(&["v1".into()], 3_000);
    assert!(delivery.take_queued().is_none());
    assert!(contacts.is_empty());
    assert_eq!(metrics.notifications(NotifyResult::Dropped), 0);
}

#[test]
fn a_visitor_who_left_or_gave_no_contact_is_not_told() {
    let (contacts, delivery, _) = contacts(10);
    contacts.note("v1", "customer-42", 1_000);
    contacts.forget("v1");
    contacts.called(&["v1".into(), "v2".into()], 2_000);
    assert!(delivery.take_queued().is_none());
}

#[test]
fn a_full_queue_drops_and_counts() {
    let (contacts, delivery, metrics) = contacts(1);
    for id in ["v1", "v2", "v3"] {
        contacts.note(id, &format!("contact-{id}"), 1_000);
    }
    contacts.called(&["v1".into(), "v2".into(), "v3".into()], 2_000);
    assert_eq!(metrics.notifications(NotifyResult::Dropped), 2);
    assert_eq!(delivery.take_queued().unwrap().contact, "contact-v1");
    assert!(delivery.take_queued().is_none());
}

#[test]
fn event_ids_differ_between_calls() {
    let (contacts, delivery, _) = contacts(10);
    contacts.note("v1", "a", 0);
    contacts.note("v2", "b", 0);
    contacts.called(&["v1".into(), "v2".into()], 1);
    let first = delivery.take_queued().unwrap();
    let second = delivery.take_queued().unwrap();
    assert_ne!(first.event_id, second.event_id);
}

#[test]
fn a_room_full_of_contacts_lets_old_ones_go_then_drops_and_counts() {
    let (contacts, delivery, metrics) = contacts(10);
    let contacts = contacts.with_room_for(2);
    contacts.note("v1", "a", 0);
    contacts.note("v2", "b", CONTACT_TTL_MS / 2);
    // Full: v1 is past the TTL and makes room; v2 is not.
    contacts.note("v3", "c", CONTACT_TTL_MS + 1);
    assert_eq!(metrics.notifications(NotifyResult::Dropped), 0);
    contacts.note("v4", "d", CONTACT_TTL_MS + 2);
    assert_eq!(metrics.notifications(NotifyResult::Dropped), 1);
    // A contact already held is replaced, full or not.
    contacts.note("v3", "c2", CONTACT_TTL_MS + 3);
    assert_eq!(metrics.notifications(NotifyResult::Dropped), 1);
    let everyone: Vec<String> = ["v1", "v2", "v3", "v4"].map(String::from).to_vec();
    contacts.called(&everyone, CONTACT_TTL_MS + 4);
    let told: Vec<String> = std::iter::from_fn(|| delivery.take_queued())
        .map(|c| c.contact)
        .collect();
    assert_eq!(told, ["b", "c2"]);
}
