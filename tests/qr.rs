//! Tiled QR: the graphs of both reduction trees run task by task in submission order (a valid order
//! of every graph) on the tile kernels, checked as LAPACK's dqrt01 checks a QR:
//! ||A - Q R||_1 / (m ||A||_1 eps) < 30 and ||I - Q^H Q||_1 / (m eps) < 30, with Q applied from
//! the tasks' own reflectors.

use std::collections::HashMap;

use faer::linalg::solvers::SolveLstsq;
use faer::{Mat, MatRef, Par};
use hetla::check::norm1;
use hetla::matgen::random_in as random;
use hetla::{Backend, Scalar, c32, c64};
use hetla_factorizations::{Op, QrTree, TaskGraph, TileRef, Tiling, qr, qr_t_slot};
use hetla_kernels::Stack;

type Tiles<T> = HashMap<(usize, usize), Mat<T>>;

fn split<T: Scalar>(a: MatRef<'_, T>, rows: &Tiling, cols: &Tiling) -> Tiles<T> {
    let mut tiles = HashMap::new();
    for i in 0..rows.row_tiles() {
        for j in 0..cols.col_tiles() {
            let (r, _) = rows.tile_shape(i, 0);
            let (_, c) = cols.tile_shape(0, j);
            tiles.insert(
                (i, j),
                a.submatrix(rows.offset(i), cols.offset(j), r, c).to_owned(),
            );
        }
    }
    tiles
}

fn join<T: Scalar>(tiles: &Tiles<T>, rows: &Tiling, cols: &Tiling) -> Mat<T> {
    let mut a = Mat::<T>::zeros(rows.rows(), cols.cols());
    for (&(i, j), t) in tiles {
        a.as_mut()
            .submatrix_mut(rows.offset(i), cols.offset(j), t.nrows(), t.ncols())
            .copy_from(t);
    }
    a
}

fn key(t: TileRef) -> (usize, usize) {
    (t.row, t.col)
}

fn stack(op: Op) -> Stack {
    match op {
        Op::Tsqrt | Op::Tsmqr => Stack::OnTile,
        _ => Stack::OnTriangle,
    }
}

/// Runs the graph's tasks in order on `tiles`; returns the T's by slot.
fn factor<T: Scalar>(
    backend: Backend,
    g: &TaskGraph,
    tiles: &mut Tiles<T>,
    ib: usize,
) -> HashMap<((usize, usize), bool), Mat<T>> {
    let mut ts = HashMap::new();
    let par = Par::rayon(2);
    for task in g.tasks() {
        let (slot_tile, pair) = qr_t_slot(task);
        let slot = (key(slot_tile), pair);
        let at = |n: usize| key(task.accesses[n].tile);
        match task.op {
            Op::Geqrt => {
                let a = tiles.get_mut(&at(0)).unwrap();
                let mut t = Mat::<T>::zeros(ib, a.nrows().min(a.ncols()));
                backend.qr_tile(a.as_mut(), t.as_mut(), par).unwrap();
                ts.insert(slot, t);
            }
            Op::Unmqr => {
                let mut c = tiles.remove(&at(1)).unwrap();
                backend
                    .qr_apply(
                        tiles[&at(0)].as_ref(),
                        ts[&slot].as_ref(),
                        c.as_mut(),
                        true,
                        par,
                    )
                    .unwrap();
                tiles.insert(at(1), c);
            }
            Op::Tsqrt | Op::Ttqrt => {
                let mut b = tiles.remove(&at(1)).unwrap();
                let r = tiles.get_mut(&at(0)).unwrap();
                let n = r.ncols();
                let mut t = Mat::<T>::zeros(ib, n);
                // The triangle is the top of its tile.
                let r = r.as_mut().subrows_mut(0, n);
                backend
                    .qr_stacked(r, b.as_mut(), stack(task.op), t.as_mut(), par)
                    .unwrap();
                tiles.insert(at(1), b);
                ts.insert(slot, t);
            }
            Op::Tsmqr | Op::Ttmqr => {
                let mut a1 = tiles.remove(&at(1)).unwrap();
                let mut a2 = tiles.remove(&at(2)).unwrap();
                let t = &ts[&slot];
                backend
                    .qr_stacked_apply(
                        tiles[&at(0)].as_ref(),
                        stack(task.op),
                        t.as_ref(),
                        (a1.as_mut().subrows_mut(0, t.ncols()), a2.as_mut()),
                        true,
                        par,
                    )
                    .unwrap();
                tiles.insert(at(1), a1);
                tiles.insert(at(2), a2);
            }
            other => panic!("{other:?} in a QR graph"),
        }
    }
    ts
}

