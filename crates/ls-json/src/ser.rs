//! The compact JSON serializer. Output contract: byte-identical to `serde_json::to_vec` for every
//! value `serde_json` can serialize, and an error wherever `serde_json` reports one (map keys that
//! are not strings, numbers, booleans or unit variants; non-finite float keys).

use crate::RAW_TOKEN;
use serde::ser::{self, Impossible, Serialize};
use std::fmt;

/// Why a value could not be written as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

fn key_must_be_a_string() -> Error {
    Error("key must be a string".to_owned())
}

/// Append the JSON of `value` to `out`. On error `out` may hold a partial value.
///
/// The serializer writes into a `String` (every piece it writes is a `&str`), so its output is
/// UTF-8 by construction and never re-validated; the bytes of `out` are reused when they are
/// UTF-8 (an empty buffer always is), and copied once otherwise.
pub fn to_writer<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    match String::from_utf8(std::mem::take(out)) {
        Ok(mut text) => {
            let written = append_to_string(&mut text, value);
            *out = text.into_bytes();
            written
        }
        Err(not_text) => {
            *out = not_text.into_bytes();
            let mut text = String::new();
            let written = append_to_string(&mut text, value);
            out.extend_from_slice(text.as_bytes());
            written
        }
    }
}

/// Append the JSON of `value` to `out`. On error `out` may hold a partial value (always at a
/// boundary between pieces, so still valid UTF-8).
pub fn append_to_string<T: Serialize + ?Sized>(out: &mut String, value: &T) -> Result<(), Error> {
    value.serialize(&mut Writer { out })
}

/// The JSON of `value` as bytes.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    to_string(value).map(String::into_bytes)
}

/// The JSON of `value` as a string.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let mut out = String::with_capacity(128);
    append_to_string(&mut out, value)?;
    Ok(out)
}

struct Writer<'a> {
    out: &'a mut String,
}

/// Per-byte escape class, as JSON (RFC 8259) and `serde_json` define it: `"` and `\` are
/// escaped, control characters get their short form where one exists and `\u00XX` otherwise;
/// everything else (DEL and non-ASCII included) is written as is.
const NO: u8 = 0;
const UU: u8 = b'u';
static ESCAPE: [u8; 256] = {
    let mut t = [NO; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = UU;
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0A] = b'n';
    t[0x0C] = b'f';
    t[0x0D] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Non-zero if any byte of the little-endian word needs escaping (a control character, `"` or
/// `\`). The test for "any" is exact (the classic has-less / has-zero bit tricks); which byte it
/// is gets settled byte by byte.
#[inline]
fn word_needs_escape(w: u64) -> u64 {
    let control = w.wrapping_sub(LO * 0x20) & !w;
    let q = w ^ (LO * u64::from(b'"'));
    let quote = q.wrapping_sub(LO) & !q;
    let b = w ^ (LO * u64::from(b'\\'));
    let backslash = b.wrapping_sub(LO) & !b;
    (control | quote | backslash) & HI
}

fn write_escape(out: &mut String, byte: u8, class: u8) {
    if class == UU {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push_str("\\u00");
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xF)]));
    } else {
        out.push('\\');
        out.push(char::from(class));
    }
}

#[inline]
fn load8(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("eight bytes"))
}

/// Whether any byte of `bytes` needs escaping. Most strings written are short keys and
/// identifiers: under 4 bytes by table, 4 to 7 as two overlapping halves of one word, 8 to 16
/// as one block of two overlapping words, longer strings 16 bytes at a time (SSE2 on x86-64,
/// two words elsewhere) with an overlapping last block.
#[inline]
fn needs_escape(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n > 16 {
        let mut i = 0;
        while i + 16 < n {
            if block_needs_escape_at(bytes, i) {
                return true;
            }
            i += 16;
        }
        block_needs_escape_at(bytes, n - 16)
    } else if n >= 8 {
        block_needs_escape(load8(bytes), load8(&bytes[n - 8..]))
    } else if n >= 4 {
        let (a, b) = (
            u32::from_le_bytes(bytes[..4].try_into().expect("four bytes")),
            u32::from_le_bytes(bytes[n - 4..].try_into().expect("four bytes")),
        );
        word_needs_escape(u64::from(a) | (u64::from(b) << 32)) != 0
    } else {
        bytes.iter().any(|&b| ESCAPE[usize::from(b)] != NO)
    }
}

