//! waitroom: a self-hosted virtual waiting room on Pingora. ARCHITECTURE.md walks through the
//! modules and the path of a request.
//!
//! `core` holds the pure decision logic (no I/O); `config` the file format and the validated
//! model; `request` the canonical request; `room` the state one room shares between its parts;
//! `gate` decides per request and `respond` turns decisions into replies; `proxy` is the thin
//! Pingora layer; `store` the room's shared state behind one trait; `service` runs it all
//! (server, admission loop, admin API, metrics, signals); `tools` are the offline commands.

pub mod clock;
pub mod config;
pub mod core;
pub mod entry;
pub mod gate;
pub mod language;
pub mod notify;
pub mod observe;
pub mod proxy;
pub mod request;
pub mod respond;
pub mod room;
pub mod service;
pub mod store;
pub mod token;
pub mod tools;
pub mod turnstile;