/// X <- Q X, Q from the factored tiles: each factorisation's Q applied in reverse order to X's row
/// blocks (X tiled by rows as A, in one column block).
fn apply_q<T: Scalar>(
    backend: Backend,
    g: &TaskGraph,
    factored: &Tiles<T>,
    ts: &HashMap<((usize, usize), bool), Mat<T>>,
    x: &mut Tiles<T>,
) {
    for task in g.tasks().iter().rev() {
        let (slot_tile, pair) = qr_t_slot(task);
        let t = &ts[&(key(slot_tile), pair)];
        let at = |n: usize| key(task.accesses[n].tile);
        match task.op {
            Op::Geqrt => {
                let (i, k) = at(0);
                let xi = x.get_mut(&(i, 0)).unwrap();
                backend
                    .qr_apply(
                        factored[&(i, k)].as_ref(),
                        t.as_ref(),
                        xi.as_mut(),
                        false,
                        Par::Seq,
                    )
                    .unwrap();
            }
            Op::Tsqrt | Op::Ttqrt => {
                let ((p, _), (q, k)) = (at(0), at(1));
                let mut top = x.remove(&(p, 0)).unwrap();
                let mut bottom = x.remove(&(q, 0)).unwrap();
                backend
                    .qr_stacked_apply(
                        factored[&(q, k)].as_ref(),
                        stack(task.op),
                        t.as_ref(),
                        (top.as_mut().subrows_mut(0, t.ncols()), bottom.as_mut()),
                        false,
                        Par::Seq,
                    )
                    .unwrap();
                x.insert((p, 0), top);
                x.insert((q, 0), bottom);
            }
            _ => {}
        }
    }
}

fn case<T: Scalar>(backend: Backend, m: usize, n: usize, b: usize, ib: usize, tree: QrTree) {
    let a = random::<T>(m, n, (m * 3 + n * 5 + b) as u64);
    let tiling = Tiling::new(m, n, b).unwrap();
    let g = qr(&tiling, tree).unwrap();
    let mut tiles = split(a.as_ref(), &tiling, &tiling);
    let ts = factor(backend, &g, &mut tiles, ib);
    let f = join(&tiles, &tiling, &tiling);
    let k = m.min(n);
    let eps = T::PRECISION.epsilon();
    // R: the upper triangle of the first k rows; Q R through the reflectors.
    let r = Mat::from_fn(m, n, |i, j| {
        if i <= j && i < k {
            f[(i, j)]
        } else {
            T::from_f64(0.0)
        }
    });
    let one_col = Tiling::new(m, n, n.max(1)).unwrap();
    let mut x = split(r.as_ref(), &tiling, &one_col);
    apply_q(backend, &g, &tiles, &ts, &mut x);
    let mut qr_product = join(&x, &tiling, &one_col);
    qr_product -= &a;
    let ratio = norm1(qr_product.as_ref()) / (m as f64 * norm1(a.as_ref()) * eps);
    assert!(
        ratio < 30.0,
        "{} {m}x{n} tiles {b} ib {ib} {tree}: ||A - QR|| ratio {ratio}",
        T::PRECISION
    );
    // Q itself, from the identity: orthogonal.
    let identity = Tiling::new(m, m, m).unwrap();
    let mut q = split(Mat::<T>::identity(m, m).as_ref(), &tiling, &identity);
    apply_q(backend, &g, &tiles, &ts, &mut q);
    let q = join(&q, &tiling, &identity);
    let mut e = Mat::<T>::identity(m, m);
    faer::linalg::matmul::matmul_with_conj(
        e.as_mut(),
        faer::Accum::Add,
        q.transpose(),
        if T::PRECISION.is_complex() {
            faer::Conj::Yes
        } else {
            faer::Conj::No
        },
        q.as_ref(),
        faer::Conj::No,
        T::from_f64(-1.0),
        Par::Seq,
    );
    let ratio = norm1(e.as_ref()) / (m as f64 * eps);
    assert!(
        ratio < 30.0,
        "{} {m}x{n} {tree}: ||I - Q^H Q|| ratio {ratio}",
        T::PRECISION
    );
}

fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Faer];
    if Backend::OpenBlas.ensure_available().is_ok() {
        all.push(Backend::OpenBlas);
    }
    all
}

#[test]
fn the_graphs_of_both_trees_factor_square_tall_wide_and_ragged_matrices() {
    for backend in backends() {
        for tree in [QrTree::Flat, QrTree::Binary, QrTree::Domains(3)] {
            for (m, n, b, ib) in [
                (96, 96, 32, 8),
                (130, 50, 16, 5),
                (200, 24, 24, 24),
                (40, 90, 16, 4),
            ] {
                case::<f64>(backend, m, n, b, ib, tree);
                case::<c64>(backend, m, n, b, ib, tree);
                case::<f32>(backend, m, n, b, ib, tree);
                case::<c32>(backend, m, n, b, ib, tree);
            }
        }
    }
}

/// dqrt01 on the API: A = Q R with the thin Q, Q^H Q = I, Q^H A = [R; 0] through apply_qh.
fn api_case<T: Scalar>(backend: Backend, m: usize, n: usize, tile: usize, tree: QrTree) {
    let a = random::<T>(m, n, (m * 7 + n * 11 + tile) as u64);
    let f = hetla::Qr::new()
        .backend(backend)
        .tile(tile)
        .inner_block(4)
        .tree(tree)
        .factor(a.as_ref())
        .unwrap();
    let eps = T::PRECISION.epsilon();
    let k = m.min(n);
    let (q, r) = (f.thin_q().unwrap(), f.r());
    assert_eq!((q.nrows(), q.ncols(), r.nrows(), r.ncols()), (m, k, k, n));
    let mut d = &q * &r;
    d -= &a;
    let ratio = norm1(d.as_ref()) / (m as f64 * norm1(a.as_ref()) * eps);
    let what = format!("{} {m}x{n} tile {tile} {tree} {backend:?}", T::PRECISION);
    assert!(ratio < 30.0, "{what}: ||A - QR|| ratio {ratio}");
    let mut e = Mat::<T>::identity(k, k);
    e -= q.adjoint() * &q;
    let ratio = norm1(e.as_ref()) / (m as f64 * eps);
    assert!(ratio < 30.0, "{what}: ||I - Q^H Q|| ratio {ratio}");
    let qha = f.apply_qh(a.as_ref()).unwrap();
    let back = f.apply_q(qha.as_ref()).unwrap();
    let mut d = back.clone();
    d -= &a;
    let ratio = norm1(d.as_ref()) / (m as f64 * norm1(a.as_ref()) * eps);
    assert!(ratio < 30.0, "{what}: ||Q Q^H A - A|| ratio {ratio}");
    let below = 30.0 * m as f64 * eps * norm1(a.as_ref());
    for j in 0..n {
        for i in k.max(j + 1)..m {
            assert!(qha[(i, j)].abs_f64() < below, "{what}: Q^H A below R");
        }
    }
}

