//! The registry of the kinds of objects a store holds: what the layers below them
//! (recovery, and in time the cleaner, the checker and repair) reach them through.

use crate::format::*;
use crate::shared::{Hooks, IntentHandler, INTENT_KINDS};

/// The hooks every store opened by this library carries.
pub(crate) static HOOKS: Hooks = Hooks {
    intents: intent_table(&[
        (I_SPLIT, crate::index::recover_split),
        (I_FSPLIT, crate::fixed::recover_split),
        (I_FMOVE, crate::fixed::recover_move),
    ]),
};

/// The table of intent handlers, by kind; a kind out of range or given twice fails the
/// build.
const fn intent_table(
    list: &[(u64, IntentHandler)],
) -> [Option<IntentHandler>; INTENT_KINDS as usize] {
    let mut t: [Option<IntentHandler>; INTENT_KINDS as usize] = [None; INTENT_KINDS as usize];
    let mut i = 0;
    while i < list.len() {
        let (k, h) = list[i];
        assert!(k > I_REDO && k < INTENT_KINDS, "intent kind out of range");
        assert!(t[k as usize].is_none(), "intent kind registered twice");
        t[k as usize] = Some(h);
        i += 1;
    }
    t
}