/// Whether any of the 16 bytes at `bytes[at..at + 16]` needs escaping.
#[cfg(target_arch = "x86_64")]
#[inline]
fn block_needs_escape_at(bytes: &[u8], at: usize) -> bool {
    let block = &bytes[at..at + 16];
    // SAFETY: `block` is 16 readable bytes; SSE2 is part of the x86-64 baseline.
    unsafe { vector_needs_escape(std::arch::x86_64::_mm_loadu_si128(block.as_ptr().cast())) }
}

/// Whether any of the 16 bytes at `bytes[at..at + 16]` needs escaping.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn block_needs_escape_at(bytes: &[u8], at: usize) -> bool {
    block_needs_escape(load8(&bytes[at..]), load8(&bytes[at + 8..]))
}

/// Whether any of the 16 bytes of two little-endian words needs escaping.
#[cfg(target_arch = "x86_64")]
#[inline]
fn block_needs_escape(lo: u64, hi: u64) -> bool {
    // SAFETY: SSE2 is part of the x86-64 baseline.
    unsafe { vector_needs_escape(std::arch::x86_64::_mm_set_epi64x(hi as i64, lo as i64)) }
}

/// Whether any byte of a 16-byte vector is `"`, `\` or a control character.
#[cfg(target_arch = "x86_64")]
#[inline]
fn vector_needs_escape(v: std::arch::x86_64::__m128i) -> bool {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline, so these intrinsics are always available.
    unsafe {
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `byte <= 0x1F`: the unsigned max with 0x1F is 0x1F exactly then.
        let limit = _mm_set1_epi8(0x1F);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, limit), limit);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) != 0
    }
}

/// Whether any of the 16 bytes of two little-endian words needs escaping.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn block_needs_escape(lo: u64, hi: u64) -> bool {
    word_needs_escape(lo) | word_needs_escape(hi) != 0
}

/// Write `s` as a quoted, escaped JSON string.
#[inline]
pub(crate) fn write_str(out: &mut String, s: &str) {
    write_item(out, false, s, "");
}

/// An object member's or array element's string: an optional leading `,`, then `"s"` (escaped
/// where needed), then `tail` (empty or `:`).
///
/// Most strings need no escape (keys, identifiers, prose): they are appended in one step with
/// one capacity check, short ones copied as overlapping words instead of through `memcpy` (a
/// reply writes ~1,900 strings, most under 24 bytes).
#[inline]
fn write_item(out: &mut String, comma: bool, s: &str, tail: &'static str) {
    let bytes = s.as_bytes();
    if needs_escape(bytes) {
        if comma {
            out.push(',');
        }
        out.push('"');
        write_escaped(out, s);
        out.push('"');
        out.push_str(tail);
        return;
    }
    let (n, c, t) = (bytes.len(), usize::from(comma), tail.len());
    debug_assert!(t <= 1, "tails are empty or one byte");
    // SAFETY: what is appended is an ASCII comma (or nothing), the bytes of a `&str` between
    // ASCII quotes, and an ASCII tail, so the `String` stays UTF-8. `reserve` makes room for all
    // `c + n + 2 + t` bytes; every write below lands in `[len, len + c + n + 2 + t)` and
    // `set_len` then covers exactly them.
    unsafe {
        let v = out.as_mut_vec();
        v.reserve(n + 4);
        let len = v.len();
        let start = v.as_mut_ptr().add(len);
        *start = b',';
        let dst = start.add(c);
        *dst = b'"';
        copy_short(bytes.as_ptr(), dst.add(1), n);
        *dst.add(n + 1) = b'"';
        if t == 1 {
            *dst.add(n + 2) = tail.as_bytes()[0];
        }
        v.set_len(len + c + n + 2 + t);
    }
}

