//! The benchmark gate (`cargo bench --bench overhead -- gate`, CI's `bench-gate` workflow): the
//! change's binary (`DRACODE_BENCH_BIN`) against the base's (`DRACODE_BENCH_BASE_BIN`), run in
//! turn — A B A B … — so a machine that speeds up or slows down during the job moves both alike,
//! on the two figures users feel: a one-task run (21 pairs) and 1,000 one-turn tasks at
//! `--jobs 64` (5 pairs). Each figure is the median of the pairs' wall-time ratios; the gate
//! fails (exit 1) when either is above [`LIMIT`].

use super::scale::{Bench, LATENCY};
use super::{Measured, chat_server::ChatServer, replay_manifest, run_cmd, spawn_measure};
use std::path::Path;

/// The largest ratio (change / base) the gate lets through.
pub const LIMIT: f64 = 1.15;

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// `pairs` runs of `run` for the change and the base in turn: the median ratio, and each side's
/// median wall time.
fn paired(pairs: usize, new: &Path, base: &Path, mut run: impl FnMut(&Path) -> Measured) -> (f64, f64, f64) {
    let (mut ratios, mut news, mut bases) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..pairs {
        let a = run(new).wall.as_secs_f64();
        let b = run(base).wall.as_secs_f64();
        ratios.push(a / b);
        news.push(a);
        bases.push(b);
    }
    (median(ratios), median(news), median(bases))
}

/// Runs the gate; `false` when the change is more than [`LIMIT`] slower on either figure.
pub fn gate(new: &Path, base: &Path, root: &Path) -> bool {
    let one = replay_manifest(root, "gate-one", 1);
    for exe in [new, base] {
        spawn_measure(run_cmd(exe, &one, root));
    }
    let (one_ratio, one_new, one_base) = paired(21, new, base, |exe| spawn_measure(run_cmd(exe, &one, root)));
    let mut verdicts = vec![("one-task run", one_ratio, one_new, one_base)];
    let scale = |exe: &Path| {
        let bench = Bench::new(exe, root, &format!("gate-scale-{}", std::process::id()));
        let manifest = bench.manifest(1000);
        let server = ChatServer::start(LATENCY);
        bench.point_at(&server);
        let (run, ok) = bench.run(&manifest, 64);
        server.stop();
        let _ = std::fs::remove_dir_all(root.join(format!("gate-scale-{}", std::process::id())));
        assert_eq!(ok, 1000, "{}: {ok} of 1,000 tasks passed", exe.display());
        run
    };
    let (scale_ratio, scale_new, scale_base) = paired(5, new, base, scale);
    verdicts.push(("1,000 tasks at --jobs 64", scale_ratio, scale_new, scale_base));
    let mut pass = true;
    for (name, ratio, new_wall, base_wall) in verdicts {
        let ok = ratio <= LIMIT;
        pass &= ok;
        println!(
            "gate: {name}: {:.1} ms vs base {:.1} ms, ratio {ratio:.3} (limit {LIMIT}): {}",
            new_wall * 1e3,
            base_wall * 1e3,
            if ok { "pass" } else { "FAIL" }
        );
    }
    pass
}
