#![allow(clippy::unwrap_used)]
//! One room over several routes (`routes = [...]`, Cloudflare's `additional_routes`): a full
//! room queues every route, one pass serves them all, the most specific route wins across
//! rooms, on the memory store and on two proxies sharing a real Redis; with `cookie_domain` one
//! pass serves a route on a second host; `--test` refuses a route two rooms claim, a route on a
//! second host without a cookie domain over both, and says what a room covers.

mod common;

use common::process::config_test;
use common::proxy::{Answer, Sections, TestProxy, Visitor};
use common::redis_server::RedisServer;

/// A drop whose checkout lives under other prefixes: one place at a time.
const DROP_WITH_CHECKOUT: &str = "path = \"/drop\"\n\
     routes = [{ path = \"/cart\" }, { path = \"/checkout\" }]\n\
     total_active_users = 1\nnew_users_per_minute = 100000\nsession_duration = \"1h\"";

/// The Set-Cookie line of the pass an answer carries.
fn pass_set_cookie(answer: &Answer) -> String {
    answer
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("waitroom="))
        .unwrap()
        .to_owned()
}

fn origin_saw(proxy: &TestProxy, path: &str) -> usize {
    proxy
        .origin
        .requests()
        .iter()
        .filter(|(p, _)| p == path)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_room_queues_every_route_and_one_pass_serves_them_all() {
    let proxy = TestProxy::start(DROP_WITH_CHECKOUT);
    let mut first = proxy.visitor();
    let admitted = first.get("/drop/shoes").await;
    assert!(admitted.reached_origin(), "{}", admitted.body);
    let pass = pass_set_cookie(&admitted);
    assert!(
        pass.contains("Path=/"),
        "the pass is the host's, for every route: {pass}"
    );
    assert!(!pass.contains("Domain="), "{pass}");

    // The room is full: a newcomer waits on each of its routes, and none of them reaches the
    // origin.
    for path in ["/cart", "/checkout/pay", "/drop/hat"] {
        let mut newcomer = proxy.visitor();
        let answer = newcomer.get(path).await;
        assert_eq!(answer.status, 200, "{path}");
        assert!(!answer.reached_origin(), "{path} let a newcomer through");
        assert!(newcomer.cookie.is_some(), "{path}: a ticket");
        assert_eq!(origin_saw(&proxy, path), 0, "{path}");
    }
    // A path outside every route is not the room's.
    let mut anyone = proxy.visitor();
    assert!(anyone.get("/about").await.reached_origin());

    // The pass got on /drop serves /cart and /checkout: one place, not three.
    for path in ["/cart", "/checkout/pay"] {
        let answer = first.get(path).await;
        assert!(answer.reached_origin(), "{path}: {}", answer.body);
        assert_eq!(origin_saw(&proxy, path), 1, "{path}");
    }
    let state = proxy.state().await;
    assert_eq!(state["occupancy"], 1, "{state}");
    assert_eq!(state["queue_length"], 3, "{state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_specific_route_wins_across_rooms() {
    let rooms = "[[rooms]]\nid = \"drop\"\npath = \"/drop\"\nroutes = [{ path = \"/cart\" }]\n\
                 total_active_users = 1\nnew_users_per_minute = 100000\n\
                 admission_interval = \"20ms\"\n\
                 [[rooms]]\nid = \"shop\"\npath = \"/\"\n\
                 routes = [{ path = \"/cart/gift-cards\" }]\n\
                 total_active_users = 100\nnew_users_per_minute = 100000\n\
                 admission_interval = \"20ms\"\n";
    let origin = common::origin::StubOrigin::start();
    let proxy = TestProxy::start_sections(
        origin.addr,
        origin,
        Sections {
            rooms: Some(rooms),
            ..Sections::default()
        },
    );
    let mut holder = Visitor::new(&proxy.base);
    assert!(holder.get("/drop").await.reached_origin());
    // /cart is the drop's (full), /cart/gift-cards the shop's, the rest the shop's.
    let mut newcomer = Visitor::new(&proxy.base);
    assert!(!newcomer.get("/cart/item").await.reached_origin());
    let mut buyer = Visitor::new(&proxy.base);
    assert!(buyer.get("/cart/gift-cards/10").await.reached_origin());
    let mut browser = Visitor::new(&proxy.base);
    assert!(browser.get("/account").await.reached_origin());
    assert_eq!(origin_saw(&proxy, "/cart/item"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_pass_from_one_proxy_serves_every_route_on_the_other() {
    let redis = RedisServer::start();
    let proxies = TestProxy::sharing_redis(
        2,
        &redis.url(),
        Sections {
            room: DROP_WITH_CHECKOUT,
            ..Sections::default()
        },
    );
    let mut first = Visitor::new(&proxies[0].base);
    assert!(first.get("/drop").await.reached_origin());
    // The other proxy: the room is full on every route for a newcomer...
    for path in ["/cart", "/checkout", "/drop"] {
        let mut newcomer = Visitor::new(&proxies[1].base);
        assert!(!newcomer.get(path).await.reached_origin(), "{path}");
    }
    // ...and the pass got on /drop from the first serves /cart and /checkout there.
    let mut same = Visitor::new(&proxies[1].base);
    same.cookie = first.cookie.clone();
    for path in ["/cart", "/checkout/done"] {
        assert!(same.get(path).await.reached_origin(), "{path}");
    }
    let origin = &proxies[0].origin;
    let reached: Vec<String> = origin.requests().into_iter().map(|(p, _)| p).collect();
    assert_eq!(reached, ["/drop", "/cart", "/checkout/done"]);
}

/// A drop on the shop's host whose payment lives on another host of the same domain.
const DROP_OVER_TWO_HOSTS: &str = "host = \"shop.example.com\"\npath = \"/drop\"\n\
     cookie_domain = \"example.com\"\n\
     routes = [{ host = \"pay.example.com\", path = \"/checkout\" }]\n\
     total_active_users = 1\nnew_users_per_minute = 100000\nsession_duration = \"1h\"";

/// A browser on `host`: what it sends and keeps is the same on every host under the cookie's
/// domain, which this visitor plays by changing its Host and keeping its cookie.
fn on_host(proxy: &TestProxy, host: &str) -> Visitor {
    let mut visitor = proxy.visitor();
    visitor.host = Some(host.to_owned());
    visitor
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_cookie_domain_one_pass_serves_a_route_on_a_second_host() {
    let proxy = TestProxy::start(DROP_OVER_TWO_HOSTS);
    let mut first = on_host(&proxy, "shop.example.com");
    let admitted = first.get("/drop").await;
    assert!(admitted.reached_origin(), "{}", admitted.body);
    let pass = pass_set_cookie(&admitted);
    assert!(pass.contains("Domain=example.com"), "{pass}");

    // The room is full on the second host too: a newcomer there waits, its ticket for the
    // whole domain, and the origin sees nothing of it.
    let mut newcomer = on_host(&proxy, "pay.example.com");
    let queued = newcomer.get("/checkout").await;
    assert!(!queued.reached_origin(), "{}", queued.body);
    assert!(
        queued
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("waitroom=") && c.contains("Domain=example.com")),
        "{:?}",
        queued.set_cookies()
    );

    // The pass got on shop.example.com, sent by the browser to pay.example.com, lets its
    // holder pay: one place for both hosts.
    first.host = Some("pay.example.com".into());
    let paid = first.get("/checkout/card").await;
    assert!(paid.reached_origin(), "{}", paid.body);
    assert_eq!(origin_saw(&proxy, "/checkout/card"), 1);
    assert_eq!(origin_saw(&proxy, "/checkout"), 0);

    // A host the room does not name is still refused, cookie or not.
    first.host = Some("blog.example.com".into());
    assert_eq!(first.get("/checkout").await.status, 421);

    let state = proxy.state().await;
    assert_eq!(state["occupancy"], 1, "{state}");
    assert_eq!(state["queue_length"], 1, "{state}");
}

const ORIGIN: &str = "[origin]\naddress = \"127.0.0.1:3000\"\n";

#[test]
fn a_cookie_domain_must_cover_every_host_of_the_room() {
    let room = |domain: &str, route_host: &str| {
        format!(
            "{ORIGIN}[room]\nid = \"drop\"\nhost = \"shop.example.com\"\npath = \"/drop\"\n\
             cookie_domain = \"{domain}\"\n\
             routes = [{{ host = \"{route_host}\", path = \"/checkout\" }}]\n\
             total_active_users = 5\nnew_users_per_minute = 5\n"
        )
    };
    let (code, stderr) = config_test(&room("example.com", "pay.example.net"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "room.routes[0].host: \"pay.example.net\" is not under room.cookie_domain \
             (\"example.com\")"
        ),
        "{stderr}"
    );
    for (domain, reason) in [
        ("com", "is a single label"),
        ("127.0.0.1", "is an address"),
        ("other.com", "is not room.host"),
        // Only a whole label counts: ample.com is not above shop.example.com.
        ("ample.com", "is not room.host"),
    ] {
        let (code, stderr) = config_test(&room(domain, "pay.example.com"));
        assert_eq!(code, Some(2), "{domain}: {stderr}");
        assert!(
            stderr.contains(&format!("room.cookie_domain: \"{domain}\" {reason}")),
            "{domain}: {stderr}"
        );
    }
    let (code, stderr) = config_test(&room(".Example.COM", "pay.example.com"));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "room \"drop\" covers shop.example.com/drop, pay.example.com/checkout: one line and \
             one capacity; a pass got on any of them serves them all (its cookie is sent to every \
             host under example.com, Path=/)"
        ),
        "{stderr}"
    );
}

#[test]
fn rooms_claiming_one_route_are_refused_by_test_naming_both() {
    let text = format!(
        "{ORIGIN}[[rooms]]\nid = \"drop\"\nhost = \"shop.example\"\npath = \"/drop\"\n\
         routes = [{{ path = \"/cart\" }}]\ntotal_active_users = 5\nnew_users_per_minute = 5\n\
         [[rooms]]\nid = \"sale\"\nhost = \"Shop.Example.\"\npath = \"/sale\"\n\
         routes = [{{ path = \"/checkout\" }}, {{ path = \"/cart\" }}]\n\
         total_active_users = 5\nnew_users_per_minute = 5\n"
    );
    let (code, stderr) = config_test(&text);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "rooms[1].routes[1]: shop.example/cart is claimed by rooms[0].routes[0] of room \
             \"drop\" too"
        ),
        "{stderr}"
    );
    // A room's own path claimed by another room's route.
    let own = format!(
        "{ORIGIN}[[rooms]]\nid = \"drop\"\nhost = \"shop.example\"\npath = \"/drop\"\n\
         total_active_users = 5\nnew_users_per_minute = 5\n\
         [[rooms]]\nid = \"sale\"\nhost = \"shop.example\"\npath = \"/sale\"\n\
         routes = [{{ path = \"/drop\" }}]\ntotal_active_users = 5\nnew_users_per_minute = 5\n"
    );
    let (code, stderr) = config_test(&own);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("rooms[1].routes[0]: shop.example/drop is claimed by rooms[0].path"),
        "{stderr}"
    );
}

