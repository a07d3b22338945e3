//! Tables indexed by id newtypes.

/// Lets tables over a graph's tasks, or a run's workers or data handles (`Vec<T>`, `[T]`), be
/// indexed by the id newtype (a tuple struct over `usize`) directly.
#[doc(hidden)]
#[macro_export]
macro_rules! index_by {
    ($id:ty) => {
        impl<T> std::ops::Index<$id> for [T] {
            type Output = T;
            fn index(&self, id: $id) -> &T {
                &self[id.0]
            }
        }
        impl<T> std::ops::IndexMut<$id> for [T] {
            fn index_mut(&mut self, id: $id) -> &mut T {
                &mut self[id.0]
            }
        }
        impl<T> std::ops::Index<$id> for Vec<T> {
            type Output = T;
            fn index(&self, id: $id) -> &T {
                &self[id.0]
            }
        }
        impl<T> std::ops::IndexMut<$id> for Vec<T> {
            fn index_mut(&mut self, id: $id) -> &mut T {
                &mut self[id.0]
            }
        }
    };
}
