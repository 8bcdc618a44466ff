//! A local server that speaks OpenAI Chat Completions.
