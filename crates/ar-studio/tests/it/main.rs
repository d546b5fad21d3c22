//! Integration tests of ar-studio: registry and timers, link routes, people API, store restarts, link-client conformance.

mod api;
mod conformance;
mod link_routes;
mod registry;
mod store;
mod support;
