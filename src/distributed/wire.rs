//! How tiles travel between ranks, in every precision: a tile is its entries in column-major order,
//! each as its real parts (one for a real type, two for a complex one, real then imaginary) in
//! MPI's datatype of the real type (`MPI_FLOAT` or `MPI_DOUBLE`), so a tile of `f32` or `c32` costs
//! 4 bytes a part, as it does in memory. A message that names its tile starts with three parts: the
//! matrix, the tile row and the tile column, whole numbers below 2^24 (exact in either real type).

use faer::{Mat, MatRef};
use hetla_factorizations::{MatrixId, TileRef};
use hetla_kernels::{Scalar, c32, c64};
use mpi::traits::Equivalence;

/// The largest tile index (and matrix id) a message can name: exact in `f32`.
const MAX_INDEX: usize = 1 << 24;

/// A scalar a distributed run computes in and sends (`f32`, `f64`, [`c32`], [`c64`]: sealed by
/// [`Scalar`], which no other type implements, and no other crate may implement `Wire` for these
/// types); see the module documentation for how its tiles travel.
pub trait Wire: Scalar {
    /// The real type its parts travel in.
    type Part: Equivalence + Copy + Default + Send + Sync + 'static;
    /// Parts per entry: 1 for a real type, 2 for a complex one.
    const PARTS: usize;
    /// Appends the entry's parts.
    fn put(self, out: &mut Vec<Self::Part>);
    /// The entry of `Self::PARTS` parts.
    fn take(parts: &[Self::Part]) -> Self;
    /// Appends the parts of a column's entries (a real column is copied whole).
    fn put_all(column: &[Self], out: &mut Vec<Self::Part>) {
        for &x in column {
            x.put(out);
        }
    }
    /// Fills `column` from its entries' parts (`column.len() * Self::PARTS` of them).
    fn take_all(parts: &[Self::Part], column: &mut [Self]) {
        for (x, p) in column.iter_mut().zip(parts.chunks_exact(Self::PARTS)) {
            *x = Self::take(p);
        }
    }
    /// A whole number below 2^24 as a part.
    fn index(i: usize) -> Self::Part;
    /// The whole number a part holds, if it holds one.
    fn as_index(p: Self::Part) -> Option<usize>;
}

macro_rules! real_wire {
    ($t:ty) => {
        impl Wire for $t {
            type Part = $t;
            const PARTS: usize = 1;
            fn put(self, out: &mut Vec<$t>) {
                out.push(self);
            }
            fn take(parts: &[$t]) -> Self {
                parts[0]
            }
            fn put_all(column: &[$t], out: &mut Vec<$t>) {
                out.extend_from_slice(column);
            }
            fn take_all(parts: &[$t], column: &mut [$t]) {
                column.copy_from_slice(parts);
            }
            fn index(i: usize) -> $t {
                i as $t
            }
            fn as_index(p: $t) -> Option<usize> {
                (p >= 0.0 && p < MAX_INDEX as $t && p.fract() == 0.0).then_some(p as usize)
            }
        }
    };
}

macro_rules! complex_wire {
    ($t:ty, $part:ty) => {
        impl Wire for $t {
            type Part = $part;
            const PARTS: usize = 2;
            fn put(self, out: &mut Vec<$part>) {
                out.push(self.re);
                out.push(self.im);
            }
            fn take(parts: &[$part]) -> Self {
                <$t>::new(parts[0], parts[1])
            }
            fn index(i: usize) -> $part {
                i as $part
            }
            fn as_index(p: $part) -> Option<usize> {
                <$part as Wire>::as_index(p)
            }
        }
    };
}

real_wire!(f32);
real_wire!(f64);
complex_wire!(c32, f32);
complex_wire!(c64, f64);

/// A tile's entries in column-major order, as parts.
pub(crate) fn parts_of<T: Wire>(m: MatRef<'_, T>) -> Vec<T::Part> {
    let mut out = Vec::with_capacity(m.nrows() * m.ncols() * T::PARTS);
    put_tile(m, &mut out);
    out
}

