//! What every Python class shares: a call that runs Rust on the locked state without the GIL
//! (refusals raised as `EnvError`, a panic as `RuntimeError` that poisons the state), and arrays
//! handed to NumPy as little-endian bytes.

use crate::errors::{panic_error, Refusal};
use crate::vector::Poison;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Run `f` on the locked state without the GIL; refusals become `EnvError`, a panic
/// `RuntimeError` (and poisons the state).
pub fn call<S, T>(
    py: Python<'_>,
    m: &Mutex<S>,
    f: impl FnOnce(&mut S) -> Result<T, Refusal> + Send,
) -> PyResult<T>
where
    S: Send + Poison,
    T: Send,
{
    let r = py.detach(|| {
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        match catch_unwind(AssertUnwindSafe(|| f(&mut g))) {
            Ok(r) => Ok(r),
            Err(p) => {
                g.poison();
                Err(p)
            }
        }
    });
    match r {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(e.into_py(py)),
        Err(p) => Err(panic_error(p)),
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0; v.len() * 4];
    for (o, x) in out.chunks_exact_mut(4).zip(v) {
        o.copy_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn f64_bytes(v: &[f64]) -> Vec<u8> {
    let mut out = vec![0; v.len() * 8];
    for (o, x) in out.chunks_exact_mut(8).zip(v) {
        o.copy_from_slice(&x.to_le_bytes());
    }
    out
}
