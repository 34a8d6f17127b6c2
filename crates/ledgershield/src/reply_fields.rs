//! The few fields `ledgershield load` checks, read out of a reply without parsing the rest.
//!
//! The load generator shares the machine with the server it measures. Deserializing whole replies
//! (even into a struct that skips unknown fields) cost it about three times the server's own
//! instructions per episode, nearly all of it tokenizing keys and strings it then ignored, so the
//! throughput figure measured the client's JSON parser. Here only what the checks need is read:
//! the first members of the leading object, walked key by key until the caller has what it wants
//! (a value stepped over by matching brackets outside strings), and the trailing member, found
//! from the end of the reply by matching brackets backwards. The values the checks use go through
//! `serde_json`.
//!
//! This is not a JSON validator: a malformed reply is reported as malformed where the walk notices
//! it, and otherwise its unread parts go unchecked. The server's replies are checked whole by its
//! own tests; what the load run needs is the case id, the step count, the first document and the
//! final score, each of which is parsed strictly.

use anyhow::{anyhow, Result};
use serde::de::DeserializeOwned;
use std::borrow::Cow;

/// Nesting deeper than this is refused (the server's replies nest about eight levels).
const MAX_DEPTH: usize = 128;

/// Whether a walk over members goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    Continue,
    Stop,
}

/// The members of the JSON object that starts at `at` (after optional whitespace): calls `each`
/// with every key and the raw bytes of its value, in order, until it returns [`Walk::Stop`].
/// Returns the index just past the object's closing brace, or `None` when stopped early.
pub fn members<'a>(
    b: &'a [u8],
    at: usize,
    mut each: impl FnMut(&str, &'a [u8]) -> Result<Walk>,
) -> Result<Option<usize>> {
    let mut i = skip_ws(b, at);
    expect(b, i, b'{')?;
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Ok(Some(i + 1));
    }
    loop {
        let (key, value_at) = key_at(b, i)?;
        let end = skip_value(b, value_at)?;
        if each(&key, &b[value_at..end])? == Walk::Stop {
            return Ok(None);
        }
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Ok(Some(i + 1)),
            _ => return Err(malformed(i)),
        }
    }
}

/// The first member of the object that starts at `at`: its key and where its value starts (the
/// value itself is not read).
pub fn first_member(b: &[u8], at: usize) -> Result<(Cow<'_, str>, usize)> {
    let i = skip_ws(b, at);
    expect(b, i, b'{')?;
    key_at(b, skip_ws(b, i + 1))
}

/// The last member of the object that makes up all of `b`, found from its end: its key and the
/// raw bytes of its value. Only the member itself is read (backwards, then its key).
pub fn last_member(b: &[u8]) -> Result<(Cow<'_, str>, &[u8])> {
    let close = last_non_ws(b, b.len()).ok_or_else(|| malformed(0))?;
    expect(b, close, b'}')?;
    let value_last = last_non_ws(b, close).ok_or_else(|| malformed(close))?;
    let value_at = match b[value_last] {
        b'}' | b']' => container_start(b, value_last)?,
        b'"' => string_start(b, value_last)?,
        _ => {
            // A scalar: back to the colon.
            let mut i = value_last;
            while i > 0 && !matches!(b[i - 1], b':' | b' ' | b'\n' | b'\r' | b'\t') {
                i -= 1;
            }
            i
        }
    };
    let colon = last_non_ws(b, value_at).ok_or_else(|| malformed(value_at))?;
    expect(b, colon, b':')?;
    let key_last = last_non_ws(b, colon).ok_or_else(|| malformed(colon))?;
    let key_at_ = string_start(b, key_last)?;
    let (key, parsed_value_at) = key_at(b, key_at_)?;
    // Backwards and forwards matching agree on well-formed JSON (the property test checks it
    // against serde_json). A container is not walked forwards again, which would double the
    // work on every reply: its brackets must pair, and what is inside is the reader's to parse.
    let well_formed = parsed_value_at == value_at
        && match (b[value_at], b[value_last]) {
            (b'{', b'}') | (b'[', b']') => true,
            (b'{' | b'[', _) | (_, b'}' | b']') => false,
            _ => skip_value(b, value_at)? == value_last + 1,
        };
    if !well_formed {
        return Err(malformed(value_at));
    }
    Ok((key, &b[value_at..=value_last]))
}

/// The key whose opening quote is at `at` and where its value starts.
fn key_at(b: &[u8], at: usize) -> Result<(Cow<'_, str>, usize)> {
    let key_end = skip_string(b, at)?;
    let inner = &b[at + 1..key_end - 1];
    let key = if inner.contains(&b'\\') {
        Cow::Owned(serde_json::from_slice::<String>(&b[at..key_end])?)
    } else {
        Cow::Borrowed(std::str::from_utf8(inner)?)
    };
    let i = skip_ws(b, key_end);
    expect(b, i, b':')?;
    Ok((key, skip_ws(b, i + 1)))
}