#[test]
fn qr_factors_through_the_runtime_in_every_precision_and_tree() {
    for backend in backends() {
        for tree in [QrTree::Flat, QrTree::Binary, QrTree::Domains(2)] {
            for (m, n, tile) in [(100, 100, 16), (150, 40, 16), (60, 90, 16), (33, 7, 64)] {
                api_case::<f64>(backend, m, n, tile, tree);
                api_case::<c64>(backend, m, n, tile, tree);
                api_case::<f32>(backend, m, n, tile, tree);
                api_case::<c32>(backend, m, n, tile, tree);
            }
        }
    }
}

#[test]
fn least_squares_match_faers_on_well_conditioned_problems() {
    for tree in [QrTree::Flat, QrTree::Binary, QrTree::Domains(4)] {
        let (m, n, k) = (300, 40, 3);
        let a = random::<f64>(m, n, 5);
        let b = random::<f64>(m, k, 6);
        let x = hetla::Qr::new()
            .tile(32)
            .tree(tree)
            .factor(a.as_ref())
            .unwrap()
            .solve_least_squares(b.as_ref())
            .unwrap();
        let reference = a.as_ref().qr().solve_lstsq(b.as_ref());
        let mut d = x.clone();
        d -= &reference;
        let rel = d.norm_max() / reference.norm_max();
        assert!(rel < 1e-10, "{tree}: relative difference {rel}");
        // hetla::lstsq, in any Matrix kind.
        let y = hetla::lstsq(a.as_ref(), b.as_ref()).unwrap();
        assert!((&y - &reference).norm_max() / reference.norm_max() < 1e-10);
    }
    let a = random::<c64>(120, 30, 8);
    let b = random::<c64>(120, 2, 9);
    let x = hetla::lstsq(a.as_ref(), b.as_ref()).unwrap();
    let reference = a.as_ref().qr().solve_lstsq(b.as_ref());
    let rel = (&x - &reference).norm_max() / reference.norm_max();
    assert!(rel < 1e-10, "c64: relative difference {rel}");
}

#[test]
fn least_squares_refuse_rank_deficient_underdetermined_and_bad_inputs() {
    use hetla::Error;
    // A zero column: R's diagonal is exactly zero there.
    let mut a = random::<f64>(50, 6, 3);
    for i in 0..50 {
        a[(i, 4)] = 0.0;
    }
    let b = random::<f64>(50, 1, 4);
    let f = hetla::Qr::new().tile(16).factor(a.as_ref()).unwrap();
    let err = f.solve_least_squares(b.as_ref()).unwrap_err();
    assert!(matches!(err, Error::RankDeficient { column: 4 }), "{err}");
    assert!(err.to_string().contains("info = 5"), "{err}");
    let wide = random::<f64>(4, 9, 1);
    let err = hetla::lstsq(wide.as_ref(), random::<f64>(4, 1, 2).as_ref()).unwrap_err();
    assert!(
        matches!(err, Error::Underdetermined { rows: 4, cols: 9 }),
        "{err}"
    );
    let err = f.apply_qh(random::<f64>(49, 1, 2).as_ref()).unwrap_err();
    assert!(
        err.to_string().contains("B has 49 rows, expected 50"),
        "{err}"
    );
    let mut nan = random::<f64>(20, 3, 1);
    nan[(7, 2)] = f64::NAN;
    let err = hetla::Qr::new().factor(nan.as_ref()).unwrap_err();
    assert!(
        matches!(err, Error::NonFinite { row: 7, col: 2, .. }),
        "{err}"
    );
    let err = hetla::Qr::new()
        .tile(0)
        .factor(random::<f64>(5, 5, 1).as_ref())
        .unwrap_err();
    assert!(matches!(err, Error::ZeroTileSize), "{err}");
    let err = hetla::Qr::new()
        .inner_block(0)
        .tile(2)
        .factor(random::<f64>(5, 5, 1).as_ref())
        .unwrap_err();
    assert!(err.to_string().contains("inner block"), "{err}");
}

/// A tall m x n matrix of 2-norm condition number `cond`: Q1 diag(sigma) Q2 with sigma geometric
/// from 1 to 1/cond, Q1 and Q2 from Householder QRs of random matrices.
fn conditioned<T: Scalar>(m: usize, n: usize, cond: f64, seed: u64) -> Mat<T> {
    let q1 = hetla::Qr::new()
        .factor(random::<T>(m, n, seed).as_ref())
        .unwrap()
        .thin_q()
        .unwrap();
    let q2 = hetla::Qr::new()
        .factor(random::<T>(n, n, seed + 1).as_ref())
        .unwrap()
        .thin_q()
        .unwrap();
    let sigma = Mat::from_fn(n, n, |i, j| {
        if i == j {
            T::from_f64(cond.powf(-(i as f64) / (n - 1).max(1) as f64))
        } else {
            T::from_f64(0.0)
        }
    });
    &q1 * &sigma * q2.adjoint()
}

