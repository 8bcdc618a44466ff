//! Task scheduling and workspaces.