/// Append a short piece of text (a formatted number) without a `memcpy` call.
#[inline]
fn push_short(out: &mut String, piece: &str) {
    // SAFETY: the bytes of a `&str` are UTF-8.
    unsafe { push_utf8(out, piece.as_bytes()) }
}

/// Append ASCII bytes (digits, signs and points written by this module).
///
/// # Safety
/// `ascii` must be ASCII (checked in debug builds).
#[inline]
unsafe fn push_ascii(out: &mut String, ascii: &[u8]) {
    debug_assert!(ascii.is_ascii(), "only ASCII is pushed as bytes");
    // SAFETY: ASCII (the contract) is UTF-8.
    unsafe { push_utf8(out, ascii) }
}

/// Append `piece` without a `memcpy` call for short pieces.
///
/// # Safety
/// `piece` must be valid UTF-8.
#[inline]
unsafe fn push_utf8(out: &mut String, piece: &[u8]) {
    let n = piece.len();
    // SAFETY: `piece` is UTF-8 (the contract), so appending it keeps the `String` UTF-8;
    // `reserve` makes room for the `n` bytes that `copy_short` writes at `len`, `set_len` covers.
    unsafe {
        let v = out.as_mut_vec();
        v.reserve(n);
        let len = v.len();
        copy_short(piece.as_ptr(), v.as_mut_ptr().add(len), n);
        v.set_len(len + n);
    }
}