fn cholesky_qr_case<T: Scalar>(m: usize, n: usize, cond: f64) -> hetla::CholeskyQrPath {
    let a = conditioned::<T>(m, n, cond, (m + n) as u64);
    let f = hetla::CholeskyQr::new().factor(a.as_ref()).unwrap();
    let eps = T::PRECISION.epsilon();
    let q = f.thin_q().unwrap();
    let mut d = &q * f.r();
    d -= &a;
    let ratio = norm1(d.as_ref()) / (m as f64 * norm1(a.as_ref()) * eps);
    let what = format!("{} {m}x{n} cond {cond:e} {:?}", T::PRECISION, f.path());
    assert!(ratio < 30.0, "{what}: ||A - QR|| ratio {ratio}");
    let mut e = Mat::<T>::identity(n, n);
    e -= q.adjoint() * &q;
    let ratio = norm1(e.as_ref()) / (m as f64 * eps);
    assert!(ratio < 30.0, "{what}: ||I - Q^H Q|| ratio {ratio}");
    for j in 0..n {
        for i in j + 1..n {
            assert_eq!(f.r()[(i, j)], T::from_f64(0.0), "{what}: R not upper");
        }
    }
    f.path().clone()
}

#[test]
fn cholesky_qr2_passes_dqrt01_or_falls_back_to_householder() {
    use hetla::CholeskyQrPath::{CholeskyQr2, Householder};
    for (m, n) in [(2000, 50), (300, 300), (1000, 1)] {
        assert_eq!(cholesky_qr_case::<f64>(m, n, 10.0), CholeskyQr2);
        assert_eq!(cholesky_qr_case::<c64>(m, n, 10.0), CholeskyQr2);
        assert_eq!(cholesky_qr_case::<f32>(m, n, 10.0), CholeskyQr2);
        assert_eq!(cholesky_qr_case::<c32>(m, n, 10.0), CholeskyQr2);
    }
    // cond 1e7 < 1/sqrt(eps) in double: two passes suffice.
    assert_eq!(cholesky_qr_case::<f64>(2000, 50, 1e7), CholeskyQr2);
    assert_eq!(cholesky_qr_case::<c64>(2000, 50, 1e7), CholeskyQr2);
    // Far beyond it (and beyond 1/sqrt(eps) in single): the Gram matrix is not numerically
    // positive definite and Householder QR takes over, still within the thresholds.
    assert!(matches!(
        cholesky_qr_case::<f64>(2000, 50, 1e15),
        Householder { pass: 1, .. }
    ));
    assert!(matches!(
        cholesky_qr_case::<f32>(2000, 50, 1e6),
        Householder { .. }
    ));
    // Least squares through it equal Householder's.
    let a = random::<f64>(500, 20, 3);
    let b = random::<f64>(500, 2, 4);
    let x = hetla::CholeskyQr::new()
        .factor(a.as_ref())
        .unwrap()
        .solve_least_squares(b.as_ref())
        .unwrap();
    let y = hetla::lstsq(a.as_ref(), b.as_ref()).unwrap();
    assert!((&x - &y).norm_max() / y.norm_max() < 1e-10);
    let err = hetla::CholeskyQr::new()
        .factor(random::<f64>(3, 5, 1).as_ref())
        .unwrap_err();
    assert!(matches!(err, hetla::Error::Underdetermined { .. }), "{err}");
}

#[test]
fn least_squares_equal_lapack_dgels_on_well_conditioned_problems() {
    if Backend::OpenBlas.ensure_available().is_err() {
        eprintln!("skipped: built without the openblas feature (LAPACK ?gels is the reference)");
        return;
    }
    fn case<T: Scalar>(m: usize, n: usize, k: usize, tree: QrTree) {
        let a = random::<T>(m, n, 21);
        let b = random::<T>(m, k, 22);
        let x = hetla::Qr::new()
            .tile(32)
            .tree(tree)
            .solve_least_squares(a.as_ref(), b.as_ref())
            .unwrap();
        let (mut f, mut c) = (a.clone(), b.clone());
        let info = Backend::OpenBlas
            .library_lstsq(f.as_mut(), c.as_mut(), Par::Seq)
            .unwrap();
        assert_eq!(info, None);
        let reference = c.as_ref().subrows(0, n).to_owned();
        let mut d = x.clone();
        d -= &reference;
        let rel = norm1(d.as_ref()) / norm1(reference.as_ref());
        // Both in the type's precision: 1e-10 in double, its single counterpart in single.
        let tolerance = if T::PRECISION.epsilon() < 1e-10 {
            1e-10
        } else {
            1e-4
        };
        assert!(
            rel < tolerance,
            "{} {tree}: relative difference {rel}",
            T::PRECISION
        );
    }
    for tree in [QrTree::Flat, QrTree::Binary] {
        case::<f64>(400, 60, 5, tree);
        case::<c64>(400, 60, 5, tree);
        case::<f32>(400, 60, 5, tree);
        case::<c32>(400, 60, 5, tree);
    }
}

