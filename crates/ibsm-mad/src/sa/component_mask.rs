//! [`ComponentMask`] (IBA 15.2.4.1) and the macro that gives every record its
//! component numbering and its `matches`.

use core::fmt;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};

/// The SA header's ComponentMask: bit `i` set means "component `i` of the template
/// record takes part in the query". Components are numbered in the order of the
/// record's fields, reserved fields included (IBA 15.2.4.1); each record type names
/// its own as associated consts (`PathRecord::DGID`, `NodeRecord::LID`, ...).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ComponentMask(pub u64);

impl ComponentMask {
    /// No component: a query for every record.
    pub const NONE: ComponentMask = ComponentMask(0);
    /// Every bit.
    pub const ALL: ComponentMask = ComponentMask(u64::MAX);

    /// The mask of component `i` alone (`NONE` for `i >= 64`).
    pub const fn component(i: u32) -> ComponentMask {
        match 1u64.checked_shl(i) {
            Some(b) => ComponentMask(b),
            None => ComponentMask(0),
        }
    }

    /// True when component `i` is selected.
    pub const fn has(self, i: u32) -> bool {
        self.intersects(Self::component(i))
    }

    /// True when every component of `other` is selected.
    pub const fn contains(self, other: ComponentMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when at least one component of `other` is selected.
    pub const fn intersects(self, other: ComponentMask) -> bool {
        self.0 & other.0 != 0
    }

    /// Both sets.
    pub const fn union(self, other: ComponentMask) -> ComponentMask {
        ComponentMask(self.0 | other.0)
    }

    /// This set without the components of `other`.
    pub const fn without(self, other: ComponentMask) -> ComponentMask {
        ComponentMask(self.0 & !other.0)
    }

    /// True when no component is selected.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The selected component numbers, lowest first.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..64).filter(move |&i| self.has(i))
    }
}

impl BitOr for ComponentMask {
    type Output = ComponentMask;
    fn bitor(self, rhs: ComponentMask) -> ComponentMask {
        self.union(rhs)
    }
}

impl BitOrAssign for ComponentMask {
    fn bitor_assign(&mut self, rhs: ComponentMask) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for ComponentMask {
    type Output = ComponentMask;
    fn bitand(self, rhs: ComponentMask) -> ComponentMask {
        ComponentMask(self.0 & rhs.0)
    }
}

impl BitAndAssign for ComponentMask {
    fn bitand_assign(&mut self, rhs: ComponentMask) {
        self.0 &= rhs.0;
    }
}

impl Not for ComponentMask {
    type Output = ComponentMask;
    fn not(self) -> ComponentMask {
        ComponentMask(!self.0)
    }
}

impl From<u64> for ComponentMask {
    fn from(v: u64) -> Self {
        ComponentMask(v)
    }
}

impl fmt::Debug for ComponentMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ComponentMask({:#018x})", self.0)
    }
}

/// Declares a record's components: one `ComponentMask` const per component (named
/// like IBA, in snake-case capitals), `COMPONENTS` (name, number) for logs,
/// `FIELD_COMPONENTS` (every non-reserved component) and `matches`.
///
/// ```text
/// record_components!(NodeRecord, |r, t| {
///     /// LID.
///     LID = 0 => r.lid == t.lid;
///     /// Reserved (ignored by `matches`).
///     RESERVED_1 = 1;
/// });
/// ```
macro_rules! record_components {
    ($ty:ident, |$r:ident, $t:ident| {
        $( $(#[$m:meta])* $name:ident = $bit:literal $(=> $e:expr)? ; )*
    }) => {
        impl $ty {
            $( $(#[$m])* pub const $name: $crate::sa::component_mask::ComponentMask =
                $crate::sa::component_mask::ComponentMask(1u64 << $bit); )*

            /// Every component of this record: (IBA name in snake-case capitals, number).
            pub const COMPONENTS: &'static [(&'static str, u32)] = &[$((stringify!($name), $bit)),*];

            /// The components that are fields (not reserved), the ones `matches` compares.
            pub const FIELD_COMPONENTS: $crate::sa::component_mask::ComponentMask =
                $crate::sa::component_mask::ComponentMask(0 $( | record_components!(@bit $bit $(, $e)?) )*);

            /// True when every component selected in `mask` is equal in `self` and
            /// `template` (IBA 15.4: a record matches a query when the selected
            /// components match). Reserved components and bits past the last
            /// component are ignored. Plain equality: selectors (MTUSelector, ...),
            /// NumbPath and JoinState bit logic are the SA's to apply, and it clears
            /// those bits before calling this.
            pub fn matches(&self, template: &Self, mask: $crate::sa::component_mask::ComponentMask) -> bool {
                let $r = self;
                let $t = template;
                let _ = (&$r, &$t);
                true $( && record_components!(@cmp mask, $bit $(, $e)?) )*
            }
        }
    };
    (@bit $bit:literal) => { 0 };
    (@bit $bit:literal, $e:expr) => { (1u64 << $bit) };
    (@cmp $mask:ident, $bit:literal) => { true };
    (@cmp $mask:ident, $bit:literal, $e:expr) => { (!$mask.has($bit) || $e) };
}
