//! The CCP protocol as ccswitch speaks it, declared once for the agent and both datapath shims
//! (DESIGN.md, decision 3):
//!
//! - [`wire`]: the libccp/portus messages (CREATE, MEASURE, INSTALL_EXPR, UPDATE_FIELDS,
//!   CHANGE_PROG, READY), their codec and stream framing ([`wire::FrameReader`]).
//! - [`lang`]: what the codes inside those messages mean: op codes, register types, the
//!   implicit registers and the primitives by index, libccp's register banks and limits.
//! - [`standard`]: the standard program every simple-API algorithm runs: its source, its
//!   report and control registers by index, their defaults, and its INSTALL_EXPR message.
//! - [`sid_table`]: flows by socket id, as each end keeps them.
//!
//! The datapath side of the protocol (validating and interpreting programs, a shim's session
//! with the agent) is `ccswitch-ccp`'s; the agent's side (compiling programs, algorithms) is
//! the agent's.

/// Declares a field-less enum of numbered variants, as the protocol numbers its message types,
/// ops, implicit registers and primitives, with `from_code`: the variant a number on the wire
/// names, if any.
macro_rules! numbered {
    (
        $(#[$meta:meta])*
        pub enum $name:ident: $repr:ty {
            $($(#[$variant_meta:meta])* $variant:ident = $code:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        pub enum $name {
            $($(#[$variant_meta])* $variant = $code,)*
        }

        impl $name {
            /// The variant numbered `code`, if there is one.
            pub fn from_code(code: u32) -> Option<Self> {
                match code {
                    $($code => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

pub mod lang;
pub mod sid_table;
pub mod standard;
pub mod wire;
