//! `RpcRequest::parse` on arbitrary bytes.
//!
//! Properties: never panics; an accepted request is valid strict JSON; the proxy's own
//! serialization (`to_bytes`, what is forwarded) parses again to an equal request and
//! re-serializes to the same bytes, which are serde_json's compact output of the same request
//! byte for byte (`to_bytes` uses the edge's own writer, `a2a::write`); a refusal answers with an id the envelope may carry
//! (null, a string or an integer).
#![no_main]

use a2a_edge::a2a::json::{parse_strict, MAX_DEPTH};
use a2a_edge::a2a::RpcRequest;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    match RpcRequest::parse(data) {
        Ok(req) => {
            assert!(parse_strict(data, MAX_DEPTH).is_ok());
            let bytes = req.to_bytes();
            let again = RpcRequest::parse(&bytes)
                .unwrap_or_else(|e| panic!("forwarded bytes refused: {e:?}"));
            assert_eq!(
                again, req,
                "the forwarded request differs from the checked one"
            );
            assert_eq!(again.to_bytes(), bytes, "serialization is not stable");
            // serde_json's output of each member, in the forwarded order.
            let mut serde = br#"{"jsonrpc":"2.0","id":"#.to_vec();
            serde.extend(serde_json::to_vec(&req.id).expect("an id serializes"));
            serde.extend_from_slice(br#","method":"#);
            serde.extend(serde_json::to_vec(req.method.as_str()).expect("a name serializes"));
            serde.extend_from_slice(br#","params":"#);
            serde.extend(serde_json::to_vec(&req.params).expect("params serialize"));
            serde.push(b'}');
            assert_eq!(bytes, serde, "the edge's writer differs from serde_json");
        }
        Err(e) => {
            let id_ok = match &e.id {
                Value::Null | Value::String(_) => true,
                Value::Number(n) => n.is_i64() || n.is_u64(),
                _ => false,
            };
            assert!(id_ok, "error answered with id {:?}", e.id);
            assert!((-32700..=-32000).contains(&e.error.code), "{e:?}");
        }
    }
});
