//! Bytes as text.

/// `bytes` in lowercase hex (digests, ids).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(super::hex(&[0, 0xab, 0x10, 0xff]), "00ab10ff");
        assert_eq!(super::hex(&[]), "");
    }
}
