//! Integration tests of ar-dispatch.
