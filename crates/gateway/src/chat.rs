//! chat wire format (to be filled in).
