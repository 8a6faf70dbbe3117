use serde_json::json;

use super::*;

fn section(extra: &str) -> RoomSection {
    toml::from_str(&format!(
        "id = \"r\"\ntotal_active_users = 10\nnew_users_per_minute = 5\n{extra}"
    ))
    .unwrap()
}

fn patch(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn every_queueing_method_reads_back_from_its_name() {
    for &(name, method) in QUEUEING_METHODS {
        assert_eq!(method.as_str(), name);
        assert_eq!(QueueingMethod::parse("k", name).ok(), Some(method));
    }
    let e = QueueingMethod::parse("room.queueing_method", "lifo").unwrap_err();
    assert_eq!(
        e.to_string(),
        "room.queueing_method: \"lifo\" is not one of fifo, random, lottery, passthrough, reject"
    );
}

#[test]
fn a_merge_patch_sets_keys_and_null_brings_back_the_default() {
    let current = section("burst = 7\nqueueing_method = \"random\"\nbypass = [\"/a\", \"/b\"]");
    let merged: RoomSection = merge_patch(
        &current,
        &patch(json!({"burst": null, "total_active_users": 50, "bypass": ["/c"]})),
    )
    .unwrap();
    assert_eq!(merged.burst, None, "unset again");
    assert_eq!(merged.total_active_users, 50);
    assert_eq!(merged.bypass, ["/c"], "an array is replaced whole");
    assert_eq!(merged.queueing_method, "random", "untouched");
    let reset: RoomSection =
        merge_patch(&current, &patch(json!({"queueing_method": null}))).unwrap();
    assert_eq!(reset.queueing_method, "fifo", "back to the default");
}

#[test]
fn a_merge_patch_merges_nested_objects_key_by_key() {
    let current = section(
        "crawler_ranges = { googlebot = [\"66.249.64.0/19\"], bingbot = [\"157.55.39.0/24\"] }",
    );
    let merged: RoomSection = merge_patch(
        &current,
        &patch(json!({"crawler_ranges": {"bingbot": null, "googlebot": ["192.0.2.0/24"]}})),
    )
    .unwrap();
    assert_eq!(
        merged.crawler_ranges.len(),
        1,
        "{:?}",
        merged.crawler_ranges
    );
    assert_eq!(merged.crawler_ranges["googlebot"], ["192.0.2.0/24"]);
    let kept: RoomSection = merge_patch(
        &current,
        &patch(json!({"crawler_ranges": {"bingbot": null}})),
    )
    .unwrap();
    assert_eq!(kept.crawler_ranges["googlebot"], ["66.249.64.0/19"]);
    let wrong = merge_patch::<RoomSection>(&current, &patch(json!({"burst": "many"})));
    assert!(wrong.is_err());
}

#[test]
fn a_live_patch_is_validated_like_the_file_and_cannot_move_the_room() {
    let settings = RoomSettings::from_section(&section("")).unwrap();
    let changed = settings
        .patched(&json!({"total_active_users": 20, "bypass_cookies": ["staff=0123456789abcdef"]}))
        .unwrap();
    assert_eq!(changed.total_active_users, 20);
    assert!(changed.bypass_cookies[0].matches("0123456789abcdef"));
    for (body, key) in [
        (json!({"path": "/x"}), "room.path"),
        (json!({"host": "x"}), "room.host"),
        (json!({"bypass_cookies": ["staff"]}), "room.bypass_cookies"),
        (json!({"bypass": ["/a//b"]}), "room.bypass"),
        (json!([1]), "body"),
    ] {
        match settings.patched(&body) {
            Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key, "{body}"),
            other => panic!("{body}: {:?}", other.map(|s| s.total_active_users)),
        }
    }
}

#[test]
fn origin_commands_and_status_codes_come_from_their_lists() {
    let revoke = RoomSettings::from_section(&section("enabled_origin_commands = [\"revoke\"]"));
    assert!(revoke.unwrap().revoke_command_enabled);
    assert!(
        !RoomSettings::from_section(&section(""))
            .unwrap()
            .revoke_command_enabled
    );
    let e = RoomSettings::from_section(&section("enabled_origin_commands = [\"reboot\"]"))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "room.enabled_origin_commands: \"reboot\" is not one of revoke"
    );
    let e = RoomSettings::from_section(&section("queueing_status_code = 503"))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "room.queueing_status_code: \"503\" is not one of 200, 202, 429"
    );
    let accepted = RoomSettings::from_section(&section("queueing_status_code = 429"));
    assert_eq!(accepted.unwrap().queueing_status_code, 429);
}
