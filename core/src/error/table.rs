//! The shape of the error table: one row per `ApiError` variant (its stable code, HTTP
//! status, whether a retry can succeed, and its public message), and the macro that turns
//! the one table in `error.rs` into the enum and its `code`, `status` and `retryable`.

use http::StatusCode;

/// One row of the error table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorRow {
    /// The variant's name.
    pub variant: &'static str,
    /// The stable `helix.agent_api.error.v1` code (several variants may share one).
    pub code: &'static str,
    pub status: StatusCode,
    pub retryable: bool,
    /// The message template (`Display`): the variant's fields in braces.
    pub message: &'static str,
}

/// `Variant[(fields) | {fields}] => "code", STATUS, retry | once, "message";`, each row
/// with its doc comments and attributes; generates the enum (`thiserror` messages), its
/// `TABLE` and `row()`.
macro_rules! error_table {
    (
        $(#[$enum_meta:meta])*
        pub enum $Enum:ident {
            $(
                $(#[$meta:meta])*
                $name:ident $( ( $($tuple:tt)* ) )? $( { $($fields:tt)* } )?
                    => $code:tt, $status:ident, $retry:ident, $message:tt;
            )*
        }
    ) => {
        $(#[$enum_meta])*
        #[derive(Debug, thiserror::Error)]
        pub enum $Enum {
            $(
                $(#[$meta])*
                #[error($message)]
                $name $( ( $($tuple)* ) )? $( { $($fields)* } )?,
            )*
        }

        impl $Enum {
            /// Every row, in the order of the table.
            pub const TABLE: &'static [$crate::error::ErrorRow] = &[
                $( error_table!(@row $name, $code, $status, $retry, $message), )*
            ];

            /// This error's row.
            pub fn row(&self) -> &'static $crate::error::ErrorRow {
                match self {
                    $(
                        Self::$name { .. } => {
                            const ROW: $crate::error::ErrorRow =
                                error_table!(@row $name, $code, $status, $retry, $message);
                            &ROW
                        }
                    )*
                }
            }
        }
    };
    (@row $name:ident, $code:tt, $status:ident, $retry:ident, $message:tt) => {
        $crate::error::ErrorRow {
            variant: stringify!($name),
            code: $code,
            status: http::StatusCode::$status,
            retryable: error_table!(@retry $retry),
            message: $message,
        }
    };
    (@retry retry) => { true };
    (@retry once) => { false };
}
pub(crate) use error_table;
