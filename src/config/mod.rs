//! Configuration: the stable file format (`file`) and the validated model the proxy runs on
//! (`model`), which reads the file; secrets masked for printing (`masking`), used by both.

pub mod file;
pub mod masking;
pub mod model;

pub use model::{Config, ConfigError, QueueingMethod, RoomSettings};
