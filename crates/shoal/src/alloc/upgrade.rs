//! The upgrade of version-1 and -2 files to version 3, by a process that opens one alone.

use super::*;
use crate::error::Result;
use crate::shared::Shared;

/// Upgrades a store of format version `from` (1 or 2), opened by this process alone (so
/// no older library shares it), to version 3 (`UPGRADED_VERSION`: version 4 differs only
/// in the records' headers, which cannot be recoded in place): for version 1, every LARGE run
/// gets its serial (version 1 files have no serials, merged free runs or RELEASED marks);
/// for both, `large_slack` is summed from the LARGE runs (older libraries never kept it);
/// then the header's version moves. Each store stands alone, so a crash midway leaves an
/// old-version file whose next opener does it all again.
pub(crate) fn upgrade(sh: &Shared, from: u32) -> Result<()> {
    let cs = sh.g.chunk_size();
    let end = sh.file_end();
    let mut c = sh.g.chunks_off;
    let mut slack = 0u64;
    while c < end {
        let run = sh.w(c + K_RUN).load(Acquire);
        if run == 0 || run > (end - c) / cs {
            return Err(sh.corrupt(format!(
                "chunk {c:#x}: run of {run} chunks does not fit the file"
            )));
        }
        if sh.w(c + K_KIND).load(Acquire) == CK_LARGE {
            if from < 2 && sh.w(c + K_SERIAL).load(Acquire) == 0 {
                sh.w(c + K_SERIAL).store(new_serial(sh, c), Release);
            }
            slack += large_slack(sh, c, run);
        }
        c += run * cs;
    }
    sh.w(H_LARGE_SLACK).store(slack, Release);
    let word = sh.w(H_VERSION).load(Acquire);
    sh.w(H_VERSION)
        .store((word & !0xffff_ffff) | u64::from(UPGRADED_VERSION), Release);
    Ok(())
}
