//! A redo list built for several writes at once (a multi-key transaction): every entry is
//! computed through the list being built, so that two writes touching one word compose.

use super::Redo;
use crate::error::{Error, Result};
use crate::format::*;
use crate::shared::Shared;
use std::sync::atomic::Ordering::*;

/// One redo list planned for many writes, and the bucket headers it changes.
pub(crate) struct Plan {
    /// Whole-word entries other than bucket headers (counters), and masked value bytes.
    words: Vec<(u64, u64)>,
    /// The words readers validate with, bucket headers and UID versions: (offset, the
    /// odd or busy value stored before the apply, final value).
    headers: Vec<(u64, u64, u64)>,
    /// Whether some entry of `words` is masked.
    masked: bool,
    /// Whether an entry found no room (the plan is [`too_large`]).
    overflowed: bool,
}

/// The error of a plan that does not fit one redo list.
pub(crate) fn too_large(what: &str) -> Error {
    Error::InvalidArgument(format!(
        "transaction too large: {what} (a transaction's writes fit one redo list of {T_NREDO} \
         words and at most {T_NHELD} segments; see DESIGN.md, \"Multi-key transactions\")"
    ))
}

impl Plan {
    pub fn new() -> Plan {
        Plan {
            words: Vec::new(),
            headers: Vec::new(),
            masked: false,
            overflowed: false,
        }
    }

    /// Entries so far.
    pub fn len(&self) -> usize {
        self.words.len() + self.headers.len()
    }

    /// Whether some write did not fit the redo list (its error was [`too_large`]).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn room(&mut self, n: usize) -> Result<()> {
        if self.len() + n > T_NREDO as usize {
            self.overflowed = true;
            return Err(too_large(&format!(
                "its writes need more than {T_NREDO} redo words"
            )));
        }
        Ok(())
    }

    /// The value word `off` will have: the plan's, else the file's.
    pub fn word(&self, sh: &Shared, off: u64) -> u64 {
        if let Some(h) = self.headers.iter().find(|h| h.0 == off) {
            return h.2;
        }
        if let Some(w) = self.words.iter().rev().find(|w| w.0 == off) {
            return w.1;
        }
        sh.w(off).load(Acquire)
    }

    /// Sets whole word `off` (not a bucket header) to `val`.
    pub fn set(&mut self, off: u64, val: u64) -> Result<()> {
        if let Some(w) = self.words.iter_mut().find(|w| w.0 == off) {
            w.1 = val;
            return Ok(());
        }
        self.room(1)?;
        self.words.push((off, val));
        Ok(())
    }

    /// Sets bucket header `off` to `fin`; `odd` is what it shows readers from the commit
    /// until the apply reaches it (taken from the first call for that header: the header
    /// as the file has it, its seq plus one).
    pub fn set_header(&mut self, off: u64, odd: u64, fin: u64) -> Result<()> {
        if let Some(h) = self.headers.iter_mut().find(|h| h.0 == off) {
            h.2 = fin;
            return Ok(());
        }
        self.room(1)?;
        self.headers.push((off, odd, fin));
        Ok(())
    }

    /// Whether header `off` is in the plan already.
    pub fn has_header(&self, off: u64) -> bool {
        self.headers.iter().any(|h| h.0 == off)
    }

    /// Writes `bytes` at byte offset `off` (a value), as masked entries for partial
    /// words: two values sharing a word never undo each other.
    pub fn set_bytes(&mut self, off: u64, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let words = (((off + bytes.len() as u64 + 7) & !7) - (off & !7)) / 8;
        self.room(words as usize)?;
        let mut r = Redo::new();
        r.push_bytes(off, bytes);
        self.masked |= r.masked;
        self.words.extend_from_slice(&r.e[..r.n]);
        Ok(())
    }

    /// The redo list: value and counter words first, bucket headers last, so that no
    /// bucket reaches its final (even) header before every value in it is in place.
    pub fn redo(&self) -> Redo {
        let mut r = Redo::new();
        for (o, v) in &self.words {
            r.push(*o, *v);
        }
        for (o, _, f) in &self.headers {
            r.push(*o, *f);
        }
        r.masked = self.masked;
        r
    }

    /// The (header, odd value) pairs to store after the commit and before the apply.
    pub fn odd_headers(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.headers.iter().map(|h| (h.0, h.1))
    }
}
