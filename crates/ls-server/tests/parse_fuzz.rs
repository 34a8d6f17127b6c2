//! A short fuzz of the request-parsing layer: property tests over raw bytes (random bytes and
//! mutated valid bodies). Every parser answers `Ok` or a 4xx error whose reply is bounded; none
//! panics. Runs in CI with the default case count.

use audit_env::{AuditResetRequest, AuditStepRequest};
use ls_server::controlbench::{parse_reset_body, parse_step_body};
use ls_server::error::MAX_MESSAGE_CHARS;
use ls_server::ApiError;
use proptest::prelude::*;

const VALID: [&str; 6] = [
    r#"{"action_type": "ocr", "payload": {"doc_id": "INV-A-001", "mode": "fast"}}"#,
    r#"{"action": {"action_type": "zoom", "payload": {"doc_id": "X", "bbox": [0, 0, 1, 1]}}, "timeout_s": 5}"#,
    r#"{"case_id": "CASE-A-001", "seed": 7, "track": "blind"}"#,
    r#"{"findings": [{"document_id": "EXP-001", "error_type": "weekend_expense", "confidence": 0.9}], "submit_final": true}"#,
    r#"{"type": "step", "data": {"action_type": "ocr", "payload": {}}}"#,
    r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"session_id": "s", "name": "ocr", "arguments": {}}}"#,
];

/// Raw bytes: random, or a valid body with bytes flipped, cut or spliced in.
fn bodies() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        (
            0..VALID.len(),
            proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
            any::<usize>()
        )
            .prop_map(|(i, edits, cut)| {
                let mut b = VALID[i].as_bytes().to_vec();
                for (at, byte) in edits {
                    let at = at % (b.len() + 1);
                    if byte % 3 == 0 && at < b.len() {
                        b.remove(at);
                    } else if byte % 3 == 1 && at < b.len() {
                        b[at] = byte;
                    } else {
                        b.insert(at, byte);
                    }
                }
                if cut % 4 == 0 {
                    b.truncate(cut % (b.len() + 1));
                }
                b
            }),
    ]
}

fn bounded_4xx(e: &ApiError) {
    assert!(e.status().is_client_error(), "{e:?} is {}", e.status());
    let body = e.body();
    assert!(body["error"]["message"].as_str().unwrap().chars().count() <= MAX_MESSAGE_CHARS + 1);
    assert!(body["detail"].as_str().unwrap().chars().count() <= MAX_MESSAGE_CHARS + 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn controlbench_bodies_parse_or_fail_cleanly(bytes in bodies()) {
        if let Err(e) = parse_step_body(&bytes) { bounded_4xx(&e); }
        if let Err(e) = parse_reset_body(&bytes) { bounded_4xx(&e); }
        if let Err(e) = ls_server::body::json_value(&bytes) { bounded_4xx(&e); }
    }

    #[test]
    fn audit_bodies_parse_or_fail_cleanly(bytes in bodies()) {
        if let Err(e) = ls_server::audit::http::parse_typed::<AuditStepRequest>(&bytes) { bounded_4xx(&e); }
        if let Err(e) = ls_server::audit::http::parse_typed::<AuditResetRequest>(&bytes) { bounded_4xx(&e); }
    }

    #[test]
    fn websocket_and_mcp_messages_parse_or_fail_cleanly(bytes in bodies()) {
        if let Err(e) = ls_server::ws::parse_message(&bytes, 1 << 20) {
            prop_assert!(e.message.chars().count() <= 4 * MAX_MESSAGE_CHARS, "{}", e.message.len());
        }
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) {
            let _ = ls_server::ws_mcp::parse_rpc(v);
        }
    }

    /// Long inputs never come back whole in an error reply.
    #[test]
    fn long_strings_are_quoted_as_a_prefix(n in 1_000usize..20_000) {
        let long = "z".repeat(n);
        let body = format!(r#"{{"action_type": 7, "payload": {{}}, "{long}": 1}}"#);
        let e = parse_step_body(body.as_bytes()).unwrap_err();
        prop_assert!(e.body().to_string().len() < 2 * MAX_MESSAGE_CHARS + 200);
        let audit = format!(r#"{{"findings": "{long}"}}"#);
        let e = ls_server::audit::http::parse_typed::<AuditStepRequest>(audit.as_bytes()).unwrap_err();
        prop_assert!(e.body().to_string().len() < 2 * MAX_MESSAGE_CHARS + 200);
    }
}
