//! Why an action is refused before it is queued: the one type the action, chat and id rules
//! answer with. No I/O.

/// Why an action is refused before it is queued (nothing reached the world).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionRefusal {
    /// The `type` is not one of the admitted set (or a field does not parse).
    UnknownType,
    /// `chat` text starts with `/` (a command).
    ChatCommand,
    /// `chat` text is empty or longer than 256 characters, or has control characters.
    ChatText,
    /// A number is outside its field's bounds.
    FieldBounds,
    /// A position is outside the environment binding's region.
    OutOfRegion,
    /// A block or item is not a well-formed `namespace:name` id.
    InvalidId,
    /// A block or item is on the deny list.
    Denied,
    /// A `sequence` has no step or more than 16.
    SequenceLength,
}

impl ActionRefusal {
    /// The `reason` the typed error carries.
    pub fn reason(self) -> &'static str {
        match self {
            ActionRefusal::UnknownType => "unknown_type",
            ActionRefusal::ChatCommand => "chat_command",
            ActionRefusal::ChatText => "chat_text",
            ActionRefusal::FieldBounds => "field_bounds",
            ActionRefusal::OutOfRegion => "out_of_region",
            ActionRefusal::InvalidId => "invalid_id",
            ActionRefusal::Denied => "denied",
            ActionRefusal::SequenceLength => "sequence_length",
        }
    }
}