/// One value, parsed strictly.
pub fn parse<T: DeserializeOwned>(raw: &[u8]) -> Result<T> {
    Ok(serde_json::from_slice(raw)?)
}

/// The index just past the value that starts at `at`.
fn skip_value(b: &[u8], at: usize) -> Result<usize> {
    match b.get(at) {
        Some(b'"') => skip_string(b, at),
        Some(b'{' | b'[') => skip_container(b, at),
        Some(_) => {
            // A number, `true`, `false` or `null`: up to the next delimiter.
            let len = b[at..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                .unwrap_or(b.len() - at);
            if len == 0 {
                return Err(malformed(at));
            }
            Ok(at + len)
        }
        None => Err(malformed(at)),
    }
}

/// The index just past the string whose opening quote is at `at`.
fn skip_string(b: &[u8], at: usize) -> Result<usize> {
    expect(b, at, b'"')?;
    let mut i = at + 1;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Err(malformed(at))
}

/// The index just past the object or array that opens at `at`.
fn skip_container(b: &[u8], at: usize) -> Result<usize> {
    let mut depth = 0usize;
    let mut i = at;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                i = skip_string(b, i)?;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(anyhow!("reply nests deeper than {MAX_DEPTH} levels"));
                }
            }
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(malformed(at))
}

/// The opening quote of the string whose closing quote is at `close`.
fn string_start(b: &[u8], close: usize) -> Result<usize> {
    expect(b, close, b'"')?;
    let mut end = close;
    while let Some(i) = b[..end].iter().rposition(|&c| c == b'"') {
        if !escaped(b, i) {
            return Ok(i);
        }
        end = i;
    }
    Err(malformed(close))
}

/// Whether the byte at `i` is escaped: an odd run of backslashes before it.
fn escaped(b: &[u8], i: usize) -> bool {
    b[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1
}

/// The opening bracket of the object or array whose closing bracket is at `close`.
fn container_start(b: &[u8], close: usize) -> Result<usize> {
    let mut depth = 0usize;
    let mut i = close;
    loop {
        match b[i] {
            b'"' => i = string_start(b, i)?,
            b'}' | b']' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(anyhow!("reply nests deeper than {MAX_DEPTH} levels"));
                }
            }
            b'{' | b'[' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => {}
        }
        if i == 0 {
            return Err(malformed(close));
        }
        i -= 1;
    }
}

