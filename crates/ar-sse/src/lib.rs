//! `text/event-stream` framing, both ways: the one encoder ([`frame`], [`comment`]) and the one
//! incremental decoder ([`Decoder`]) that every crate of the workspace uses.
//!
//! Pure byte and string work, no I/O: callers wrap an encoded frame in their own body type
//! (`Bytes::from(String)` moves it without copying) and feed received chunks to a decoder.

mod decode;
mod encode;

pub use decode::{Decoder, Event};
pub use encode::{comment, frame};
