//! The list of families: [`Family`], its names and [`Family::ALL`], generated from one line per
//! family. It knows nothing of what a family does (that is its [`Room`](super::Room), which the
//! compiler asks for when a line is added here), so that every layer can name a family.

/// The families, each `Variant "name"`: the enum, its names and [`Family::ALL`].
macro_rules! families {
    ($($(#[$doc:meta])* $variant:ident $name:literal,)*) => {
        /// A factorisation family: what a user asks hetla to factor (serialised, parsed and given
        /// on the command line by its name: "cholesky", "inverse", "lu", "qr", "ldlt").
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        #[non_exhaustive]
        pub enum Family {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl Family {
            /// Every family, in the order reports list them.
            pub const ALL: [Family; [$($name),*].len()] = [$(Family::$variant),*];

            /// Its name on the command line and in files ("cholesky", "lu").
            pub fn name(self) -> &'static str {
                match self {
                    $(Family::$variant => $name,)*
                }
            }
        }
    };
}

families! {
    /// Tiled Cholesky (n^3/3 flops).
    Cholesky "cholesky",
    /// Cholesky then the inverse from its factor (n^3 flops together).
    Inverse "inverse",
    /// LU with partial pivoting in block columns (2 n^3/3 flops).
    Lu "lu",
    /// Tiled Householder QR of an m x n matrix (4 n^3/3 flops when square).
    Qr "qr",
    /// Aasen's symmetric indefinite factorisation in blocks (n^3/3 flops).
    Ldlt "ldlt",
    /// The inverse of a lower triangular matrix (LAPACK's ?trtri; n^3/3 flops).
    Trtri "trtri",
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Family {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let s = s.to_ascii_lowercase();
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "unknown factorisation {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}
