//! Integration scenarios, one file per capability.

mod openai_provider;
