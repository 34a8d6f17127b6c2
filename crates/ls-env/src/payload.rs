//! Typed access to action payload fields. A field of the wrong JSON type is a [`PayloadError`]
//! naming it (the protocol layer answers 4xx); a missing or unknown id is not an error here — the
//! tool fails as a penalised step.

use ls_core::json_field;
use serde_json::{Map, Value};

/// Longest string accepted in an id-like payload field.
pub const MAX_FIELD_CHARS: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("payload.{field}: {message}")]
pub struct PayloadError {
    pub field: String,
    pub message: String,
}

impl PayloadError {
    pub fn new(field: &str, message: &str) -> Self {
        Self {
            field: field.to_owned(),
            message: message.to_owned(),
        }
    }
}

/// A string field (numbers are accepted and rendered, since ids like PO numbers are often numeric).
pub fn opt_str(p: &Map<String, Value>, key: &str) -> Result<Option<String>, PayloadError> {
    match json_field(p, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            if s.chars().count() > MAX_FIELD_CHARS {
                return Err(PayloadError::new(key, "is too long"));
            }
            Ok(Some(s.clone()))
        }
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(PayloadError::new(key, "must be a string")),
    }
}

/// A page number: an integer, or a numeric string; anything else non-numeric means "no page".
pub fn opt_page(p: &Map<String, Value>, key: &str) -> Result<Option<u32>, PayloadError> {
    match json_field(p, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && (1.0..=10_000.0).contains(&f) => Ok(Some(f as u32)),
            _ => Err(PayloadError::new(
                key,
                "must be a positive integer page number",
            )),
        },
        Some(Value::String(s)) => Ok(s.trim().parse::<u32>().ok().filter(|p| *p >= 1)),
        Some(_) => Err(PayloadError::new(key, "must be a page number")),
    }
}

/// A bounding box `[x1, y1, x2, y2]` of four finite numbers.
pub fn opt_bbox(p: &Map<String, Value>, key: &str) -> Result<Option<[f64; 4]>, PayloadError> {
    match json_field(p, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) if a.len() == 4 => {
            let mut out = [0.0; 4];
            for (o, v) in out.iter_mut().zip(a) {
                *o = v.as_f64().filter(|f| f.is_finite()).ok_or_else(|| {
                    PayloadError::new(key, "must be four numbers [x1, y1, x2, y2]")
                })?;
            }
            Ok(Some(out))
        }
        Some(_) => Err(PayloadError::new(
            key,
            "must be four numbers [x1, y1, x2, y2]",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_types() {
        let p = json!({"doc_id": 5, "bad": [1], "page": "x", "page2": 2, "bbox": [0, 0, 10, 10], "bb": [1, "a", 2, 3]});
        let p = p.as_object().unwrap();
        assert_eq!(opt_str(p, "doc_id").unwrap().as_deref(), Some("5"));
        assert_eq!(opt_str(p, "bad").unwrap_err().field, "bad");
        assert_eq!(opt_page(p, "page").unwrap(), None);
        assert_eq!(opt_page(p, "page2").unwrap(), Some(2));
        assert_eq!(opt_bbox(p, "bbox").unwrap(), Some([0.0, 0.0, 10.0, 10.0]));
        assert!(opt_bbox(p, "bb").is_err());
    }
}