/// Copy `n` bytes from `src` to `dst` (non-overlapping): up to 16 bytes as two overlapping
/// words (or halves, or single bytes), longer runs with `copy_nonoverlapping`.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, and the ranges must not overlap.
#[inline]
unsafe fn copy_short(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{copy_nonoverlapping, read_unaligned, write_unaligned};
    // SAFETY (for every arm): each read covers `[0, 8)`/`[n - 8, n)` (or the 4-byte and 1-byte
    // equivalents) of the source, all inside `[0, n)` given the arm's bounds on `n`; writes
    // mirror them in the destination.
    unsafe {
        if n >= 8 {
            if n > 16 {
                copy_nonoverlapping(src, dst, n);
                return;
            }
            let (a, b) = (
                read_unaligned(src.cast::<u64>()),
                read_unaligned(src.add(n - 8).cast::<u64>()),
            );
            write_unaligned(dst.cast::<u64>(), a);
            write_unaligned(dst.add(n - 8).cast::<u64>(), b);
        } else if n >= 4 {
            let (a, b) = (
                read_unaligned(src.cast::<u32>()),
                read_unaligned(src.add(n - 4).cast::<u32>()),
            );
            write_unaligned(dst.cast::<u32>(), a);
            write_unaligned(dst.add(n - 4).cast::<u32>(), b);
        } else if n > 0 {
            // 1 to 3 bytes: first, middle and last (some coincide).
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
    }
}

/// The contents of a string that has at least one byte to escape: clean words are skipped whole,
/// the others are settled byte by byte.
#[cold]
fn write_escaped(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    // `run` is the start of the bytes not yet copied; they need no escape. Both `run` and `i`
    // sit next to an escaped byte, which is ASCII, so slicing `s` there is on char boundaries.
    let (mut run, mut i) = (0, 0);
    while i < bytes.len() {
        if i + 8 <= bytes.len() && word_needs_escape(load8(&bytes[i..])) == 0 {
            i += 8;
            continue;
        }
        let end = (i + 8).min(bytes.len());
        while i < end {
            let class = ESCAPE[usize::from(bytes[i])];
            if class != NO {
                out.push_str(&s[run..i]);
                write_escape(out, bytes[i], class);
                run = i + 1;
            }
            i += 1;
        }
    }
    out.push_str(&s[run..]);
}

#[inline]
fn write_int<I: itoa::Integer>(out: &mut String, v: I) {
    push_short(out, itoa::Buffer::new().format(v));
}

#[inline]
fn write_f64(out: &mut String, v: f64) {
    if v.is_finite() {
        if !write_short_decimal(out, v) {
            push_short(out, zmij::Buffer::new().format_finite(v));
        }
    } else {
        out.push_str("null");
    }
}

/// Write a finite `v` that is the double nearest some decimal with at most four fractional
/// digits and a magnitude in `[1e-4, 1e9)` (or zero), returning `false` for anything else.
///
/// Most numbers in a reply are scores and amounts rounded to four places; the general
/// shortest-representation algorithm costs ~150 instructions each, this ~30. The output is what
/// `zmij` (and `serde_json`) writes: a decimal with `m` fractional units of 10⁻⁴ has at most 13
/// significant digits, and two decimals of at most 15 significant digits never round to the same
/// double, so the shortest digits that round-trip are those of `m / 10⁴` with trailing zeros
/// dropped; in this magnitude range both write plain notation, with `.0` for integers.
/// `tests/parity.rs` checks this against `zmij` over every such decimal shape.
#[inline]
fn write_short_decimal(out: &mut String, v: f64) -> bool {
    const SCALE: f64 = 10_000.0;
    let a = v.abs();
    if a == 0.0 {
        push_short(out, if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return true;
    }
    if !(1e-4..1e9).contains(&a) {
        return false;
    }
    // `a * SCALE` is within an ulp of the decimal's units; the check below is exact: division is
    // correctly rounded, so it holds iff `a` is the double nearest `units / 10⁴`.
    let units = (a * SCALE + 0.5) as u64;
    if units as f64 / SCALE != a {
        return false;
    }
    let (mut int, frac) = (units / 10_000, units % 10_000);
    // Written right to left into one buffer, appended once: fraction, point, integer, sign.
    let mut buf = [0u8; 24];
    let mut at = buf.len();
    if frac == 0 {
        at -= 1;
        buf[at] = b'0';
    } else {
        // Four digits (two pairs from a table), trailing zeros dropped.
        let (hi, lo) = ((frac / 100) as usize, (frac % 100) as usize);
        let digits = [
            DIGIT_PAIRS[2 * hi],
            DIGIT_PAIRS[2 * hi + 1],
            DIGIT_PAIRS[2 * lo],
            DIGIT_PAIRS[2 * lo + 1],
        ];
        let keep = fraction_digits(frac);
        at -= keep;
        buf[at..at + keep].copy_from_slice(&digits[..keep]);
    }
    at -= 1;
    buf[at] = b'.';
    loop {
        at -= 1;
        buf[at] = b'0' + (int % 10) as u8;
        int /= 10;
        if int == 0 {
            break;
        }
    }
    if v < 0.0 {
        at -= 1;
        buf[at] = b'-';
    }
    // SAFETY: every byte written above is a digit, `.` or `-`.
    unsafe { push_ascii(out, &buf[at..]) };
    true
}

/// "00", "01", ..., "99".
static DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Decimal digits to keep of a fraction in `1..10_000` written as four digits.
#[inline]
fn fraction_digits(frac: u64) -> usize {
    match frac {
        f if f % 1000 == 0 => 1,
        f if f % 100 == 0 => 2,
        f if f % 10 == 0 => 3,
        _ => 4,
    }
}

#[inline]
fn write_f32(out: &mut String, v: f32) {
    if v.is_finite() {
        out.push_str(zmij::Buffer::new().format_finite(v));
    } else {
        out.push_str("null");
    }
}

/// The ten integer methods of a serializer, all with the same body.
macro_rules! integers {
    ($self:ident, $v:ident => $body:expr) => {
        integers!(@each $self, $v, $body; serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
            serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64, serialize_u128: u128);
    };
    (@each $self:ident, $v:ident, $body:expr; $($name:ident: $t:ty),*) => {
        $(fn $name($self, $v: $t) -> Result<(), Error> {
            $body
        })*
    };
}

/// An array or object being written.
#[doc(hidden)]
pub struct Compound<'a, 'b> {
    w: &'b mut Writer<'a>,
    state: State,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum State {
    /// No element written yet.
    First,
    /// At least one element written: the next one needs a comma.
    Rest,
    /// Inside a raw value: the one field is written verbatim.
    Raw,
}

/// How a compound closes: `]`, `}`, or those plus the `}` of an externally tagged variant.
#[derive(Clone, Copy)]
enum Close {
    Array,
    Object,
    VariantArray,
    VariantObject,
}

impl<'a, 'b> Compound<'a, 'b> {
    /// A compound whose opening bracket is written and that has no element yet.
    #[inline]
    fn first(w: &'b mut Writer<'a>) -> Self {
        Compound {
            w,
            state: State::First,
        }
    }

    /// Whether the next element needs a leading comma (every one after the first does).
    #[inline]
    fn take_comma(&mut self) -> bool {
        let comma = self.state == State::Rest;
        self.state = State::Rest;
        comma
    }

    #[inline]
    fn comma(&mut self) {
        if self.take_comma() {
            self.w.out.push(',');
        }
    }

    /// An object member with a static key: the comma, `"key":` in one append, then the value.
    #[inline]
    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        let comma = self.take_comma();
        write_item(self.w.out, comma, key, ":");
        value.serialize(&mut *self.w)
    }

    #[inline]
    fn close(self, how: Close) -> Result<(), Error> {
        let out = &mut *self.w.out;
        match how {
            Close::Array => out.push(']'),
            Close::Object => out.push('}'),
            Close::VariantArray => out.push_str("]}"),
            Close::VariantObject => out.push_str("}}"),
        }
        Ok(())
    }
}

impl Writer<'_> {
    /// The start of an externally tagged variant: `{"variant"` and then `open` (`:`, `:[` or
    /// `:{`).
    #[inline]
    fn tag(&mut self, variant: &str, open: &str) {
        self.out.push('{');
        write_str(self.out, variant);
        self.out.push_str(open);
    }
}

impl<'a, 'b> ser::Serializer for &'b mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    integers!(self, v => {
        write_int(self.out, v);
        Ok(())
    });
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        write_f32(self.out, v);
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        write_f64(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0u8; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.out.push('[');
        for (i, b) in v.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            write_int(self.out, *b);
        }
        self.out.push(']');
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        write_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.tag(variant, ":");
        value.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.out.push('[');
        Ok(Compound::first(self))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.tag(variant, ":[");
        Ok(Compound::first(self))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, 'b>, Error> {
        self.out.push('{');
        Ok(Compound::first(self))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Compound<'a, 'b>, Error> {
        if name == RAW_TOKEN {
            return Ok(Compound {
                w: self,
                state: State::Raw,
            });
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'b>, Error> {
        self.tag(variant, ":{");
        Ok(Compound::first(self))
    }
}

