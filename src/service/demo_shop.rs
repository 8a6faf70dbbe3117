//! A tiny shop the binary can serve itself (`[origin] serve_demo_shop = true`), so the product
//! can be tried on a fresh machine with nothing else running.

use async_trait::async_trait;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;

use crate::respond::reply::Reply;

pub struct DemoShop;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{title}</title><style>body{{font-family:system-ui,sans-serif;max-width:40rem;\
         margin:3rem auto;padding:0 1rem;line-height:1.5}}a{{color:#1d4ed8}}</style></head>\
         <body><h1>{title}</h1>{body}</body></html>"
    )
}

#[async_trait]
impl ServeHttp for DemoShop {
    async fn response(&self, session: &mut ServerSession) -> http::Response<Vec<u8>> {
        let path = session.req_header().uri.path().to_owned();
        let reply = match path.as_str() {
            "/checkout" => Reply::html(
                200,
                page(
                    "Order placed",
                    "<p>Thank you! Your session in the waiting room has ended, so the next \
                     person in line can come in.</p><p><a href=\"/\">Back to the shop</a></p>",
                ),
            )
            // The origin command a real shop sends after checkout.
            .with_header("cf-waiting-room-command", "revoke"),
            _ => Reply::html(
                200,
                page(
                    "Demo shop",
                    &format!(
                        "<p>You are in: the waiting room let you through to <code>{}</code>.</p>\
                         <p>Open this shop in a second browser (or a private window) while this \
                         one is inside: the room has space for one visitor, so the second one \
                         waits in line.</p><p><a href=\"/checkout\">Check out</a> to leave and \
                         let the next visitor in.</p>",
                        path.replace(['<', '>', '&', '"'], "")
                    ),
                ),
            )
            .with_header("set-cookie", "demo_cart=1; Path=/; HttpOnly; SameSite=Lax"),
        };
        reply.into_http()
    }
}
