//! The model endpoint dracode serves an external coding agent on loopback.
