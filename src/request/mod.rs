//! The request as the gate decides on it and the origin receives it: one canonical target and
//! host (`canonical`, `authority`, refused with a `refusal`), the sites this proxy serves and the request view (`view`), who the
//! client is behind trusted proxies (`client`), which paths a room covers (`route`) and the rules
//! that bypass, protect or block requests (`rules`).

pub mod authority;
pub mod canonical;
pub mod client;
pub mod crawler;
pub mod refusal;
pub mod route;
pub mod rules;
pub mod view;
