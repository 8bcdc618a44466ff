//! One integration-test binary: every scenario lives in `suite/`, helpers in `support/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)] // a bench/test: a panic is the report

mod suite;
mod support;
