//! What the reporters' unit tests share: a writer they can read back, the XSD checks, and the
//! builders of outcomes and event streams ([`crate::events::test_support`]).

pub use crate::events::test_support::*;
use std::sync::{Arc, Mutex};

/// XSD checks with xmllint, shared with the integration tests.
#[path = "../../tests/support/xmllint.rs"]
pub mod xmllint;

/// A writer whose bytes a test can read back while a reporter owns it.
#[derive(Clone, Default)]
pub struct Shared(pub Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
