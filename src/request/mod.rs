//! The request as the gate decides on it and the origin receives it.

pub mod canonical;