/// pinv(A) B by faer's SVD, singular values below `rcond` times the largest dropped.
fn pinv_solve<T: Scalar>(a: MatRef<'_, T>, b: MatRef<'_, T>, rcond: f64) -> Mat<T> {
    let svd = a.thin_svd().unwrap();
    let (u, s, v) = (svd.U(), svd.S(), svd.V());
    let largest = s.column_vector()[0].abs_f64();
    let mut c = u.adjoint() * b;
    for i in 0..c.nrows() {
        let si = s.column_vector()[i].abs_f64();
        let scale = T::from_f64(if si > rcond * largest { 1.0 / si } else { 0.0 });
        for j in 0..c.ncols() {
            c[(i, j)] *= scale;
        }
    }
    v * c
}

/// A random m x n matrix of rank r (the product of an m x r and an r x n one).
fn low_rank<T: Scalar>(m: usize, n: usize, r: usize, seed: u64) -> Mat<T> {
    random::<T>(m, r, seed) * random::<T>(r, n, seed + 1)
}

fn rank_revealing_case<T: Scalar>(tolerance: f64) {
    // Rank 3 in 40 x 10, a wide 6 x 15 of full row rank, a wide rank-2 one, full rank 30 x 8, rank
    // 20 in 60 x 30 (tall and doubtful: the tiled QR first, then its R pivoted).
    let rcond = T::PRECISION.epsilon().sqrt() * 1e-2;
    for (a, rank) in [
        (low_rank::<T>(40, 10, 3, 1), 3),
        (random::<T>(6, 15, 3), 6),
        (low_rank::<T>(6, 15, 2, 4), 2),
        (random::<T>(30, 8, 6), 8),
        (low_rank::<T>(60, 30, 20, 8), 20),
    ] {
        let b = random::<T>(a.nrows(), 2, 7);
        let (x, r) = hetla::lstsq_rank(a.as_ref(), b.as_ref(), Some(rcond)).unwrap();
        let what = format!("{} {} x {} rank {rank}", T::PRECISION, a.nrows(), a.ncols());
        assert_eq!(r, rank, "{what}");
        let reference = pinv_solve(a.as_ref(), b.as_ref(), rcond);
        let error = hetla::check::relative_error(x.as_ref(), reference.as_ref());
        assert!(error < tolerance, "{what}: {error}");
    }
    // The pivoted factors: A P = Q R with R's diagonal real (LAPACK's convention, so that it is
    // the QR of A P) and |R_ii| non-increasing, Q orthonormal.
    let a = low_rank::<T>(12, 9, 9, 9);
    for full in [false, true] {
        let f = hetla::PivotedQr::factor(a.as_ref(), full).unwrap();
        let ap = Mat::from_fn(12, 9, |i, j| a[(i, f.perm()[j])]);
        let qr = f.q() * f.r();
        let error = hetla::check::relative_error(qr.as_ref(), ap.as_ref());
        assert!(error < tolerance, "{} Q R - A P: {error}", T::PRECISION);
        let d: Vec<f64> = (0..9).map(|i| f.r()[(i, i)].abs_f64()).collect();
        assert!(d.windows(2).all(|w| w[0] >= w[1]), "{d:?}");
        for i in 0..9 {
            assert_eq!(
                f.r()[(i, i)].to_c64().im,
                0.0,
                "{} R[{i}, {i}]",
                T::PRECISION
            );
        }
        let unpivoted = hetla::Qr::new().factor(ap.as_ref()).unwrap();
        let error = hetla::check::relative_error(f.r().subrows(0, 9), unpivoted.r().as_ref());
        assert!(
            error < tolerance,
            "{} R against Qr's: {error}",
            T::PRECISION
        );
        assert_eq!(f.q().ncols(), if full { 12 } else { 9 });
    }
}

#[test]
fn rank_revealing_least_squares_gives_the_minimum_norm_solution_of_any_shape_and_rank() {
    rank_revealing_case::<f64>(1e-9);
    rank_revealing_case::<c64>(1e-9);
    rank_revealing_case::<f32>(2e-2);
    rank_revealing_case::<c32>(2e-2);
    // Empty and non-finite input.
    let (x, r) = hetla::lstsq_rank(
        faer::Mat::<f64>::zeros(0, 3).as_ref(),
        faer::Mat::<f64>::zeros(0, 1).as_ref(),
        None,
    )
    .unwrap();
    assert_eq!((x.nrows(), x.ncols(), r), (3, 1, 0));
    let mut bad = hetla::matgen::random_in::<f64>(5, 3, 1);
    bad[(1, 1)] = f64::INFINITY;
    assert!(hetla::lstsq_rank(bad.as_ref(), faer::Mat::<f64>::zeros(5, 1).as_ref(), None).is_err());
}

#[test]
fn in_place_products_with_q_take_any_matrix_view_and_both_factors_name_their_thin_q_alike() {
    let a = hetla::matgen::random_in::<f64>(60, 20, 8);
    let f = hetla::Qr::new().tile(16).factor(a.as_ref()).unwrap();
    let b = hetla::matgen::random_in::<f64>(60, 3, 9);
    let expected = f.apply_qh(b.as_ref()).unwrap();
    // B stored row-major (a transposed view): the same product, written back into it.
    let mut stored = b.transpose().to_owned();
    f.apply_qh_in_place(stored.as_mut().transpose_mut())
        .unwrap();
    assert!((stored.transpose().to_owned() - &expected).norm_max() < 1e-12);
    let mut back = expected.clone();
    f.apply_q_in_place(&mut back).unwrap();
    assert!((back - &b).norm_max() < 1e-12);
    // thin_q on both QR factors: Q^H Q = I, Q R = A.
    let q = f.thin_q().unwrap();
    let c = hetla::CholeskyQr::new().factor(a.as_ref()).unwrap();
    let qc = c.thin_q().unwrap();
    for q in [&q, &qc] {
        assert!((q.adjoint() * q - faer::Mat::<f64>::identity(20, 20)).norm_max() < 1e-12);
    }
    assert!((&qc * c.r() - &a).norm_max() < 1e-10);
}

