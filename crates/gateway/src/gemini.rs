//! gemini wire format (to be filled in).
