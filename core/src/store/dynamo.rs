//! DynamoDB backend (being written).
