//! Kafka's varints, the one Rust reading of them (the Python one is
//! kdissect/protocol/varint.py): unsigned LEB128 of at most `max` bytes, and zigzag for
//! the signed ones.

/// An unsigned LEB128 varint of at most `max` bytes at `*p`, all before `end` (Python's
/// `reader.uvarint`: longer is an error, as is running past the end).
#[inline]
pub(crate) fn uvarint(d: &[u8], p: &mut usize, end: usize, max: usize) -> Option<u128> {
    let mut value: u128 = 0;
    for i in 0..max {
        if *p >= end {
            return None;
        }
        let b = d[*p];
        *p += 1;
        value |= ((b & 0x7f) as u128) << (7 * i);
        if b < 0x80 {
            return Some(value);
        }
    }
    None
}

/// A zigzag varint (signed) of at most `max` bytes.
#[inline]
pub(crate) fn varint(d: &[u8], p: &mut usize, end: usize, max: usize) -> Option<i128> {
    uvarint(d, p, end, max).map(zigzag)
}

/// A zigzag-encoded value as the signed number it stands for.
#[inline]
pub(crate) fn zigzag(n: u128) -> i128 {
    ((n >> 1) as i128) ^ -((n & 1) as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_stop_at_the_end_and_at_their_width() {
        let mut p = 0;
        assert_eq!(varint(&[0x02], &mut p, 1, 5), Some(1));
        let mut p = 0;
        assert_eq!(varint(&[0x01], &mut p, 1, 5), Some(-1));
        let mut p = 0;
        assert_eq!(varint(&[0x80], &mut p, 1, 5), None);
        let mut p = 0;
        assert_eq!(varint(&[0xff; 6], &mut p, 6, 5), None);
    }
}