/// The array-like compounds (sequences, tuples, tuple structs, tuple variants): elements
/// separated by commas, then the close.
macro_rules! array_like {
    ($($trait:ident::$element:ident => $close:ident),* $(,)?) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.comma();
                value.serialize(&mut *self.w)
            }
            fn end(self) -> Result<(), Error> {
                self.close(Close::$close)
            }
        }
    )*};
}

array_like!(
    SerializeSeq::serialize_element => Array,
    SerializeTuple::serialize_element => Array,
    SerializeTupleStruct::serialize_field => Array,
    SerializeTupleVariant::serialize_field => VariantArray,
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        // The key writes the separating comma and the `:` after itself (one append for a
        // string key).
        let comma = self.take_comma();
        key.serialize(MapKey {
            out: &mut *self.w.out,
            comma,
        })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        self.close(Close::Object)
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if self.state == State::Raw {
            return value.serialize(RawText {
                out: &mut *self.w.out,
            });
        }
        self.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        if self.state == State::Raw {
            return Ok(());
        }
        self.close(Close::Object)
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close(Close::VariantObject)
    }
}

/// What a restricted serializer (map keys, raw text) returns for a compound it refuses.
type Refused = Impossible<(), Error>;

/// Serializer methods that all fail with `$err()`, each given by its name, optional value type
/// parameter, argument types and return type.
macro_rules! refuse {
    ($err:ident; $($name:ident $(<$T:ident>)? ($($arg:ty),*) -> $ret:ty;)*) => {$(
        fn $name $(<$T: Serialize + ?Sized>)? (self, $(_: $arg),*) -> Result<$ret, Error> {
            Err($err())
        }
    )*};
}