#[test]
fn the_thin_q_formed_from_the_identity_is_q_applied_to_it_for_every_shape_and_tree() {
    for tree in [hetla::QrTree::Flat, hetla::QrTree::Binary] {
        for (m, n, tile) in [
            (70, 30, 16),
            (30, 70, 16),
            (53, 53, 8),
            (100, 7, 32),
            (9, 40, 4),
        ] {
            let a = hetla::matgen::random_in::<hetla::c64>(m, n, (m + n) as u64);
            let f = hetla::Qr::new()
                .tile(tile)
                .tree(tree)
                .factor(a.as_ref())
                .unwrap();
            let k = m.min(n);
            let q = f.thin_q().unwrap();
            let applied = f
                .apply_q(faer::Mat::<hetla::c64>::identity(m, k).as_ref())
                .unwrap();
            let error = hetla::check::relative_error(q.as_ref(), applied.as_ref());
            assert!(error < 1e-13, "{m} x {n} tile {tile} {tree:?}: {error}");
            // Into the caller's memory: a block of a bigger matrix, whatever it held.
            let mut big = faer::Mat::<hetla::c64>::from_fn(m + 3, k + 2, |i, j| {
                hetla::c64::new(i as f64, j as f64)
            });
            f.q_into(big.as_mut().submatrix_mut(2, 1, m, k)).unwrap();
            let into = big.as_ref().submatrix(2, 1, m, k);
            assert!(hetla::check::relative_error(into, q.as_ref()) < 1e-15);
            assert_eq!(big[(0, 0)], hetla::c64::new(0.0, 0.0));
            assert_eq!(
                big[(m + 2, k + 1)],
                hetla::c64::new((m + 2) as f64, (k + 1) as f64)
            );
            let mut wide = faer::Mat::<hetla::c64>::zeros(m, m + 1);
            assert!(f.q_into(&mut wide).is_err(), "more columns than Q has");
            let full = f.full_q().unwrap();
            let applied = f
                .apply_q(faer::Mat::<hetla::c64>::identity(m, m).as_ref())
                .unwrap();
            let error = hetla::check::relative_error(full.as_ref(), applied.as_ref());
            assert!(
                error < 1e-13,
                "full Q, {m} x {n} tile {tile} {tree:?}: {error}"
            );
        }
    }
}

/// `hetla::lstsq` on A with two equal columns (n = 12, m = 200) in `T`: refused naming the later
/// column (R's entry there is rounding, |r_kk| / |r_11| ~ eps), where the plain solve gave a
/// solution of norm 1e13; `lstsq_rank` solves it with rank n - 1; a graded A (condition ~1e5, ~1e2
/// in single precision) beside it still solves.
fn rank_deficiency_is_refused_in<T: Scalar>() {
    use hetla::Error;
    let (m, n) = (200, 12);
    let mut a = random::<T>(m, n, 21);
    for i in 0..m {
        a[(i, 7)] = a[(i, 3)];
    }
    let b = random::<T>(m, 1, 22);
    let err = hetla::lstsq(a.as_ref(), b.as_ref()).unwrap_err();
    assert!(
        matches!(err, Error::RankDeficient { column: 7 }),
        "{}: {err}",
        T::PRECISION.letter()
    );
    // At the same cutoff, max(m, n) eps (at eps alone a rounding residue may count as rank).
    let cutoff = Some(m as f64 * T::PRECISION.epsilon());
    let (x, rank) = hetla::lstsq_rank(a.as_ref(), b.as_ref(), cutoff).unwrap();
    assert_eq!(rank, n - 1, "{}", T::PRECISION.letter());
    let largest = (0..n).map(|i| x[(i, 0)].abs_f64()).fold(0.0, f64::max);
    assert!(largest < 1e3, "{}: |x| {largest}", T::PRECISION.letter());
    // Graded columns (scales 1 to 1e-5, 1e-2 in single precision): within the cutoff, solved.
    let decades = if T::PRECISION.epsilon() > 1e-10 {
        2.0
    } else {
        5.0
    };
    let other = random::<T>(m, 1, 23);
    let graded = Mat::from_fn(m, n, |i, j| {
        let column = if j == 7 { other[(i, 0)] } else { a[(i, j)] };
        column * T::from_f64(10f64.powf(-decades * j as f64 / (n - 1) as f64))
    });
    assert!(
        hetla::lstsq(graded.as_ref(), b.as_ref()).is_ok(),
        "{}",
        T::PRECISION.letter()
    );
}

#[test]
fn least_squares_refuse_a_numerically_rank_deficient_a_in_every_precision() {
    rank_deficiency_is_refused_in::<f32>();
    rank_deficiency_is_refused_in::<f64>();
    rank_deficiency_is_refused_in::<c32>();
    rank_deficiency_is_refused_in::<c64>();
}

