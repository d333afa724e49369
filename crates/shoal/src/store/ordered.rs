//! Creating, opening and listing ordered maps.

use super::maps::{read_name, validate_name};
use super::Store;
use crate::api::ordered::{OrderedMap, OrderedOptions};
use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::ordered::{self as ko, area};
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

impl Store {
    /// Opens the ordered map `name`, creating it if it does not exist. An object of another
    /// kind by that name is [`Error::WrongMapKind`]. A store holds at most 63 ordered maps.
    /// An existing map is opened whatever options it was created with
    /// ([`OrderedMap::options`]); a new one has keys of bytes and no duplicates.
    pub fn ordered_map(&self, name: &str) -> Result<OrderedMap> {
        self.ordered_map_inner(name, None)
    }

    /// Opens the ordered map `name`, creating it with `opts` if it does not exist. A map
    /// by that name created with other options is [`Error::WrongMapKind`].
    pub fn ordered_map_with(&self, name: &str, opts: &OrderedOptions) -> Result<OrderedMap> {
        self.ordered_map_inner(name, Some(opts))
    }

    fn ordered_map_inner(&self, name: &str, opts: Option<&OrderedOptions>) -> Result<OrderedMap> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        let checked = |m: OrderedMap| match opts {
            Some(o) if m.options() != *o => Err(Error::WrongMapKind {
                name: name.into(),
                found: ordered_kind(&m.options()),
                wanted: ordered_kind(o),
            }),
            _ => Ok(m),
        };
        if let Some(m) = self.find_ordered(name)? {
            return checked(m);
        }
        if !self.sh.g.ordered {
            return Err(Error::InvalidArgument(format!(
                "the store at {} predates ordered maps (its format has no ORDERED flag); \
                 create them in a store made by this version",
                self.sh.path.display()
            )));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let flags = opts.map_or(0, OrderedOptions::flags);
        let r = self.create_ordered_locked(&tx, name, flags);
        tx.unlock(H_CATALOG_LOCK);
        checked(r?)
    }

    /// The store's marker `i` (below [`MARKERS`]): a persistent word that write
    /// transactions over ordered maps set with their commit (`set_marker`), 0 until one
    /// does. A store with no ordered map has all of them 0.
    pub fn ordered_marker(&self, i: u64) -> Result<u64> {
        crate::api::ordered::check_marker(i)?;
        let sh = &*self.sh;
        match area::area(sh)? {
            None => Ok(0),
            Some(a) => area::marker(sh, a, i),
        }
    }

    /// Names of the ordered maps in the store.
    pub fn ordered_maps(&self) -> Result<Vec<String>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        let mut out = Vec::new();
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) & 0xff == CAT_LIVE && ko::is_ordered(sh, id) {
                out.push(read_name(sh, ce)?);
            }
        }
        Ok(out)
    }

    fn find_ordered(&self, name: &str) -> Result<Option<OrderedMap>> {
        let sh = &*self.sh;
        let Some((id, _)) = self.find_entry(name)? else {
            return Ok(None);
        };
        if !ko::is_ordered(sh, id) {
            return Err(Error::WrongMapKind {
                name: name.into(),
                found: self.kind_at(id)?,
                wanted: MapKind::Ordered {
                    u64_keys: false,
                    duplicates: false,
                },
            });
        }
        let m = ko::ordered_ref(sh, id)?;
        let en = area::current_entry(sh, m.area, m.e)?;
        if en.owner != ko::map::owner_word(id, m.cat_word) {
            // Created, but killed before its first commit: finish it (under the catalog
            // lock, so that only one process does).
            let tx = self.txn()?;
            tx.lock(H_CATALOG_LOCK)?;
            let r = (|| {
                let en = area::current_entry(sh, m.area, m.e)?;
                let ce = sh.g.cat_entry(id);
                if sh.w(ce + C_STATE).load(Acquire) != m.cat_word {
                    return Ok(false);
                }
                if en.owner != ko::map::owner_word(id, m.cat_word) {
                    first_commit(&tx, &m)?;
                }
                Ok(true)
            })();
            tx.unlock(H_CATALOG_LOCK);
            if !r? {
                return Ok(None);
            }
        }
        Ok(Some(OrderedMap::new(self.sh.clone(), m, name)))
    }

    fn create_ordered_locked(&self, tx: &Txn, name: &str, flags: u64) -> Result<OrderedMap> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(m) = self.find_ordered(name)? {
            return Ok(m);
        }
        let a = area::ensure_area(tx)?;
        // An entry is free if no table and no live map's header names it.
        let taken = area::used_entries(sh, a)? | ko::map::named_entries(sh);
        let e = (1..=MAX_ORDERED)
            .find(|i| taken & (1 << i) == 0)
            .ok_or_else(|| {
                Error::StoreFull(format!(
                    "the store already holds its maximum of {MAX_ORDERED} ordered maps"
                ))
            })?;
        let m = self.create_object(tx, name, KIND_ORDERED, 1, |c, id, word| {
            let hdr = ko::map::init_header(sh, c, e, flags);
            (
                ko::OrderedRef {
                    id,
                    cat_word: word,
                    hdr,
                    e,
                    flags,
                    area: a,
                },
                hdr,
            )
        })?;
        crate::rt::failpoint!("ordered.create.cataloged");
        first_commit(tx, &m)?;
        Ok(OrderedMap::new(self.sh.clone(), m, name))
    }
}

fn ordered_kind(o: &OrderedOptions) -> MapKind {
    MapKind::Ordered {
        u64_keys: o.u64_keys,
        duplicates: o.duplicates,
    }
}

/// Makes the map's entry in the root table (empty tree, pool at its first page).
fn first_commit(tx: &Txn, m: &ko::OrderedRef) -> Result<()> {
    let sh = tx.sh;
    let used = area::used_entries(sh, m.area)? | 1 << m.e;
    let en = area::Entry {
        owner: ko::map::owner_word(m.id, m.cat_word),
        ..Default::default()
    };
    area::commit(tx, m.area, &[(m.e, en)], Some(used), &[], |_| {})?;
    Ok(())
}
