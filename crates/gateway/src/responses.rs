//! responses wire format (to be filled in).