/// Appends the parts of `m`'s entries, column by column.
fn put_tile<T: Wire>(m: MatRef<'_, T>, out: &mut Vec<T::Part>) {
    for c in m.col_iter() {
        match c.try_as_col_major() {
            Some(c) => T::put_all(c.as_slice(), out),
            None => c.iter().for_each(|&x| x.put(out)),
        }
    }
}

/// The `rows x cols` tile of column-major `parts`, when they are that many.
pub(crate) fn tile_of<T: Wire>(rows: usize, cols: usize, parts: &[T::Part]) -> Option<Mat<T>> {
    (parts.len() == rows * cols * T::PARTS).then(|| {
        let mut m = Mat::zeros(rows, cols);
        if rows > 0 {
            for (c, column) in parts.chunks_exact(rows * T::PARTS).enumerate() {
                T::take_all(column, m.col_as_slice_mut(c));
            }
        }
        m
    })
}

/// A message carrying `tile`: its place, then its entries; `None` when an index is too large to
/// name.
pub(crate) fn message<T: Wire>(tile: TileRef, m: MatRef<'_, T>) -> Option<Vec<T::Part>> {
    let place = [tile.matrix.0 as usize, tile.row, tile.col];
    if place.iter().any(|&i| i >= MAX_INDEX) {
        return None;
    }
    let mut out = Vec::with_capacity(3 + m.nrows() * m.ncols() * T::PARTS);
    out.extend(place.map(T::index));
    put_tile(m, &mut out);
    Some(out)
}

/// The tile a message names and its entries' parts; `None` when it names none.
pub(crate) fn named<T: Wire>(data: &[T::Part]) -> Option<(TileRef, &[T::Part])> {
    let [matrix, row, col] = [data.first()?, data.get(1)?, data.get(2)?].map(|&p| T::as_index(p));
    let matrix = u8::try_from(matrix?).ok()?;
    Some((TileRef::new(MatrixId(matrix), row?, col?), &data[3..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Wire>() {
        let m = Mat::<T>::from_fn(3, 2, |i, j| T::from_parts(i as f64 + 0.5, j as f64 - 0.25));
        let tile = TileRef::new(MatrixId(2), 7, 3);
        let sent = message(tile, m.as_ref()).unwrap();
        assert_eq!(sent.len(), 3 + 6 * T::PARTS);
        let (named_tile, parts) = named::<T>(&sent).unwrap();
        assert_eq!(named_tile, tile);
        assert_eq!(tile_of::<T>(3, 2, parts).unwrap(), m);
        assert!(tile_of::<T>(2, 2, parts).is_none());
        assert_eq!(tile_of::<T>(3, 2, &parts_of(m.as_ref())).unwrap(), m);
        // A view whose columns are not contiguous (a transpose) travels as its copy would, and an
        // empty tile as nothing.
        let t = m.transpose();
        let (strided, copied) = (parts_of(t), parts_of(t.to_owned().as_ref()));
        assert_eq!(tile_of::<T>(2, 3, &strided), tile_of::<T>(2, 3, &copied));
        assert_eq!(tile_of::<T>(2, 3, &parts_of(t)).unwrap(), t.to_owned());
        assert_eq!(tile_of::<T>(0, 2, &[]).unwrap().ncols(), 2);
    }

    #[test]
    fn tiles_travel_whole_in_every_precision() {
        for precision in hetla_kernels::Precision::ALL {
            hetla_kernels::with_scalar!(precision, T => round_trip::<T>());
        }
        // A place that is not a whole number, or too large, names no tile.
        assert!(named::<f32>(&[0.5, 0.0, 0.0]).is_none());
        assert!(named::<f64>(&[0.0, 1.0]).is_none());
        let big = TileRef::new(MatrixId(0), MAX_INDEX, 0);
        assert!(message(big, Mat::<f32>::zeros(1, 1).as_ref()).is_none());
    }
}
