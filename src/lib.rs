//! waitroom: a self-hosted virtual waiting room on Pingora.
//!
//! Pure decision logic lives in `core` (no I/O); `store` holds the room's shared state behind one
//! trait; `gate` decides per request; `proxy` and `admin` are the thin Pingora layers; `server`
//! assembles them from the validated `config`.

pub mod admin;
pub mod admission;
pub mod calibrate;
pub mod client;
pub mod clock;
pub mod config;
pub mod core;
pub mod crawler;
pub mod custom_page;
pub mod demo_shop;
pub mod export;
pub mod gate;
pub mod lifecycle;
pub mod locale;
pub mod logging;
pub mod metrics;
pub mod page;
pub mod proxy;
pub mod reload;
pub mod reply;
pub mod request;
pub mod route;
pub mod server;
pub mod status;
pub mod store;
pub mod tls;
pub mod token;
pub mod turnstile;
