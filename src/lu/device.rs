//! LU's mixed solve refined on a GPU ([`Lu::solve_refined`] on a platform with a GPU whose budget
//! holds A in the working precision and the single factor): A is written into the GPU's memory
//! once; the single LU is made on the platform's workers as on the host path (the GPU among them,
//! with the run's tensor math), its L and U written to the GPU once and kept; each refinement step
//! runs there: the residual B - A X by one cuBLAS ?gemm on the resident A, the correction by two
//! ?trsm with the resident factor ([`SpanKernel::Solve`](hetla_kernels::elementwise::SpanKernel)),
//! the row interchanges applied on the host to the vectors, which alone cross (their precision
//! changes there). GMRES-IR's preconditioner is the factor widened on the host and written once,
//! when it first runs. A fallback frees A's copy and factors in double on the platform's workers.

use std::rc::Rc;

use faer::{Mat, MatMut, MatRef};
use hetla_kernels::elementwise::FactorKind;
use hetla_kernels::swap_rows;

use super::{Lu, Norms};
use crate::Result;
use crate::mixed::{LowFactor, Refinable, Refinement, System, mixed_solve, widened};
use crate::tiles::device::DeviceBuffer;

impl Lu {
    /// The mixed solve of `system` (A X = B) refined on GPU `gpu` (see the module documentation);
    /// `low` is A rounded.
    pub(super) fn refined_on_device<T: Refinable>(
        &self,
        gpu: usize,
        (a, norms): (MatRef<'_, T>, Norms),
        system: System<'_, T>,
        low: Mat<T::Low>,
    ) -> Result<(Mat<T>, Refinement)> {
        let b = system.b;
        let platform = self.resolve_platform()?;
        let device = platform.devices()[gpu].device.clone();
        let a_copy = std::cell::RefCell::new(Some(DeviceBuffer::from_host(&device, a)?));
        let factor_low = || {
            let factor = self.factor_checked(low, norms)?;
            if let Some(column) = factor.singular {
                return Ok(Err(super::zero_pivot::<T>(column)));
            }
            let resident = Rc::new(DeviceBuffer::from_host(&device, factor.storage())?);
            let factor = Rc::new(factor);
            let factor_low = factor.clone();
            let solve_low = move |r: MatRef<'_, T::Low>| {
                let mut r = r.to_owned();
                swap_rows(r.as_mut(), factor_low.pivots());
                resident.solve_host(FactorKind::Lu, r.as_ref())
            };
            let (device, wide) = (device.clone(), std::cell::OnceCell::new());
            let precondition = move |mut x: MatMut<'_, T>| {
                if wide.get().is_none() {
                    let widened = widened::<T>(factor.storage());
                    let _ = wide.set(DeviceBuffer::from_host(&device, widened.as_ref())?);
                }
                let wide = wide.get().expect("set above");
                swap_rows(x.as_mut(), factor.pivots());
                x.copy_from(wide.solve_host(FactorKind::Lu, x.as_ref())?);
                Ok(())
            };
            Ok(Ok(LowFactor {
                solve_low,
                precondition,
                shift: 0.0,
            }))
        };
        let residual = |x: MatRef<'_, T>, b: MatRef<'_, T>| match &*a_copy.borrow() {
            Some(a) => a.residual(x, b),
            None => unreachable!("A's copy is taken only by the fallback"),
        };
        let solve_full = || {
            // A's copy leaves the GPU's memory before the platform's run needs it.
            drop(a_copy.borrow_mut().take());
            self.factor_checked(a.to_owned(), norms)?.solve(b)
        };
        let (x, mut how) = mixed_solve(system, factor_low, residual, solve_full)?;
        how.device = Some(gpu);
        Ok((x, how))
    }
}
