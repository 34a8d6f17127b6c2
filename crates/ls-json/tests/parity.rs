//! The output contract: `ls_json` writes what `serde_json` writes, byte for byte, and fails where
//! it fails.

use ls_json::{Raw, RawJson};
use proptest::prelude::*;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

fn same<T: Serialize + ?Sized>(value: &T) {
    let theirs = serde_json::to_string(value).expect("serde_json serializes it");
    let ours = ls_json::to_string(value).expect("ls_json serializes it");
    assert_eq!(ours, theirs);
}

#[derive(Serialize)]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { a: f64, b: Option<bool> },
}

#[derive(Serialize)]
struct Inner {
    x: u64,
    label: &'static str,
}

#[derive(Serialize)]
struct Outer<'a> {
    name: String,
    #[serde(flatten)]
    inner: Inner,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
    none: Option<u8>,
    shapes: Vec<Shape>,
    raw: RawJson,
    borrowed: Raw<'a>,
    theirs: &'a serde_json::value::RawValue,
    unit: (),
    tuple: (u8, char, &'a str),
    bytes: serde_bytes_like::Bytes<'a>,
    int_keys: BTreeMap<i64, &'static str>,
    bool_keys: BTreeMap<bool, u8>,
    char_keys: BTreeMap<char, u8>,
    floats: [f64; 8],
    small: f32,
    big: (i128, u128),
}

/// `serialize_bytes` without another dependency.
mod serde_bytes_like {
    pub struct Bytes<'a>(pub &'a [u8]);
    impl serde::Serialize for Bytes<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }
}

#[test]
fn every_serde_data_model_shape_matches() {
    let theirs = serde_json::value::RawValue::from_string(r#"{"pre": [1, 2]}"#.to_owned()).unwrap();
    let value = Outer {
        name: "quote \" backslash \\ newline \n tab \t nul \u{0} del \u{7f} é €".to_owned(),
        inner: Inner {
            x: u64::MAX,
            label: "flattened",
        },
        skipped: None,
        none: None,
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(7),
            Shape::Tuple(-3, "t".into()),
            Shape::Struct {
                a: 0.1,
                b: Some(true),
            },
            Shape::Struct { a: -0.0, b: None },
        ],
        raw: RawJson::from_serialize(&json!({"k": [1, "two", null]})),
        borrowed: Raw("[true,false]"),
        theirs: &theirs,
        unit: (),
        tuple: (1, '"', "x"),
        bytes: serde_bytes_like::Bytes(&[0, 1, 255]),
        int_keys: [(-5, "neg"), (12, "pos")].into_iter().collect(),
        bool_keys: [(false, 0), (true, 1)].into_iter().collect(),
        char_keys: [('\n', 1), ('a', 2)].into_iter().collect(),
        floats: [
            0.0,
            1.0,
            -1.5,
            1e300,
            5e-324,
            f64::NAN,
            f64::INFINITY,
            2354.1,
        ],
        small: 0.1,
        big: (i128::MIN, u128::MAX),
    };
    same(&value);
}

#[test]
fn raw_values_embed_verbatim_in_both_serializers() {
    let raw = RawJson::from_serialize(&json!({"a": 1, "b": "x"}));
    assert_eq!(raw.get(), r#"{"a":1,"b":"x"}"#);
    let wrapper = json!({"outer": true});
    let mut m = Map::new();
    m.insert("w".into(), wrapper);
    #[derive(Serialize)]
    struct Holder<'a> {
        m: &'a Map<String, Value>,
        raw: &'a RawJson,
    }
    let h = Holder { m: &m, raw: &raw };
    same(&h);
    assert_eq!(
        ls_json::to_string(&h).unwrap(),
        r#"{"m":{"w":{"outer":true}},"raw":{"a":1,"b":"x"}}"#
    );
    // serde_json's tree builder parses it back to the same value.
    assert_eq!(
        serde_json::to_value(&raw).unwrap(),
        json!({"a": 1, "b": "x"})
    );
}

