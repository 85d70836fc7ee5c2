// SPDX-License-Identifier: GPL-2.0

//! Fieldless enums kept in an `AtomicU8`: [`code_enum!`] declares one with its `code` (the
//! discriminant) and `from_code` (an unknown code reads as the first variant, so a torn or
//! corrupt value can never panic).

/// `code_enum! { /// docs  pub enum Name { /// docs  First, /// docs  Second, ... } }`
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(#[$first_meta:meta])* $first:ident,
            $($(#[$variant_meta:meta])* $variant:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        $vis enum $name {
            $(#[$first_meta])* $first,
            $($(#[$variant_meta])* $variant,)*
        }

        impl $name {
            /// Every variant, in discriminant order.
            #[allow(dead_code)]
            const ALL: &'static [$name] = &[$name::$first, $($name::$variant),*];

            fn code(self) -> u8 {
                self as u8
            }

            #[allow(dead_code)]
            fn from_code(code: u8) -> Self {
                Self::ALL
                    .get(usize::from(code))
                    .copied()
                    .unwrap_or($name::$first)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    code_enum! {
        enum Colour {
            Red,
            Green,
            Blue,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_read_as_the_first() {
        for &c in Colour::ALL {
            assert_eq!(Colour::from_code(c.code()), c);
        }
        assert_eq!(Colour::Blue.code(), 2);
        assert_eq!(Colour::from_code(3), Colour::Red);
        assert_eq!(Colour::from_code(255), Colour::Red);
    }
}
