//! What a long reader of an ordered map costs: the pages its snapshot keeps, against the
//! commits made while it lives, for commits of 1, 16 and 256 keys (docs/DESIGN.md,
//! "Long readers", quotes the table this prints with `--nocapture`).
//!
//! A reader's pin keeps every page that commits after its snapshot free: a map grows by
//! about the pages each commit copies (one path per key it writes), times the commits
//! made while the reader lives, and by nothing more. Once the reader ends, those pages
//! are reused: the same number of commits again grows the map by nothing (more than a
//! tenth). The test checks both, so the figures it prints are the figures of a bound
//! that holds.

use shoal::Store;

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

const KEYS: u64 = 100_000;

#[test]
fn a_long_reader_holds_the_pages_of_the_commits_it_outlives_and_no_more() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    println!("| keys per commit | commits while the reader lives | pages held | pages per commit | growth after it ends, same commits again |");
    println!("|---:|---:|---:|---:|---:|");
    let mut seed = 0x5eed_u64;
    for (n, &(per, commits)) in [
        (1u64, 100u64),
        (1, 1000),
        (1, 4000),
        (16, 100),
        (16, 1000),
        (256, 100),
    ]
    .iter()
    .enumerate()
    {
        let path = d.path().join(format!("g{n}.shoal"));
        let s = Store::open(&path).unwrap();
        let m = s.ordered_map("g").unwrap();
        {
            let mut w = m.write().unwrap();
            for i in 0..KEYS {
                w.put(format!("key{i:012}").as_bytes(), &[1; 50]).unwrap();
            }
            w.commit().unwrap();
        }
        let mut run = |commits: u64| {
            for _ in 0..commits {
                let mut w = m.write().unwrap();
                for _ in 0..per {
                    let i = rng(&mut seed) % KEYS;
                    w.put(format!("key{i:012}").as_bytes(), &[2; 50]).unwrap();
                }
                w.commit().unwrap();
            }
        };
        let bytes = || s.object_stats("g").unwrap().unwrap().index_bytes;
        // The same commits once without a reader: the free pages they leave are the
        // steady state's.
        run(commits);
        let base = bytes();
        let snap = m.snapshot().unwrap();
        run(commits);
        let held = bytes();
        assert_eq!(snap.len(), KEYS);
        drop(snap);
        run(commits);
        let after = bytes();
        let pages = (held - base) / 4096;
        let per_commit = pages as f64 / commits as f64;
        println!(
            "| {per} | {commits} | {pages} | {per_commit:.1} | {} pages |",
            (after - held) / 4096
        );
        // A commit of `per` keys copies at most `per` paths of a tree of 100 000 keys
        // (3 levels), and now and then a page of the free-page queue itself: what the
        // reader holds is bounded by that, per commit.
        assert!(
            pages <= commits * (per * 3 + 1),
            "{pages} pages held for {commits} commits of {per} keys"
        );
        assert!(
            pages >= commits / 2,
            "{pages} pages held for {commits} commits of {per} keys: did the pin hold?"
        );
        assert!(
            after - held <= held / 10,
            "after the reader ended, {commits} more commits grew the map from {held} to {after} bytes"
        );
        assert!(s.check().unwrap().is_ok());
        drop(m);
        drop(s);
        std::fs::remove_file(&path).unwrap();
    }
}
