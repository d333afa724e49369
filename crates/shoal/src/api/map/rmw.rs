//! Read-modify-writes: compare-and-swap, update, add, get-or-insert.

use super::*;
use crate::deadline::Wait;
use crate::error::{Error, Result};
use crate::kinds::varmap::Action;

impl Map {
    /// Atomically: if the current value of `key` equals `expected` (`None` = absent),
    /// sets it to `new` (`None` = remove) and returns true; else changes nothing and
    /// returns false. Compare-and-remove is `compare_and_swap(k, Some(old), None)`;
    /// insert-if-absent is `compare_and_swap(k, None, Some(v))`.
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let _call = crate::deadline::call();
        check_sizes(key, new)?;
        // Optimistic pre-check: a mismatch appends nothing.
        let cur = self.get(key)?;
        if cur.as_deref() != expected {
            return Ok(false);
        }
        let (applied, ()) = self.rmw(key, |map, tx, hit, appended| {
            let same = match (hit, expected) {
                (None, None) => true,
                (Some(h), Some(e)) => h.vlen == e.len() as u64 && tx.sh.r.bytes_eq(h.val_off, e),
                _ => false,
            };
            if !same {
                return Ok((Action::Keep, ()));
            }
            Ok((
                match new {
                    Some(v)
                        if hit.is_some_and(|h| h.vlen == v.len() as u64)
                            && map.in_place_ok(Some(v)) =>
                    {
                        Action::InPlace(v)
                    }
                    Some(v) => {
                        let (off, len) = map.append(tx, key, v)?;
                        appended.push((off, len));
                        Action::Put(off, len)
                    }
                    None if hit.is_some() => Action::Remove,
                    None => Action::Keep,
                },
                (),
            ))
        })?;
        Ok(applied || (expected.is_none() && new.is_none()))
    }

    /// Atomic read-modify-write: `f` sees the current value (or `None`) and returns the
    /// new one (or `None` to remove the key); no other write to the key comes in between.
    /// Returns what `f` returned for the value that was installed.
    ///
    /// `f` runs without any lock held (it may be slow; other keys are not blocked): the
    /// result is installed only if the value is still the one `f` saw, otherwise `f` runs
    /// again on the new value. So `f` may run several times and must have no side
    /// effects. A process that dies inside `f` leaves the old value and holds no lock.
    /// Gives up with [`Error::Timeout`] after the store's lock timeout of retries.
    pub fn update(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        check_sizes(key, None)?;
        let _call = crate::deadline::call();
        let wait = Wait::begin(self.m.timeout, self.m.timeout);
        let mut tries = 0u32;
        loop {
            let cur = self.get(key)?;
            let new = f(cur.as_deref());
            if let Some(v) = &new {
                check_sizes(key, Some(v))?;
            }
            if cur.is_none() && new.is_none() {
                // Absent stays absent: nothing to install, but make sure it is still absent.
                if !self.contains(key)? {
                    return Ok(None);
                }
            } else if self.compare_and_swap(key, cur.as_deref(), new.as_deref())? {
                return Ok(new);
            }
            tries += 1;
            if wait.expired() {
                return Err(wait.timeout());
            }
            if tries > 4 {
                crate::rt::sleep(std::time::Duration::from_micros(10 << tries.min(10)));
            } else {
                crate::rt::yield_now();
            }
        }
    }

    /// Atomically adds `delta` (wrapping) to the 8-byte little-endian signed integer value
    /// of `key` (an absent key counts as 0 and is created), and returns the new value.
    /// `InvalidArgument` if the current value is not 8 bytes long.
    pub fn add(&self, key: &[u8], delta: i64) -> Result<i64> {
        let _call = crate::deadline::call();
        let (_, v) = self.rmw(key, |map, tx, hit, appended| {
            let cur = match hit {
                None => 0i64,
                Some(h) if h.vlen == 8 => {
                    verify_hit(tx.sh, h, &map.name)?;
                    let mut b = [0u8; 8];
                    tx.sh.r.read_bytes(h.val_off, &mut b);
                    i64::from_le_bytes(b)
                }
                Some(h) => {
                    return Err(Error::InvalidArgument(format!(
                        "add needs an 8-byte integer value; this one has {} bytes",
                        h.vlen
                    )))
                }
            };
            let new = cur.wrapping_add(delta);
            if hit.is_some() && map.in_place_ok(Some(&[0; 8])) {
                return Ok((Action::InPlaceWord(new as u64), new));
            }
            let (off, len) = map.append(tx, key, &new.to_le_bytes())?;
            appended.push((off, len));
            Ok((Action::Put(off, len), new))
        })?;
        Ok(v)
    }

    /// Returns the value of `key`, first inserting `default` if the key is absent
    /// (atomically: of several racing callers, exactly one inserts).
    pub fn get_or_insert(&self, key: &[u8], default: &[u8]) -> Result<Vec<u8>> {
        let _call = crate::deadline::call();
        check_sizes(key, Some(default))?;
        if let Some(v) = self.get(key)? {
            return Ok(v);
        }
        let (_, v) = self.rmw(key, |map, tx, hit, appended| match hit {
            Some(h) => Ok((Action::Keep, copy_value(tx.sh, h, &map.name)?)),
            None => {
                let (off, len) = map.append(tx, key, default)?;
                appended.push((off, len));
                Ok((Action::Put(off, len), default.to_vec()))
            }
        })?;
        Ok(v)
    }
}
