//! Opening a store while another process grows it.
//!
//! What this proves: `Store::open` of an existing store never fails while another
//! process is growing the file. Two worker processes open and close the store in a loop
//! (each open reads and validates the header anew) while this process appends records
//! that each take a new chunk, so the file's size and the header's file end change all
//! the time. Every open must succeed, and the store must check clean afterwards.
//!
//! (An open that read the file's size before the header could see a file end beyond the
//! size it had just read, and reject a healthy store as "truncated".)

use shoal::{OpenMode, Options, Store};
use shoal_torture::harness::{env_u64, seed, Rig, Scratch};
use shoal_torture::value::{hot_key, make_value, Wid};
use std::time::Duration;

#[test]
fn open_while_another_process_grows_the_file() {
    let seed = seed();
    let dir = Scratch::new("open", seed);
    let rig = Rig::new(env!("CARGO_BIN_EXE_shoal-worker"), &dir.path, seed);
    let cs = 64 * 1024;
    let opts = Options {
        chunk_size: cs,
        lock_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let store = Store::open_with(&rig.store, &opts, OpenMode::CreateNew).unwrap();
    let map = store.map("t").unwrap();
    let me = Wid { slot: 9, gen: 0 };
    for i in 0..4 {
        let k = hot_key(i);
        map.put(k.as_bytes(), &make_value(&k, me, i + 1, 10))
            .unwrap();
    }
    let opens = env_u64("SHOAL_OPENS", 3000).to_string();
    let mut openers: Vec<_> = (0..2)
        .map(|i| {
            rig.spawn(
                "reopen",
                Wid { slot: i, gen: 0 },
                &["--ops", &opens, "--hot", "4"],
            )
        })
        .collect();
    // Each record needs a chunk of its own: every put grows the file by one chunk.
    let big = vec![0x5au8; (cs / 2 + 1000) as usize];
    let before = store.stats().unwrap().file_size;
    let budget = env_u64("SHOAL_GROWTH_CHUNKS", 1500);
    let mut i = 0;
    while i < budget
        && openers
            .iter_mut()
            .any(|w| w.child.try_wait().unwrap().is_none())
    {
        map.put(format!("g:{i}").as_bytes(), &big).unwrap();
        i += 1;
    }
    let bad = rig.wait_all(&mut openers, Duration::from_secs(120));
    assert!(
        bad.is_empty(),
        "seed {seed}: opening while the file grows failed:\n{}",
        bad.join("\n")
    );
    let grown = (store.stats().unwrap().file_size - before) / cs;
    // The opens did race with growth (each record needs a chunk; half of them is plenty).
    assert!(
        i > 0 && grown >= i / 2,
        "seed {seed}: the file grew by {grown} chunks for {i} records of a chunk each"
    );
    let report = store.check().unwrap();
    assert!(report.is_ok(), "seed {seed}: {report}");
    eprintln!(
        "seed {seed}: {opens} opens in each of 2 processes while the file grew by {grown} chunks"
    );
}