#[test]
fn errors_where_serde_json_errors() {
    let mut bad: BTreeMap<Vec<u8>, u8> = BTreeMap::new();
    bad.insert(vec![1], 1);
    assert!(serde_json::to_string(&bad).is_err());
    assert!(ls_json::to_string(&bad).is_err());
    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    struct K {
        a: u8,
    }
    let mut bad2 = BTreeMap::new();
    bad2.insert(K { a: 1 }, 1);
    assert!(serde_json::to_string(&bad2).is_err());
    assert!(ls_json::to_string(&bad2).is_err());
    // A value that cannot serialize becomes null in RawJson.
    assert_eq!(RawJson::from_serialize(&bad).get(), "null");
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        // Dense in the characters that need escaping, at every alignment.
        proptest::collection::vec(
            prop_oneof![
                Just('"'),
                Just('\\'),
                Just('\n'),
                Just('\u{1}'),
                Just('\u{7f}'),
                Just('é'),
                Just('a'),
                Just(' ')
            ],
            0..40
        )
        .prop_map(|v| v.into_iter().collect()),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        any::<f64>().prop_map(|f| json!(f)),
        (-1e6f64..1e6).prop_map(|f| json!((f * 1e4).round() / 1e4)),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec((arb_string(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_trees_match_serde_json(v in arb_value()) {
        let ours = ls_json::to_string(&v).unwrap();
        prop_assert_eq!(&ours, &serde_json::to_string(&v).unwrap());
        // And the text is JSON.
        prop_assert!(serde_json::from_str::<Value>(&ours).is_ok());
    }

    #[test]
    fn strings_match_serde_json(s in arb_string()) {
        prop_assert_eq!(ls_json::to_string(&s).unwrap(), serde_json::to_string(&s).unwrap());
    }

    #[test]
    fn floats_match_serde_json(f in any::<f64>(), g in any::<f32>()) {
        prop_assert_eq!(ls_json::to_string(&(f, g)).unwrap(), serde_json::to_string(&(f, g)).unwrap());
    }

    /// Decimals with up to four places (the writer's fast path) and their neighbours one ulp
    /// away (which must leave it), over the whole magnitude range the fast path takes and past it.
    #[test]
    fn short_decimals_and_their_neighbours_match_serde_json(units in 0u64..20_000_000_000_000, places in 0u32..=6, neg: bool) {
        let v = units as f64 / 10f64.powi(places as i32);
        let v = if neg { -v } else { v };
        for x in [v, f64::from_bits(v.to_bits().wrapping_add(1)), f64::from_bits(v.to_bits().wrapping_sub(1))] {
            prop_assert_eq!(ls_json::to_string(&x).unwrap(), serde_json::to_string(&x).unwrap(), "{:e}", x);
        }
    }
}

/// Every decimal shape the fast path writes: each number of places, trailing zeros, the range
/// edges (1e-4 and just under 1e9), zeros of both signs and integers.
#[test]
fn short_decimal_edges_match_serde_json() {
    let mut cases = vec![
        0.0, -0.0, 1e-4, -1e-4, 9.9999e-5, 1.5e-4, 0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 10.0, 0.35,
        0.98, 0.08, 0.0001, 0.9999, 1234.5678,
    ];
    cases.extend([
        999_999_999.999_9,
        999_999_999.0,
        1e9,
        1e9 + 0.5,
        123_456_789.1,
        1e8,
        1e7 + 0.25,
        1e16,
        1e15,
        4503599627370496.0,
    ]);
    cases.extend([
        1.0 / 3.0,
        2.0f64.sqrt(),
        0.1 + 0.2,
        1e-5,
        0.00015,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
    ]);
    for units in (0..100_000u64).chain((0..2_000).map(|k| k * 7_919_993)) {
        cases.push(units as f64 / 10_000.0);
        cases.push(units as f64 / 1_000.0);
        cases.push(-(units as f64) / 100.0);
    }
    for x in cases {
        assert_eq!(
            ls_json::to_string(&x).unwrap(),
            serde_json::to_string(&x).unwrap(),
            "{x:e}"
        );
    }
}

/// A `Serialize` impl that serializes something else to raw JSON while being serialized.
struct Nested(u8);

impl Serialize for Nested {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = if self.0 == 0 {
            RawJson::from_serialize(&json!({"leaf": true}))
        } else {
            RawJson::from_serialize(&Nested(self.0 - 1))
        };
        (self.0, inner).serialize(s)
    }
}

#[test]
fn from_serialize_is_reentrant() {
    let raw = RawJson::from_serialize(&Nested(3));
    assert_eq!(raw.get(), r#"[3,[2,[1,[0,{"leaf":true}]]]]"#);
    // The scratch buffer is reused afterwards and still gives exact output.
    assert_eq!(RawJson::from_serialize(&"x").get(), r#""x""#);
    assert_eq!(
        RawJson::from_serialize(&vec!["a"; 100_000]).get().len(),
        4 * 100_000 + 1
    );
}
