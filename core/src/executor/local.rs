//! Local executor (being written).
