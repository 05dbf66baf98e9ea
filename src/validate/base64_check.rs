//! Strict standard base64 checked without decoding it.
//!
//! A multimodal part (an image, a PDF) is forwarded as the caller sent it; the proxy only has
//! to know that it is base64 the agent will decode and how many bytes it holds. Decoding it to
//! find out costs a table lookup and a store per byte (the largest part of validating a 5 MiB
//! image); checking needs neither. [`standard_decoded_len`] accepts exactly what the `base64`
//! crate's `STANDARD` engine decodes (padding required and canonical, no whitespace, the
//! unused bits of the last symbol zero): the unit table and the fuzz target `base64_check`
//! compare the two on every input.

/// Bytes checked side by side: the loop over one block has no branch, so the compiler
/// compares a vector register's worth of bytes at a time.
const BLOCK: usize = 32;

/// The decoded length of `input` if it is strict standard base64, `None` if the `base64`
/// crate's `STANDARD` engine would refuse it.
pub fn standard_decoded_len(input: &[u8]) -> Option<usize> {
    if input.len() % 4 != 0 {
        return None;
    }
    let Some((body, &[a, b, c, d])) = input.split_last_chunk::<4>() else {
        return Some(0);
    };
    if !all_symbols(body) || !is_symbol(a) || !is_symbol(b) {
        return None;
    }
    // The last quantum: `ab==` holds one byte (b's low 4 bits unused), `abc=` two (c's low 2
    // bits unused); an unused bit set is a second spelling of the same bytes, refused.
    let padding = match (c, d) {
        (b'=', b'=') if sextet(b) & 0x0f == 0 => 2,
        (c, b'=') if is_symbol(c) && sextet(c) & 0x03 == 0 => 1,
        (c, d) if is_symbol(c) && is_symbol(d) => 0,
        _ => return None,
    };
    Some(input.len() / 4 * 3 - padding)
}

/// Whether every byte is one of `A-Z a-z 0-9 + /`.
fn all_symbols(bytes: &[u8]) -> bool {
    let mut blocks = bytes.chunks_exact(BLOCK);
    for block in &mut blocks {
        let ok = block.iter().fold(true, |ok, &byte| ok & is_symbol(byte));
        if !ok {
            return false;
        }
    }
    blocks.remainder().iter().all(|&byte| is_symbol(byte))
}

/// One of the standard alphabet's 64 symbols (not `=`). Comparisons only, no branch.
#[inline(always)]
fn is_symbol(byte: u8) -> bool {
    (byte.wrapping_sub(b'A') < 26)
        | (byte.wrapping_sub(b'a') < 26)
        | (byte.wrapping_sub(b'0') < 10)
        | (byte == b'+')
        | (byte == b'/')
}

/// The 6-bit value of a symbol (for the last quantum's unused bits only).
fn sextet(symbol: u8) -> u8 {
    match symbol {
        b'A'..=b'Z' => symbol - b'A',
        b'a'..=b'z' => symbol - b'a' + 26,
        b'0'..=b'9' => symbol - b'0' + 52,
        b'+' => 62,
        _ => 63,
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    fn crate_len(input: &[u8]) -> Option<usize> {
        base64::engine::general_purpose::STANDARD
            .decode(input)
            .ok()
            .map(|bytes| bytes.len())
    }

    #[test]
    fn agrees_with_the_crate_on_the_table() {
        let cases: &[(&[u8], Option<usize>)] = &[
            (b"", Some(0)),
            (b"aGk=", Some(2)),
            (b"aGVsbG8=", Some(5)),
            (b"aGVsbA==", Some(4)),
            (b"aGVs", Some(3)),
            (b"+/+/", Some(3)),
            (b"aGVsbG8", None),                                  // missing padding
            (b"aGVsbG8==", None),                                // extra padding
            (b"aGVsbA", None),                                   // missing "=="
            (b"aGVs bG8=", None),                                // inner space
            (b"aGVsbG8=\n", None),                               // trailing newline
            (b" aGVsbG8=", None),                                // leading space
            (b"aGVs\r\nbG8=", None),                             // MIME line break
            (b"aGVsbG9=", None),                                 // trailing bits (c & 3)
            (b"aGVsbB==", None),                                 // trailing bits (b & 15)
            (b"aGVsbG8=aGk=", None),                             // padding in the middle
            (b"aGk=aGk=", None),                                 // a padded quantum, then another
            (b"=aGk", None),                                     // padding first
            (b"a===", None),                                     // three pads
            (b"====", None),                                     // only padding
            (b"aG=k", None),                                     // pad then symbol
            (b"aGk-", None),                                     // URL-safe alphabet
            (b"aGk_", None),                                     // URL-safe alphabet
            (b"%%%%", None),                                     // not base64 at all
            (b"aGk\0", None),                                    // NUL
            (b"aG\xc3\xa9", None),                               // non-ASCII
            (b"aGVs\xffbG8", None),                              // 0xff in the body
            (b"aGVsaGVsaGVsaGVsaGVsaGVsaGVsaGVsaGVs", Some(27)), // a whole block and more
        ];
        for (input, want) in cases {
            let got = standard_decoded_len(input);
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(input));
            assert_eq!(
                got,
                crate_len(input),
                "crate: {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Every byte value in every position of a last quantum and of the body around the block
    /// edges (a byte first, last, and at each offset of a block), against the crate.
    #[test]
    fn agrees_with_the_crate_for_every_byte_in_every_position() {
        let body = b"QUJD".repeat(20); // 80 symbols: two whole blocks and a remainder
        let mut checked = 0;
        for byte in 0..=255u8 {
            for at in 0..body.len() {
                let mut input = body.clone();
                input[at] = byte;
                assert_eq!(
                    standard_decoded_len(&input),
                    crate_len(&input),
                    "{byte} at {at}"
                );
                checked += 1;
            }
            for pos in 0..4 {
                for tail in [&b"QUJD"[..], b"QUI=", b"QQ==", b"AAAA", b"AA==", b"AAA="] {
                    let mut quantum = tail.to_vec();
                    quantum[pos] = byte;
                    let mut input = body.clone();
                    input.extend_from_slice(&quantum);
                    assert_eq!(
                        standard_decoded_len(&input),
                        crate_len(&input),
                        "{byte} at {pos} of {tail:?}"
                    );
                    assert_eq!(standard_decoded_len(&quantum), crate_len(&quantum));
                    checked += 2;
                }
            }
        }
        assert_eq!(checked, 256 * (80 + 4 * 6 * 2));
    }

    /// Every last quantum over the symbols that end one range and start the next, `=` and
    /// their neighbours outside the alphabet.
    #[test]
    fn agrees_with_the_crate_on_every_quantum_of_edge_symbols() {
        let edges = b"@AZ[`az{/09:+,=.\x00\x7f\x80";
        for &a in edges {
            for &b in edges {
                for &c in edges {
                    for &d in edges {
                        let q = [a, b, c, d];
                        assert_eq!(standard_decoded_len(&q), crate_len(&q), "{q:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_decoded_length_is_the_crates_for_every_length() {
        for n in 0..200usize {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
            let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
            assert_eq!(standard_decoded_len(encoded.as_bytes()), Some(n));
            for cut in 1..4.min(encoded.len() + 1) {
                let short = &encoded.as_bytes()[..encoded.len() - cut];
                assert_eq!(standard_decoded_len(short), crate_len(short), "{n} - {cut}");
            }
        }
    }
}
