//! Iteration over a map: entries and keys, a segment's copy at a time.

use super::*;
use crate::error::{Error, Result};
use std::collections::VecDeque;

/// Iterator over a map's entries; see [`Map::iter`]. Yields `Result`s. A damaged segment
/// (entries whose records cannot be read, or fail their checksums) is reported as one
/// [`Error::Corrupt`] naming the map and the segment, after the segment's readable
/// entries, and the iteration goes on with the next segment; any other error (the map was
/// dropped, its directory is damaged, a timeout) ends it.
pub struct Iter {
    pub(super) map: Map,
    /// Position in bit-reversed hash order (see `crate::kinds::varmap::snapshot`).
    pub(super) cursor: u64,
    pub(super) done: bool,
    pub(super) buf: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// The damage of the segment whose items are in `buf`, reported after them.
    pub(super) damage: Option<Error>,
    pub(super) values: bool,
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.buf.pop_front() {
                return Some(Ok(item));
            }
            if let Some(e) = self.damage.take() {
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            let sh = &*self.map.sh;
            if let Err(e) = sh.ensure_registered() {
                self.done = true;
                return Some(Err(e));
            }
            let m = &self.map;
            match crate::kinds::varmap::snapshot(&m.sh, &m.m, &m.name, self.cursor, self.values) {
                Ok(step) => {
                    self.buf.extend(step.items);
                    self.damage = step.damage.map(|(_, what)| sh.corrupt(what));
                    match step.next {
                        Some(c) => self.cursor = c,
                        None => self.done = true,
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Iterator over a map's keys; see [`Map::keys`].
pub struct Keys(pub(super) Iter);

impl Iterator for Keys {
    type Item = Result<Vec<u8>>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|r| r.map(|(k, _)| k))
    }
}
