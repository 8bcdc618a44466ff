//! OpenAI provider scenarios.
