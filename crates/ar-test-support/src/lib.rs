//! Test support: the mock model provider server and the HTTP harness of the service suites.
//! Dev and bench only.

pub mod mock_provider;
#[cfg(feature = "service")]
pub mod service;
