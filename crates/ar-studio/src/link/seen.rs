//! The at-most-once memory: the newest command ids seen, bounded.

use std::collections::{HashSet, VecDeque};

/// Remembers at most `cap` ids, forgetting the oldest first.
#[derive(Debug)]
pub struct SeenSet {
    order: VecDeque<String>,
    set: HashSet<String>,
    cap: usize,
}

impl SeenSet {
    pub fn new(cap: usize) -> Self {
        Self {
            order: VecDeque::new(),
            set: HashSet::new(),
            cap: cap.max(1),
        }
    }

    /// Records `id`; false when it was already seen.
    pub fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        self.set.insert(id.to_string());
        self.order.push_back(id.to_string());
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_oldest() {
        let mut s = SeenSet::new(2);
        assert!(s.insert("a"));
        assert!(!s.insert("a"));
        assert!(s.insert("b"));
        assert!(s.insert("c"));
        assert!(s.insert("a"));
    }
}
