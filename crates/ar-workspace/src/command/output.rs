//! A command's output, kept bounded while it runs: the last bytes and the count of all.

use std::collections::VecDeque;

/// The last `keep` bytes written, and how many there were in all.
#[derive(Debug)]
pub(crate) struct Tail {
    keep: usize,
    buf: VecDeque<u8>,
    total: u64,
}

impl Tail {
    pub fn new(keep: usize) -> Self {
        Self {
            keep,
            buf: VecDeque::with_capacity(keep.min(64 * 1024)),
            total: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let bytes = &bytes[bytes.len().saturating_sub(self.keep)..];
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.keep);
        self.buf.drain(..overflow);
        self.buf.extend(bytes);
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn cut(&self) -> bool {
        self.total > self.buf.len() as u64
    }

    /// The kept bytes as text, starting at a character boundary when cut.
    pub fn text(&self) -> String {
        let bytes: Vec<u8> = self.buf.iter().copied().collect();
        let start = if self.cut() {
            bytes.iter().position(|b| (*b as i8) >= -0x40).unwrap_or(0)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_counts_all() {
        let mut tail = Tail::new(4);
        tail.push(b"abc");
        tail.push(b"defg");
        assert_eq!(tail.text(), "defg");
        assert_eq!(tail.total(), 7);
        assert!(tail.cut());
        tail.push(b"0123456789");
        assert_eq!(tail.text(), "6789");
    }

    #[test]
    fn a_cut_tail_starts_at_a_character() {
        let mut tail = Tail::new(3);
        tail.push("aé€".as_bytes()); // a, 2 bytes, 3 bytes: the last 3 bytes are €
        assert_eq!(tail.text(), "€");
        let mut tail = Tail::new(4);
        tail.push("aé€".as_bytes()); // last 4: second byte of é, then €
        assert_eq!(tail.text(), "€");
    }
}
