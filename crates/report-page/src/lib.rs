//! `report.html`: a dracode output folder (and earlier ones, for history) drawn as one
//! self-contained page that a person opens from a downloaded artifact — no server, no network.
//!
//! [`data`] is what the page is given (the contract between this crate and
//! `assets/report.js`); [`page`] writes the file around it.

#![forbid(unsafe_code)]

pub mod data;
pub mod page;
