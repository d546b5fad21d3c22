//! The `wire_values!` macro: a module of string constants plus `ALL` and `is_valid` for one enum-like field.

/// Declares a module holding the accepted string values of one wire field.
macro_rules! wire_values {
    (
        $(#[$meta:meta])*
        pub mod $name:ident {
            $( $(#[$cmeta:meta])* $konst:ident = $value:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub mod $name {
            $( $(#[$cmeta])* pub const $konst: &str = $value; )+

            /// Every value the contract defines, in contract order.
            pub const ALL: &[&str] = &[$($konst),+];

            /// Whether `value` is one of [`ALL`] (exact, case-sensitive match).
            pub fn is_valid(value: &str) -> bool {
                ALL.contains(&value)
            }
        }
    };
}
