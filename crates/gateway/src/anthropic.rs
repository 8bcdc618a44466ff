//! anthropic wire format (to be filled in).
