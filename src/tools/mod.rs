//! Offline commands of the binary: `export-terraform` (the managed Cloudflare room from the
//! config), `calibrate` (the room's numbers from a k6 capacity run) and `sign-entry` (an entry
//! token for a members-only line).

pub mod calibrate;
pub mod export;
pub mod sign_entry;
