//! Creating, opening and listing queue sets.

use super::maps::{read_name, validate_name};
use super::Store;
use crate::api::queue::{QueueSet, QueueSetOptions};
use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::queue as kq;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

impl Store {
    /// Opens the queue set `name`, creating it with `opts` if it does not exist. An
    /// existing set is opened as it is (its geometry and queues are not compared with
    /// `opts`); an object of another kind by that name is [`Error::WrongMapKind`]. Queue
    /// sets need a store of format version 10 or later.
    pub fn queue_set(&self, name: &str, opts: &QueueSetOptions) -> Result<QueueSet> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        let initial = opts.validate()?;
        if let Some(s) = self.find_queue_set(name)? {
            return Ok(s);
        }
        if !self.sh.g.queues {
            return Err(Error::InvalidArgument(format!(
                "the store at {} predates queue sets (its format has no QUEUES flag); \
                 create them in a store made by this version",
                self.sh.path.display()
            )));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = self.create_queue_set_locked(&tx, name, opts, initial);
        tx.unlock(H_CATALOG_LOCK);
        r
    }

    /// Opens the existing queue set `name`: `NotFound` if there is none.
    pub fn open_queue_set(&self, name: &str) -> Result<QueueSet> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        self.find_queue_set(name)?
            .ok_or_else(|| Error::NotFound(format!("queue set {name:?}")))
    }

    /// Names of the queue sets in the store.
    pub fn queue_sets(&self) -> Result<Vec<String>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        let mut out = Vec::new();
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) & 0xff == CAT_LIVE && kq::is_queue_set(sh, id) {
                out.push(read_name(sh, ce)?);
            }
        }
        Ok(out)
    }

    fn find_queue_set(&self, name: &str) -> Result<Option<QueueSet>> {
        let sh = &*self.sh;
        let Some((id, st)) = self.find_entry(name)? else {
            return Ok(None);
        };
        if !kq::is_queue_set(sh, id) {
            return Err(Error::WrongMapKind {
                name: name.into(),
                found: self.kind_at(id)?,
                wanted: MapKind::QueueSet {
                    element_size: 0,
                    elements: 0,
                    queues: 0,
                },
            });
        }
        let mut q = kq::queue_ref_unchecked(sh, id)?;
        q.cat_word = st;
        if sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) != st {
            return Ok(None); // dropped while we looked
        }
        let set = QueueSet::new(self.sh.clone(), q, name);
        // What a process that died holding elements left: handed back now, best effort
        // (a read-only store cannot, and pulls look again).
        if !sh.read_only {
            let _ = set.reclaim();
        }
        Ok(Some(set))
    }

    fn create_queue_set_locked(
        &self,
        tx: &Txn,
        name: &str,
        opts: &QueueSetOptions,
        initial: u64,
    ) -> Result<QueueSet> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(s) = self.find_queue_set(name)? {
            return Ok(s);
        }
        let (size, elems, queues, redeliver) = opts.parts();
        let cs = sh.g.chunk_size();
        let need = kq::run_need(sh.g.n_proc, queues.len() as u64, elems, size);
        let k = need.div_ceil(cs);
        if need > sh.g.max_size {
            return Err(Error::StoreFull(format!(
                "a queue set of {elems} elements of {size} bytes needs {need} bytes; the store \
                 may grow to {} bytes",
                sh.g.max_size
            )));
        }
        let q = self.create_object(tx, name, KIND_QUEUES, k, |c, id, word| {
            let mut q = kq::init_set(sh, c, id, size, elems, queues, initial, initial, redeliver);
            q.cat_word = word;
            (q, q.hdr)
        })?;
        Ok(QueueSet::new(self.sh.clone(), q, name))
    }
}
