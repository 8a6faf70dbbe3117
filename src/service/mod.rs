//! Running the product: the server assembled from the config (`server`), the admission loop
//! (`admission`), the admin listener (`admin`), reloads, signals and hand-over (`lifecycle`),
//! logs, TLS, the open-file limit and the demo shop.

pub mod admin;
pub mod admission;
mod checks;
pub mod demo_shop;
pub mod lifecycle;
pub mod limits;
mod listeners;
pub mod live;
pub mod logging;
pub mod reload;
mod rooms;
pub mod server;
mod start;
mod stores;
pub mod tls;
