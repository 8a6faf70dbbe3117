#![allow(clippy::unwrap_used)]
//! One room over several routes (`routes = [...]`, Cloudflare's `additional_routes`): a full
//! room queues every route, one pass serves them all, the most specific route wins across
//! rooms, on the memory store and on two proxies sharing a real Redis; `--test` refuses a route
//! two rooms claim and a route on a second host, and says what a room covers.

mod common;

use common::process::config_test;
use common::proxy::{Sections, TestProxy, Visitor};
use common::redis_server::RedisServer;

/// A drop whose checkout lives under other prefixes: one place at a time.
const DROP_WITH_CHECKOUT: &str = "path = \"/drop\"\n\
     routes = [{ path = \"/cart\" }, { path = \"/checkout\" }]\n\
     total_active_users = 1\nnew_users_per_minute = 100000\nsession_duration = \"1h\"";

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
    let pass = admitted
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("waitroom="))
        .unwrap()
        .to_owned();
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

const ORIGIN: &str = "[origin]\naddress = \"127.0.0.1:3000\"\n";

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
