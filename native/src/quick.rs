//! Whether an answer names brokers, seen without Python (kdissect/proxy/skipscan.py,
//! `quick_check`, writes the program this reads): an answer whose brokers can only be
//! named in its top-level tagged fields is walked by its lengths, as `_skip_struct` walks
//! it, up to those fields. The thread forwarder (relay.rs) then passes a Produce or Fetch
//! answer without leader hints unchanged, without waiting for the interpreter.

use crate::varint::uvarint;

const FIXED: i64 = 1;
const VARINT: i64 = 2;
const LENGTH: i64 = 3;
const ARRAY: i64 = 4;
const STRUCT: i64 = 5;

pub(crate) enum Op {
    Fixed(usize),
    Varint(usize),
    Length { compact: bool, wide: bool },
    Array { compact: bool, elem: Box<Op> },
    Struct { nullable: bool, prog: Prog },
}

pub(crate) struct Prog {
    flexible: bool,
    ops: Vec<Op>,
}

pub(crate) struct Check {
    pub header_tagged: bool,
    pub tags: Vec<u64>,
    pub prog: Prog,
}

/// The program `quick_check` wrote, or None when it is not one.
pub(crate) fn parse(header_tagged: bool, tags: Vec<u64>, program: &[i64]) -> Option<Check> {
    let mut at = 0;
    let prog = parse_prog(program, &mut at, 0)?;
    (at == program.len()).then_some(Check {
        header_tagged,
        tags,
        prog,
    })
}

fn next(p: &[i64], at: &mut usize) -> Option<i64> {
    let v = *p.get(*at)?;
    *at += 1;
    Some(v)
}

fn parse_prog(p: &[i64], at: &mut usize, depth: usize) -> Option<Prog> {
    if depth > 32 {
        return None;
    }
    let n = usize::try_from(next(p, at)?).ok()?;
    let flexible = next(p, at)? != 0;
    let mut ops = Vec::new();
    for _ in 0..n {
        ops.push(parse_op(p, at, depth)?);
    }
    Some(Prog { flexible, ops })
}

fn parse_op(p: &[i64], at: &mut usize, depth: usize) -> Option<Op> {
    Some(match next(p, at)? {
        FIXED => Op::Fixed(usize::try_from(next(p, at)?).ok()?),
        VARINT => Op::Varint(usize::try_from(next(p, at)?).ok()?),
        LENGTH => Op::Length {
            compact: next(p, at)? != 0,
            wide: next(p, at)? != 0,
        },
        ARRAY => Op::Array {
            compact: next(p, at)? != 0,
            elem: Box::new(parse_op(p, at, depth + 1)?),
        },
        STRUCT => Op::Struct {
            nullable: next(p, at)? != 0,
            prog: parse_prog(p, at, depth + 1)?,
        },
        _ => return None,
    })
}

struct Walk<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Walk<'_> {
    fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.pos.checked_add(n)?;
        (end <= self.b.len()).then(|| self.pos = end)
    }

    fn fixed<const N: usize>(&mut self) -> Option<[u8; N]> {
        let v = self
            .b
            .get(self.pos..self.pos.checked_add(N)?)?
            .try_into()
            .ok()?;
        self.pos += N;
        Some(v)
    }

    fn uvarint(&mut self) -> Option<u64> {
        u64::try_from(uvarint(self.b, &mut self.pos, self.b.len(), 5)?).ok()
    }

    /// A length or count prefix (-1: null).
    fn length(&mut self, compact: bool, wide: bool) -> Option<i64> {
        Some(if compact {
            self.uvarint()? as i64 - 1
        } else if wide {
            i32::from_be_bytes(self.fixed::<4>()?) as i64
        } else {
            i16::from_be_bytes(self.fixed::<2>()?) as i64
        })
    }

    fn tagged(&mut self) -> Option<()> {
        for _ in 0..self.count_tags()? {
            self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            self.skip(size)?;
        }
        Some(())
    }

    fn count_tags(&mut self) -> Option<u64> {
        let n = self.uvarint()?;
        (n <= (self.b.len() - self.pos) as u64).then_some(n)
    }

    fn op(&mut self, op: &Op) -> Option<()> {
        match op {
            Op::Fixed(n) => self.skip(*n),
            Op::Varint(max) => uvarint(self.b, &mut self.pos, self.b.len(), *max).map(|_| ()),
            Op::Length { compact, wide } => {
                let n = self.length(*compact, *wide)?;
                if n < -1 {
                    return None;
                }
                self.skip(n.max(0) as usize)
            }
            Op::Array { compact, elem } => {
                let n = self.length(*compact, true)?;
                // (every element takes a byte at least, as the Python walk checks)
                if n > (self.b.len() - self.pos) as i64 {
                    return None;
                }
                for _ in 0..n.max(0) {
                    self.op(elem)?;
                }
                Some(())
            }
            Op::Struct { nullable, prog } => {
                if *nullable && (self.fixed::<1>()?[0] as i8) < 0 {
                    return Some(());
                }
                self.prog(prog)
            }
        }
    }

    fn prog(&mut self, prog: &Prog) -> Option<()> {
        for op in &prog.ops {
            self.op(op)?;
        }
        if prog.flexible {
            self.tagged()?;
        }
        Some(())
    }
}