/// dqrt01's ratios of a QR given as Q (m x c, c = m or min(m, n)) and the factored matrix (R on and
/// above its diagonal): ||A - Q R||_1 / (m ||A||_1 eps) and ||I - Q^H Q||_1 / (m eps).
fn qr_ratios<T: Scalar>(a: &Mat<T>, q: &Mat<T>, factored: &Mat<T>) -> (f64, f64) {
    let (m, n) = (a.nrows(), a.ncols());
    let eps = T::PRECISION.epsilon();
    let r = Mat::from_fn(q.ncols(), n, |i, j| {
        if i <= j && i < factored.nrows() {
            factored[(i, j)]
        } else {
            T::from_f64(0.0)
        }
    });
    let scale = norm1(a.as_ref()).max(f64::MIN_POSITIVE);
    let factor = norm1((a - q * &r).as_ref()) / (m.max(1) as f64 * scale * eps);
    let orthogonality =
        norm1((Mat::<T>::identity(q.ncols(), q.ncols()) - q.adjoint() * q).as_ref())
            / (m.max(1) as f64 * eps);
    (factor, orthogonality)
}

/// dqrt01's two ratios of A's QR (Q and the factored matrix or R), each below 30.
fn assert_qr<T: Scalar>(what: &str, full: bool, a: &Mat<T>, q: &Mat<T>, factored: &Mat<T>) {
    let (factor, orthogonality) = qr_ratios(a, q, factored);
    assert!(factor < 30.0, "{what} full {full}: A - Q R {factor}");
    assert!(
        orthogonality < 30.0,
        "{what} full {full}: I - Q^H Q {orthogonality}"
    );
}

