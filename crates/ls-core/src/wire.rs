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
