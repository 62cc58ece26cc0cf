//! Which strings a template can produce, to tell whether two entities' keys can ever be equal.
//!
//! A template is a list of `#`-separated segments, and values never hold `#`, so two templates can
//! only produce the same key when they have as many segments and every pair of segments can produce
//! the same text. Each segment is literal text around at most one reference; a reference produces a
//! small regular language (an enum's values, `N` digits, a fixed-width timestamp, any non-empty text
//! without `#`). Two segments intersect when the product of their automata reaches the end.

use crate::attribute::{AttrType, Attribute};
use crate::model::Entity;
use crate::template::{Part, Segment, Template};

/// One position of a segment's pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Exact(char),
    Digit,
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Atom {
    One(Class),
    Star(Class),
}

fn meet(a: Class, b: Class) -> bool {
    match (a, b) {
        (Class::Exact(x), Class::Exact(y)) => x == y,
        (Class::Exact(c), Class::Digit) | (Class::Digit, Class::Exact(c)) => c.is_ascii_digit(),
        _ => true,
    }
}

fn literal(text: &str) -> impl Iterator<Item = Atom> + '_ {
    text.chars().map(|c| Atom::One(Class::Exact(c)))
}

/// The alternatives (atom sequences) that a reference can produce.
fn reference_atoms(part: &Part, entity: &Entity) -> Vec<Vec<Atom>> {
    let digits = |n: usize| vec![Atom::One(Class::Digit); n];
    let timestamp = |width: usize| {
        "DDDD-DD-DDTDD:DD:DD.DDDZ"
            .chars()
            .take(width)
            .map(|c| {
                Atom::One(if c == 'D' {
                    Class::Digit
                } else {
                    Class::Exact(c)
                })
            })
            .collect::<Vec<_>>()
    };
    let any = vec![Atom::One(Class::Any), Atom::Star(Class::Any)];
    match part {
        Part::Lit(text) => vec![literal(text).collect()],
        Part::Tenant => vec![any],
        Part::Shard(n) => (0..*n).map(|s| literal(&s.to_string()).collect()).collect(),
        Part::Attr { name, bucket } => {
            let attr = entity.attributes.get(name);
            match attr.map(|a| a.ty) {
                None if name == crate::model::CREATED_AT => {
                    vec![timestamp(bucket.map_or(24, |b| b.width()))]
                }
                Some(AttrType::Timestamp) => vec![timestamp(bucket.map_or(24, |b| b.width()))],
                Some(AttrType::Number) => match attr.and_then(|a| a.width) {
                    Some(w) => vec![digits(w as usize)],
                    None => vec![vec![Atom::One(Class::Digit), Atom::Star(Class::Digit)]],
                },
                Some(AttrType::Boolean) => {
                    vec![literal("true").collect(), literal("false").collect()]
                }
                Some(AttrType::Enum) => attr
                    .map(|a: &Attribute| a.values.iter().map(|v| literal(v).collect()).collect())
                    .unwrap_or_default(),
                _ => vec![any],
            }
        }
    }
}

fn segment_alternatives(segment: &Segment<'_>, entity: &Entity) -> Vec<Vec<Atom>> {
    let middles = match segment.reference {
        Some(part) => reference_atoms(part, entity),
        None => vec![Vec::new()],
    };
    middles
        .into_iter()
        .map(|middle| {
            literal(&segment.prefix)
                .chain(middle)
                .chain(literal(&segment.suffix))
                .collect()
        })
        .collect()
}

/// Whether two atom sequences can match one common string.
fn intersects(a: &[Atom], b: &[Atom]) -> bool {
    let (n, m) = (a.len(), b.len());
    let mut seen = vec![false; (n + 1) * (m + 1)];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        let slot = i * (m + 1) + j;
        if seen.get(slot).copied().unwrap_or(true) {
            continue;
        }
        if let Some(s) = seen.get_mut(slot) {
            *s = true;
        }
        if i == n && j == m {
            return true;
        }
        let (x, y) = (a.get(i), b.get(j));
        if let Some(Atom::Star(_)) = x {
            stack.push((i + 1, j));
        }
        if let Some(Atom::Star(_)) = y {
            stack.push((i, j + 1));
        }
        if let (Some(x), Some(y)) = (x, y) {
            let (cx, next_i) = match x {
                Atom::One(c) => (*c, i + 1),
                Atom::Star(c) => (*c, i),
            };
            let (cy, next_j) = match y {
                Atom::One(c) => (*c, j + 1),
                Atom::Star(c) => (*c, j),
            };
            if meet(cx, cy) {
                stack.push((next_i, next_j));
            }
        }
    }
    false
}

/// Whether some key made by template `a` of entity `ea` can equal one made by `b` of `eb`.
pub(crate) fn may_produce_same(a: &Template, ea: &Entity, b: &Template, eb: &Entity) -> bool {
    let (Ok(sa), Ok(sb)) = (a.segments(), b.segments()) else {
        return false;
    };
    sa.len() == sb.len()
        && sa.iter().zip(&sb).all(|(x, y)| {
            let xs = segment_alternatives(x, ea);
            let ys = segment_alternatives(y, eb);
            xs.iter().any(|p| ys.iter().any(|q| intersects(p, q)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Model;

    fn entity(attrs: &str) -> Entity {
        let text = format!("[entities.x]\npk = \"X#{{tenant}}\"\nsk = \"S\"\n{attrs}");
        Model::parse(&text).unwrap().entities()[0].clone()
    }

    fn collide(a: &str, b: &str, e: &Entity) -> bool {
        may_produce_same(
            &Template::parse(a).unwrap(),
            e,
            &Template::parse(b).unwrap(),
            e,
        )
    }

    #[test]
    fn literal_against_reference() {
        let e = entity("attributes.userId = { type = \"string\" }\n");
        assert!(collide("USER#{tenant}#{userId}", "USER#{tenant}#ADMIN", &e));
        assert!(!collide("USER#{tenant}#{userId}", "USER#{tenant}", &e));
        assert!(!collide("ORDER#{tenant}", "USER#{tenant}", &e));
    }

    #[test]
    fn typed_references() {
        let e = entity(
            "attributes.n = { type = \"number\", width = 3 }\nattributes.s = { type = \"enum\", values = [\"A\", \"B1\"] }\n",
        );
        assert!(!collide("P{n}", "PABC", &e));
        assert!(collide("P{n}", "P123", &e));
        assert!(!collide("P{n}", "P1234", &e));
        assert!(collide("{s}", "B1", &e));
        assert!(!collide("{s}", "C", &e));
        assert!(!collide("X{s}", "{n}", &e));
        assert!(!collide("{createdAt}", "2024", &e));
        assert!(collide("{createdAt:year}", "2024", &e));
    }
}
