//! A client of GitHub's REST API: a base URL (`GITHUB_API_URL`, default
//! [`client::DEFAULT_API_URL`]), a token, the headers GitHub asks for, and typed errors
//! ([`error::GithubError`]) that name what a refusal needs — the token's permission, or the
//! repository setting that lets GitHub Actions create pull requests.
//!
//! One file per resource: [`pulls`] (list, create, update) and [`issues`] (labelled issues, who
//! labelled them, permissions, comments); [`queue`] picks the issues a manifest's `[issues]`
//! takes as tasks. The operations are checked in the tests against GitHub's own OpenAPI
//! description (`tests/fixtures/schemas/github-rest-publish.json`). Used by `dracode publish`
//! and by the plan of a run whose manifest has `[issues]`.

pub mod client;
pub mod error;
pub mod issues;
pub mod pulls;
pub mod queue;

pub use client::{Client, Repo};
pub use error::{GithubError, Operation};