/// The last byte before `end` that is not whitespace.
fn last_non_ws(b: &[u8], end: usize) -> Option<usize> {
    b[..end]
        .iter()
        .rposition(|c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t'))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

fn expect(b: &[u8], i: usize, c: u8) -> Result<()> {
    if b.get(i) == Some(&c) {
        Ok(())
    } else {
        Err(malformed(i))
    }
}

fn malformed(at: usize) -> anyhow::Error {
    anyhow!("malformed JSON object at byte {at}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Every member as the walk sees it, each value parsed: equals serde_json's own parse.
    fn walked(text: &str) -> Value {
        let mut out = serde_json::Map::new();
        let end = members(text.as_bytes(), 0, |k, v| {
            out.insert(k.to_owned(), parse::<Value>(v)?);
            Ok(Walk::Continue)
        })
        .unwrap()
        .expect("walked to the end");
        assert_eq!(text[end..].trim(), "", "the walk ends at the object's end");
        Value::Object(out)
    }

    fn sample() -> Value {
        json!({
            "observation": {"case_id": "CASE-A-001", "instruction": "a \"quoted\" {brace} [bracket] \\ back \\\"",
                            "step_count": 3, "nested": [[{"a": []}, {}], "]}", "\\"], "e": {}},
            "reward": -0.125e-3, "done": true, "truncated": false, "nothing": null,
            "info": {"final_score": 0.8125, "\"odd\" key": "\u{1F600} ü", "tail": ["\\", "\"}"]}
        })
    }

    #[test]
    fn members_and_their_values_match_a_full_parse() {
        let v = sample();
        for text in [v.to_string(), serde_json::to_string_pretty(&v).unwrap()] {
            assert_eq!(walked(&text), v, "{text}");
        }
        assert_eq!(walked("{}"), json!({}));
        assert_eq!(walked(" { \"a\" : [ ] } "), json!({"a": []}));
    }

    #[test]
    fn first_and_last_members_are_read_without_the_middle() {
        let v = sample();
        for text in [v.to_string(), serde_json::to_string_pretty(&v).unwrap()] {
            let b = text.as_bytes();
            let (key, at) = first_member(b, 0).unwrap();
            assert_eq!(key, "observation");
            // A walk that stops at the step count never reads past it.
            let mut seen = Vec::new();
            let end = members(b, at, |k, v| {
                seen.push(k.to_owned());
                Ok(if k == "step_count" {
                    assert_eq!(parse::<u64>(v).unwrap(), 3);
                    Walk::Stop
                } else {
                    Walk::Continue
                })
            })
            .unwrap();
            assert_eq!(end, None);
            assert_eq!(seen, ["case_id", "instruction", "step_count"]);
            let (key, value) = last_member(b).unwrap();
            assert_eq!(key, "info");
            assert_eq!(parse::<Value>(value).unwrap(), v["info"]);
        }
        // Trailing scalars and strings too.
        for (text, key, value) in [
            (r#"{"a":{"b":1},"z":-1.5e3}"#, "z", json!(-1.5e3)),
            (r#"{"z" : "x\"}\\" }"#, "z", json!("x\"}\\")),
            (r#"{"z":[]}"#, "z", json!([])),
            (r#"{"\"z\"":null}"#, "\"z\"", json!(null)),
        ] {
            let (k, v) = last_member(text.as_bytes()).unwrap();
            assert_eq!(
                (k.as_ref(), parse::<Value>(v).unwrap()),
                (key, value),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        for bad in [
            "",
            "[]",
            "{",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1",
            "{\"a\":1,",
            "{\"a\" 1}",
            "{\"a\":\"x}",
            "{\"a\":[1,2}",
            "{1:2}",
            "{\"a\":}",
            "{:1}",
            "}",
            "{\"a\":]}",
            "{\"a\":[}",
            "x}",
            "{\"a\"1}",
            "{\"a\":\"}",
        ] {
            let b = bad.as_bytes();
            assert!(
                members(b, 0, |_, _| Ok(Walk::Continue)).is_err(),
                "members {bad:?}"
            );
            assert!(last_member(b).is_err(), "last_member {bad:?}");
        }
        // A defect before the trailing member is the walk's to find, not `last_member`'s.
        for middle in [&b"{\"a\":1 \"b\":2}"[..], b"\"b\":2}"] {
            assert!(members(middle, 0, |_, _| Ok(Walk::Continue)).is_err());
            assert_eq!(last_member(middle).unwrap().0, "b");
        }
        for bad in ["", "[]", "{", "{1:2}", "{\"a\" 1}", "{\"a"] {
            assert!(
                first_member(bad.as_bytes(), 0).is_err(),
                "first_member {bad:?}"
            );
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(members(deep.as_bytes(), 0, |_, _| Ok(Walk::Continue)).is_err());
        assert!(last_member(deep.as_bytes()).is_err());
        // A value the check reads is parsed strictly.
        let r = members(b"{\"step_count\":3x}", 0, |_, v| {
            parse::<u64>(v).map(|_| Walk::Continue)
        });
        assert!(r.is_err());
    }

    fn arb_string() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            any::<String>(),
            // Dense in what the walk must get right: quotes, backslashes and brackets in strings.
            proptest::collection::vec(
                prop_oneof![
                    Just('"'),
                    Just('\\'),
                    Just('{'),
                    Just('}'),
                    Just('['),
                    Just(']'),
                    Just(':'),
                    Just(','),
                    Just('a')
                ],
                0..24
            )
            .prop_map(|v| v.into_iter().collect()),
        ]
    }

    fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            // Four decimals: serde_json parses these back exactly.
            (-1e6f64..1e6).prop_map(|f| json!((f * 1e4).round() / 1e4)),
            arb_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((arb_string(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Any object, compact or pretty: the walk sees serde_json's members, and the trailing
        /// member read from the end is the last of them.
        #[test]
        fn walks_agree_with_serde_json(
            members_in in proptest::collection::vec((arb_string(), arb_value()), 1..6),
            pretty in proptest::bool::ANY,
        ) {
            let v = Value::Object(members_in.into_iter().collect());
            let text = if pretty { serde_json::to_string_pretty(&v) } else { serde_json::to_string(&v) }.unwrap();
            proptest::prop_assert_eq!(&walked(&text), &v);
            let (k, last) = last_member(text.as_bytes()).unwrap();
            let (want_k, want_v) = v.as_object().unwrap().iter().next_back().unwrap();
            proptest::prop_assert_eq!(k.as_ref(), want_k.as_str());
            proptest::prop_assert_eq!(&parse::<Value>(last).unwrap(), want_v);
            let (k, _) = first_member(text.as_bytes(), 0).unwrap();
            proptest::prop_assert_eq!(k.as_ref(), v.as_object().unwrap().keys().next().unwrap().as_str());
        }
    }
}
