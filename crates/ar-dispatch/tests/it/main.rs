//! Integration tests of ar-dispatch: wire formats, local runtimes, composites, node and remote, subscription lane, real CLIs.

mod cli;
mod composite;
mod contracts;
mod egress;
mod fake;
mod local;
mod login;
mod node;
mod subscription;
mod support;
mod wire;
