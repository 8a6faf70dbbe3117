//! Offline commands of the binary: `export-terraform` (the managed Cloudflare room from the
//! config) and `calibrate` (the room's numbers from a k6 capacity run).

pub mod calibrate;
pub mod export;
