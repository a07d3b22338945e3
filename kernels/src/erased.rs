//! The matrix types of a precision known at run time only: a device's copies and replicas take them
//! (see the `any` module for how they go in and out of typed ones).

use faer::{Mat, MatMut, MatRef, c32, c64};

/// A read-only tile view of any precision.
#[derive(Debug, Clone, Copy)]
pub enum AnyRef<'a> {
    /// `f32`.
    S(MatRef<'a, f32>),
    /// `f64`.
    D(MatRef<'a, f64>),
    /// Complex `f32`.
    C(MatRef<'a, c32>),
    /// Complex `f64`.
    Z(MatRef<'a, c64>),
}

/// A writable tile view of any precision.
#[derive(Debug)]
pub enum AnyMut<'a> {
    /// `f32`.
    S(MatMut<'a, f32>),
    /// `f64`.
    D(MatMut<'a, f64>),
    /// Complex `f32`.
    C(MatMut<'a, c32>),
    /// Complex `f64`.
    Z(MatMut<'a, c64>),
}

/// An owned matrix of any precision.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyMat {
    /// `f32`.
    S(Mat<f32>),
    /// `f64`.
    D(Mat<f64>),
    /// Complex `f32`.
    C(Mat<c32>),
    /// Complex `f64`.
    Z(Mat<c64>),
}