/// A batch of mixed shapes factored in place one matrix per core gives the R of a QR of its own
/// (the whole matrix one tile there too), its Q full and thin passes dqrt01, and a NaN member is
/// refused at its place while the others are done; the least-squares batch gives each problem's
/// `lstsq_rank` solution and rank, of any shape and rank.
fn qr_batch_case<T: Scalar>(tolerance: f64) {
    let shapes = [
        (24, 24),
        (40, 17),
        (9, 30),
        (0, 0),
        (64, 64),
        (1, 1),
        (5, 0),
        (70, 33),
    ];
    let mut originals: Vec<Mat<T>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(m, n))| random::<T>(m, n, 40 + i as u64))
        .collect();
    let mut nan = random::<T>(10, 6, 60);
    nan[(3, 4)] = T::from_f64(f64::NAN);
    originals.push(nan);
    let mut factored = originals.clone();
    let mut views: Vec<_> = factored.iter_mut().map(|a| a.as_mut()).collect();
    let qr = hetla::Qr::new();
    let t = qr.factor_batch_in_place(&mut views).unwrap();
    assert!(
        matches!(t[shapes.len()], Err(hetla::Error::NonFinite { .. })),
        "{:?}",
        t[shapes.len()]
    );
    let what = |i: usize| format!("{} {:?}", T::PRECISION, shapes[i]);
    let kept: Vec<usize> = (0..shapes.len()).collect();
    for full in [false, true] {
        let mut q: Vec<Mat<T>> = kept
            .iter()
            .map(|&i| {
                let (m, n) = shapes[i];
                Mat::from_fn(m, if full { m } else { m.min(n) }, |_, _| T::from_f64(7.0))
            })
            .collect();
        let h: Vec<_> = kept.iter().map(|&i| factored[i].as_ref()).collect();
        let ts: Vec<_> = kept
            .iter()
            .map(|&i| t[i].as_ref().unwrap().as_ref())
            .collect();
        let mut qs: Vec<_> = q.iter_mut().map(|q| q.as_mut()).collect();
        let done = qr.q_batch(&h, &ts, &mut qs).unwrap();
        assert!(qr.q_batch(&h, &ts[..1], &mut qs).is_err());
        for (slot, &i) in kept.iter().enumerate() {
            done[slot].as_ref().unwrap();
            assert_qr(&what(i), full, &originals[i], &q[slot], &factored[i]);
        }
        // A Q with more columns than rows is matrix 0's error; lengths that differ, the call's.
        let mut wide = [Mat::<T>::zeros(24, 25)];
        let mut views: Vec<_> = wide.iter_mut().map(|q| q.as_mut()).collect();
        assert!(qr.q_batch(&h[..1], &ts[..1], &mut views).unwrap()[0].is_err());
    }
    for &i in &kept {
        let (m, n) = shapes[i];
        if m.min(n) == 0 {
            continue;
        }
        let alone = hetla::Qr::new().factor(originals[i].as_ref()).unwrap().r();
        let r = Mat::from_fn(m.min(n), n, |r, c| {
            if r <= c {
                factored[i][(r, c)]
            } else {
                T::from_f64(0.0)
            }
        });
        let error = hetla::check::relative_error(r.as_ref(), alone.as_ref());
        assert!(error < tolerance, "{}: R against Qr's {error}", what(i));
    }

    // Q and R written out in one pass, from row-major inputs (as numpy's C order lies): R with
    // min(m, n) or m rows (zeros below), Q thin or full, the NaN member refused at its place.
    let transposed: Vec<Mat<T>> = originals.iter().map(|a| a.transpose().to_owned()).collect();
    let inputs: Vec<_> = transposed.iter().map(|a| a.transpose()).collect();
    for full in [false, true] {
        let sizes: Vec<(usize, usize, usize)> = originals
            .iter()
            .map(|a| {
                let (m, n) = (a.nrows(), a.ncols());
                (m, n, if full { m } else { m.min(n) })
            })
            .collect();
        let mut q: Vec<Mat<T>> = sizes
            .iter()
            .map(|&(m, _, c)| Mat::from_fn(m, c, |_, _| T::from_f64(7.0)))
            .collect();
        let mut r: Vec<Mat<T>> = sizes
            .iter()
            .map(|&(_, n, c)| Mat::from_fn(c, n, |_, _| T::from_f64(7.0)))
            .collect();
        let mut qs: Vec<_> = q.iter_mut().map(|q| q.as_mut()).collect();
        let mut rs: Vec<_> = r.iter_mut().map(|r| r.as_mut()).collect();
        let done = qr
            .factor_batch_into(&inputs, &mut rs, Some(&mut qs))
            .unwrap();
        assert!(matches!(
            done[shapes.len()],
            Err(hetla::Error::NonFinite { .. })
        ));
        for &i in &kept {
            done[i].as_ref().unwrap();
            assert_qr(&what(i), full, &originals[i], &q[i], &r[i]);
            for row in 0..r[i].nrows() {
                for col in 0..row.min(r[i].ncols()) {
                    assert!(r[i][(row, col)] == T::from_f64(0.0), "{}: R below", what(i));
                }
            }
        }
    }
    let mut short = [Mat::<T>::zeros(23, 24)];
    let mut views: Vec<_> = short.iter_mut().map(|r| r.as_mut()).collect();
    assert!(
        qr.factor_batch_into(&inputs[..1], &mut views, None)
            .unwrap()[0]
            .is_err()
    );

    // Least squares: the rank-revealing problems of `rank_revealing_case`, and a NaN.
    let rcond = T::PRECISION.epsilon().sqrt() * 1e-2;
    let mut problems = vec![
        (low_rank::<T>(40, 10, 3, 1), 3),
        (random::<T>(6, 15, 3), 6),
        (low_rank::<T>(6, 15, 2, 4), 2),
        (random::<T>(30, 8, 6), 8),
        (low_rank::<T>(60, 30, 20, 8), 20),
        (random::<T>(64, 64, 10), 64),
        (Mat::zeros(0, 4), 0),
    ];
    let mut bad = random::<T>(8, 3, 11);
    bad[(2, 1)] = T::from_f64(f64::INFINITY);
    problems.push((bad, 0));
    let b: Vec<Mat<T>> = problems
        .iter()
        .enumerate()
        .map(|(i, (a, _))| random::<T>(a.nrows(), 2, 20 + i as u64))
        .collect();
    let a: Vec<_> = problems.iter().map(|(a, _)| a.as_ref()).collect();
    let bs: Vec<_> = b.iter().map(|b| b.as_ref()).collect();
    let solved = qr.lstsq_rank_batch(&a, &bs, Some(rcond)).unwrap();
    for (i, (a, rank)) in problems.iter().enumerate().take(problems.len() - 1) {
        let what = format!("{} {} x {} rank {rank}", T::PRECISION, a.nrows(), a.ncols());
        let (x, r) = solved[i].as_ref().unwrap();
        assert_eq!(*r, *rank, "{what}");
        let (alone, _) = hetla::lstsq_rank(a.as_ref(), b[i].as_ref(), Some(rcond)).unwrap();
        let error = hetla::check::relative_error(x.as_ref(), alone.as_ref());
        assert!(error < tolerance, "{what}: against lstsq_rank {error}");
    }
    assert!(
        matches!(solved.last(), Some(Err(hetla::Error::NonFinite { .. }))),
        "{:?}",
        solved.last()
    );
    assert!(qr.lstsq_rank_batch(&a, &bs[..1], None).is_err());
    // ?gelsd's: the ranks by the singular values (scipy's `s`, each against faer's SVD of the
    // matrix), each solution as `lstsq_svd` gives it alone, the NaN member refused at its place.
    let values = qr.lstsq_svd_batch(&a, &bs, Some(rcond)).unwrap();
    for (i, (m, rank)) in problems.iter().enumerate().take(problems.len() - 1) {
        let (x, r, got) = values[i].as_ref().unwrap();
        assert_eq!(
            *r,
            *rank,
            "{} matrix {i}: rank by singular values",
            T::PRECISION
        );
        let (alone, alone_rank, _) =
            hetla::lstsq_svd(m.as_ref(), b[i].as_ref(), Some(rcond)).unwrap();
        assert_eq!(alone_rank, *rank);
        let error = hetla::check::relative_error(x.as_ref(), alone.as_ref());
        assert!(
            error < tolerance,
            "{} matrix {i}: against lstsq_svd {error}",
            T::PRECISION
        );
        let alone = m.singular_values().unwrap();
        assert_eq!(got.len(), alone.len());
        for (x, y) in got.iter().zip(&alone) {
            let real = |v| <T as faer::traits::ComplexField>::from_real_impl(v).abs_f64();
            let (x, y) = (real(x), real(y));
            assert!(
                (x - y).abs() <= tolerance * y.abs().max(1.0),
                "{} matrix {i}: {x} against {y}",
                T::PRECISION
            );
        }
    }
    assert!(matches!(
        values.last(),
        Some(Err(hetla::Error::NonFinite { .. }))
    ));
}

#[test]
fn qr_and_least_squares_batches_solve_each_problem_as_alone_in_every_precision() {
    for precision in hetla::Precision::ALL {
        let tolerance = if precision.epsilon() > 1e-10 {
            2e-2
        } else {
            1e-9
        };
        hetla_kernels::with_scalar!(precision, T => qr_batch_case::<T>(tolerance));
    }
}
