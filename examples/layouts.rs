//! The cost of a matrix's layout: the same Cholesky factorisation in place (default options) of a
//! faer matrix, an ndarray array in Fortran order and one in C order (a row-major view, copied to
//! tiles by blocked transposes), in alternated rounds after a warm-up; best and median of each, and
//! each layout's ratio to faer's in the same round.
//!
//! Run: `cargo run --release --features ndarray --example layouts -- [n] [rounds]`.

use std::time::Instant;

use hetla::{Cholesky, matgen::random_spd};
use ndarray::{Array2, ShapeBuilder};

fn main() -> hetla::Result<()> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().unwrap_or(Ok(4096)).expect("n: a whole number");
    let rounds = args
        .next()
        .unwrap_or(Ok(7))
        .expect("rounds: a whole number");
    let a = random_spd(n, 1);
    let fortran = Array2::from_shape_fn((n, n).f(), |(i, j)| a[(i, j)]);
    let c_order = Array2::from_shape_fn((n, n), |(i, j)| a[(i, j)]);
    let options = Cholesky::new();
    let mut times = [vec![], vec![], vec![]];
    // Round 0 is the warm-up, not counted.
    for round in 0..=rounds {
        let mut m = a.clone();
        let started = Instant::now();
        options.factor_in_place(&mut m)?;
        let faer = started.elapsed().as_secs_f64();
        let mut f = fortran.clone();
        let started = Instant::now();
        options.factor_in_place(&mut f)?;
        let fortran_s = started.elapsed().as_secs_f64();
        let mut c = c_order.clone();
        let started = Instant::now();
        options.factor_in_place(&mut c)?;
        let c_s = started.elapsed().as_secs_f64();
        assert_eq!(
            c[[n - 1, n - 2]],
            m[(n - 1, n - 2)],
            "C order factors as faer does"
        );
        if round > 0 {
            for (list, t) in times.iter_mut().zip([faer, fortran_s, c_s]) {
                list.push(t);
            }
        }
    }
    let stats = |t: &[f64]| {
        let mut t = t.to_vec();
        t.sort_by(f64::total_cmp);
        (t[0], t[t.len() / 2])
    };
    let (faer_best, _) = stats(&times[0]);
    println!("n = {n}, {rounds} rounds after a warm-up; ratio = time / faer's time");
    for (name, t) in ["faer", "ndarray-f", "ndarray-c"].iter().zip(&times) {
        let (best, median) = stats(t);
        let per_round: Vec<f64> = t.iter().zip(&times[0]).map(|(x, f)| x / f).collect();
        let (ratio_best, ratio_median) = stats(&per_round);
        println!(
            "{name:10} best {best:.4} s  median {median:.4} s  best/faer's best {:.3}  per-round \
             ratio best {ratio_best:.3} median {ratio_median:.3}",
            best / faer_best,
        );
    }
    Ok(())
}