/// Some(false): `body` (an answer after its size prefix) names no broker; Some(true): one
/// of the top-level tags that may name brokers is there; None: the bytes do not follow
/// the layout (Python looks, and says so).
pub(crate) fn names_brokers(check: &Check, body: &[u8]) -> Option<bool> {
    let mut w = Walk { b: body, pos: 0 };
    w.skip(4)?; // the correlation id
    if check.header_tagged {
        w.tagged()?;
    }
    for op in &check.prog.ops {
        w.op(op)?;
    }
    let mut found = false;
    for _ in 0..w.count_tags()? {
        let tag = w.uvarint()?;
        let size = usize::try_from(w.uvarint()?).ok()?;
        let at = w.pos;
        w.skip(size)?;
        // (those tags are arrays: one of none names none, as Tansu sends in every answer)
        found |= check.tags.contains(&tag) && body[at..w.pos] != [1];
    }
    (w.pos == body.len()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    // a struct of an int32 and a compact array of (int16, compact string), flexible
    const PROGRAM: [i64; 14] = [
        2, 1, FIXED, 4, ARRAY, 1, STRUCT, 0, 2, 1, FIXED, 2, LENGTH, 1,
    ];

    fn check() -> Check {
        let mut p = PROGRAM.to_vec();
        p.push(0); // (LENGTH's wide)
        parse(true, vec![0], &p).expect("a program")
    }

    fn answer(tags: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 0, 9, 0]; // correlation id, no header tags
        b.extend([0, 0, 0, 1]); // int32
        b.extend([2, 0, 7, 3, b'a', b'b', 0]); // one element: 7, "ab", no tags
        b.extend(tags);
        b
    }

    #[test]
    fn an_answer_without_the_tag_names_no_broker() {
        assert_eq!(names_brokers(&check(), &answer(&[0])), Some(false));
        assert_eq!(names_brokers(&check(), &answer(&[1, 5, 1, 0])), Some(false));
    }

    #[test]
    fn the_tag_is_found_unless_it_holds_an_empty_array() {
        assert_eq!(
            names_brokers(&check(), &answer(&[1, 0, 2, 2, 0])),
            Some(true)
        );
        assert_eq!(names_brokers(&check(), &answer(&[1, 0, 1, 1])), Some(false));
    }

    #[test]
    fn bytes_off_the_layout_are_not_judged() {
        let a = answer(&[0]);
        for cut in 0..a.len() {
            assert_eq!(names_brokers(&check(), &a[..cut]), None, "cut at {cut}");
        }
        let mut longer = a.clone();
        longer.push(0);
        assert_eq!(names_brokers(&check(), &longer), None);
    }
}

/// `names_brokers` for Python's tests (tests/test_proxy_quick.py): `check` as
/// `skipscan.quick_check` gives it; None also when it is not a program.
#[pyo3::pyfunction]
pub fn answer_names_brokers(check: (bool, Vec<u64>, Vec<i64>), body: &[u8]) -> Option<bool> {
    names_brokers(&parse(check.0, check.1, &check.2)?, body)
}
