//! The `wire_enum!` macro: closed enumerations whose wire spelling is written once.

/// Declares a closed enumeration whose wire spelling is written once, in the variant table: the
/// serde name (`#[serde(rename)]`, so JSON and the JSON Schema use it), [`as_str`](Decision::as_str)
/// and `ALL` (in table order) all come from the same `Variant = "wire"` line. Exported for the
/// domain crates (the caller imports `serde::{Deserialize, Serialize}` and depends on `schemars`).
#[macro_export]
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum $name { $( $(#[$vmeta])* #[serde(rename = $wire)] $variant, )* }

        impl $name {
            /// Every variant, in table order.
            pub const ALL: [$name; [$($wire),*].len()] = [ $( Self::$variant, )* ];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $wire, )* }
            }

            /// The variant spelled exactly `value` on the wire.
            pub fn from_wire(value: &str) -> Option<Self> {
                match value { $( $wire => Some(Self::$variant), )* _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// A compile-time check that a table of rows lists them in its enum's order (row `i`'s `key` is
/// the variant with discriminant `i`), so a `spec(self)` can index the table by the variant.
/// Exported for the domain crates' tables (actions, tracks, attacks).
#[macro_export]
macro_rules! rows_in_enum_order {
    ($table:ident . $key:ident, $msg:literal) => {
        const _: () = {
            let mut i = 0;
            while i < $table.len() {
                assert!($table[i].$key as usize == i, $msg);
                i += 1;
            }
        };
    };
}
