//! Test support: mock model provider server, temp stores, test apps. Dev-only.

pub mod mock_provider;