/// A restricted serializer's associated types and the methods it refuses with `$err()`: bytes,
/// options, units, newtype variants and every compound.
macro_rules! refuse_compounds {
    ($err:ident) => {
        type Ok = ();
        type Error = Error;
        type SerializeSeq = Refused;
        type SerializeTuple = Refused;
        type SerializeTupleStruct = Refused;
        type SerializeTupleVariant = Refused;
        type SerializeMap = Refused;
        type SerializeStruct = Refused;
        type SerializeStructVariant = Refused;

        refuse!($err;
            serialize_bytes(&[u8]) -> ();
            serialize_none() -> ();
            serialize_some<T>(&T) -> ();
            serialize_unit() -> ();
            serialize_unit_struct(&'static str) -> ();
            serialize_newtype_variant<T>(&'static str, u32, &'static str, &T) -> ();
            serialize_seq(Option<usize>) -> Refused;
            serialize_tuple(usize) -> Refused;
            serialize_tuple_struct(&'static str, usize) -> Refused;
            serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Refused;
            serialize_map(Option<usize>) -> Refused;
            serialize_struct(&'static str, usize) -> Refused;
            serialize_struct_variant(&'static str, u32, &'static str, usize) -> Refused;
        );
    };
}

/// Map keys: strings, and (quoted) numbers, booleans and unit variants, as `serde_json` allows.
/// Writes the member's leading comma (when it is not the first), the quoted key and the `:`.
struct MapKey<'o> {
    out: &'o mut String,
    comma: bool,
}

impl MapKey<'_> {
    fn string(self, text: &str) -> Result<(), Error> {
        write_item(self.out, self.comma, text, ":");
        Ok(())
    }

    /// A number or boolean key, quoted (it needs no escaping).
    fn quoted(self, text: &str) -> Result<(), Error> {
        if self.comma {
            self.out.push(',');
        }
        self.out.push('"');
        self.out.push_str(text);
        self.out.push_str("\":");
        Ok(())
    }

    /// A float key, quoted; `serde_json` refuses the non-finite ones.
    fn float<F: zmij::Float>(self, v: F, finite: bool) -> Result<(), Error> {
        if !finite {
            return Err(Error(
                "float key must be finite (got NaN or +/-inf)".to_owned(),
            ));
        }
        self.quoted(zmij::Buffer::new().format_finite(v))
    }
}

impl ser::Serializer for MapKey<'_> {
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.string(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(if v { "true" } else { "false" })
    }
    integers!(self, v => self.quoted(itoa::Buffer::new().format(v)));
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.float(v, v.is_finite())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v, v.is_finite())
    }
    refuse_compounds!(key_must_be_a_string);
}

/// The one field of a raw value: its text, written verbatim.
struct RawText<'o> {
    out: &'o mut String,
}

fn not_raw() -> Error {
    Error("a raw JSON value must hold JSON text".to_owned())
}