#[test]
fn a_route_on_a_second_host_or_repeated_is_refused_and_a_good_one_explained() {
    let room = |routes: &str| {
        format!(
            "{ORIGIN}[room]\nid = \"drop\"\nhost = \"shop.example\"\npath = \"/drop\"\n\
             routes = [{routes}]\ntotal_active_users = 5\nnew_users_per_minute = 5\n"
        )
    };
    let (code, stderr) = config_test(&room("{ host = \"checkout.example\", path = \"/pay\" }"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "room.routes[0].host: \"checkout.example\" is not the room's host (shop.example): \
             a pass is a cookie of one host"
        ),
        "{stderr}"
    );
    let (code, stderr) = config_test(&room(
        "{ path = \"/cart\" }, { host = \"SHOP.example\", path = \"/cart\" }",
    ));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("room.routes[1]: repeats room.routes[0]"),
        "{stderr}"
    );
    let (code, stderr) = config_test(&room("{ path = \"/drop\" }"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("room.routes[0]: repeats the room's own host and path"),
        "{stderr}"
    );
    let (code, stderr) = config_test(&room("{ path = \"cart\" }"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("room.routes[0].path: must start with '/'"),
        "{stderr}"
    );

    let (code, stderr) = config_test(&room(
        "{ path = \"/cart\" }, { host = \"shop.example\", path = \"/checkout\" }",
    ));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "room \"drop\" covers shop.example/drop, shop.example/cart, shop.example/checkout: \
             one line and one capacity; a pass got on any of them serves them all"
        ),
        "{stderr}"
    );
}
