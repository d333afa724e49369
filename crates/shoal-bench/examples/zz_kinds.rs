// scratch (not committed): single gets, variable map vs fixed 16+16 map vs hashbrown, rounds alternating
use std::hint::black_box;
use std::time::Instant;
type HbMap = hashbrown::HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(10_000_000);
    let only_fixed = std::env::args().nth(2).is_some();
    let data = shoal_bench::Data::generate(n, 7);
    let path = format!("/dev/shm/zz-kinds-{}.shoal", std::process::id());
    let s = shoal::Store::create(&path).unwrap();
    let f = s.fixed_map("f", 16, 16).unwrap();
    let v = s.map("v").unwrap();
    let mut hb = HbMap::default();
    let t = Instant::now();
    for i in 0..n {
        f.put(data.key(i), data.val(i)).unwrap();
    }
    eprintln!(
        "fixed puts {:.2} M/s",
        n as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    if !only_fixed {
        for i in 0..n {
            v.put(data.key(i), data.val(i)).unwrap();
        }
        for i in 0..n {
            hb.insert(data.key(i).to_vec(), data.val(i).to_vec());
        }
    }
    let round = 500_000.min(n);
    let mut buf = Vec::new();
    let mut out = [0u8; 16];
    let (mut rv, mut rf, mut rh) = (vec![], vec![], vec![]);
    for r in 0..12 {
        let lo = (r * round) % (n - round + 1);
        let ord = &data.order[lo..lo + round];
        let t = Instant::now();
        let mut c = 0u64;
        for &i in ord {
            c += f.get_into(data.key(i as usize), &mut out).unwrap() as u64;
            black_box(&out);
        }
        assert_eq!(c as usize, round);
        rf.push(round as f64 / t.elapsed().as_secs_f64() / 1e6);
        if only_fixed {
            continue;
        }
        let t = Instant::now();
        let mut c = 0u64;
        for &i in ord {
            c += v.get_into(data.key(i as usize), &mut buf).unwrap() as u64;
            black_box(&buf);
        }
        assert_eq!(c as usize, round);
        rv.push(round as f64 / t.elapsed().as_secs_f64() / 1e6);
        let t = Instant::now();
        let mut c = 0u64;
        for &i in ord {
            if let Some(x) = hb.get(data.key(i as usize)) {
                buf.clear();
                buf.extend_from_slice(x);
                c += black_box(&*buf)[15] as u64 / 255 + 1;
            }
        }
        assert_eq!(c as usize, round);
        rh.push(round as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if v.is_empty() {
            0.0
        } else {
            v[v.len() / 2]
        }
    };
    println!(
        "M gets/s median: fixed {:.2} variable {:.2} hashbrown {:.2}",
        med(&mut rf),
        med(&mut rv),
        med(&mut rh)
    );
    drop(s);
    shoal::Store::destroy(&path).unwrap();
}