impl ser::Serializer for RawText<'_> {
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.out.push_str(v);
        Ok(())
    }
    // 128-bit integers keep serde's default refusal.
    refuse!(not_raw;
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_newtype_struct<T>(&'static str, &T) -> ();
    );
    refuse_compounds!(not_raw);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut out = String::new();
        write_str(&mut out, s);
        out
    }

    /// `to_writer` appends after whatever the buffer holds, UTF-8 or not, and keeps its capacity.
    #[test]
    fn to_writer_appends_to_any_bytes() {
        let mut text = b"prefix:".to_vec();
        text.reserve(1000);
        let capacity = text.capacity();
        to_writer(&mut text, &("é\n", 1)).unwrap();
        assert_eq!(text, b"prefix:[\"\xc3\xa9\\n\",1]", "a newline is escaped");
        assert_eq!(
            text.capacity(),
            capacity,
            "the buffer is reused, not reallocated"
        );
        let mut bytes = vec![0xff, 0xfe];
        to_writer(&mut bytes, &["a"]).unwrap();
        assert_eq!(bytes, b"\xff\xfe[\"a\"]");
        let mut failed = b"x".to_vec();
        assert!(to_writer(
            &mut failed,
            &std::collections::BTreeMap::from([(vec![1u8], 2)])
        )
        .is_err());
        assert!(
            failed.starts_with(b"x"),
            "an error leaves the earlier bytes in place"
        );
    }

    #[test]
    fn escapes_every_class_at_every_offset_of_a_word() {
        for special in [
            '"', '\\', '\n', '\u{0}', '\u{1f}', '\u{8}', '\u{c}', '\r', '\t',
        ] {
            for pos in 0..20 {
                let s: String = (0..20)
                    .map(|i| if i == pos { special } else { 'a' })
                    .collect();
                let want = serde_json::to_string(&s).unwrap();
                assert_eq!(esc(&s), want, "special {special:?} at {pos}");
            }
        }
    }

    /// Every length through the short-copy arms and past them, ASCII and multi-byte, appended
    /// to buffers that are full (so every write grows them) and to roomy ones.
    #[test]
    fn clean_strings_of_every_length_copy_exactly() {
        for len in 0..70 {
            let ascii: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let mixed: String = (0..len)
                .map(|i| if i % 3 == 0 { 'é' } else { 'k' })
                .collect();
            let wide: String = "€".repeat(len);
            for s in [&ascii, &mixed, &wide] {
                let want = serde_json::to_string(s).unwrap();
                let mut tight = String::from("x");
                tight.shrink_to_fit();
                let mut roomy = String::with_capacity(1024);
                roomy.push('y');
                for mut out in [tight, roomy] {
                    let before = out.clone();
                    write_str(&mut out, s);
                    assert_eq!(out, format!("{before}{want}"), "len {len}");
                    write_item(&mut out, true, s, ":");
                    assert_eq!(out, format!("{before}{want},{want}:"), "len {len}");
                    push_short(&mut out, s);
                    assert_eq!(out, format!("{before}{want},{want}:{s}"), "len {len}");
                }
            }
        }
    }

    #[test]
    fn leaves_del_and_non_ascii_alone() {
        let s = "caf\u{e9} \u{7f} \u{20ac}\u{1F600} ~ plain ascii text of some length";
        assert_eq!(esc(s), serde_json::to_string(s).unwrap());
        assert!(esc(s).contains('\u{7f}'));
    }

    #[test]
    fn short_and_overlapping_tests_see_every_position() {
        // Up to 47 bytes: two rounds of the 16-byte loop and every tail length after them.
        for len in 0..48 {
            for pos in 0..len {
                let mut b = vec![b'k'; len];
                b[pos] = b'"';
                assert!(needs_escape(&b), "len {len} pos {pos}");
                b[pos] = 0x1f;
                assert!(needs_escape(&b), "len {len} pos {pos}");
            }
            assert!(!needs_escape(&vec![b'k'; len]), "len {len}");
        }
    }

    /// Every byte value at every position of strings up to 40 bytes: the block, word and table
    /// tests agree exactly with the escape table.
    #[test]
    fn every_byte_at_every_position_is_classified_exactly() {
        for len in 1..=40 {
            for pos in 0..len {
                for b in 0u8..=255 {
                    let mut s = vec![b'k'; len];
                    s[pos] = b;
                    assert_eq!(
                        needs_escape(&s),
                        ESCAPE[usize::from(b)] != NO,
                        "len {len} pos {pos} byte {b:#04x}"
                    );
                }
            }
        }
    }

    #[test]
    fn word_test_has_no_false_negatives() {
        // Every single byte value at every position of a word of otherwise safe bytes.
        for b in 0u8..=255 {
            for pos in 0..8 {
                let mut w = [b'a'; 8];
                w[pos] = b;
                let flagged = word_needs_escape(u64::from_le_bytes(w)) != 0;
                assert_eq!(
                    flagged,
                    ESCAPE[usize::from(b)] != NO,
                    "byte {b:#04x} at {pos}"
                );
            }
        }
    }
}
