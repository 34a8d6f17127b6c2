//! `ls-json` owns how LedgerShield writes JSON on its hot path: every step reply, tool record,
//! grading report and memory snapshot.
//!
//! Two things live here:
//!
//! * [`to_writer`] / [`to_vec`] / [`append_to_string`]: a `serde::Serializer` that writes exactly what
//!   `serde_json::to_vec` writes (compact form, same number formatting through the same `itoa` and
//!   `zmij` crates, same escapes, non-finite floats as `null`), but tests strings for escapes 16
//!   bytes at a time and appends a clean one (with its quotes, comma and colon) in one step, and
//!   writes floats that are short decimals from their integer units. Profiles of a whole episode
//!   put a quarter of its instructions in `serde_json`'s byte-by-byte escape loop, which its
//!   `Formatter` trait cannot replace. The output contract is checked against `serde_json` by
//!   unit and property tests (`tests/parity.rs`). It appends only `&str` bytes and ASCII it wrote
//!   itself, so its output is UTF-8 by construction and is never re-validated (that check was
//!   ~2 % of an episode's instructions).
//! * [`RawJson`]: JSON text serialized once and shared by `Arc`, written verbatim into any later
//!   serialization, ours or `serde_json`'s (it speaks `serde_json`'s raw-value protocol, so
//!   `serde_json::to_string` and `serde_json::to_value` accept it too).
//!
//! Invariant: everything [`RawJson`] holds is the output of this serializer (or `null`), hence
//! valid JSON; nothing re-parses it to check.

mod ser;

pub use ser::{append_to_string, to_string, to_vec, to_writer, Error};

use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::sync::Arc;

/// The struct name `serde_json` (feature `raw_value`) reserves for raw JSON text: a struct of that
/// name with one field of that name, whose value is a string, is written verbatim.
pub(crate) const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// The most scratch capacity a thread keeps between values (a terminal report is ~25 KB).
const SCRATCH_KEEP_BYTES: usize = 256 * 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<String> = std::cell::RefCell::new(String::with_capacity(16 * 1024));
}

/// Pre-serialized JSON text shared by `Arc`: cloning is a reference-count increment, writing it
/// is one copy of its bytes.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson(Arc<str>);

impl RawJson {
    /// Serialize a value once. A value that cannot be serialized (a map with non-string keys, an
    /// error from a custom `Serialize`) becomes `null`; our report types never do that.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Self {
        Self::try_from_serialize(value).unwrap_or_else(|_| Self::null())
    }

    /// Serialize a value once, reporting why it cannot be serialized.
    pub fn try_from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, Error> {
        // Written into a per-thread scratch buffer, then copied once into an exactly sized `Arc`:
        // no growth reallocations per value. A `Serialize` impl that itself calls
        // `from_serialize` finds the buffer taken and uses a fresh one.
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                buf.clear();
                let raw = Self::from_buffer(&mut buf, value);
                if buf.capacity() > SCRATCH_KEEP_BYTES {
                    *buf = String::with_capacity(SCRATCH_KEEP_BYTES);
                }
                raw
            }
            Err(_) => Self::from_buffer(&mut String::new(), value),
        })
    }

    fn from_buffer<T: Serialize + ?Sized>(buf: &mut String, value: &T) -> Result<Self, Error> {
        append_to_string(buf, value)?;
        Ok(Self(Arc::from(buf.as_str())))
    }

    /// The JSON `null`.
    pub fn null() -> Self {
        Self(Arc::from("null"))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Raw(self.get()).serialize(s)
    }
}

/// Borrowed JSON text written verbatim (for views assembled from [`RawJson`] parts).
/// The caller guarantees the text is JSON.
#[derive(Clone, Copy, Debug)]
pub struct Raw<'a>(pub &'a str);

impl Serialize for Raw<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct(RAW_TOKEN, 1)?;
        st.serialize_field(RAW_TOKEN, self.0)?;
        st.end()
    }
}
