//! HTTP executor (being written).
