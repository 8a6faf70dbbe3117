//! Configuration: the stable file format (`file`) and the validated model the proxy runs on
//! (`model`).

pub mod file;
pub mod model;

pub use model::{Config, ConfigError, QueueingMethod, RoomSettings};
