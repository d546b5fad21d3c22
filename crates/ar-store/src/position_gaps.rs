//! The rule that keeps PostgreSQL's position feed gap-free: a reader never moves past a missing position a running transaction may still commit.
//!
//! Event positions come from a sequence when a commit inserts them, and commits become
//! visible in any order: the feed may show position 11 while 10 belongs to a transaction that
//! has not committed yet. A reader that took 11 and moved its cursor there would never see 10.
//! So the feed shows rows only up to the first missing position, until that gap is known to
//! be permanent (its transaction rolled back, or the sequence skipped values after a crash).
//!
//! A gap below a visible row was drawn before the query that saw it, by a transaction that had
//! its id by then (every commit statement writes the run row, which assigns the id, before it
//! inserts events). When a gap is first seen the feed takes a fresh transaction id, `mark`,
//! which is above every id assigned so far, so above the id of whatever may fill the gap. Once
//! a snapshot's `xmin` is past `mark`, every such transaction has ended, and a gap still there
//! stays one. (A snapshot's `xmax` would not do: it follows the last *completed* transaction,
//! and a running one may already have an id at or above it.) The feed waits only while a gap
//! is open; the usual case, rows without gaps, costs nothing.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// Gaps kept at most; the oldest are forgotten first (a forgotten gap is only seen anew,
/// and waited for again, never skipped early).
const MAX_TRACKED: usize = 4096;

/// Gaps seen in the feed, by their first missing position, with the `mark` taken when each
/// was first seen.
#[derive(Debug, Default)]
pub(crate) struct PositionGaps {
    open: Mutex<BTreeMap<i64, i64>>,
}

/// How many rows of a feed query may be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Visible {
    pub rows: usize,
    /// The rows stop at a gap seen for the first time: take a mark for it (`PositionGaps::mark`).
    pub new_gap: Option<i64>,
}

impl PositionGaps {
    /// How many of `positions` (ascending, all after `after`, read in a snapshot whose `xmin`
    /// is given) the feed may show: up to the first gap that may still be filled.
    pub(crate) fn visible(&self, after: i64, positions: &[i64], xmin: i64) -> Visible {
        let mut open = self.open.lock();
        let mut expected = after.saturating_add(1);
        for (index, &position) in positions.iter().enumerate() {
            if position > expected {
                match open.get(&expected) {
                    None => {
                        return Visible {
                            rows: index,
                            new_gap: Some(expected),
                        }
                    }
                    Some(&mark) if xmin <= mark => {
                        return Visible {
                            rows: index,
                            new_gap: None,
                        }
                    }
                    Some(_) => {
                        open.remove(&expected);
                    }
                }
            }
            expected = position.saturating_add(1);
        }
        Visible {
            rows: positions.len(),
            new_gap: None,
        }
    }

    /// Records the transaction id taken after the gap at `position` was first seen.
    pub(crate) fn mark(&self, position: i64, mark: i64) {
        let mut open = self.open.lock();
        open.entry(position).or_insert(mark);
        forget_oldest(&mut open);
    }
}

fn forget_oldest(open: &mut BTreeMap<i64, i64>) {
    while open.len() > MAX_TRACKED {
        open.pop_first();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(gaps: &PositionGaps, after: i64, positions: &[i64], xmin: i64) -> usize {
        let visible = gaps.visible(after, positions, xmin);
        if let Some(gap) = visible.new_gap {
            // The feed's fresh transaction id: above everything assigned so far.
            gaps.mark(gap, 200);
        }
        visible.rows
    }

    #[test]
    fn contiguous_rows_are_all_shown() {
        let gaps = PositionGaps::default();
        assert_eq!(
            gaps.visible(4, &[5, 6, 7], 100),
            Visible {
                rows: 3,
                new_gap: None
            }
        );
        assert_eq!(gaps.visible(0, &[], 100).rows, 0);
    }

    #[test]
    fn a_gap_holds_the_rows_after_it_until_older_transactions_ended() {
        let gaps = PositionGaps::default();
        // 11 is visible, 10 is not: a running transaction may still commit it.
        assert_eq!(shown(&gaps, 9, &[11, 12], 100), 0);
        assert_eq!(shown(&gaps, 9, &[11, 12], 200), 0, "the mark itself");
        // Every transaction that could hold 10 has ended, and 10 is still missing: skipped.
        assert_eq!(shown(&gaps, 9, &[11, 12], 201), 2);
    }

    #[test]
    fn a_gap_filled_meanwhile_is_no_gap() {
        let gaps = PositionGaps::default();
        assert_eq!(shown(&gaps, 9, &[11], 100), 0);
        assert_eq!(shown(&gaps, 9, &[10, 11], 101), 2);
    }

    #[test]
    fn rows_before_a_gap_are_shown_and_a_gap_after_the_cursor_counts() {
        let gaps = PositionGaps::default();
        assert_eq!(shown(&gaps, 0, &[1, 2, 4], 7), 2);
        assert_eq!(shown(&gaps, 0, &[3], 50), 0);
        assert_eq!(shown(&gaps, 0, &[3], 201), 1);
    }
}
