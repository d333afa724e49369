//! Creating, opening and listing logs.

use super::maps::{read_name, validate_name};
use super::Store;
use crate::api::log::{Log, LogOptions};
use crate::error::{Error, Result};
use crate::format::*;
use crate::kinds::log as kl;
use crate::txn::Txn;
use std::sync::atomic::Ordering::*;

impl Store {
    /// Opens the log `name`, creating it with `opts` if it does not exist. An existing log
    /// is opened as it is (its geometry is not compared with `opts`); an object of another
    /// kind by that name is [`Error::WrongMapKind`]. Logs need a store of format version
    /// 11 or later.
    pub fn log(&self, name: &str, opts: &LogOptions) -> Result<Log> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        opts.validate()?;
        if let Some(l) = self.find_log(name)? {
            return Ok(l);
        }
        if !self.sh.g.logs {
            return Err(Error::InvalidArgument(format!(
                "the store at {} predates logs (its format has no LOGS flag); create them \
                 in a store made by this version",
                self.sh.path.display()
            )));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = self.create_log_locked(&tx, name, opts);
        tx.unlock(H_CATALOG_LOCK);
        r
    }

    /// Opens the existing log `name`: `NotFound` if there is none.
    pub fn open_log(&self, name: &str) -> Result<Log> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        self.find_log(name)?
            .ok_or_else(|| Error::NotFound(format!("log {name:?}")))
    }

    /// Names of the logs in the store.
    pub fn logs(&self) -> Result<Vec<String>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        let mut out = Vec::new();
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) & 0xff == CAT_LIVE && kl::is_log(sh, id) {
                out.push(read_name(sh, ce)?);
            }
        }
        Ok(out)
    }

    fn find_log(&self, name: &str) -> Result<Option<Log>> {
        let sh = &*self.sh;
        let Some((id, st)) = self.find_entry(name)? else {
            return Ok(None);
        };
        if !kl::is_log(sh, id) {
            return Err(Error::WrongMapKind {
                name: name.into(),
                found: self.kind_at(id)?,
                wanted: MapKind::Log {
                    slots: 0,
                    max_record: 0,
                },
            });
        }
        let mut l = kl::log_ref_unchecked(sh, id)?;
        l.cat_word = st;
        if sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) != st {
            return Ok(None); // dropped while we looked
        }
        Ok(Some(Log::new(self.sh.clone(), l, name)))
    }

    fn create_log_locked(&self, tx: &Txn, name: &str, opts: &LogOptions) -> Result<Log> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(l) = self.find_log(name)? {
            return Ok(l);
        }
        let (slots, max_record, readers, policy) = opts.parts();
        let need = kl::run_need(sh.g.n_txn, slots, max_record, readers);
        if need > sh.g.max_size {
            return Err(Error::StoreFull(format!(
                "a log of {slots} records of {max_record} bytes needs {need} bytes; the store \
                 may grow to {} bytes",
                sh.g.max_size
            )));
        }
        let k = need.div_ceil(sh.g.chunk_size());
        let l = self.create_object(tx, name, KIND_LOG, k, |c, id, word| {
            let mut l = kl::init_log(sh, c, id, slots, max_record, readers, policy);
            l.cat_word = word;
            (l, l.hdr)
        })?;
        Ok(Log::new(self.sh.clone(), l, name))
    }
}
