//! One integration-test binary: every scenario lives in `suite/`, helpers in `support/`.

mod suite;
mod support;
