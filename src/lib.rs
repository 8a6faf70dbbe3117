//! waitroom: a self-hosted virtual waiting room on Pingora.

pub mod clock;
pub mod core;
pub mod store;
