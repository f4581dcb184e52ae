//! The test names a spec has given so far, and the fixture files they record into, kept as
//! hashes: a data file of 100,000 rows costs a few megabytes of hashes, not its tests.

use crate::diag::Span;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Where a name was first given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum First {
    /// A written test, at this line of the spec.
    Line(u32),
    /// A row of the data file of the `from:` test `group` (see [`Seen::data_file`]).
    Row { group: u32, line: u64 },
}

/// Names and fixture stems given so far.
#[derive(Default)]
pub(super) struct Seen {
    names: HashMap<u128, First>,
    /// By stem: the name that first recorded into it, with where. Written tests keep their name
    /// for the message; rows are named by their place.
    stems: HashMap<u128, (u128, Option<String>, First, Span)>,
    /// The `from:` of each data test, by group.
    files: HashMap<u32, String>,
}

/// 128 bits of SipHash: two distinct names of a spec never share one in practice (a collision
/// among 10^6 names has a chance near 10^-27), and nothing outside this process sees it.
pub(super) fn hash(text: &str) -> u128 {
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        text.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

impl Seen {
    pub(super) fn data_file(&mut self, group: u32, from: &str) {
        self.files.insert(group, from.to_string());
    }

    /// `line N` of the spec, or `data/cases.csv:N`.
    pub(super) fn place(&self, first: First) -> String {
        match first {
            First::Line(line) => format!("line {line}"),
            First::Row { group, line } => {
                let file = self.files.get(&group).map_or("the data file", |f| f);
                format!("{file}:{line}")
            }
        }
    }

    /// Claims `name` for `here`: where it was given first when it was given before.
    pub(super) fn claim(&mut self, name: &str, here: First) -> Option<String> {
        match self.names.entry(hash(name)) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let first = *e.get();
                Some(self.place(first))
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(here);
                None
            }
        }
    }

    /// Claims the fixture file name `stem` for test `name`: when another test recorded into it
    /// first, that test's name (a written test's; rows are not kept by name), where it is given,
    /// and its span.
    pub(super) fn claim_stem(
        &mut self,
        stem: &str,
        name: &str,
        here: (First, Span),
    ) -> Option<(Option<String>, String, Span)> {
        let name_hash = hash(name);
        match self.stems.get(&hash(stem)) {
            Some((first_hash, _, _, _)) if *first_hash == name_hash => None,
            Some((_, first_name, first, span)) => {
                Some((first_name.clone(), self.place(*first), *span))
            }
            None => {
                let kept = matches!(here.0, First::Line(_)).then(|| name.to_string());
                self.stems
                    .insert(hash(stem), (name_hash, kept, here.0, here.1));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_claimed_once_and_say_where_first() {
        let mut seen = Seen::default();
        seen.data_file(2, "data/cases.csv");
        assert_eq!(seen.claim("a", First::Line(7)), None);
        assert_eq!(seen.claim("b", First::Row { group: 2, line: 4 }), None);
        assert_eq!(seen.claim("a", First::Line(9)).as_deref(), Some("line 7"));
        assert_eq!(
            seen.claim("b", First::Line(9)).as_deref(),
            Some("data/cases.csv:4")
        );
        assert_ne!(hash("ab"), hash("ba"));
    }
}
