//! Running the product: the server assembled from the config (`server`), the admission loop
//! (`admission`), the admin listener (`admin`), reloads, signals and hand-over (`lifecycle`),
//! logs, TLS, the open-file limit and the demo shop.

pub mod admin;
pub mod admission;
pub mod autopilot;
pub mod demo_shop;
pub mod lifecycle;
pub mod limits;
pub mod live;
pub mod logging;
pub mod reload;
pub mod server;
pub mod tls;
